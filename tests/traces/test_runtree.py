"""Runs as span trees read from trace files: streamed like the runs, outcomes merged."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry import context

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.testing import Capture
from chainlat.traces import ReadCounters, load_runs, read_runs
from support.tracegen import DATA_DIR, ChatRun, graded_file, write_runs


def test_run_trees_hold_open_traces_not_the_file(tmp_path: Path) -> None:
    """The same settle rule as the runs: spans are dropped once their run is handed out."""
    path = write_runs(tmp_path / "t.jsonl", [ChatRun()] * 200, batch=None)
    counters = ReadCounters()
    trees = read_runs([path], outcomes=True, counters=counters)
    totals = [tree.recomputed_rollup().total_ms for tree in trees]
    assert totals == [r.total_ms for r in read_runs([path])]
    assert (counters.spans, counters.workflows, counters.late_spans) == (600, 200, 0)
    assert counters.peak_open_spans <= 3 + 8


def test_outcomes_recorded_long_after_the_runs_are_merged(cap: Capture, tmp_path: Path) -> None:
    path = graded_file(cap, tmp_path / "t.jsonl", gap_lines=50)
    trees = list(read_runs([path], outcomes=True))
    assert [(t.variant, t.success, t.score) for t in trees] == [
        ("large", True, 0.5),
        ("small", False, 0.5),
    ]
    assert all(s.record.name != "record_outcome" for t in trees for s in t.spans)
    assert trees[0].origin == f"{path}:2"  # where its workflow span was read


def test_load_run_trees_lists_each_source_in_start_order(cap: Capture, tmp_path: Path) -> None:
    """Runs that end in the other order than they started (concurrent runs) come sorted."""
    p = cap.provider
    first = chainlat.workflow("agent", variant="first", tracer_provider=p)
    first.__enter__()
    cap.clock.advance(1)
    token = context.attach(context.Context())  # a run of its own, not nested in the first
    with chainlat.workflow("agent", variant="second", tracer_provider=p):
        cap.clock.advance(1)
    context.detach(token)
    cap.clock.advance(1)
    first.__exit__(None, None, None)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(encode_request([s])) + "\n" for s in cap.spans()))
    streamed = [t.variant for t in read_runs([path], outcomes=True)]
    assert streamed == ["second", "first"]  # as the traces completed
    assert [t.variant for t in load_runs([path, DATA_DIR / "jaeger-traces.json"])] == [
        "first",
        "second",
        None,
        None,
    ]
