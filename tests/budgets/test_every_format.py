"""One table of cases that cannot be judged, through every format of ``chainlat check`` and
the pytest plugin: each fails, and each says the same summary as the exit code."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from chainlat.cli import main
from chainlat.report import check_schema
from support.tracegen import ChatRun, write_runs

pytest_plugins = ["pytester"]

RUNS = [ChatRun(retrieve_ms=100, chat_ms=300), ChatRun(retrieve_ms=60, chat_ms=250)]
KEPT = '[workflows.support-chat]\ntotal = "10s"\n'


@dataclass(frozen=True)
class Case:
    name: str
    budgets: str
    reason: str
    summary: str
    stderr: str
    """What the one stderr line about the limit says."""
    plugin: bool = True
    """Whether the case applies to live runs in pytest (which have no token counts)."""


CASES = [
    Case(
        "misspelled step",
        KEPT + '[workflows.support-chat.steps."chat gpt-40"]\nmax = "1s"\n',
        "unknown_step",
        "FAILED: 0 of 2 limits broken, 1 not judged",
        "did you mean 'chat gpt-4o'?",
    ),
    Case(
        "misspelled workflow",
        KEPT + '[workflows.support-chta]\ntotal = "1s"\n',
        "unknown_workflow",
        "FAILED: 0 of 2 limits broken, 1 not judged",
        "did you mean 'support-chat'?",
    ),
    Case(
        "cost without prices",
        KEPT + 'cost = "0.01"\n',
        "no_price",
        "FAILED: 0 of 2 limits broken, 1 not judged",
        "2 of 2 runs: no [prices] in the budget file",
    ),
    Case(
        "cost of calls without token counts",
        KEPT + 'cost = "0.01"\n[prices.gpt-4o]\ninput_per_mtok = 2.5\noutput_per_mtok = 10\n',
        "no_tokens",
        "FAILED: 0 of 2 limits broken, 1 not judged",
        "a call to 'gpt-4o' has no valid token counts",
        plugin=False,
    ),
    Case(
        "operation never called",
        KEPT + '[workflows.support-chat.operations.text_to_speech]\nlatency = "1s"\n',
        "no_data",
        "FAILED: 0 of 2 limits broken, 1 not judged",
        "no run of 'support-chat' has a call of text_to_speech",
    ),
    Case(
        "too few runs",
        'min_runs = 10\n[workflows.support-chat]\ntotal = "10s"\np95 = "10s"\n',
        "not_enough_runs",
        "FAILED: 0 of 2 limits broken, 1 not judged",
        "min_runs asks for",
    ),
]
IDS = [c.name for c in CASES]


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    return write_runs(tmp_path / "t.jsonl", RUNS)


def _check(
    capsys: pytest.CaptureFixture[str], *args: str | os.PathLike[str]
) -> tuple[int, str, str]:
    code = main(["check", *(str(a) for a in args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_text_fails_with_the_summary_and_one_line_on_stderr(
    case: Case, tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(case.budgets)
    code, out, err = _check(capsys, traces, "--budgets", budgets)
    assert code == 2
    assert out.rstrip("\n").splitlines()[-1] == case.summary
    assert "OK" not in out.splitlines()[-1]
    assert "NOT JUDGED" in out
    (line,) = [x for x in err.splitlines() if not x.startswith("chainlat: warning")]
    assert line.startswith(f"chainlat: {budgets}: workflows.") and case.stderr in line
    assert "Traceback" not in err


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_json_and_junit_fail_and_say_the_same(
    case: Case, tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(case.budgets)
    junit = tmp_path / "junit.xml"
    code, out, _ = _check(
        capsys, traces, "--budgets", budgets, "--format", "json", "--junit", junit
    )
    assert code == 2
    document = json.loads(out)
    jsonschema.validate(document, check_schema())
    assert (document["ok"], document["exit_code"], document["summary"]) == (
        False,
        2,
        case.summary,
    )
    (unjudged,) = [v for v in document["verdicts"] if v["status"] == "not_judged"]
    assert (unjudged["reason"], unjudged["allowed"]) == (case.reason, False)
    assert case.stderr in unjudged["why"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("0", "1", "0")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (properties["exit_code"], properties["summary"]) == ("2", case.summary)
    (error,) = [c.find("error") for c in suite.iter("testcase") if c.find("error") is not None]
    assert error is not None and case.stderr in (error.get("message") or "")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_markdown_fails_and_says_the_same(
    case: Case, tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(case.budgets)
    code, out, _ = _check(capsys, traces, "--budgets", budgets, "--format", "markdown")
    assert code == 2
    assert out.splitlines()[0] == "## chainlat latency budgets: limits not judged"
    assert out.rstrip("\n").splitlines()[-1] == case.summary
    assert "**NOT JUDGED" in out


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_an_opt_out_passes_and_says_so(
    case: Case, tmp_path: Path, traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(case.budgets)
    absent = case.reason.startswith("unknown_")
    flag = "--allow-missing" if absent else "--allow-unjudged"
    other = "--allow-unjudged" if absent else "--allow-missing"
    assert _check(capsys, traces, "--budgets", budgets, other)[0] == 2
    code, out, err = _check(capsys, traces, "--budgets", budgets, flag)
    assert code == 0, err
    assert out.rstrip("\n").splitlines()[-1] == (
        "OK: 1 of 2 limits judged and kept, 1 not judged (allowed)"
    )


WORKFLOW = """
import chainlat

def answer():
    with chainlat.workflow("support-chat"):
        with chainlat.inference("gpt-4o"):
            pass
"""


@pytest.mark.parametrize(
    "case", [c for c in CASES if c.plugin], ids=[c.name for c in CASES if c.plugin]
)
def test_the_pytest_session_fails_with_the_same_summary(
    case: Case, pytester: pytest.Pytester
) -> None:
    pytester.makepyfile(workflows=WORKFLOW)
    pytester.makefile(".toml", session=case.budgets)
    pytester.makepyfile(
        test_app="""
        from workflows import answer

        def test_runs():
            answer()
            answer()
        """
    )
    # In a process of its own: the plugin sets the global tracer provider, which the
    # OpenTelemetry API lets a process set only once.
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--chainlat-budgets=session.toml"
    )
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["NOT JUDGED: workflows.*", case.summary, f"*{case.summary}: failing*"]
    )
    # The session summary wraps its lines to the terminal: the why is there, unwrapped.
    assert case.stderr in " ".join(line.strip() for line in result.outlines)


def test_the_check_schema_says_status_reason_why_allowed_exit_code_and_summary() -> None:
    schema = check_schema()
    verdict = schema["properties"]["verdicts"]["items"]
    assert {"status", "reason", "why", "allowed"} <= set(verdict["required"])
    assert verdict["properties"]["status"]["enum"] == ["ok", "broken", "not_judged"]
    assert "unknown_step" in verdict["properties"]["reason"]["enum"]
    assert {"exit_code", "summary"} <= set(schema["required"])
    jsonschema.Draft202012Validator.check_schema(schema)
