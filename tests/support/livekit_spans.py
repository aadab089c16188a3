"""A LiveKit Agents session built with the OpenTelemetry SDK on an injected clock, in the
shapes livekit-agents 1.8.9 writes (tests/core/test_voice_livekit*.py add their turns)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from chainlat._core.runs import WorkflowRun
from chainlat.traces.sdk import runs_from_spans

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


class LiveKitSession:
    """A LiveKit session: every time in ms from T0, under one ``agent_session`` (an
    ``invoke_workflow`` named ``agent_session``, voice/agent_session.py 988-1012)."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracer = provider.get_tracer("livekit-agents")
        self.session = self.span(
            "agent_session",
            None,
            0,
            {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent_session"},
        )

    def span(
        self, name: str, parent: Span | None, start_ms: int, attributes: dict[str, AttributeValue]
    ) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(
            name, context=context, start_time=T0 + start_ms * MS, attributes=attributes
        )

    def closed(
        self,
        name: str,
        parent: Span | None,
        start_ms: int,
        end_ms: int,
        attributes: dict[str, AttributeValue] | None = None,
    ) -> Span:
        span = self.span(name, parent, start_ms, attributes or {})
        span.end(end_time=T0 + end_ms * MS)
        return span

    def runs(self, exporter: InMemorySpanExporter, end_ms: int) -> list[WorkflowRun]:
        """The session ended at ``end_ms``, and the runs of its spans in start order."""
        self.session.end(end_time=T0 + end_ms * MS)
        return sorted(runs_from_spans(exporter.get_finished_spans()), key=lambda r: r.start_ns)
