"""Every ``chainlat`` command held to one contract: the same run filter, formats, help
layout, warnings and exit codes. A command that drifts from the others fails here."""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

import pytest

from chainlat._core import exits
from chainlat._core.exits import EXIT_CODES_HELP, EXIT_INPUT, EXIT_OK
from chainlat.cli import build_parser, main
from chainlat.cli.options import (
    FILTER_GROUP,
    FORMATS,
    JAEGER_GROUP,
    READING_GROUP,
    add_reading,
    add_run_filter,
)
from chainlat.testing import Capture
from support.cli import run, write_variant_runs

SRC = Path(__file__).resolve().parents[2] / "src" / "chainlat"

READING = ("check", "report", "diff", "profile", "whatif", "compare")
"""The commands that read runs."""
TABLES = READING
"""The commands that print a table."""


def _commands(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, argparse.ArgumentParser]:
    """Every (sub)command's parser by its name (``budgets rules``)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[prefix + name] = sub
                found.update(_commands(sub, prefix + name + " "))
    return found


COMMANDS = _commands(build_parser())


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    found = [a for a in parser._actions if flag in a.option_strings]
    assert found, f"{parser.prog} has no {flag}"
    return found[0]


def _described(action: argparse.Action) -> tuple[object, ...]:
    return (
        tuple(action.option_strings), type(action).__name__, action.metavar, action.help,
        action.default, action.choices, action.type,
    )  # fmt: skip


def _reference(add: object) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    add(parser)  # type: ignore[operator]
    return parser


def _groups(parser: argparse.ArgumentParser) -> list[str]:
    return [g.title or "" for g in parser._action_groups if g._group_actions]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_commands_are_all_walked() -> None:
    assert set(READING) <= set(COMMANDS)
    assert {"budgets schema", "budgets validate", "budgets rules", "demo", "sim"} <= set(COMMANDS)


@pytest.mark.parametrize("command", READING)
@pytest.mark.parametrize("flag", ["--workflow", "--variant", "--roots"])
def test_every_reading_command_takes_the_same_run_filter(command: str, flag: str) -> None:
    """Same option, same metavar (NAME), same help, repeatable: declared in one place."""
    expected = _option(_reference(add_run_filter), flag)
    assert _described(_option(COMMANDS[command], flag)) == _described(expected)


@pytest.mark.parametrize("command", READING)
def test_every_reading_command_takes_the_same_sources_and_reading_bounds(command: str) -> None:
    parser = COMMANDS[command]
    reference = _reference(add_reading)
    jaeger = command != "diff"  # diff reads two files, named
    for group in reference._action_groups:
        if group.title == JAEGER_GROUP and not jaeger:
            continue
        for action in group._group_actions:
            if action.dest != "help":
                assert _described(_option(parser, action.option_strings[0])) == _described(action)


@pytest.mark.parametrize("command", TABLES)
def test_every_command_that_prints_a_table_has_text_json_and_markdown(command: str) -> None:
    action = _option(COMMANDS[command], "--format")
    assert tuple(action.choices or ()) == FORMATS
    assert action.default == "text"


@pytest.mark.parametrize("command", READING)
def test_main_options_come_first_and_the_tuning_flags_last_in_help(command: str) -> None:
    parser = COMMANDS[command]
    groups = _groups(parser)
    assert groups[-1] == READING_GROUP
    assert groups.index(FILTER_GROUP) < len(groups) - 1
    text = parser.format_help()
    tuning = text.index(READING_GROUP)
    assert text.index("--settle-lines N ") > tuning
    assert text.index("--max-open-bytes N ") > tuning
    assert text.index("--format {") < text.index(FILTER_GROUP) < tuning


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help_is_formatted_and_states_the_exit_codes(command: str) -> None:
    text = COMMANDS[command].format_help()
    assert "%%" not in text and "%(" not in text  # a help string printed unformatted
    assert "LABEL" not in text  # one placeholder for a name: NAME
    if command not in ("budgets",):
        assert EXIT_CODES_HELP in _flat(text)


PLACEHOLDERS = {"NAME", "FILE", "URL", "N", "SECONDS", "DURATION", "PERCENT", "P"}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_names_its_value_with_a_shared_placeholder(command: str) -> None:
    """``--workflow NAME``, ``--budgets FILE``, ``--window DURATION``: never argparse's
    default (the option's name in capitals), never a second word for the same thing."""
    for action in COMMANDS[command]._actions:
        if not action.option_strings or action.nargs == 0 or action.choices is not None:
            continue
        metavar = action.metavar
        assert isinstance(metavar, str), f"{command} {action.option_strings[0]}: no metavar"
        assert metavar in PLACEHOLDERS or metavar.startswith('"'), (
            f"{command} {action.option_strings[0]} {metavar}"
        )


@pytest.mark.parametrize("command", ["demo", "sim"])
def test_the_commands_with_their_own_parser_state_the_exit_codes_too(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == EXIT_OK
    assert EXIT_CODES_HELP in _flat(capsys.readouterr().out)


_HOSTILE_VALUE = "http://user:hunter2@host/\x1b[31mred"
"""An argument value no command accepts for a number: a password, and a terminal escape."""
_NUMBER_OPTION = {"demo": "--requests", "sim": "--port"}
"""An option taking a number, for the commands that parse their own options."""


def _number_option(parser: argparse.ArgumentParser) -> str | None:
    """An option of ``parser`` whose value is converted (not taken as text), if any."""
    for action in parser._actions:
        if action.option_strings and action.type is not None and action.nargs is None:
            return action.option_strings[-1]
    return None


_BAD_ARGUMENTS = [
    *((f"{name}, unknown option", [*name.split(), f"--{_HOSTILE_VALUE}"]) for name in COMMANDS),
    *(
        (f"{name}, bad value", [*name.split(), flag, _HOSTILE_VALUE])
        for name in COMMANDS
        if (flag := _NUMBER_OPTION.get(name) or _number_option(COMMANDS[name]))
    ),
]


@pytest.mark.parametrize("argv", [pytest.param(a, id=case) for case, a in sorted(_BAD_ARGUMENTS)])
def test_a_bad_argument_is_one_scrubbed_line_and_exit_2_in_every_command(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """argparse's usage dump is never printed, nor the password or the escape it quotes."""
    code: object
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    err = capsys.readouterr().err
    assert code == EXIT_INPUT, err
    assert err.count("\n") == 1 and err.startswith("chainlat"), err
    assert "usage:" not in err
    assert "hunter2" not in err and "\x1b" not in err
    if "@host" in err:  # the value quoted (not only a missing argument named)
        assert "user:[REDACTED]@host" in err and "\\x1b[31mred" in err


def test_exit_codes_are_defined_in_one_module_only() -> None:
    """No module but ``_core/exits.py`` names an exit code, and the commands return the
    table's names, never a bare number."""
    table = {name for name in vars(exits) if name.startswith("EXIT_")}
    assert {"EXIT_OK", "EXIT_BROKEN", "EXIT_INPUT", "EXIT_INTERNAL", "EXIT_BROKEN_PIPE"} <= table
    commands = [
        *(SRC / "cli").glob("*.py"),
        SRC / "demo" / "__init__.py",
        SRC / "demo" / "voice.py",
        SRC / "sim" / "__init__.py",
        SRC / "sim" / "_cli.py",
    ]
    for path in SRC.rglob("*.py"):
        if path == SRC / "_core" / "exits.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    assert not (
                        isinstance(target, ast.Name) and re.fullmatch(r"_?EXIT_\w+", target.id)
                    ), f"{path}:{node.lineno}: defines {target.id}"
            if path in commands and isinstance(node, ast.Return):
                value = node.value
                assert not (isinstance(value, ast.Constant) and type(value.value) is int), (
                    f"{path}:{node.lineno}: returns a bare exit code"
                )


# --- behaviour: every reading command, the same file --------------------------------------


@pytest.fixture
def traces(cap: Capture, tmp_path: Path) -> Path:
    """Ten runs per variant and a line that is not spans; a budget file beside them."""
    (tmp_path / "budgets.toml").write_text('[workflows.agent]\np95 = "5s"\n')
    return write_variant_runs(cap, tmp_path / "traces.jsonl", corrupt_line=True)


def _args(command: str, traces: Path) -> list[str | Path]:
    """The command's own arguments over ``traces`` (diff: the file against itself)."""
    arguments: dict[str, list[str | Path]] = {
        "check": ["check", traces, "--budgets", traces.parent / "budgets.toml"],
        "report": ["report", traces],
        "diff": ["diff", traces, traces, "--variant", "large"],
        "profile": ["profile", traces],
        "whatif": ["whatif", traces, "--drop", "execute_tool lookup"],
        "compare": ["compare", traces],
    }
    return arguments[command]


@pytest.mark.parametrize("command", READING)
def test_every_reading_command_prints_the_readers_warnings(
    command: str, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = run(capsys, *_args(command, traces))
    assert code == EXIT_OK, err
    skipped = 2 if command == "diff" else 1  # diff reads the file twice, as both sides
    assert f"chainlat: warning: {skipped} lines are not spans and were skipped" in err


@pytest.mark.parametrize("command", READING)
def test_every_reading_command_scrubs_what_its_warnings_quote(
    command: str, cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A warning quotes the first bad line's problem, and with it what the file holds."""
    (tmp_path / "budgets.toml").write_text('[workflows.agent]\np95 = "5s"\n')
    traces = write_variant_runs(cap, tmp_path / "traces.jsonl")
    span = {"traceId": "0" * 32, "spanId": _HOSTILE_VALUE, "name": "x"}
    bad = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    with traces.open("a") as out:
        out.write(json.dumps(bad) + "\n")
    code, _out, err = run(capsys, *_args(command, traces))
    assert code == EXIT_OK, err
    assert "lines are not spans and were skipped" in err and "spanId" in err
    assert "hunter2" not in err and "user:[REDACTED]@host" in err
    assert "\x1b" not in err


@pytest.mark.parametrize("command", READING)
@pytest.mark.parametrize(
    ("flag", "name", "seen"),
    [("--workflow", "agnet", "workflows seen: 'agent'"),
     ("--variant", "smal", "variants seen: 'large', 'small'")],
)  # fmt: skip
def test_every_reading_command_checks_the_names_it_filters_by(
    command: str, flag: str, name: str, seen: str, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = run(capsys, *_args(command, traces), flag, name)
    assert code == EXIT_INPUT
    assert f"chainlat: {flag} '{name}': no run read has this" in err
    assert seen in err
    assert "Traceback" not in err


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: bare {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("command", TABLES)
def test_every_table_command_writes_strict_json_and_markdown(
    command: str, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *_args(command, traces), "--format", "json")
    assert code == EXIT_OK, err
    assert isinstance(_strict_json(out), dict)
    code, out, err = run(capsys, *_args(command, traces), "--format", "markdown")
    assert code == EXIT_OK, err
    assert re.search(r"^\|( ?:?-+:? ?\|)+$", out, re.MULTILINE), out  # a Markdown table
    assert "┃" not in out and "│" not in out  # not the terminal's table


def test_the_variant_filter_selects_the_same_runs_in_every_command(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--variant small`` keeps the ten runs of ``small``, whichever command reads them."""
    runs: dict[str, object] = {}
    for command in ("report", "whatif", "compare"):
        code, out, err = run(
            capsys, *_args(command, traces), "--variant", "small", "--format", "json"
        )
        assert code == EXIT_OK, err
        document = json.loads(out)
        if command == "report":
            runs[command] = document["workflows"]["agent"]["runs"]
        elif command == "whatif":
            runs[command] = [(w["variant"], w["runs"]) for w in document["workflows"]]
        else:
            runs[command] = [(v["variant"], v["runs"]) for v in document["variants"]]
    assert runs == {"report": 10, "whatif": [("small", 10)], "compare": [("small", 10)]}
    code, out, err = run(capsys, "profile", traces, "--variant", "small", "--format", "json")
    assert code == EXIT_OK, err
    assert set(json.loads(out)["models"]) == {"small"}


# --- a file that is not UTF-8, in every role a command reads one in ----------------------

_TRACES = Path(__file__).resolve().parents[1] / "data" / "collector-traces.jsonl"
_NOT_UTF8: dict[str, tuple[str, bytes, list[str]]] = {
    # role: (file name, content with a bad byte on line 2, column 4, the command)
    "budgets": ("b.toml", b"[workflows.x]\np95\xff = 1\n", ["check", str(_TRACES), "--budgets"]),
    "budgets validate": ("b.toml", b"[workflows.x]\np95\xff = 1\n", ["budgets", "validate"]),
    "profiles": (
        "p.toml",
        b"[models.m]\nttf\xff_base_ms = 1\n",
        ["whatif", str(_TRACES), "--prompt-scale", "0.5", "--profiles"],
    ),
    "sim profiles": ("p.toml", b"[models.m]\nttf\xff_base_ms = 1\n", ["sim", "--profiles"]),
    "outcomes": (
        "o.jsonl",
        b'{"trace_id": "' + b"0" * 32 + b'", "success": true}\n{"t\xff": 1}\n',
        ["compare", str(_TRACES), "--outcomes"],
    ),
    "traces": ("t.json", b'{\n "r\xffsourceSpans": []\n}\n', ["report"]),
}


@pytest.mark.parametrize("role", list(_NOT_UTF8))
def test_a_file_that_is_not_utf8_is_named_at_its_line_and_column(
    role: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, content, command = _NOT_UTF8[role]
    path = tmp_path / name
    path.write_bytes(content)
    code, _, err = run(capsys, *command, path)
    assert code == EXIT_INPUT
    # The traces read before the bad file may bring warnings of their own.
    errors = [line for line in err.splitlines() if not line.startswith("chainlat: warning: ")]
    assert len(errors) == 1, err
    assert f"{path}:2: " in err and "not UTF-8 text: byte 0xff at column 4" in err, err
