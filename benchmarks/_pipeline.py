"""The pipelines the benchmarks compare, built the same way for chainlat and for bare spans.

Every pipeline ends in a BatchSpanProcessor over :class:`DroppingExporter`, so
the figures are the cost paid in the application's thread plus the batch
processor's thread, without any I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Tracer

import chainlat

STEP_ATTRIBUTES = {"app.operation": "chat", "app.model": "gpt-4o", "app.kind": "inference"}
"""A bare span's attributes: as many as ``chainlat.inference("gpt-4o")`` sets, under keys
chainlat's processor does not classify, so the baseline pays only its pass-through."""

WORKFLOW_ATTRIBUTES = {"app.operation": "invoke", "app.workflow": "bench", "app.kind": "workflow"}

KINDS: Sequence[str] = (
    "data",
    "inference",
    "tool",
    "inference",
    "data",
    "tool",
    "inference",
    "data",
    "inference",
    "tool",
)
"""The ten steps of the benchmarked workflow: four model calls, three data stages, three tools."""


class DroppingExporter(SpanExporter):
    """Accepts every batch and keeps nothing; counts the spans it was given."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def provider(
    *, with_chainlat: bool = True, exporter: DroppingExporter | None = None
) -> TracerProvider:
    """What ``chainlat.configure()`` builds, over a dropping exporter and without metrics.

    Without chainlat: a plain provider with the SDK's BatchSpanProcessor, for reference.
    ``exporter``: the dropping exporter to use, to count what reached it.
    """
    exporter = exporter if exporter is not None else DroppingExporter()
    if with_chainlat:
        return chainlat.configure("bench", exporter=exporter, set_global=False, metric_readers=[])
    result = TracerProvider(shutdown_on_exit=False)
    result.add_span_processor(BatchSpanProcessor(exporter))
    return result


def bare_step(tracer: Tracer) -> None:
    """One bare SDK span, as a hand-instrumented application would start it."""
    with tracer.start_as_current_span(
        "chat gpt-4o", kind=SpanKind.CLIENT, attributes=STEP_ATTRIBUTES
    ):
        pass


def chainlat_step(p: TracerProvider) -> None:
    """One ``chainlat.inference`` step, as written inline in an application."""
    with chainlat.inference("gpt-4o", tracer_provider=p):
        pass


def bare_workflow(tracer: Tracer) -> None:
    """A root span and ten children: the bare equivalent of :func:`chainlat_workflow`."""
    with tracer.start_as_current_span("invoke_workflow bench", attributes=WORKFLOW_ATTRIBUTES):
        for kind in KINDS:
            with tracer.start_as_current_span(
                f"{kind} step",
                kind=SpanKind.CLIENT if kind == "inference" else SpanKind.INTERNAL,
                attributes=STEP_ATTRIBUTES,
            ):
                pass


def chainlat_workflow(p: TracerProvider) -> chainlat.WorkflowHandle:
    """A ten-step workflow, end to end, rollup included."""
    with chainlat.workflow("bench", tracer_provider=p) as run:
        for kind in KINDS:
            if kind == "inference":
                with chainlat.inference("gpt-4o", tracer_provider=p):
                    pass
            elif kind == "data":
                with chainlat.data_stage("retrieve", tracer_provider=p):
                    pass
            else:
                with chainlat.tool("lookup", tracer_provider=p):
                    pass
    return run
