"""Outcomes on workflow runs: on the span, after the fact by trace id, merged by the readers."""

from __future__ import annotations

import pytest

import chainlat
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans


def test_outcome_inside_the_block_goes_on_the_workflow_span(cap: Capture) -> None:
    with chainlat.workflow("answer", variant="small", tracer_provider=cap.provider) as run:
        cap.clock.advance(5)
        run.record_outcome(success=True, score=0.75)
    attributes = dict(cap.span("invoke_workflow answer").attributes or {})
    assert attributes["chainlat.outcome.success"] is True
    assert attributes["chainlat.outcome.score"] == 0.75
    assert attributes["chainlat.variant"] == "small"
    [tree] = runs_from_spans(cap.spans())
    assert (tree.variant, tree.success, tree.score) == ("small", True, 0.75)


def test_outcome_after_the_block_is_a_child_span_in_the_same_trace(cap: Capture) -> None:
    with chainlat.workflow("answer", tracer_provider=cap.provider) as run:
        cap.clock.advance(5)
    run.record_outcome(success=False)
    outcome = cap.span("record_outcome")
    workflow = cap.span("invoke_workflow answer")
    assert outcome.parent is not None and workflow.context is not None
    assert outcome.parent.span_id == workflow.context.span_id
    assert outcome.context is not None
    assert outcome.context.trace_id == workflow.context.trace_id
    assert dict(outcome.attributes or {}) == {"chainlat.outcome.success": False}
    [tree] = runs_from_spans(cap.spans())
    assert (tree.success, tree.score) == (False, None)
    assert all(s.record.name != "record_outcome" for s in tree.spans)
    assert tree.recomputed_rollup().total_ms == 5


def test_record_outcome_by_trace_id_reaches_the_only_workflow_of_the_trace(cap: Capture) -> None:
    with chainlat.workflow("answer", tracer_provider=cap.provider) as run:
        cap.clock.advance(5)
    trace_id = f"{run.span.get_span_context().trace_id:032x}"
    chainlat.record_outcome(trace_id, score=0.5, tracer_provider=cap.provider)
    chainlat.record_outcome(trace_id, success=True, tracer_provider=cap.provider)
    [tree] = runs_from_spans(cap.spans())
    assert (tree.success, tree.score) == (True, 0.5)


def test_record_outcome_by_span_id_picks_that_workflow(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("outer", tracer_provider=p) as outer:
        cap.clock.advance(1)
    with chainlat.workflow("second", tracer_provider=p) as second:
        cap.clock.advance(1)
    # Two workflows in two traces: each outcome names its trace and span.
    for handle, success in ((outer, True), (second, False)):
        context = handle.span.get_span_context()
        chainlat.record_outcome(
            context.trace_id, success=success, span_id=context.span_id, tracer_provider=p
        )
    by_name = {t.workflow: t.success for t in runs_from_spans(cap.spans())}
    assert by_name == {"outer": True, "second": False}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "needs success"),
        ({"score": float("nan")}, "score must be a number"),
        ({"success": 1}, "success must be True or False"),
        ({"success": True, "trace_id": "xyz"}, "trace_id must be hex"),
        ({"success": True, "trace_id": 0}, "trace_id out of range"),
    ],
)
def test_bad_outcome_arguments_log_once_and_record_nothing_as_run_record_outcome_does(
    kwargs: dict[str, object],
    message: str,
    cap: Capture,
    caplog: pytest.LogCaptureFixture,
    fresh_warnings: None,
) -> None:
    """chainlat.record_outcome(trace_id) never raises into user code, like run.record_outcome()."""
    trace_id = kwargs.pop("trace_id", "0af7651916cd43dd8448eb211c80319c")
    for _ in range(2):
        chainlat.record_outcome(trace_id, tracer_provider=cap.provider, **kwargs)  # type: ignore[arg-type]
    assert cap.spans() == ()
    lines = [r.getMessage() for r in caplog.records if r.name == "chainlat"]
    assert len(lines) == 1 and message in lines[0] and "not recorded" in lines[0]


def test_nested_workflow_is_a_step_of_the_outer_run_and_a_nested_run(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("outer", tracer_provider=p):
        cap.clock.advance(1)
        with chainlat.workflow("inner", tracer_provider=p):
            cap.clock.advance(2)
    tree, inner = runs_from_spans(cap.spans())
    assert (inner.workflow, inner.nested, inner.total_ms) == ("inner", True, 2.0)
    assert (tree.workflow, tree.nested) == ("outer", False)
    assert [s.name for s in tree.steps] == ["invoke_workflow inner"]
    assert [s.record.name for s in tree.spans] == ["invoke_workflow inner"]
    assert tree.variant_label == "(none)"
