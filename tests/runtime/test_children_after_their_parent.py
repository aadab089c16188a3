"""A span that starts after its parent ended, inside a workflow that is still open, is the
workflow's.

LangSmith's OpenTelemetry export (langsmith 0.15.1, ``LANGSMITH_TRACING_MODE=otel``) builds
its spans after the fact, from its run records, on its background tracing thread, each
with its run's own start and end times: a run's span is written, start to end, before its
children's. The live rollup owned a span only while its parent was open, so the children
of an ended span were not the workflow's: in the interop matrix's ``langsmith-otel``
stack the rollup recorded on the workflow span counted no retrieval and no tool (data
0.0 ms where the spans hold 31.6, tool 0.0 where they hold 26.3), where the readers count
both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace

import chainlat
from chainlat.testing import Capture
from support.readback import both_ways


def _after_the_fact(cap: Capture) -> None:
    """A chain run's span, then its retriever's and its tool's, as LangSmith writes them:
    the chain's start and end first, each child's after, all with the runs' own times."""
    tracer = cap.provider.get_tracer("langsmith")
    t0 = cap.clock()

    def run(name: str, from_ms: int, to_ms: int, kind: str, **more: str) -> trace.Span:
        span = tracer.start_span(
            name,
            context=inside,
            start_time=t0 + from_ms * 1_000_000,
            attributes={"langsmith.span.kind": kind, **more},
        )
        span.end(end_time=t0 + to_ms * 1_000_000)
        return span

    inside = None
    chain = run("retrieve", 0, 40, "chain")
    inside = trace.set_span_in_context(chain)
    run("FaqRetriever", 5, 35, "retriever", **{"gen_ai.operation.name": "embeddings"})
    run("lookup_order", 36, 39, "tool", **{"gen_ai.operation.name": "execute_tool"})
    cap.clock.advance(50)


def test_the_children_of_an_ended_span_are_in_the_live_rollup(cap: Capture) -> None:
    with chainlat.workflow("agent", tracer_provider=cap.provider):
        _after_the_fact(cap)
    [rollup] = cap.rollups()
    assert (rollup.data_count, rollup.tool_count) == (1, 1)
    assert rollup.data_ms == pytest.approx(30.0)
    assert rollup.tool_ms == pytest.approx(3.0)


def test_the_live_rollup_is_the_readers(cap: Capture, tmp_path: Path) -> None:
    with chainlat.workflow("agent", tracer_provider=cap.provider):
        _after_the_fact(cap)
    [live] = cap.rollups()
    for run in both_ways(cap, tmp_path):
        assert run.rebuilt == ""
        assert (live.data_count, live.tool_count, live.data_ms, live.tool_ms) == (
            run.rollup.data_count,
            run.rollup.tool_count,
            run.rollup.data_ms,
            run.rollup.tool_ms,
        )


def test_a_span_started_after_its_workflow_ended_is_not_its(cap: Capture) -> None:
    # Owned until the workflow ends, not longer: the rollup was recorded as it ended.
    tracer = cap.provider.get_tracer("langsmith")
    with chainlat.workflow("agent", tracer_provider=cap.provider):
        step = tracer.start_span("retrieve", start_time=cap.clock())
        step.end(end_time=cap.clock.advance(10))
    late = tracer.start_span(
        "lookup_order",
        context=trace.set_span_in_context(step),
        attributes={"gen_ai.operation.name": "execute_tool"},
    )
    late.end()
    [rollup] = cap.rollups()
    assert rollup.tool_count == 0
    assert cap.processor._owner == {}
