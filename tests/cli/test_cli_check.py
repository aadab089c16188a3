"""``chainlat check``: every source format, every exit code, one-line errors without tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chainlat.cli import main
from support import MISTAKES, StartFakeJaeger
from support.cli import run
from support.tracegen import DATA_DIR, ChatRun, write_runs

BUDGETS = """\
[workflows.support-chat]
total = "1s"
p95 = { total = "900ms" }

[workflows.support-chat.steps."chat gpt-4o"]
ttft = "200ms"
"""

RUNS = [ChatRun(retrieve_ms=100, ttft_ms=80, chat_ms=300), ChatRun(retrieve_ms=60, chat_ms=250)]


@pytest.fixture
def budgets(tmp_path: Path) -> Path:
    path = tmp_path / "chainlat.toml"
    path.write_text(BUDGETS)
    return path


def assert_one_line_error(err: str, *fragments: str) -> None:
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
    assert err.startswith("chainlat: ")
    for fragment in fragments:
        assert fragment in err


def test_within_budget_exits_0(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = write_runs(tmp_path / "t.jsonl", RUNS)
    code, out, err = run(capsys, "check", traces, "--budgets", budgets)
    assert (code, err) == (0, "")
    assert "OK: all 3 limits judged and kept" in out


def test_broken_budget_exits_1_and_shows_the_worst_run(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = write_runs(tmp_path / "t.jsonl", [*RUNS, ChatRun(ttft_ms=250, chat_ms=1200)])
    code, out, _ = run(capsys, "check", traces, "--budgets", budgets)
    assert code == 1
    assert 'worst run for workflows.support-chat.steps."chat gpt-4o".ttft:' in out
    assert "<-- ttft 250.0 ms > 200 ms" in out
    assert "<-- total 1310.0 ms > 1000 ms" in out
    assert "FAILED: 3 of 3 limits broken, 0 not judged" in out


def test_budget_file_is_found_in_the_working_directory(
    tmp_path: Path,
    budgets: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    traces = write_runs(tmp_path / "t.jsonl", RUNS)
    code, out, _ = run(capsys, "check", traces)
    assert code == 0
    assert f"budgets from {budgets.name}" in out or f"budgets from {budgets}" in out


def test_collector_file_and_jaeger_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    budgets = tmp_path / "b.yaml"
    budgets.write_text("workflows:\n  support-chat:\n    total: 950ms\n    p50: 350ms\n")
    code, out, _ = run(
        capsys,
        "check",
        DATA_DIR / "collector-traces.jsonl",
        DATA_DIR / "jaeger-traces.json",
        "--budgets",
        budgets,
        "--format",
        "json",
    )
    assert code == 1
    report = json.loads(out)
    verdicts = {v["target"]: v for v in report["verdicts"]}
    assert verdicts["total"]["status"] == "ok"
    assert verdicts["total"]["actual_ms"] == 900.0
    assert verdicts["p50.total"]["status"] == "broken"
    # The 300 ms run failed (status ERROR): counted, but out of the percentiles by default,
    # so p50 is the nearest rank 2nd of 400, 500, 900.
    assert verdicts["p50.total"]["actual_ms"] == 500.0
    assert verdicts["p50.total"]["runs"] == 3
    assert report["workflows"]["support-chat"]["runs"] == 4


def test_jaeger_api_source(
    fake_jaeger: StartFakeJaeger, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jaeger = fake_jaeger(v3=True)
    budgets = tmp_path / "b.toml"
    budgets.write_text('[workflows.support-chat]\ntotal = "600ms"\n')
    code, out, _ = run(
        capsys,
        "check",
        "--jaeger",
        jaeger.url,
        "--service",
        "support-api",
        "--lookback",
        "3h",
        "--limit",
        "50",
        "--budgets",
        budgets,
        "--format",
        "markdown",
    )
    assert code == 0
    assert out.startswith("## chainlat latency budgets: within budget")
    assert "| `total (each run)` | 600 ms | 500.0 ms | 0/2 over | ok |" in out


def test_junit_report(tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = write_runs(tmp_path / "t.jsonl", [*RUNS, ChatRun(ttft_ms=250)])
    junit = tmp_path / "junit.xml"
    code, _, _ = run(capsys, "check", traces, "--budgets", budgets, "--junit", junit)
    assert code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures")) == ("3", "1")
    failures = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("name") for c in failures] == ['steps."chat gpt-4o".ttft']
    failure = failures[0].find("failure")
    assert failure is not None and "<-- ttft 250.0 ms > 200 ms" in (failure.text or "")


def test_percentiles_below_min_runs_are_nothing_to_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "b.toml"
    budgets.write_text('min_runs = 10\n[workflows.support-chat]\np95 = "1s"\n')
    traces = write_runs(tmp_path / "t.jsonl", RUNS)
    code, out, err = run(capsys, "check", traces, "--budgets", budgets)
    assert code == 2
    assert "NOT JUDGED: 2 < min_runs 10" in out
    assert out.endswith("FAILED: 0 of 1 limit broken, 1 not judged\n")
    assert_one_line_error(
        err,
        "workflows.support-chat.p95.total: 2 of the 10 runs min_runs asks for",
        "--allow-unjudged",
    )
    code, out, err = run(capsys, "check", traces, "--budgets", budgets, "--allow-unjudged")
    assert code == 2
    assert out.endswith("FAILED: no limit judged, 1 not judged (allowed)\n")
    assert_one_line_error(err, "nothing to judge")


# --- exit code 2 --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "toml", "yaml_text", "expected"), MISTAKES, ids=[m[0] for m in MISTAKES]
)
def test_budget_file_mistakes_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    toml: str,
    yaml_text: str,
    expected: str,
) -> None:
    for name, text in (("b.toml", toml), ("b.yaml", yaml_text)):
        path = tmp_path / name
        path.write_text(text)
        code, out, err = run(capsys, "check", DATA_DIR / "jaeger-traces.json", "--budgets", path)
        assert (code, out) == (2, "")
        assert_one_line_error(err, f"chainlat: {path}", expected)


def _bad_sources(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    good = (DATA_DIR / "collector-traces.jsonl").read_text()
    lines = good.splitlines()
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(f"{lines[0]}\n{lines[1][:50]}\n{lines[2]}\n")
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_text(good[:-100])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    no_workflows = tmp_path / "no-workflows.jsonl"
    no_workflows.write_text(lines[0] + "\n")
    return {
        "corrupt line": (corrupt, f"{corrupt}:2: not valid JSON ("),
        "truncated file": (truncated, f"{truncated}:3: truncated: the file ends in the middle"),
        "empty file": (empty, f"{empty}: empty file: no spans to read"),
        "missing file": (tmp_path / "nope.jsonl", "nope.jsonl: no such file"),
        "no workflow spans": (no_workflows, "nothing to judge: 3 spans in"),
    }


def test_a_corrupt_line_is_skipped_counted_and_the_rest_judged(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, _ = _bad_sources(tmp_path)["corrupt line"]
    code, out, err = run(capsys, "check", path, "--budgets", budgets, "--allow-unjudged")
    assert code == 0, err
    assert "OK: 2 of 3 limits judged and kept, 1 not judged (allowed)" in out
    assert "1 line" in err and "skipped" in err
    # The run left is a failed one: no percentile has a sample, and that is not a pass.
    code, out, err = run(capsys, "check", path, "--budgets", budgets)
    assert code == 2
    assert "p95.total: all 1 runs of 'support-chat' failed" in err


@pytest.mark.parametrize(
    "case", ["truncated file", "empty file", "missing file", "no workflow spans"]
)
def test_unusable_traces_exit_2(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    path, expected = _bad_sources(tmp_path)[case]
    code, out, err = run(capsys, "check", path, "--budgets", budgets)
    assert (code, out) == (2, "")
    assert_one_line_error(err, expected)


def test_no_budgeted_workflow_in_the_traces_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "b.toml"
    budgets.write_text('[workflows.checkout]\ntotal = "1s"\n')
    code, _, err = run(capsys, "check", DATA_DIR / "jaeger-traces.json", "--budgets", budgets)
    assert code == 2
    assert_one_line_error(
        err,
        "b.toml: workflows.checkout: no run of workflow 'checkout'",
        "seen: 'support-chat'",
        "--allow-missing",
    )
    code, _, err = run(
        capsys,
        "check",
        DATA_DIR / "jaeger-traces.json",
        "--budgets",
        budgets,
        "--allow-missing",
    )
    assert code == 2
    assert_one_line_error(
        err, "nothing to judge", "budgeted: checkout; in the traces: support-chat"
    )


def test_a_misspelled_step_fails_the_gate_with_a_suggestion(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "b.toml"
    budgets.write_text(
        '[workflows.support-chat.steps."chat gpt-40"]\nmax = "1ms"\n'
        '[workflows.support-chat.steps."data nightly"]\nmax = "1ms"\noptional = true\n'
    )
    code, _, err = run(capsys, "check", DATA_DIR / "jaeger-traces.json", "--budgets", budgets)
    assert code == 2
    assert_one_line_error(
        err,
        "workflows.support-chat.steps.\"chat gpt-40\": no run of 'support-chat' has a step",
        "did you mean 'chat gpt-4o'?",
    )
    # An optional step that no run has is "no data", not an error.
    assert "data nightly" not in err


def test_unreachable_jaeger_exits_2(budgets: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "check", "--jaeger", "http://127.0.0.1:9", "--service", "x", "--budgets", budgets
    )
    assert code == 2
    assert_one_line_error(err, "cannot reach Jaeger")


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--jaeger", "http://127.0.0.1:9"], "--jaeger needs --service NAME"),
        ([], "no traces to read"),
        (["--jaeger", "http://x", "--service", "s", "--lookback", "soon"], "--lookback 'soon'"),
    ],
)
def test_bad_arguments_exit_2(
    budgets: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    code, _, err = run(capsys, "check", "--budgets", budgets, *args)
    assert code == 2
    assert_one_line_error(err, expected)


def test_unknown_format_is_an_argparse_error_with_exit_2(
    budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["check", "x.jsonl", "--format", "yaml"])
    assert caught.value.code == 2
    assert "invalid choice: 'yaml'" in capsys.readouterr().err


def test_budgets_schema_and_validate(
    tmp_path: Path, budgets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "budgets", "schema")
    assert code == 0
    assert json.loads(out)["title"] == "chainlat latency budgets"
    code, out, _ = run(capsys, "budgets", "validate", budgets)
    assert (code, out) == (0, f"{budgets}: ok (support-chat)\n")


def test_check_as_a_real_process(tmp_path: Path, budgets: Path) -> None:
    """The installed entry point, in a fresh interpreter: exit code and output streams."""
    traces = write_runs(tmp_path / "t.jsonl", [*RUNS, ChatRun(chat_ms=1500)])
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", str(traces), "--budgets", str(budgets)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "160"},
    )
    assert done.returncode == 1, done.stderr
    assert "BROKEN: " in done.stdout
    assert done.stderr == ""
    broken = tmp_path / "broken.toml"
    broken.write_text("[workflows.x]\nmax = 5\n")
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", str(traces), "--budgets", str(broken)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr == f"chainlat: {broken}: workflows.x.max: unknown key (expected one of: " + (
        "total, inference, data, tool, overhead, first_output, speech_to_text, "
        "text_to_speech, first_output_speech_to_text, first_output_text_to_speech, "
        "first_output_end_of_turn, p50/p90/p95/p99 (any pNN), error_rate, cost, "
        "cost_p95 (any cost_pNN), min_runs, exclude_cache_hits, include_errors, "
        "include_interrupted, optional, steps, operations)\n"
    )
