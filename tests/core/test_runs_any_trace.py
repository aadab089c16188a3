"""Runs from traces that hold no chainlat workflow span: agents, chains, any root."""

from __future__ import annotations

from chainlat._core.rollup import SpanKindLabel, SpanRecord
from chainlat._core.runs import TracedSpan
from chainlat._core.trace_runs import runs_of_trace

MS = 1_000_000


def span(
    span_id: int,
    parent: int | None,
    name: str,
    start_ms: float,
    end_ms: float,
    kind: SpanKindLabel | None = None,
    **attributes: object,
) -> TracedSpan:
    record = SpanRecord(span_id, parent, name, round(start_ms * MS), round(end_ms * MS), kind)
    return TracedSpan(record, {k.replace("__", "."): v for k, v in attributes.items()})


HTTP_SERVICE = [
    span(1, None, "POST /chat", 0, 100),
    span(2, 1, "chat m", 10, 60, "inference"),
    span(3, 1, "execute_tool t", 60, 90, "tool"),
]


def test_a_trace_without_a_workflow_has_no_run_by_default() -> None:
    assert runs_of_trace("t", HTTP_SERVICE) == []


def test_with_roots_every_local_root_is_a_run_named_by_its_span() -> None:
    [run] = runs_of_trace("t", HTTP_SERVICE, roots=True)
    assert (run.workflow, run.nested, run.total_ms) == ("POST /chat", False, 100.0)
    assert (run.rollup.inference_ms, run.rollup.tool_ms, run.rollup.overhead_ms) == (50, 30, 20)
    assert [s.name for s in run.steps] == ["chat m", "execute_tool t"]


def test_a_root_whose_parent_is_in_another_service_is_a_local_root() -> None:
    spans = [span(5, 99, "GET /search", 0, 10), span(6, 5, "data q", 1, 9, "data")]
    [run] = runs_of_trace("t", spans, roots=True)
    assert (run.workflow, run.rollup.data_ms) == ("GET /search", 8)


def test_with_roots_a_workflow_inside_the_root_is_nested() -> None:
    spans = [
        span(1, None, "POST /chat", 0, 100),
        span(2, 1, "invoke_workflow w", 5, 95, "workflow", gen_ai__workflow__name="w"),
        span(3, 2, "chat m", 10, 60, "inference"),
    ]
    outer, inner = runs_of_trace("t", spans, roots=True)
    assert (outer.workflow, outer.nested) == ("POST /chat", False)
    assert (inner.workflow, inner.nested) == ("w", True)
    assert [r.workflow for r in runs_of_trace("t", spans)] == ["w"]


def test_an_openinference_chain_root_is_a_run() -> None:
    spans = [
        span(1, None, "LangGraph", 0, 100, openinference__span__kind="CHAIN"),
        span(2, 1, "ChatOpenAI", 10, 60, "inference", openinference__span__kind="LLM"),
    ]
    [run] = runs_of_trace("t", spans)
    assert (run.workflow, run.rollup.inference_count) == ("LangGraph", 1)


def test_an_outcome_span_is_never_a_root_run() -> None:
    spans = [*HTTP_SERVICE, span(9, None, "record_outcome", 200, 200)]
    assert [r.workflow for r in runs_of_trace("t", spans, roots=True)] == ["POST /chat"]
