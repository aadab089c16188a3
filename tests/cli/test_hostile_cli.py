"""The CLI under hostile input: one scrubbed line and exit 2 for bad input, valid output in
every format whatever the names in the traces, and never a traceback."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
import chainlat._core.errors
from chainlat._core.rollup import Rollup
from chainlat._core.runs import StepTiming, WorkflowRun
from chainlat._runtime.otlp_json import JsonLinesSpanExporter, encode_request
from chainlat.budgets import Budgets, evaluate
from chainlat.cli import main
from chainlat.testing import Capture, capture
from support import StartFakeJaeger, free_port
from support.cli import run

STEPS = [
    "load [/mnt/data]",
    "retrieve [kb-v2]",
    "[bold]loud",
    "tab\there",
    "esc\x1b[31mred",
    "nul\x00x",
    "vt\x0bx",
    "pipe|x",
    "back`tick``s",
    "new\nline",
    "L" * 10_000,
]
WORKFLOW = "wf [/x]\t\x1b[2J|`"


def write_hostile(path: Path, *, runs: int = 24, scale: float = 1.0) -> Path:
    """``runs`` runs of a workflow whose name and step names are hostile.

    Lone surrogates are left out here (the exporter replaces them, and whether a reader
    keeps one is the reader's business): the renderers are given them directly below."""
    plain = path.with_suffix(".plain")
    exporter = JsonLinesSpanExporter(plain)
    with capture(fake_clock=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(exporter))
        p = cap.provider
        for i in range(runs):
            with chainlat.workflow(WORKFLOW, tracer_provider=p):
                for name in STEPS:
                    with chainlat.data_stage(name, tracer_provider=p):
                        cap.clock.advance(ms=(5 + i % 7) * scale)
            cap.clock.advance(ms=100)
        p.force_flush()
    plain.rename(path)
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Two trace files (the second twice as slow) and a JSON budget file for them."""
    folder = tmp_path_factory.mktemp("hostile")
    before = write_hostile(folder / "before.jsonl")
    after = write_hostile(folder / "after.jsonl", scale=2.0)
    limits: dict[str, object] = {
        "total": "1ms",
        "p95": "1ms",
        "steps": {f"data {name}": {"max": "1ms"} for name in STEPS},
    }
    budgets = folder / "budgets.json"
    budgets.write_text(json.dumps({"workflows": {WORKFLOW: limits}}))
    return before, after, budgets


def strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: bare {constant}")

    return json.loads(text, parse_constant=refuse)


def assert_one_line_error(err: str, *fragments: str) -> None:
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert err.startswith("chainlat")
    for fragment in fragments:
        assert fragment in err, err


def assert_shown_literally(out: str) -> None:
    """The hostile names are visible, escaped, and nothing raw reaches the terminal."""
    for raw in ("\x1b", "\x00", "\x0b", "\ud800"):
        assert raw not in out
    for shown in ("load [/mnt/data]", "retrieve [kb-v2]", "\\x1b[31mred", "nul\\x00x"):
        # Markdown text outside code spans escapes its punctuation: load \[/mnt/data\]
        assert shown in out or shown in re.sub(r"\\(.)", r"\1", out), shown


# --- items 10, 11, 12: hostile names in every command and format -----------------------------


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_check_with_hostile_names_is_valid_in_every_format(
    hostile: tuple[Path, Path, Path], tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before, _, budgets = hostile
    junit = tmp_path / "junit.xml"
    args = ("check", before, "--budgets", budgets, "--format", fmt, "--junit", junit)
    code, out, err = run(capsys, *args, "--no-progress")
    assert (code, err) == (1, "")
    ET.parse(junit)  # XML 1.0 that parses, whatever the names
    if fmt == "json":
        document = strict_json(out)
        assert isinstance(document, dict)
        assert WORKFLOW in document["workflows"]
        assert any("load [/mnt/data]" in v["target"] for v in document["verdicts"])
    else:
        assert_shown_literally(out)
        assert "worst run for" in out.lower()  # the waterfall of a tab-named step drew
    if fmt == "markdown":
        assert "pipe\\|x" in out and "back\\`tick\\`\\`s" in out and "new\\x0aline" in out


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_report_with_hostile_names_is_valid_in_every_format(
    hostile: tuple[Path, Path, Path], tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before, _, _ = hostile
    args: list[str | os.PathLike[str]] = ["report", before, "--format", fmt, "--no-progress"]
    html = tmp_path / "report.html"
    plotly = _has_plotly()
    if plotly:
        args += ["--html", html]
    code, out, err = run(capsys, *args)
    assert (code, err) == (0, "")
    if fmt == "json":
        strict_json(out)
    else:
        assert_shown_literally(out)
    if plotly:
        page = html.read_bytes().decode("utf-8")  # strict: no lone surrogate got in
        assert "load [/mnt/data]" in page and "\x1b" not in page


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_diff_with_hostile_names_is_valid_in_every_format(
    hostile: tuple[Path, Path, Path], fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after, _ = hostile
    code, out, err = run(capsys, "diff", before, after, "--format", fmt, "--no-progress")
    assert (code, err) == (1, "")
    if fmt == "json":
        strict_json(out)
    else:
        assert_shown_literally(out)


def test_hostile_names_reach_a_real_stdout_without_an_encoding_error(
    hostile: tuple[Path, Path, Path],
) -> None:
    before, _, budgets = hostile
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", str(before), "--budgets", str(budgets)],
        capture_output=True,
        timeout=120,
        env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"},
    )
    assert done.returncode == 1, done.stderr
    assert b"Traceback" not in done.stderr
    assert b"load [/mnt/data]" in done.stdout


def test_every_renderer_replaces_lone_surrogates(tmp_path: Path) -> None:
    from chainlat import report
    from chainlat._core.stats import aggregate

    name = "lone\ud800 [/x]\x1b"
    step = StepTiming(f"data {name}", "data", 0, 5_000_000)
    rollup = Rollup(total_ms=5.0, inference_ms=0.0, data_ms=5.0, tool_ms=0.0, overhead_ms=0.0)
    run_ = WorkflowRun(name, rollup, (step,), 0, 5_000_000, origin=f"{name}.jsonl:1")
    budgets = Budgets.model_validate({"workflows": {name: {"total": 1, "p50": 1}}})
    verdicts = evaluate([run_], budgets)
    stats = aggregate([run_])
    outputs = [
        report.check_text(verdicts, sources=name),
        report.check_markdown(verdicts, sources=name),
        report.stats_text(stats, sources=name, waterfalls={name: [(name, run_)]}),
        report.stats_markdown(stats, sources=name, waterfalls={name: [(name, run_)]}),
        report.junit_xml(verdicts),
        report.waterfall(run_),
    ]
    if _has_plotly():
        outputs.append(report.html_page(stats, sources=name, waterfalls={name: [(name, run_)]}))
    for text in outputs:
        text.encode("utf-8")  # strict: raises on a lone surrogate
        assert "\x1b" not in text
    ET.fromstring(outputs[4].split("\n", 1)[1])


def _has_plotly() -> bool:
    try:
        import plotly  # noqa: F401
    except ImportError:
        return False
    return True


def test_the_pytest_plugin_failure_message_survives_a_tab_in_a_step_name() -> None:
    from chainlat.pytest_plugin import _failure

    step = StepTiming("tab\there", "tool", 0, 5_000_000)
    rollup = Rollup(total_ms=5.0, inference_ms=0.0, data_ms=0.0, tool_ms=5.0, overhead_ms=0.0)
    budgets = Budgets.model_validate({"workflows": {"w": {"steps": {"tab\there": {"max": 1}}}}})
    report = evaluate([WorkflowRun("w", rollup, (step,), 0, 5_000_000)], budgets)
    message = _failure(report, "1 run of w")
    assert message is not None
    assert "tab\\x09here" in message and "<-- max 5.0 ms > 1 ms" in message


# --- item 4: no credential in any line the CLI prints ----------------------------------------


def test_an_unreachable_jaeger_url_is_printed_without_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "b.toml"
    budgets.write_text('[workflows.w]\ntotal = "1s"\n')
    url = f"http://user:hunter2-PW@127.0.0.1:{free_port()}"
    code, out, err = run(
        capsys, "check", "--jaeger", url, "--service", "s", "--budgets", budgets, "--no-progress"
    )
    assert code == 2
    assert_one_line_error(err)
    assert "hunter2" not in err + out


def test_a_usage_error_quoting_a_url_is_printed_without_its_password(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["report", "t.jsonl", "--limit", "http://user:hunter2-PW@host"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--limit" in err and "hunter2" not in err


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_a_reports_source_line_never_shows_the_jaeger_password(
    fake_jaeger: StartFakeJaeger, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    jaeger = fake_jaeger(v3=True)
    url = jaeger.url.replace("http://", "http://user:hunter2-PW@")
    code, out, err = run(
        capsys, "report", "--jaeger", url, "--service", "support-api", "--format", fmt
    )
    assert code == 0, err
    assert "127.0.0.1" in out and "hunter2" not in out + err


# --- item 7: float arguments and duplicate keys ----------------------------------------------


@pytest.mark.parametrize("threshold", ["nan", "NaN%", "inf", "-inf%", "1e400", "-5%"])
def test_a_non_finite_or_negative_threshold_is_one_line_exit_2(
    hostile: tuple[Path, Path, Path], threshold: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after, _ = hostile
    code, _, err = run(capsys, "diff", before, after, f"--threshold={threshold}")
    assert code == 2
    assert_one_line_error(err, "--threshold")


@pytest.mark.parametrize("alpha", ["nan", "inf", "1e400"])
def test_a_non_finite_alpha_is_one_line_exit_2(
    hostile: tuple[Path, Path, Path], alpha: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after, _ = hostile
    code, _, err = run(capsys, "diff", before, after, f"--alpha={alpha}")
    assert code == 2
    assert_one_line_error(err, "--alpha")


@pytest.fixture
def model_traces(cap: Capture, tmp_path: Path) -> Path:
    """Three runs of a workflow with one call to model ``big`` (100 tokens in, 11 out)."""
    p = cap.provider
    for _ in range(3):
        with chainlat.workflow("agent", tracer_provider=p):
            with chainlat.inference("big", tracer_provider=p) as call:
                cap.clock.advance(200)
                call.record_usage(100, 11)
    file = tmp_path / "traces.jsonl"
    file.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    return file


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--prompt-scale", "chat big=1e308"),
        ("--prompt-scale", "chat big=nan"),
        ("--prompt-scale", "chat big=inf"),
        ("--cache-hit-rate", "chat big=nan"),
        ("--cache-hit-rate", "chat big=1e400"),
    ],
)
def test_an_out_of_range_whatif_number_is_one_line_exit_2(
    model_traces: Path, flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, "whatif", model_traces, flag, value, "--no-progress")
    assert code == 2
    assert_one_line_error(err, flag)


def test_huge_token_counts_are_left_out_of_a_fit_not_an_overflow(
    model_traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = model_traces.read_text()
    huge = text.replace('"intValue": "100"', '"intValue": "' + "9" * 400 + '"', 1)
    model_traces.write_text(huge.replace('"intValue": "11"', '"doubleValue": 1e300', 1))
    code, out, err = run(capsys, "profile", model_traces, "--format", "json", "--no-progress")
    assert (code, err) == (0, "")
    assert strict_json(out)


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "b.yaml",
            "workflows:\n  w:\n    total: 1ms\n  w:\n    p95: 1s\n",
            'b.yaml:4: duplicate key "w"',
        ),
        ("b.json", '{"workflows": {"w": {"total": 1}, "w": {}}}', 'b.json:1: duplicate key "w"'),
    ],
)
def test_a_duplicate_key_in_a_budget_file_is_one_line_exit_2(
    tmp_path: Path, name: str, text: str, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run(capsys, "budgets", "validate", path)
    assert code == 2
    assert_one_line_error(err, where)


# --- item 12: deep nesting, and the handler as the safety net --------------------------------


def test_an_outcomes_line_nested_too_deeply_is_one_line_exit_2(
    model_traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes = tmp_path / "outcomes.jsonl"
    outcomes.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    code, _, err = run(capsys, "compare", model_traces, "--outcomes", outcomes, "--no-progress")
    assert code == 2
    assert_one_line_error(err, f"{outcomes}:1: nested too deeply")


def test_a_budget_file_nested_too_deeply_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"workflows": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001)
    code, _, err = run(capsys, "budgets", "validate", path)
    assert code == 2
    assert_one_line_error(err, f"{path}: nested too deeply")


@pytest.fixture
def failing_command(monkeypatch: pytest.MonkeyPatch) -> list[BaseException]:
    """``budgets validate`` raising whatever the test puts in the list."""
    raised: list[BaseException] = []

    def validate(args: argparse.Namespace) -> int:
        raise raised[0]

    monkeypatch.setattr("chainlat.cli.budgets._validate", validate)
    return raised


@pytest.mark.parametrize(
    "exc",
    [
        RecursionError("maximum recursion depth exceeded"),
        UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates not allowed"),
        OverflowError("cannot convert float infinity to integer"),
        ValueError("could not convert string to float: 'http://u:hunter2-PW@h'"),
    ],
)
def test_an_input_failure_a_parser_did_not_catch_is_one_line_exit_2(
    failing_command: list[BaseException],
    exc: BaseException,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    failing_command.append(exc)
    code, _, err = run(capsys, "budgets", "validate", tmp_path / "b.toml")
    assert code == 2
    assert_one_line_error(err, "chainlat budgets: cannot use", "b.toml")
    assert "hunter2" not in err


def test_a_pydantic_validation_error_is_one_line_exit_2(
    failing_command: list[BaseException], capsys: pytest.CaptureFixture[str]
) -> None:
    from chainlat._core.latency import LatencyProfile

    try:
        LatencyProfile(ttft_base_ms=math.nan)
    except ValueError as exc:
        failing_command.append(exc)
    code, _, err = run(capsys, "budgets", "validate", "b.toml")
    assert code == 2
    assert_one_line_error(err, "ttft_base_ms")


def test_a_bug_stays_a_traceback_in_chainlats_tests_and_is_one_line_exit_3_elsewhere(
    failing_command: list[BaseException],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    failing_command.append(TypeError("a bug"))
    with pytest.raises(TypeError):
        main(["budgets", "validate", "b.toml"])
    monkeypatch.setattr(chainlat._core.errors, "RAISE_INTERNAL_ERRORS", False)
    code, _, err = run(capsys, "budgets", "validate", "b.toml")
    assert code == 3
    assert_one_line_error(err, "internal error", "TypeError: a bug", "please report it")


def test_budgets_validate_prints_workflow_names_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "b.json"
    path.write_text('{"workflows": {"w\\u001b[2J\\ud800": {"total": 1}}}')
    code, out, err = run(capsys, "budgets", "validate", path)
    assert (code, err) == (0, "")
    assert out.endswith(": ok (w\\x1b[2J\ufffd)\n")
