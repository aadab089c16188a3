"""A span that ends before it starts costs that span, not its line: the other spans of the
line (here, a 60 s run) are read and judged, and the dropped span is counted in a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import capture
from chainlat.traces import read_runs


def _line(seconds: float, *, negative: bool) -> str:
    with capture(fake_clock=True) as cap:
        with chainlat.workflow("chat", tracer_provider=cap.provider):
            with chainlat.data_stage("retrieve", tracer_provider=cap.provider):
                cap.clock.advance(ms=5)
            with chainlat.inference("gpt-4o", tracer_provider=cap.provider):
                cap.clock.advance(ms=seconds * 1000)
        document = encode_request(cap.spans())
    if negative:
        for resource in document["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if span["name"] == "data retrieve":
                        span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - 1)
    return json.dumps(document) + "\n"


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text(_line(0.1, negative=False) + _line(60, negative=True), encoding="utf-8")
    return path


def test_the_run_of_a_negative_span_is_read_without_it(traces: Path) -> None:
    runs = sorted(read_runs([traces]), key=lambda r: r.total_ms)
    assert [round(r.total_ms) for r in runs] == [105, 60_005]
    assert [s.name for s in runs[1].steps] == ["chat gpt-4o"]


def test_the_gate_judges_the_run_and_says_what_was_dropped(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows.chat]\ntotal = "1s"\n', encoding="utf-8")
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 1
    err = capsys.readouterr().err
    assert "1 spans end before they start and were dropped" in err
    assert "t.jsonl:2:" in err


def test_a_negative_span_in_a_jaeger_json_file_costs_that_span_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Jaeger's JSON gives a duration; a negative one drops its span, not the trace."""
    start_us = 1_700_000_000_000_000
    spans = [
        {
            "traceID": "ab" * 16, "spanID": "00000000000000a1", "operationName": name,
            "startTime": start_us, "duration": duration, "references": references,
            "tags": [{"key": "gen_ai.operation.name", "type": "string", "value": operation}],
        }
        for name, duration, references, operation in (
            ("invoke_workflow chat", 60_000_000, [], "invoke_workflow"),
            ("chat gpt-4o", 59_000_000, [{"refType": "CHILD_OF", "spanID": "00000000000000a1"}],
             "chat"),
            ("data retrieve", -5, [{"refType": "CHILD_OF", "spanID": "00000000000000a1"}],
             "retrieval"),
        )
    ]  # fmt: skip
    for index, span in enumerate(spans):
        span["spanID"] = f"00000000000000a{index + 1}"
    path = tmp_path / "jaeger.json"
    path.write_text(json.dumps({"data": [{"traceID": "ab" * 16, "spans": spans}]}))
    (run,) = read_runs(path)
    assert round(run.total_ms) == 60_000
    assert [s.name for s in run.steps] == ["chat gpt-4o"]
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows.chat]\ntotal = "1s"\n', encoding="utf-8")
    assert main(["check", str(path), "--budgets", str(budgets)]) == 1
    assert "1 spans end before they start and were dropped" in capsys.readouterr().err


def _negative_workflow_file(tmp_path: Path) -> Path:
    """Two fast runs of ``chat``; the second's workflow span ends before it starts."""
    good = _line(0.1, negative=False)
    document = json.loads(_line(0.1, negative=False))
    for resource in document["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                if span["name"] == "invoke_workflow chat":
                    span["endTimeUnixNano"] = str(int(span["startTimeUnixNano"]) - 1)
    path = tmp_path / "t.jsonl"
    path.write_text(good + json.dumps(document) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "options", [[], ["--format", "json"], ["--format", "markdown"], ["--junit", "JUNIT"]]
)
def test_a_dropped_workflow_span_leaves_its_workflows_limits_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    """A run whose workflow span ends before it starts cannot be read: the limits of its
    workflow are not judged (exit 2) in every format, never kept on the other runs."""
    traces = _negative_workflow_file(tmp_path)
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows.chat]\ntotal = "1s"\n', encoding="utf-8")
    options = [str(tmp_path / "junit.xml") if o == "JUNIT" else o for o in options]
    assert main(["check", str(traces), "--budgets", str(budgets), *options]) == 2
    out, err = capsys.readouterr()
    assert "invoke_workflow chat" in err
    if options[:2] == ["--format", "json"]:
        (verdict,) = json.loads(out)["verdicts"]
        assert (verdict["status"], verdict["reason"]) == ("not_judged", "incomplete_run")
        assert "ends before it starts" in verdict["why"]
    elif options and options[0] == "--junit":
        assert 'name="exit_code" value="2"' in (tmp_path / "junit.xml").read_text()
    else:
        assert "FAILED: 0 of 1 limit broken, 1 not judged" in out
