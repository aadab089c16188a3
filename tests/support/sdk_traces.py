"""Traces written by the real OpenTelemetry SDK on an injected clock, as a framework's
spans would be: a provider with an in-memory exporter, a GenAI workflow span at the root,
and the finished spans as one OTLP JSON line, to read back as the commands read a file."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chainlat._runtime.otlp_json import encode_request
from chainlat.testing import Capture

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def sdk_tracer(name: str = "app") -> tuple[trace.Tracer, InMemorySpanExporter]:
    """A tracer of a fresh provider whose every finished span the exporter keeps."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer(name), exporter


def workflow_span(tracer: trace.Tracer, workflow: str, start_ns: int = T0) -> trace.Span:
    """``invoke_workflow <workflow>``, started at ``start_ns``: a run's root."""
    return tracer.start_span(
        f"invoke_workflow {workflow}",
        start_time=start_ns,
        attributes={"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": workflow},
    )


def written(path: Path, exporter: InMemorySpanExporter) -> Path:
    """The exporter's spans as one OTLP JSON line in ``path``."""
    path.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    return path


def foreign_chat(cap: Capture, *, after_ms: float, took_ms: float) -> None:
    """Another instrumentation's GenAI ``chat gpt-4o`` span (opentelemetry-instrumentation-
    openai-v2's shape: it says nothing of streaming and marks no first token), on
    ``cap``'s provider, ``after_ms`` after its injected clock's now, ``took_ms`` long; the
    clock is left at its end. Its times are given: only chainlat's own spans read the
    injected clock."""
    tracer = cap.provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    start = cap.clock.advance(ms=after_ms)
    span = tracer.start_span(
        "chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}, start_time=start
    )
    span.end(end_time=cap.clock.advance(ms=took_ms))
