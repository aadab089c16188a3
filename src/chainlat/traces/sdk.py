"""Finished OpenTelemetry SDK spans (an in-memory exporter's) as workflow runs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from chainlat._core.runs import TracedSpan, WorkflowRun, record_of
from chainlat._core.trace_runs import runs_of_trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


def traced_span(span: ReadableSpan) -> TracedSpan | None:
    """An SDK span as a :class:`TracedSpan`; None when it has not ended."""
    from opentelemetry.trace import StatusCode

    context = span.context
    if context is None or span.start_time is None or span.end_time is None:
        return None
    attributes = dict(span.attributes or {})
    return TracedSpan(
        record_of(
            context.span_id,
            span.parent.span_id if span.parent is not None else None,
            span.name,
            span.start_time,
            span.end_time,
            attributes,
            [(event.name, event.timestamp) for event in span.events],
        ),
        attributes,
        error=span.status.status_code is StatusCode.ERROR,
    )


def runs_from_spans(spans: Iterable[ReadableSpan]) -> list[WorkflowRun]:
    """The workflow runs among finished SDK spans, by trace, in start order."""
    traces: dict[int, list[TracedSpan]] = {}
    for span in spans:
        traced = traced_span(span)
        if traced is not None and span.context is not None:
            traces.setdefault(span.context.trace_id, []).append(traced)
    runs: list[WorkflowRun] = []
    for trace_id, members in traces.items():
        runs.extend(runs_of_trace(f"{trace_id:032x}", members))
    runs.sort(key=lambda r: r.start_ns)
    return runs
