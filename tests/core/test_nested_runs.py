"""Runs nested in runs, in time and memory linear in the spans: each run rolled up from its
own spans, the nested runs standing in for theirs, gives what the walk of every span gives."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from chainlat._core import trace_runs
from chainlat._core.rollup import NESTED_LEVELS, SpanKindLabel, SpanRecord
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat._core.trace_runs import SpansBelow, runs_of_trace
from support.records import rec

T0 = 1_700_000_000_000  # ms


def _span(
    span_id: int,
    parent: int | None,
    name: str,
    start_ms: float,
    end_ms: float,
    kind: SpanKindLabel | None = None,
    **extra: object,
) -> TracedSpan:
    record: SpanRecord = rec(span_id, parent, name, T0 + start_ms, T0 + end_ms, kind, **extra)
    attributes = {"gen_ai.workflow.name": name} if kind == "workflow" else {}
    return TracedSpan(record, attributes)


def _call(span_id: int, parent: int, start: float, end: float, **extra: object) -> TracedSpan:
    """A call of chainlat's own API, as the readers make it: not streamed unless it marked a
    first token (``SpanRecord.streamed``)."""
    return _span(
        span_id, parent, f"chat m{span_id}", start, end, "inference",
        source="chainlat", streamed=False, model="m", input_tokens=10 + span_id,
        output_tokens=span_id, **extra,
    )  # fmt: skip


def _both(spans: list[TracedSpan]) -> tuple[list[WorkflowRun], list[WorkflowRun]]:
    composed = runs_of_trace("0" * 32, spans)
    trace_runs.COMPOSE = False
    try:
        whole = runs_of_trace("0" * 32, spans)
    finally:
        trace_runs.COMPOSE = True
    return composed, whole


def _same(composed: list[WorkflowRun], whole: list[WorkflowRun]) -> None:
    assert [r.span_id for r in composed] == [r.span_id for r in whole]
    for a, b in zip(composed, whole, strict=True):
        assert a == b  # rollup, steps, times, nested, incomplete: every compared field
        assert a.rebuilt == b.rebuilt
        assert [s.record.span_id for s in a.spans] == [s.record.span_id for s in b.spans]
        assert len(a.spans) == len(b.spans)


def _chain_of_three() -> list[TracedSpan]:
    return [
        _span(1, None, "outer", 0, 1000, "workflow"),
        _call(2, 1, 10, 100, ttft_ms=30.0, user_facing=True),  # the first output: here
        _span(3, 1, "middle", 120, 900, "workflow"),
        _call(4, 3, 130, 300, ttft_ms=20.0, user_facing=True),
        _span(5, 3, "inner", 310, 800, "workflow"),
        _span(6, 5, "data load", 320, 400, "data"),
        _call(7, 5, 400, 790, ttft_ms=35.0),
        _span(8, 1, "execute_tool t", 910, 990, "tool"),
    ]


def test_a_chain_of_three_nested_runs_is_composed_with_the_numbers_of_the_whole_walk() -> None:
    composed, whole = _both(_chain_of_three())
    _same(composed, whole)
    outer = next(r for r in composed if r.workflow == "outer")
    assert isinstance(outer.spans, SpansBelow)  # composed, not walked whole
    assert outer.rollup.step_count == 7
    assert outer.rollup.inference_count == 3
    assert outer.rollup.first_output_ms == 40.0
    assert outer.rollup.critical_path == (
        "chat m2", "middle", "chat m4", "inner", "data load", "chat m7", "execute_tool t",
    )  # fmt: skip


def test_sibling_nested_runs_are_composed_with_the_numbers_of_the_whole_walk() -> None:
    spans = [
        _span(1, None, "outer", 0, 1000, "workflow"),
        _span(2, 1, "left", 10, 400, "workflow"),
        _call(3, 2, 20, 390),
        _span(4, 1, "glue", 400, 420),  # transparent
        _span(5, 4, "right", 420, 950, "workflow"),
        _call(6, 5, 430, 600),
        _span(7, 5, "execute_tool t", 600, 940, "tool"),
        _call(8, 1, 950, 990, ttft_ms=5.0, user_facing=True),  # the first output, after both
    ]
    composed, whole = _both(spans)
    _same(composed, whole)
    assert isinstance(composed[0].spans, SpansBelow)
    assert composed[0].rollup.first_output_ms == 955.0


def test_a_nested_run_overlapping_a_sibling_step_is_walked_whole() -> None:
    spans = [
        _span(1, None, "outer", 0, 1000, "workflow"),
        _span(2, 1, "agent", 10, 600, "workflow"),
        _call(3, 2, 20, 300),
        _span(4, 2, "data fetch", 300, 590, "data"),
        _span(5, 1, "data side", 200, 800, "data"),  # beside the agent, overlapping it
    ]
    composed, whole = _both(spans)
    _same(composed, whole)
    assert not isinstance(composed[0].spans, SpansBelow)


def test_a_first_output_a_nested_run_gives_is_walked_whole() -> None:
    composed, whole = _both(
        [*_chain_of_three()[:3], _call(4, 3, 130, 300, ttft_ms=20.0), *_chain_of_three()[4:]]
    )  # the middle's first output is the inner run's streamed call, which started last
    _same(composed, whole)
    assert composed[1].workflow == "middle"
    assert composed[1].rollup.first_output_ms == 435.0 - 120.0
    assert not isinstance(composed[1].spans, SpansBelow)


def test_a_first_output_inside_a_nested_run_is_walked_whole() -> None:
    spans = [
        _span(1, None, "outer", 0, 1000, "workflow"),
        _call(2, 1, 10, 100),
        _span(3, 1, "agent", 110, 900, "workflow"),
        _call(4, 3, 120, 890, ttft_ms=50.0, user_facing=True),
        _span(5, 1, "execute_tool t", 900, 990, "tool"),
    ]
    composed, whole = _both(spans)
    _same(composed, whole)
    assert composed[0].rollup.first_output_ms == 170.0
    assert not isinstance(composed[0].spans, SpansBelow)


def test_a_first_output_after_a_nested_run_is_composed() -> None:
    spans = [
        _span(1, None, "outer", 0, 1000, "workflow"),
        _span(2, 1, "agent", 10, 500, "workflow"),
        _call(3, 2, 20, 490),
        _span(4, 2, "execute_tool t", 100, 200, "tool"),  # beside the call, inside the agent
        _call(5, 1, 510, 990, ttft_ms=40.0, user_facing=True),
    ]
    composed, whole = _both(spans)
    _same(composed, whole)
    assert isinstance(composed[0].spans, SpansBelow)
    assert composed[0].rollup.first_output_ms == 550.0


def _chain(n: int) -> Iterator[TracedSpan]:
    for i in range(n):
        yield _span(i + 1, i or None, f"w{i % 3}-{i}", i, 10_000 - i, "workflow")
        yield _call(n + i + 1, i + 1, i + 0.25, i + 0.75)


def test_a_chain_deeper_than_the_step_levels_keeps_every_figure_and_the_nearer_steps() -> None:
    depth = NESTED_LEVELS + 4
    composed, whole = _both(list(_chain(depth)))
    for a, b in zip(composed, whole, strict=True):
        assert a.rollup.step_count == b.rollup.step_count
        assert a.rollup.inference_ms == b.rollup.inference_ms
        assert a.rollup.overhead_ms == b.rollup.overhead_ms
        assert a.rollup.first_output_ms == b.rollup.first_output_ms
        assert a.rollup.input_tokens == b.rollup.input_tokens
        kept = {(s.name, s.depth) for s in a.steps}
        assert kept <= {(s.name, s.depth) for s in b.steps}
        assert {(s.name, s.depth) for s in b.steps if s.depth <= NESTED_LEVELS} <= kept
        assert [s.record.span_id for s in a.spans] == [s.record.span_id for s in b.spans]
    assert composed[0].rollup.step_count == 2 * depth - 1
    assert composed[-1] == whole[-1]


_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (BYTES, BYTES))
    from chainlat.traces import read_runs
    runs = list(read_runs(sys.argv[1]))
    outer = next(r for r in runs if not r.nested)
    inner = runs[-1]
    print(json.dumps({
        "runs": len(runs), "nested": sum(r.nested for r in runs),
        "outer": [outer.rollup.total_ms, outer.rollup.overhead_ms, outer.rollup.step_count,
                  outer.rollup.inference_count, len(outer.spans)],
        "inner": [inner.rollup.total_ms, inner.rollup.step_count, len(inner.spans)],
        "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }))
    """
)


