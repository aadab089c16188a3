"""A step's attributes handed to chainlat's processor at start (`_runtime/handover.py`).

Handed over only where nothing could tell the difference from ``start_span(attributes=)``:
each test here sets up something that could (a sampler or an earlier processor that reads
attributes) and checks it still sees them, or checks the handed-over span holds exactly
what the SDK's path gives.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace import sampling as s
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes

import chainlat
from chainlat._runtime.handover import first_to_start, sampler_is_blind
from chainlat._runtime.processor import ChainlatSpanProcessor, processor_for, tracer_for


class ReadingSampler(s.Sampler):
    """Samples everything, and keeps what attributes it was shown."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> s.SamplingResult:
        self.seen.append(dict(attributes or {}))
        return s.SamplingResult(s.Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "ReadingSampler"


class ReadingProcessor(SpanProcessor):
    """Keeps the attributes each span had when it started."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.seen.append(dict(span.attributes or {}))


def provider_with(
    *before: SpanProcessor, sampler: s.Sampler | None = None
) -> tuple[TracerProvider, InMemorySpanExporter]:
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    for processor in before:
        provider.add_span_processor(processor)
    processor_for(provider)  # chainlat's, after those
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def one_step(
    provider: TracerProvider, exporter: InMemorySpanExporter, **attributes: Any
) -> ReadableSpan:
    exporter.clear()
    with chainlat.workflow("w", tracer_provider=provider):
        with chainlat.inference("m", provider="openai", tracer_provider=provider, **attributes):
            pass
    spans = [span for span in exporter.get_finished_spans() if span.name.startswith("chat")]
    assert len(spans) == 1
    return spans[0]


def held(span: ReadableSpan) -> tuple[list[tuple[str, Any]], int]:
    return list((span.attributes or {}).items()), span.dropped_attributes


def test_a_default_provider_hands_the_attributes_over() -> None:
    provider, _ = provider_with()
    processor = processor_for(provider)
    assert processor is not None
    assert processor.handover(tracer_for(provider)) is not None


def test_the_handed_over_step_holds_what_start_span_gives() -> None:
    handed = provider_with()
    through_sdk = provider_with(sampler=ReadingSampler())  # not handed over
    for (provider, _), expected in ((handed, True), (through_sdk, False)):
        processor = processor_for(provider)
        assert processor is not None
        assert (processor.handover(tracer_for(provider)) is not None) is expected
    extra: dict[str, Any] = {"retries": 2, "tags": ["a", "b"], "score": 0.5, "shown": None}
    assert held(one_step(*handed, **extra)) == held(one_step(*through_sdk, **extra))
    attributes = dict(one_step(*handed, **extra).attributes or {})
    assert attributes["tags"] == ("a", "b")  # a list: cleaned by the SDK's path, as before
    assert attributes["gen_ai.request.model"] == "m"
    assert attributes["chainlat.step.index"] == 0


def test_a_sampler_that_reads_attributes_still_sees_them() -> None:
    sampler = ReadingSampler()
    one_step(*provider_with(sampler=sampler))
    assert [seen.get("gen_ai.request.model") for seen in sampler.seen] == [None, "m"]
    assert sampler.seen[0]["gen_ai.workflow.name"] == "w"


@pytest.mark.parametrize("parent_based", [False, True])
def test_a_subclass_of_an_sdk_sampler_is_not_trusted(parent_based: bool) -> None:
    class Custom(s.StaticSampler):
        pass

    custom = Custom(s.Decision.RECORD_AND_SAMPLE)
    assert not sampler_is_blind(s.ParentBased(custom) if parent_based else custom)


@pytest.mark.parametrize(
    "sampler",
    [
        s.ALWAYS_ON,
        s.ALWAYS_OFF,
        s.DEFAULT_ON,
        s.TraceIdRatioBased(0.5),
        s.ParentBasedTraceIdRatio(0.5),
        s.ParentBased(s.ALWAYS_ON, remote_parent_sampled=s.TraceIdRatioBased(0.1)),
    ],
)
def test_the_sdk_samplers_are_blind(sampler: s.Sampler) -> None:
    assert sampler_is_blind(sampler)


def test_a_processor_reading_attributes_before_chainlats_still_sees_them() -> None:
    reader = ReadingProcessor()
    one_step(*provider_with(reader))
    assert reader.seen[1]["gen_ai.request.model"] == "m"
    assert reader.seen[1]["chainlat.step.kind"] == "inference"


def test_a_processor_after_chainlats_sees_them_too() -> None:
    provider, exporter = provider_with()
    one_step(provider, exporter)
    reader = ReadingProcessor()
    provider.add_span_processor(reader)  # the processor tuple changes: checked again
    one_step(provider, exporter)
    assert reader.seen[1]["gen_ai.request.model"] == "m"


def test_only_idle_starts_may_come_first() -> None:
    ours = ChainlatSpanProcessor()
    exporter = InMemorySpanExporter()
    batch = BatchSpanProcessor(exporter)
    try:
        assert first_to_start((SimpleSpanProcessor(exporter), batch, ours), ours)
        assert not first_to_start((ReadingProcessor(), ours), ours)
        assert not first_to_start((batch,), ours)  # not there at all
    finally:
        batch.shutdown()  # type: ignore[no-untyped-call]


def test_a_step_not_sampled_leaves_nothing_for_the_next_span() -> None:
    provider, exporter = provider_with(sampler=s.ALWAYS_OFF)
    with chainlat.inference("m", tracer_provider=provider):
        pass
    # The next span started on this thread, foreign and sampled, gets none of the step's.
    on = TracerProvider()
    on.add_span_processor(processor_for(provider))  # type: ignore[arg-type]
    other = InMemorySpanExporter()
    on.add_span_processor(SimpleSpanProcessor(other))
    on.get_tracer("t").start_span("foreign", attributes={"a": 1}).end()
    assert exporter.get_finished_spans() == ()
    assert [dict(span.attributes or {}) for span in other.get_finished_spans()] == [{"a": 1}]


def test_values_at_the_attribute_limit_go_the_sdks_way() -> None:
    from opentelemetry.sdk.trace import SpanLimits

    limited = TracerProvider(span_limits=SpanLimits(max_span_attributes=3))
    processor_for(limited)
    exporter = InMemorySpanExporter()
    limited.add_span_processor(SimpleSpanProcessor(exporter))
    with chainlat.inference("m", tracer_provider=limited):
        pass
    (span,) = exporter.get_finished_spans()
    attributes: Mapping[str, Any] = span.attributes or {}
    assert len(attributes) == 3
    # chainlat's identity attributes are set again last, so they are the ones kept.
    assert attributes.get("gen_ai.request.model") == "m"
