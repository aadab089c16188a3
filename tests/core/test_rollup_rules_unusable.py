"""Rule 15 of docs/attributes.md: a first token that is no time is never used as one; a first
output is never placed before the start of the call it belongs to."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chainlat._core.runs import WorkflowRun
from chainlat.traces.sdk import runs_from_spans

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def _run(wire_start_ms: int, ttft_ms: float, *, marked_ms: float | None = None) -> WorkflowRun:
    """A workflow 0-1000 ms with one call ``chat gpt-4o`` 100-600, and inside it the call at
    the wire from ``wire_start_ms`` to 590, its first chunk ``ttft_ms`` after its start."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    root_attributes: dict[str, str | float] = {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": "chat",
    }
    if marked_ms is not None:
        root_attributes["chainlat.workflow.first_output_ms"] = marked_ms
    root = tracer.start_span("invoke_workflow chat", start_time=T0, attributes=root_attributes)
    call = tracer.start_span(
        "chat gpt-4o",
        context=trace.set_span_in_context(root),
        start_time=T0 + 100 * MS,
        attributes={"chainlat.step.kind": "inference", "gen_ai.request.model": "gpt-4o"},
    )
    wire = tracer.start_span(
        "POST",
        context=trace.set_span_in_context(call),
        start_time=T0 + wire_start_ms * MS,
        attributes={
            "chainlat.step.kind": "inference",
            "http.request.method": "POST",
            "gen_ai.request.model": "gpt-4o",
            "chainlat.latency.ttft_ms": ttft_ms,
        },
    )
    wire.end(end_time=T0 + 590 * MS)
    call.end(end_time=T0 + 600 * MS)
    root.end(end_time=T0 + 1000 * MS)
    (run,) = runs_from_spans(exporter.get_finished_spans())
    return run


def test_a_first_token_before_its_call_starts_is_not_used() -> None:
    """The wire span (its clock 60 ms behind) saw the first chunk at 60 ms, before the call
    began at 100: the first output was placed there, before its call."""
    run = _run(40, 20.0)
    assert run.first_output_ms == 100.0  # at least the call's start
    assert run.rollup.unusable == ("chat gpt-4o",)
    assert run.rollup.unusable_values == ("a first token 40 ms before its start",)
    assert run.rollup.unusable_parts == ("first_output", "first_output_split")


def test_a_first_token_inside_its_call_is_a_measurement() -> None:
    run = _run(110, 20.0)
    assert run.first_output_ms == 130.0
    assert (run.rollup.unusable, run.rollup.unusable_parts) == ((), ())


def test_the_application_mark_does_not_depend_on_a_first_token() -> None:
    """The run's own mark stays measured; the call's first token is still not known."""
    run = _run(110, -5.0, marked_ms=300.0)
    assert run.first_output_ms == 300.0
    assert run.rollup.unusable == ("chat gpt-4o",)
    assert run.rollup.unusable_values == ("chainlat.latency.ttft_ms = -5.0",)
    assert run.rollup.unusable_parts == ()