def _nested_chain_file(path: Path, n: int) -> None:
    t0 = 1_700_000_000_000_000_000
    spans = []
    for i in range(n):
        span = {
            "traceId": "0" * 31 + "1",
            "spanId": f"{i + 1:016x}",
            "name": f"invoke_workflow w{i}",
            "startTimeUnixNano": str(t0 + i * 1000),
            "endTimeUnixNano": str(t0 + 2 * 10**9 - i * 1000),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
                {"key": "gen_ai.workflow.name", "value": {"stringValue": f"w{i % 3}"}},
            ],
        }
        if i:
            span["parentSpanId"] = f"{i:016x}"
        spans.append(span)
    spans.reverse()  # the innermost first, as an exporter writes them
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    path.write_text(json.dumps(doc) + "\n")


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_AS"), reason="no address-space limit here")
def test_twenty_thousand_nested_workflows_read_within_a_gibibyte(tmp_path: Path) -> None:
    """Once 27.7 s and 375 MB for 2,000, a MemoryError at 3,000 under 800 MB, no answer in
    300 s for 20,000 (quadratic): now read in one process limited to 1 GiB."""
    n = 20_000
    path = tmp_path / "nested.jsonl"
    _nested_chain_file(path, n)
    script = _CHILD.replace("BYTES", str(1 << 30))
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        capture_output=True,
        text=True,
        timeout=600,  # a stop, not a measure: the read takes seconds
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout)
    assert found["runs"] == n
    assert found["nested"] == n - 1
    assert found["outer"] == [2000.0, 2000.0, n - 1, 0, n - 1]
    assert found["inner"] == [2000.0 - 2 * (n - 1) / 1000, 0, 0]
