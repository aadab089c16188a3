"""The Pipecat observer under hostile frames, without Pipecat (stand-in frame classes): a
VAD stop whose stamp or silence is no number, results before their calls, thousands of
calls. chainlat's own suite re-raises the observer's internal errors, so each case that
would have been logged as one fails here."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chainlat._core import attributes as attr
from chainlat.integrations.pipecat import ChainlatObserver, Frames

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


@dataclass
class Started:
    function_name: str
    tool_call_id: str


@dataclass
class Result:
    function_name: str
    tool_call_id: str
    error: str | None = None


@dataclass
class Cancelled:
    function_name: str
    tool_call_id: str


class Speaking:
    pass


class Audio:
    pass


class Transport:
    pass


@dataclass
class VadStopped:
    stop_secs: object
    timestamp: object


FRAMES = Frames(Started, Result, Cancelled, Speaking, Audio, Transport, VadStopped)


def _setup() -> tuple[TracerProvider, InMemorySpanExporter, ChainlatObserver]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter, ChainlatObserver(provider, frames=FRAMES)


@pytest.mark.parametrize(
    ("stop_secs", "timestamp"),
    [
        (math.nan, (T0 + 700 * MS) / 1e9),
        (0.2, math.nan),
        (math.inf, (T0 + 700 * MS) / 1e9),
        (0.2, -math.inf),
        (-1e300, (T0 + 700 * MS) / 1e9),  # finite, but past any instant in nanoseconds
        ("0.2", (T0 + 700 * MS) / 1e9),
    ],
    ids=["nan silence", "nan stamp", "infinite silence", "infinite stamp", "huge", "string"],
)
def test_a_vad_stop_with_no_instant_marks_nothing_and_raises_nothing(
    stop_secs: object, timestamp: object
) -> None:
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    observer.observe(VadStopped(stop_secs, timestamp), T0 + 701 * MS)
    turn.end(end_time=T0 + 2000 * MS)
    (span,) = exporter.get_finished_spans()
    assert attr.WORKFLOW_SPEECH_END_MS not in (span.attributes or {})


def test_results_before_their_calls_and_thousands_of_calls_are_read_in_order() -> None:
    """A result pushed before its call is no step; 5,000 calls each answered are 5,000 tool
    steps, none ending before it starts (a result stamped before its call ends at it)."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    observer.observe(Result("early", "x"), T0 + MS)
    observer.observe(Started("early", "x"), T0 + 2 * MS)  # never answered
    for index in range(5000):
        observer.observe(Started("lookup", str(index)), T0 + (10 + index) * MS)
        observer.observe(Result("lookup", str(index)), T0 + (5 + index) * MS)  # stamped earlier
    turn.end(end_time=T0 + 6000 * MS)
    tools = [s for s in exporter.get_finished_spans() if s.name == "execute_tool lookup"]
    assert len(tools) == 5000
    assert all(s.end_time == s.start_time for s in tools)


@dataclass
class OddAudio(Audio):
    audio: object
    sample_rate: object
    num_channels: object = 1


@pytest.mark.parametrize(
    ("audio", "sample_rate", "num_channels"),
    [
        (None, 16_000, 1),
        (b"\0" * 640, "sixteen thousand", 1),
        (b"\0" * 640, 16_000, [1]),
        (b"\0" * 640, math.inf, 1),
        (b"\0" * 640, -16_000, 1),
    ],
    ids=["no audio", "rate a word", "channels a list", "infinite rate", "negative rate"],
)
def test_an_audio_frame_of_no_reading_is_still_the_first_output_at_its_push(
    audio: object, sample_rate: object, num_channels: object
) -> None:
    """The first frame the transport pushed after it started speaking marks the first
    output; a frame whose playing time cannot be read marks it at the push (it raised, and
    the turn lost its first output)."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    transport = Transport()
    observer.observe(Speaking(), T0 + 500 * MS, transport)
    observer.observe(OddAudio(audio, sample_rate, num_channels), T0 + 520 * MS, transport)
    turn.end(end_time=T0 + 2000 * MS)
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})[attr.WORKFLOW_FIRST_OUTPUT_MS] == 520.0


def test_an_audio_frame_read_is_the_first_output_less_its_playing_time() -> None:
    """The same with a frame that reads: 20 ms of 16 kHz mono, pushed once written."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    transport = Transport()
    observer.observe(Speaking(), T0 + 490 * MS, transport)
    observer.observe(OddAudio(b"\0" * 640, 16_000), T0 + 520 * MS, transport)
    turn.end(end_time=T0 + 2000 * MS)
    (span,) = exporter.get_finished_spans()
    assert (span.attributes or {})[attr.WORKFLOW_FIRST_OUTPUT_MS] == 500.0
