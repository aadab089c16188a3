"""Interrupted voice turns left out of the percentiles are said to be, in every output of
``check`` and ``report``; a percentile left with fewer than ``min_runs`` is not judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.cli import main
from chainlat.testing import capture

LEFT_OUT = "19 interrupted (barge-in), not in the percentiles"


def _turns(path: Path) -> None:
    """Nineteen slow turns (2 s) the caller interrupted, and one fast (100 ms) completed."""
    with capture(fake_clock=True, sequential_ids=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
        for n in range(20):
            with chainlat.workflow("voice-turn", tracer_provider=cap.provider) as turn:
                cap.clock.advance(100 if n == 19 else 2000)
                turn.end_reason("completed" if n == 19 else "interrupted")


@pytest.mark.parametrize(
    "options", [[], ["--format", "json"], ["--format", "markdown"], ["--junit", "JUNIT"]]
)
def test_check_says_how_many_turns_were_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    _turns(traces)
    budgets = tmp_path / "b.toml"
    budgets.write_text('min_runs = 20\n[workflows.voice-turn]\np95 = "500ms"\n')
    junit = tmp_path / "junit.xml"
    options = [str(junit) if o == "JUNIT" else o for o in options]
    assert main(["check", str(traces), "--budgets", str(budgets), *options]) == 2
    out = capsys.readouterr().out
    if options[:2] == ["--format", "json"]:
        document = json.loads(out)
        stats = document["workflows"]["voice-turn"]
        assert (stats["interrupted"], stats["interrupted_in_percentiles"]) == (19, False)
        (verdict,) = document["verdicts"]
        assert (verdict["status"], verdict["reason"]) == ("not_judged", "not_enough_runs")
        assert "19 interrupted turns left out" in verdict["why"]
    elif options and options[0] == "--junit":
        text = junit.read_text()
        assert LEFT_OUT in text
        assert 'name="exit_code" value="2"' in text
    else:
        assert LEFT_OUT in out


@pytest.mark.parametrize("options", [[], ["--format", "json"]])
def test_report_says_how_many_turns_were_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    _turns(traces)
    assert main(["report", str(traces), *options]) == 0
    out = capsys.readouterr().out
    if options:
        assert json.loads(out)["workflows"]["voice-turn"]["interrupted"] == 19
    else:
        assert LEFT_OUT in out


@pytest.mark.parametrize(("include", "status", "judged"), [(False, "ok", 1), (True, "broken", 20)])
def test_per_run_limits_leave_interrupted_turns_out_as_the_percentiles_do(
    tmp_path: Path, include: bool, status: str, judged: int
) -> None:
    """A 500 ms per-run limit judges the one completed turn (100 ms) and keeps; with
    ``include_interrupted = true`` it judges all twenty and the 2 s turns break it."""
    from chainlat.budgets import evaluate, load_budgets
    from chainlat.traces import read_runs

    traces = tmp_path / "t.jsonl"
    _turns(traces)
    budgets = tmp_path / "b.toml"
    flag = "include_interrupted = true\n" if include else ""
    budgets.write_text(f'{flag}[workflows.voice-turn]\ntotal = "500ms"\n')
    (verdict,) = evaluate(read_runs([str(traces)]), load_budgets(budgets)).verdicts
    assert (verdict.target, verdict.status, verdict.runs) == ("total", status, judged)
    assert verdict.actual_ms == (2000.0 if include else 100.0)
