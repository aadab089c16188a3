"""Pipecat's voice spans read as voice turns: turns, stages, time to first byte, first audio
and how each turn ended, from spans shaped as pipecat-ai 1.14.0 writes them."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import aggregate
from chainlat.traces.sdk import runs_from_spans

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def conversation(
    exporter: InMemorySpanExporter, *turns: dict[str, AttributeValue]
) -> list[WorkflowRun]:
    """One conversation of turns, each: the caller speaks 0-1000 ms, ``stt`` 0-1200 (its span
    opens at the start of speech), ``llm`` 1210-1400 (first token at 1300), ``tts`` 1400-2400
    (first audio at 1650), each turn 3 s after the one before."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pipecat")
    talk = tracer.start_span("conversation", start_time=T0, attributes={"conversation.id": "c"})
    parent = trace.set_span_in_context(talk)
    stages: tuple[tuple[str, str, int, int, dict[str, AttributeValue]], ...] = (
        ("stt", "stt", 0, 1200, {"metrics.audio_seconds": 1.0}),
        ("llm", "chat", 1210, 1400, {"metrics.ttfb": 0.09, "gen_ai.usage.input_tokens": 20,
                                      "gen_ai.usage.output_tokens": 12}),
        ("tts", "tts", 1400, 2400, {"metrics.ttfb": 0.25, "gen_ai.output.type": "speech"}),
    )  # fmt: skip
    for n, extra in enumerate(turns, start=1):
        base = T0 + (n - 1) * 3000 * MS
        turn = tracer.start_span(
            "turn", context=parent, start_time=base, attributes={"turn.number": n, **extra}
        )
        inside = trace.set_span_in_context(turn)
        for name, operation, start, end, more in stages:
            attributes: dict[str, AttributeValue] = {
                "gen_ai.operation.name": operation,
                "gen_ai.request.model": f"sim-{name}",
                **more,
            }
            span = tracer.start_span(
                name, context=inside, start_time=base + start * MS, attributes=attributes
            )
            span.end(end_time=base + end * MS)
        turn.end(end_time=base + 2900 * MS)
    talk.end(end_time=T0 + len(turns) * 3000 * MS)
    return sorted(runs_from_spans(exporter.get_finished_spans()), key=lambda r: r.start_ns)


def test_a_pipecat_turn_is_a_voice_run_split_by_stage(exporter: InMemorySpanExporter) -> None:
    (run,) = conversation(exporter, {"turn.was_interrupted": False})
    assert run.workflow == "turn"
    assert run.rollup.critical_path == ("stt", "llm", "tts")
    assert [(s.name, s.ttft_ms) for s in run.steps] == [
        ("stt", None),
        ("llm", pytest.approx(90.0)),
        ("tts", pytest.approx(250.0)),
    ]
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (20, 12)
    # The first audio: the TTS call's first byte, as Pipecat's metrics.ttfb places it.
    assert run.first_output_ms == pytest.approx(1650.0)
    r = run.rollup
    assert r.first_output_speech_to_text_ms == pytest.approx(1200.0)  # speech included
    assert r.first_output_text_to_speech_ms == pytest.approx(250.0)
    assert r.first_output_inference_ms == pytest.approx(1200.0 + 190.0 + 250.0)
    assert r.first_output_overhead_ms == pytest.approx(10.0)
    # No stt time to first byte (stop_secs = 0): no span says where the caller stopped, so
    # the turn keeps Pipecat's start, their first word, and says so (rule 16).
    assert run.unknown_start is not None and "stop_secs = 0" in run.unknown_start


def _lone_turn(exporter: InMemorySpanExporter, children: tuple[str, ...]) -> WorkflowRun:
    """A turn 0-2900 ms with ``children`` (0-100, 1200-2400 ...: each 1,200 ms from the one
    before), spans as Pipecat names them."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pipecat")
    turn = tracer.start_span("turn", start_time=T0, attributes={"turn.number": 1})
    inside = trace.set_span_in_context(turn)
    for n, name in enumerate(children):
        operation = {"llm_response": "llm_response", "llm": "chat"}.get(name, name)
        span = tracer.start_span(
            name,
            context=inside,
            start_time=T0 + 1200 * n * MS,
            attributes={"gen_ai.operation.name": operation, "service.operation": operation},
        )
        span.end(end_time=T0 + (1200 * n + 100) * MS)
    turn.end(end_time=T0 + 2900 * MS)
    (run,) = runs_from_spans(exporter.get_finished_spans())
    return run


def test_a_speech_to_speech_turn_without_the_observer_says_its_start_is_none(
    exporter: InMemorySpanExporter,
) -> None:
    """A realtime service's turn (its ``llm_response``, no ``stt``) without chainlat's
    observer: Pipecat opened it at the caller's first word, and nothing says where they
    stopped; a turn of text (an ``llm`` alone) starts where it was asked."""
    spoken = _lone_turn(exporter, ("llm_setup", "llm_response"))
    assert spoken.start_ns == T0
    assert spoken.unknown_start is not None
    assert "speech-to-speech service writes no stt span" in spoken.unknown_start
    typed = _lone_turn(InMemorySpanExporter(), ("llm",))
    assert typed.unknown_start is None


def test_pipecat_interrupted_turns_are_counted_apart(exporter: InMemorySpanExporter) -> None:
    runs = conversation(
        exporter,
        {"turn.was_interrupted": False},
        {"turn.was_interrupted": True},  # the caller spoke over the bot
        {"turn.was_interrupted": True, "turn.ended_by_conversation_end": True},
    )
    stats = aggregate(runs).workflows["turn"]
    assert (stats.runs, stats.interrupted) == (3, 1)
    assert len(stats.quantities["first_output"]) == 2  # the session's end is no barge-in
