"""Runs a reader could not read whole: their workflow's limits are not judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chainlat.cli import main
from chainlat.traces import ReadCounters, read_runs
from support.tracegen import DATA_DIR

BUDGETS = """\
[workflows.support-chat]
total = "10s"
[workflows.support-chat.steps."chat gpt-4o"]
max = "10s"
"""


def _late_file(tmp_path: Path) -> Path:
    """The root first, its two children three lines later."""
    path = tmp_path / "late.jsonl"
    lines = (DATA_DIR / "collector-traces.jsonl").read_text().splitlines()
    path.write_text("\n".join([lines[1], "", "", lines[0]]) + "\n")
    return path


def test_the_reader_counts_late_spans_by_the_workflow_of_their_trace(tmp_path: Path) -> None:
    counters = ReadCounters()
    list(read_runs([_late_file(tmp_path)], settle_lines=1, counters=counters))
    assert (counters.late_spans, counters.late_workflows) == (3, {"support-chat": 3})


def test_a_span_dropped_after_the_settle_window_leaves_its_workflow_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(BUDGETS)
    args = ["check", str(_late_file(tmp_path)), "--budgets", str(budgets), "--format", "json"]
    code = main([*args, "--settle-lines", "1"])
    out, err = capsys.readouterr()
    assert code == 2, err
    document = json.loads(out)
    assert document["summary"] == "FAILED: 0 of 2 limits broken, 2 not judged"
    assert {v["reason"] for v in document["verdicts"]} == {"incomplete_run"}
    assert "3 spans of its runs arrived after their trace was judged" in err
    assert main([*args, "--settle-lines", "8"]) == 0


def _span(trace: str, span: str, parent: str, start_s: float, end_s: float) -> dict[str, object]:
    found: dict[str, object] = {
        "traceId": trace,
        "spanId": span,
        "name": "POST /chat",
        "kind": 2,
        "startTimeUnixNano": str(int(start_s * 1e9)),
        "endTimeUnixNano": str(int(end_s * 1e9)),
    }
    if parent:
        found["parentSpanId"] = parent
    return found


def _roots_file(tmp_path: Path) -> Path:
    """A 100 ms request, a 9 s one whose span is its own parent, and a 9 s one in a ring of
    two spans that are each other's parent."""
    spans = [
        _span("1" * 32, "a" * 16, "", 1.0, 1.1),
        _span("2" * 32, "b" * 16, "b" * 16, 2.0, 11.0),
        _span("3" * 32, "c" * 16, "d" * 16, 12.0, 21.0),
        _span("3" * 32, "d" * 16, "c" * 16, 12.5, 20.0),
    ]
    line = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    path = tmp_path / "roots.jsonl"
    path.write_text(json.dumps(line) + "\n")
    return path


def test_roots_makes_a_run_of_a_root_that_is_its_own_parent_or_in_a_cycle(tmp_path: Path) -> None:
    runs = list(read_runs([_roots_file(tmp_path)], roots=True))
    assert [(r.total_ms, r.incomplete) for r in runs] == [
        (100.0, None),
        (9000.0, "its root span is its own parent"),
        (9000.0, "its root span is part of a cycle of 2 parents"),
    ]


def test_a_cycle_root_is_judged_broken_or_leaves_its_workflow_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = _roots_file(tmp_path)
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows."POST /chat"]\ntotal = "1s"\n')
    assert main(["check", str(traces), "--budgets", str(budgets), "--roots"]) == 1
    budgets.write_text('[workflows."POST /chat"]\np50 = "10s"\n')
    assert main(["check", str(traces), "--budgets", str(budgets), "--roots"]) == 2
    err = capsys.readouterr().err
    assert "2 of its runs could not be read whole: its root span is its own parent" in err
