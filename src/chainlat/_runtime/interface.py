"""The runtime's doors: what the rest of chainlat uses of it, and nothing else.

``httpx/`` starts and finishes model-call steps that outlive the call starting them;
runtime budgets, chain metrics and the pytest plugin register workflow-end callbacks;
the demo asks where ``configure()`` would send its traces. None of them reads a handle's
private members or edits the runtime's lists; a test holds them to it.

Example::

    remove = on_workflow_end(lambda run: print(run.rollup))
    ...
    remove()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind

from chainlat._runtime.exporters import choose_exporter, traces_file_path
from chainlat._runtime.handles import InferenceHandle, StepHandle, WorkflowHandle
from chainlat._runtime.hooks import after_workflow_end, on_workflow_end
from chainlat._runtime.processor import Clock
from chainlat._runtime.steps import StepSpec, start_step

H = TypeVar("H", bound=StepHandle)

if TYPE_CHECKING:
    from opentelemetry import trace

    from chainlat._core.rollup import SpanRecord

__all__ = [
    "InferenceHandle",
    "StepHandle",
    "WorkflowHandle",
    "after_workflow_end",
    "choose_exporter",
    "default_traces_path",
    "finish_step",
    "mark_end_of_turn",
    "on_workflow_end",
    "record_output_chunks",
    "start_detached_step",
    "start_step_at",
    "step_clock",
    "workflow_records",
]


def start_detached_step(
    name: str,
    attributes: Mapping[str, Any],
    tracer_provider: trace.TracerProvider | None,
    *,
    span_kind: SpanKind = SpanKind.CLIENT,
) -> InferenceHandle:
    """Start a model-call step without making it current, for one that outlives the call
    starting it (an HTTP response read later, maybe in another thread or task).

    It goes through the same code as ``with chainlat.inference(...)``; end it with
    :func:`finish_step`. ``attributes`` become the step's identity: not changed after.
    """
    return start_step(InferenceHandle, name, span_kind, attributes, tracer_provider)


def finish_step(
    handle: StepHandle, exc: BaseException | None, *, end_ns: int | None = None
) -> None:
    """End a step started by :func:`start_detached_step` (at ``end_ns``, default now)."""
    handle._finish(exc, end_ns=end_ns)


def start_step_at(spec: StepSpec[H], at_ns: int) -> H:
    """Start the step ``spec`` (``inference(...)``, ``tool(...)``) without making it
    current, at ``at_ns`` of the span clock, a moment ago: an event read from a connection
    started it, and the work of tracing that event is not the step's wait. An instant
    after now starts it now."""
    return spec.start(at_ns)


def mark_end_of_turn(handle: WorkflowHandle, at_ns: int) -> None:
    """Mark ``at_ns`` (the span clock) as the instant the end of the caller's turn was
    detected, in a voice turn that started at the end of their words: the wait for the
    first output before it is its end-of-turn part (``compute_rollup``'s
    ``end_of_turn_ns``). Kept between the workflow's start and now; the last mark wins."""
    if handle.end_ns is None:
        handle._end_of_turn_ns = min(max(handle.start_ns, at_ns), handle._now())


def step_clock(handle: StepHandle) -> Clock:
    """The clock the step's span is timed with (the processor's; ``time.time_ns`` without)."""
    processor = handle._processor
    if processor is not None:
        return processor.clock
    import time

    return time.time_ns


def record_output_chunks(handle: StepHandle, gaps_s: Iterable[float]) -> None:
    """Record the time between output chunks of an ended streamed call, as a metric."""
    processor = handle._processor
    span = handle.span
    if processor is not None and isinstance(span, ReadableSpan):
        processor.record_output_chunks(span, gaps_s)


def workflow_records(handle: WorkflowHandle) -> list[SpanRecord]:
    """The ended steps of a workflow, inside an :func:`on_workflow_end` callback (a copy)."""
    processor = handle._processor
    if processor is None:
        return []
    return list(processor.records_of(handle.span.get_span_context().span_id))


def default_traces_path(traces_file: str | None = None) -> Path | None:
    """The file ``configure()`` would append traces to, or None when they go elsewhere
    (OTLP, the console, nowhere) by the environment."""
    if choose_exporter(None) != "file":
        return None
    return Path(traces_file_path(traces_file))
