"""The Pipecat observer without Pipecat: frames of stand-in classes, a turn span written as
Pipecat writes it (scope ``pipecat.turn``), a fresh provider and an in-memory exporter."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

from chainlat._core import attributes as attr
from chainlat._core.voice import SEMANTIC_VAD_START
from chainlat.integrations.pipecat import ChainlatObserver, Frames
from chainlat.traces.sdk import runs_from_spans

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
    properties: Any = None


@dataclass
class Cancelled:
    function_name: str
    tool_call_id: str


@dataclass
class Speaking:
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Audio:
    audio: bytes
    sample_rate: int = 16_000
    num_channels: int = 1


@dataclass
class VadStopped:
    """Pipecat's ``VADUserStoppedSpeakingFrame``: its wall-clock stamp, in seconds."""

    stop_secs: float
    timestamp: float


@dataclass
class UserStopped:
    """Pipecat's ``UserStoppedSpeakingFrame``: a realtime service asks for its answer."""


@dataclass
class ServiceAudio:
    """A ``TTSAudioRawFrame``: the audio a service pushes."""

    audio: bytes = bytes(960)


@dataclass
class ResponseEnd:
    """An ``LLMFullResponseEndFrame``."""


@dataclass
class Metadata:
    """An ``LLMServiceMetadataFrame``: a service says what it is at the pipeline's start."""

    is_realtime_service: bool


@dataclass
class _Settings:
    model: str
    session_properties: Any = None


class RealtimeService:
    """An LLM service (``LLMService``) that answers with audio: a speech-to-speech one."""

    def __init__(self, model: str = "sim-realtime") -> None:
        self._settings = _Settings(model)


@dataclass
class ProposedStopped:
    """A ``ProposedUserStoppedSpeakingFrame``: the service's hand-on of the server's
    ``speech_stopped``."""


@dataclass
class InputAudio:
    """An ``InputAudioRawFrame``: the caller's audio, as the input transport pushes it."""

    audio: bytes
    sample_rate: int = 16_000
    num_channels: int = 1


@dataclass
class _SpeechStopped:
    audio_end_ms: int


@dataclass
class _TurnDetection:
    type: str = "server_vad"
    silence_duration_ms: int | None = 500


@dataclass
class _Session:
    """A ``SessionProperties`` as far as the observer reads it."""

    detection: Any

    @property
    def audio(self) -> Any:
        return SimpleNamespace(input=SimpleNamespace(turn_detection=self.detection))


class ServerVadService(RealtimeService):
    """``OpenAIRealtimeLLMService`` with the server's turn detection: its handlers of
    ``session.updated`` and ``speech_stopped``, which the receive task calls by name."""

    def __init__(self, configured: Any = None) -> None:
        super().__init__()
        self._settings.session_properties = _Session(configured)
        self.handled: list[str] = []

    async def _handle_evt_session_updated(self, evt: Any) -> None:
        self.handled.append("session.updated")

    async def _handle_evt_speech_stopped(self, evt: Any) -> None:
        self.handled.append("speech_stopped")

    def receive(self, event: Any) -> None:
        """One server event, handled as the receive task handles it."""
        import asyncio

        name = (
            "_handle_evt_speech_stopped"
            if isinstance(event, _SpeechStopped)
            else "_handle_evt_session_updated"
        )
        asyncio.run(getattr(self, name)(event))


class Transport:
    """The output transport, the source of the frames that mark the first output."""


class Other:
    """Any other processor (the TTS service pushing its own audio)."""


OUT = Transport()
CHUNK = Audio(bytes(1280))
"""40 ms of 16 kHz mono 16-bit audio: Pipecat's default output chunk."""
FRAMES = Frames(
    Started,
    Result,
    Cancelled,
    Speaking,
    Audio,
    Transport,
    VadStopped,
    UserStopped,
    RealtimeService,
    ServiceAudio,
    ResponseEnd,
    Metadata,
    ProposedStopped,
    InputAudio,
)


def _setup() -> tuple[TracerProvider, InMemorySpanExporter, ChainlatObserver]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter, ChainlatObserver(provider, frames=FRAMES)


def _answers(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    """The speech-to-speech answers the observer wrote, in the order they started."""
    found = [s for s in spans if s.name == "realtime sim-realtime"]
    return sorted(found, key=lambda s: s.start_time or 0)


def test_a_call_is_a_tool_step_of_the_turn_and_the_first_written_audio_its_output() -> None:
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    observer.observe(Started("lookup", "c1"), T0 + 300 * MS)
    observer.observe(Started("lookup", "c1"), T0 + 300 * MS)  # the upstream copy
    observer.observe(Result("lookup", "c1"), T0 + 420 * MS)
    observer.observe(Result("lookup", "c1"), T0 + 420 * MS)
    observer.observe(CHUNK, T0 + 850 * MS, Other())  # the TTS's audio: not yet played
    observer.observe(Speaking(), T0 + 898 * MS, OUT)
    observer.observe(Speaking(), T0 + 898 * MS, OUT)  # the upstream copy
    observer.observe(CHUNK, T0 + 940 * MS, OUT)  # written from 900 ms, pushed at 940
    observer.observe(Speaking(), T0 + 1000 * MS, OUT)  # the turn's later frames change nothing
    observer.observe(CHUNK, T0 + 1100 * MS, OUT)
    turn.end(end_time=T0 + 2000 * MS)
    spans = exporter.get_finished_spans()
    (tool,) = [s for s in spans if s.name == "execute_tool lookup"]
    assert tool.parent is not None and tool.parent.span_id == turn.get_span_context().span_id
    assert (tool.start_time, tool.end_time) == (T0 + 300 * MS, T0 + 420 * MS)
    (run,) = runs_from_spans(spans)
    assert run.rollup.tool_count == 1
    assert [s.kind for s in run.steps] == ["tool"]
    assert run.first_output_ms == 900.0


def test_the_mark_is_never_before_the_speaking_frame_and_off_on_request() -> None:
    """A write that returned at once (no playing time) marks at the speaking frame."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    observer.observe(Speaking(), T0 + 500 * MS, OUT)
    observer.observe(CHUNK, T0 + 501 * MS, OUT)
    turn.end(end_time=T0 + 1000 * MS)
    unmarked = ChainlatObserver(provider, first_output=False, frames=FRAMES)
    other = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0 + 2000 * MS)
    unmarked.observe(Speaking(), T0 + 2500 * MS, OUT)
    unmarked.observe(CHUNK, T0 + 2600 * MS, OUT)
    other.end(end_time=T0 + 3000 * MS)
    marked, plain = exporter.get_finished_spans()
    assert (marked.attributes or {})[attr.WORKFLOW_FIRST_OUTPUT_MS] == 500.0
    assert attr.WORKFLOW_FIRST_OUTPUT_MS not in (plain.attributes or {})


def test_a_failed_or_cancelled_call_is_a_failed_step_and_an_update_ends_nothing() -> None:
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)

    @dataclass
    class Update:
        is_final: bool = False

    observer.observe(Started("a", "1"), T0 + 1 * MS)
    observer.observe(Result("a", "1", properties=Update()), T0 + 2 * MS)
    observer.observe(Result("a", "1", error="boom"), T0 + 3 * MS)
    observer.observe(Started("b", "2"), T0 + 4 * MS)
    observer.observe(Cancelled("b", "2"), T0 + 5 * MS)
    turn.end(end_time=T0 + 10 * MS)
    tools = {s.name: s for s in exporter.get_finished_spans() if s.name != "turn"}
    assert tools["execute_tool a"].end_time == T0 + 3 * MS
    assert not tools["execute_tool a"].status.is_ok
    assert (tools["execute_tool b"].attributes or {})[attr.ERROR_TYPE] == "cancelled"


def test_calls_without_a_result_and_marked_turns_are_held_in_bounded_numbers() -> None:
    """A session whose function calls never get a result holds at most MAX_OPEN_CALLS of
    them (the oldest go); the turns it marked, at most MAX_MARKED; a call still held is
    timed when its result comes."""
    from chainlat.integrations.pipecat import MAX_MARKED, MAX_OPEN_CALLS

    provider, exporter, observer = _setup()
    tracer = provider.get_tracer("pipecat.turn")
    for n in range(3 * MAX_OPEN_CALLS):
        observer.observe(Started("lost", str(n)), T0 + n)
    assert len(observer._calls) == MAX_OPEN_CALLS
    observer.observe(Result("lost", str(3 * MAX_OPEN_CALLS - 1)), T0 + 5 * MS)
    observer.observe(Result("lost", "0"), T0 + 5 * MS)  # dropped long ago: no step
    (tool,) = exporter.get_finished_spans()
    assert tool.start_time == T0 + 3 * MAX_OPEN_CALLS - 1 and tool.end_time == T0 + 5 * MS
    for n in range(2 * MAX_MARKED):
        at = T0 + (n + 1) * 1000 * MS
        turn = tracer.start_span("turn", start_time=at)
        observer.observe(Speaking(), at + 100 * MS, OUT)
        observer.observe(CHUNK, at + 101 * MS, OUT)
        turn.end(end_time=at + 500 * MS)
    assert len(observer._marked) == MAX_MARKED
    turns = [s for s in exporter.get_finished_spans() if s.name == "turn"]
    assert len(turns) == 2 * MAX_MARKED
    assert all(attr.WORKFLOW_FIRST_OUTPUT_MS in (t.attributes or {}) for t in turns)


def test_frames_outside_any_turn_are_ignored_and_other_spans_are_no_turns() -> None:
    provider, exporter, observer = _setup()
    other = provider.get_tracer("app").start_span("turn", start_time=T0)
    observer.observe(Speaking(), T0 + 5 * MS, OUT)
    observer.observe(CHUNK, T0 + 6 * MS, OUT)
    other.end(end_time=T0 + 10 * MS)
    (ended,) = exporter.get_finished_spans()
    assert attr.WORKFLOW_FIRST_OUTPUT_MS not in (ended.attributes or {})
    assert observer.turns.open == {}


def test_the_turn_starts_at_the_vads_end_of_the_words_and_its_wait_counts_from_there() -> None:
    """A turn opened as the caller began (no ``stt`` span: a speech-to-speech service): the
    last VAD stop before the first output, less its ``stop_secs``, is where it starts."""
    from opentelemetry import trace

    provider, exporter, observer = _setup()
    tracer = provider.get_tracer("pipecat.turn")
    conversation = tracer.start_span("conversation", start_time=T0 - 5000 * MS)
    turn = tracer.start_span("turn", context=trace.set_span_in_context(conversation), start_time=T0)
    turn.set_attribute("turn.number", 2)
    observer.observe(VadStopped(0.2, (T0 + 700 * MS) / 1e9), T0 + 701 * MS)  # a pause
    observer.observe(VadStopped(0.2, (T0 + 1400 * MS) / 1e9), T0 + 1401 * MS)  # the end
    observer.observe(Speaking(), T0 + 1900 * MS, OUT)
    observer.observe(CHUNK, T0 + 1940 * MS, OUT)
    observer.observe(VadStopped(0.2, (T0 + 2500 * MS) / 1e9), T0 + 2501 * MS)  # speech after
    turn.end(end_time=T0 + 3000 * MS)
    conversation.end(end_time=T0 + 3000 * MS)
    ended, _ = exporter.get_finished_spans()
    assert (ended.attributes or {})[attr.WORKFLOW_SPEECH_END_MS] == 1200.0
    (run,) = runs_from_spans(exporter.get_finished_spans())
    assert run.start_ns == T0 + 1200 * MS
    assert run.first_output_ms == 700.0


def test_a_vad_stop_stamped_outside_its_turn_moves_nothing() -> None:
    """A stamp on another clock (``time.monotonic()``) or after its push is no end of the
    words: the turn keeps Pipecat's start."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    observer.observe(VadStopped(0.2, 12_345.0), T0 + 500 * MS)
    observer.observe(VadStopped(0.2, (T0 + 900 * MS) / 1e9), T0 + 600 * MS)
    turn.end(end_time=T0 + 1000 * MS)
    (ended,) = exporter.get_finished_spans()
    assert attr.WORKFLOW_SPEECH_END_MS not in (ended.attributes or {})


def test_a_realtime_services_answer_is_an_inference_step_from_the_ask_to_its_end() -> None:
    """From the ``UserStoppedSpeakingFrame`` the service asked at to its
    ``LLMFullResponseEndFrame``, its time to first token at the first audio it pushed."""
    from opentelemetry import trace

    provider, exporter, observer = _setup()
    tracer = provider.get_tracer("pipecat.turn")
    conversation = tracer.start_span("conversation", start_time=T0 - 5000 * MS)
    turn = tracer.start_span("turn", context=trace.set_span_in_context(conversation), start_time=T0)
    turn.set_attribute("turn.number", 1)
    service = RealtimeService()
    observer.observe(Metadata(is_realtime_service=True), T0, service)
    observer.observe(VadStopped(0.2, (T0 + 1000 * MS) / 1e9), T0 + 1001 * MS)
    observer.observe(ServiceAudio(), T0 + 900 * MS, Other())  # a TTS service's: no answer
    observer.observe(UserStopped(), T0 + 1300 * MS, Other())
    observer.observe(ServiceAudio(), T0 + 1600 * MS, service)
    observer.observe(ServiceAudio(), T0 + 1620 * MS, service)
    observer.observe(Speaking(), T0 + 1610 * MS, OUT)
    observer.observe(CHUNK, T0 + 1650 * MS, OUT)
    observer.observe(ResponseEnd(), T0 + 2400 * MS, service)
    observer.observe(ResponseEnd(), T0 + 2500 * MS, service)  # no answer open: nothing
    observer.observe(ServiceAudio(), T0 + 2600 * MS, service)  # not asked again: nothing
    turn.end(end_time=T0 + 3000 * MS)
    conversation.end(end_time=T0 + 3000 * MS)
    spans = exporter.get_finished_spans()
    (step,) = [s for s in spans if s.name == "realtime sim-realtime"]
    assert step.parent is not None and step.parent.span_id == turn.get_span_context().span_id
    assert (step.start_time, step.end_time) == (T0 + 1300 * MS, T0 + 2400 * MS)
    (run,) = runs_from_spans(spans)
    assert run.start_ns == T0 + 800 * MS  # the VAD's stamp less its stop_secs
    assert [(s.name, s.kind, s.ttft_ms) for s in run.steps] == [
        ("realtime sim-realtime", "inference", 300.0)
    ]
    assert run.first_output_ms == 810.0  # the write from 1610 ms, pushed at 1650
    assert run.rollup.first_output_inference_ms == 310.0
    # The end of the words (800 ms) to the ask (1300 ms): the end-of-turn wait, overhead.
    assert run.rollup.first_output_end_of_turn_ms == 500.0
    assert run.rollup.first_output_overhead_ms == 500.0


def test_a_realtime_answer_after_a_function_call_counts_from_the_calls_result() -> None:
    """The answer that called the function is a step from the caller's stop to its end,
    with no first token (it pushed no audio); the tool is a step, and the spoken answer
    runs from the result to its end. A cascade's LLM service (it never said it is speech to
    speech) answers with no step."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    service = RealtimeService()
    observer.observe(Metadata(is_realtime_service=True), T0, service)
    observer.observe(UserStopped(), T0 + 100 * MS, Other())
    observer.observe(Started("lookup", "c1"), T0 + 400 * MS, service)
    observer.observe(ResponseEnd(), T0 + 410 * MS, service)  # the call's answer: no audio
    observer.observe(Result("lookup", "c1"), T0 + 520 * MS, service)
    observer.observe(ServiceAudio(), T0 + 830 * MS, service)
    observer.observe(ResponseEnd(), T0 + 1500 * MS, service)
    cascade = RealtimeService("gpt-4o")
    observer.observe(Metadata(is_realtime_service=False), T0, cascade)
    observer.observe(UserStopped(), T0 + 1600 * MS, Other())
    observer.observe(ServiceAudio(), T0 + 1700 * MS, cascade)
    observer.observe(ResponseEnd(), T0 + 1800 * MS, cascade)
    turn.end(end_time=T0 + 2000 * MS)
    spans = exporter.get_finished_spans()
    assert sorted(s.name for s in spans) == [
        "execute_tool lookup", "realtime sim-realtime", "realtime sim-realtime", "turn"
    ]  # fmt: skip
    calling, answer = _answers(spans)
    # Its call began at 400 ms, before its response.done (410): the caller waited on the
    # tool from there.
    assert (calling.start_time, calling.end_time) == (T0 + 100 * MS, T0 + 400 * MS)
    assert attr.LATENCY_TTFT_MS not in (calling.attributes or {})
    assert [e.name for e in calling.events] == []
    assert (answer.start_time, answer.end_time) == (T0 + 520 * MS, T0 + 1500 * MS)
    assert (answer.attributes or {})[attr.LATENCY_TTFT_MS] == 310.0


def test_a_result_before_the_calling_answer_ended_asks_the_next_at_that_end() -> None:
    """The service owes the create while a response runs (llm.py 1109-1114): the spoken
    answer starts at the end of the one that called, not at the earlier result; with two
    calls of one answer, at the last result."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    service = RealtimeService()
    observer.observe(Metadata(is_realtime_service=True), T0, service)
    observer.observe(UserStopped(), T0 + 100 * MS, Other())
    observer.observe(Started("lookup", "c1"), T0 + 400 * MS, service)
    observer.observe(Result("lookup", "c1"), T0 + 405 * MS, service)  # a quick tool
    observer.observe(ResponseEnd(), T0 + 410 * MS, service)
    observer.observe(Started("lookup", "c2"), T0 + 700 * MS, service)  # asked again: 2 calls
    observer.observe(Started("lookup", "c3"), T0 + 701 * MS, service)
    observer.observe(ResponseEnd(), T0 + 710 * MS, service)
    observer.observe(Result("lookup", "c2"), T0 + 800 * MS, service)
    observer.observe(Result("lookup", "c3"), T0 + 850 * MS, service)
    observer.observe(ServiceAudio(), T0 + 1150 * MS, service)
    observer.observe(ResponseEnd(), T0 + 1500 * MS, service)
    turn.end(end_time=T0 + 2000 * MS)
    answers = _answers(exporter.get_finished_spans())
    assert [(s.start_time, s.end_time) for s in answers] == [
        (T0 + 100 * MS, T0 + 400 * MS),  # to its call's start, before its response.done
        (T0 + 410 * MS, T0 + 700 * MS),
        (T0 + 850 * MS, T0 + 1500 * MS),
    ]
    assert [(s.attributes or {}).get(attr.LATENCY_TTFT_MS) for s in answers] == [
        None, None, 300.0
    ]  # fmt: skip


def test_a_realtime_answer_ends_with_pipecats_handling_of_its_response_done() -> None:
    """The ``LLMFullResponseEndFrame`` is pushed inside Pipecat's ``llm_response`` span: the
    step ends with that span, whether it is still open when the observer reads the frame
    (the step is written at its end) or ended already; the reader then takes the two for
    one call (under load the rest of the handling after the push was 0.8 ms of a 1.3 ms
    span, and the span was read as a second call)."""
    from opentelemetry import trace

    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    context = trace.set_span_in_context(turn)
    pipecat = provider.get_tracer("pipecat")
    service = RealtimeService()
    observer.observe(Metadata(is_realtime_service=True), T0, service)
    # The first answer: the frame read while Pipecat's span is open.
    observer.observe(UserStopped(), T0 + 100 * MS, Other())
    observer.observe(ServiceAudio(), T0 + 400 * MS, service)
    handling = pipecat.start_span(
        "llm_response", context=context, start_time=T0 + 1000 * MS, attributes=USAGE
    )
    observer.observe(ResponseEnd(), T0 + 1000 * MS + 500_000, service)
    assert not [s for s in exporter.get_finished_spans() if s.name.startswith("realtime")]
    handling.end(end_time=T0 + 1001 * MS + 300_000)
    # The second: the span ended before the observer read the frame pushed inside it.
    observer.observe(UserStopped(), T0 + 2000 * MS, Other())
    observer.observe(ServiceAudio(), T0 + 2300 * MS, service)
    done = pipecat.start_span(
        "llm_response", context=context, start_time=T0 + 3000 * MS, attributes=USAGE
    )
    done.end(end_time=T0 + 3001 * MS)
    observer.observe(ResponseEnd(), T0 + 3000 * MS + 400_000, service)
    # A frame outside any such span: the step ends at the push.
    observer.observe(UserStopped(), T0 + 4000 * MS, Other())
    observer.observe(ServiceAudio(), T0 + 4300 * MS, service)
    observer.observe(ResponseEnd(), T0 + 5000 * MS, service)
    turn.end(end_time=T0 + 6000 * MS)
    spans = exporter.get_finished_spans()
    answers = _answers(spans)
    assert [(s.start_time, s.end_time) for s in answers] == [
        (T0 + 100 * MS, T0 + 1001 * MS + 300_000),
        (T0 + 2000 * MS, T0 + 3001 * MS),
        (T0 + 4000 * MS, T0 + 5000 * MS),
    ]
    (run,) = runs_from_spans(spans)
    # Each llm_response inside its answer's step: no step of its own, its usage kept.
    assert [s.name for s in run.steps] == ["realtime sim-realtime"] * 3
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (68, 148)


USAGE: dict[str, AttributeValue] = {
    "gen_ai.operation.name": "llm_response",
    "gen_ai.request.model": "sim-realtime",
    "service.operation": "llm_response",
    "gen_ai.usage.input_tokens": 34,
    "gen_ai.usage.output_tokens": 74,
}
"""What Pipecat writes on a realtime ``llm_response`` (its usage; no time of the answer's)."""


def test_an_answer_that_called_ends_at_its_call_when_pipecats_handling_outlasts_it() -> None:
    """The call pushed after the ``LLMFullResponseEndFrame`` but before Pipecat's handling of
    ``response.done`` ended: the step ends at the call's start, read after the span ended;
    a call after that handling leaves the step to the handling's end."""
    from opentelemetry import trace

    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    context = trace.set_span_in_context(turn)
    pipecat = provider.get_tracer("pipecat")
    service = RealtimeService()
    observer.observe(Metadata(is_realtime_service=True), T0, service)
    observer.observe(UserStopped(), T0 + 100 * MS, Other())
    handling = pipecat.start_span(
        "llm_response", context=context, start_time=T0 + 409 * MS, attributes=USAGE
    )
    observer.observe(ResponseEnd(), T0 + 410 * MS, service)
    handling.end(end_time=T0 + 413 * MS)
    observer.observe(Started("lookup", "c1"), T0 + 411 * MS + 500_000, service)
    observer.observe(Result("lookup", "c1"), T0 + 530 * MS, service)
    handling = pipecat.start_span(
        "llm_response", context=context, start_time=T0 + 839 * MS, attributes=USAGE
    )
    observer.observe(ResponseEnd(), T0 + 840 * MS, service)  # it called again
    handling.end(end_time=T0 + 841 * MS)
    observer.observe(Started("lookup", "c2"), T0 + 842 * MS, service)
    observer.observe(Result("lookup", "c2"), T0 + 960 * MS, service)
    observer.observe(ServiceAudio(), T0 + 1300 * MS, service)
    observer.observe(ResponseEnd(), T0 + 2000 * MS, service)
    turn.end(end_time=T0 + 3000 * MS)
    answers = _answers(exporter.get_finished_spans())
    assert [(s.start_time, s.end_time) for s in answers] == [
        (T0 + 100 * MS, T0 + 411 * MS + 500_000),
        (T0 + 530 * MS, T0 + 841 * MS),
        (T0 + 960 * MS, T0 + 2000 * MS),
    ]


# --- the server's turn detection ------------------------------------------------------------

FRAME = bytes(640)
"""20 ms of 16 kHz mono 16-bit audio: one microphone frame."""
MIC = Other()
"""The input transport."""


def _server_turn(
    service: ServerVadService, observer: ChainlatObserver, *, audio_end_ms: int, frames: int
) -> None:
    """``frames`` microphone frames pushed at the end of each (the first ending at T0 +
    20 ms), then the server's ``speech_stopped`` at ``audio_end_ms``, received and handed
    on 40 ms after the last frame."""
    for n in range(1, frames + 1):
        observer.observe(InputAudio(FRAME), T0 + 20 * n * MS, MIC)
    service.receive(_SpeechStopped(audio_end_ms))
    observer.observe(ProposedStopped(), T0 + (20 * frames + 40) * MS, service)


def test_the_servers_turn_detection_starts_the_turn_at_its_end_of_the_words() -> None:
    """``speech_stopped`` at 1,507 ms of audio, with the 500 ms of silence the server's
    ``session.updated`` says it waits on: the words ended at 1,007 ms of audio, in the frame
    of 1,000-1,020 ms, pushed at T0 + 1,020 ms: at T0 + 1,007 ms. The answer counts from
    the frame that handed the stop on, and the user aggregator's stop after it asks
    nothing; the service's own handlers still run."""
    from opentelemetry import trace

    provider, exporter, observer = _setup()
    tracer = provider.get_tracer("pipecat.turn")
    conversation = tracer.start_span("conversation", start_time=T0 - 5000 * MS)
    turn = tracer.start_span("turn", context=trace.set_span_in_context(conversation), start_time=T0)
    turn.set_attribute("turn.number", 1)
    service = ServerVadService()
    observer.observe(Metadata(is_realtime_service=True), T0, service)
    service.receive(SimpleNamespace(session=_Session(_TurnDetection(silence_duration_ms=500))))
    _server_turn(service, observer, audio_end_ms=1507, frames=80)  # 1,600 ms of audio
    observer.observe(UserStopped(), T0 + 1645 * MS, Other())  # the aggregator's, after
    observer.observe(ServiceAudio(), T0 + 1940 * MS, service)
    observer.observe(Speaking(), T0 + 1950 * MS, OUT)
    observer.observe(CHUNK, T0 + 1990 * MS, OUT)
    observer.observe(ResponseEnd(), T0 + 2600 * MS, service)
    turn.end(end_time=T0 + 3000 * MS)
    conversation.end(end_time=T0 + 3000 * MS)
    assert service.handled == ["session.updated", "speech_stopped"]  # still handled
    spans = exporter.get_finished_spans()
    (step,) = _answers(spans)
    assert (step.start_time, step.end_time) == (T0 + 1640 * MS, T0 + 2600 * MS)
    (run,) = runs_from_spans(spans)
    # 1,007 ms of audio: in the frame of 1,000-1,020 ms, pushed at T0 + 1,020 ms.
    assert run.start_ns == T0 + 1007 * MS
    assert run.first_output_ms == 943.0  # to the write at 1,950 ms
    assert run.rollup.first_output_end_of_turn_ms == 633.0  # to the stop handed on


def test_the_silence_is_the_settings_without_a_session_update_and_none_for_semantic_vad() -> None:
    """A ``session.updated`` missed (handled before the observer wrapped the handler): the
    silence the service was set up with. ``semantic_vad`` (Pipecat's ``SemanticTurnDetection``
    states no silence) waits as long as its model decides: the turn starts at ``audio_end_ms``
    less only a silence the settings state, and says its start is no known end of the words."""
    starts = []
    for configured, expected_ms, unknown in (
        (_TurnDetection(silence_duration_ms=300), 1207, False),
        (_TurnDetection(silence_duration_ms=None), 1007, False),  # the server's default, 500 ms
        (None, 1007, False),
        (_TurnDetection(type="semantic_vad", silence_duration_ms=None), 1507, True),
        (_TurnDetection(type="semantic_vad", silence_duration_ms=200), 1307, True),
    ):
        provider, exporter, observer = _setup()
        turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
        turn.set_attribute("turn.number", 1)
        service = ServerVadService(configured)
        observer.observe(Metadata(is_realtime_service=True), T0, service)
        _server_turn(service, observer, audio_end_ms=1507, frames=80)
        turn.end(end_time=T0 + 3000 * MS)
        (ended,) = exporter.get_finished_spans()
        attributes = ended.attributes or {}
        found = attributes.get(attr.WORKFLOW_SPEECH_END_MS)
        said = attributes.get(attr.WORKFLOW_START_UNKNOWN)
        starts.append(
            ((found, said), (float(expected_ms), SEMANTIC_VAD_START if unknown else None))
        )
    assert [found for found, _ in starts] == [expected for _, expected in starts]


def test_what_the_session_update_does_not_say_is_read_from_the_settings() -> None:
    """A ``session.updated`` whose turn detection states no silence, or no turn detection
    at all: the silence and the kind the service was set up with (300 ms, ``server_vad``;
    ``semantic_vad``), as when no ``session.updated`` was read."""
    found = []
    for updated, configured in (
        (_TurnDetection(silence_duration_ms=None), _TurnDetection(silence_duration_ms=300)),
        (None, _TurnDetection(silence_duration_ms=300)),
        (None, _TurnDetection(type="semantic_vad", silence_duration_ms=None)),
    ):
        provider, exporter, observer = _setup()
        turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
        turn.set_attribute("turn.number", 1)
        service = ServerVadService(configured)
        observer.observe(Metadata(is_realtime_service=True), T0, service)
        service.receive(SimpleNamespace(session=_Session(updated)))
        _server_turn(service, observer, audio_end_ms=1507, frames=80)
        turn.end(end_time=T0 + 3000 * MS)
        (ended,) = exporter.get_finished_spans()
        attributes = ended.attributes or {}
        found.append(
            (
                attributes.get(attr.WORKFLOW_SPEECH_END_MS),
                attributes.get(attr.WORKFLOW_START_UNKNOWN),
            )
        )
    assert found == [(1207.0, None), (1207.0, None), (1507.0, SEMANTIC_VAD_START)]


def test_an_end_of_the_words_the_observer_cannot_place_moves_nothing() -> None:
    """Audio the frames do not reach (a stop past the audio pushed), or a service without
    the handlers (another realtime service): the turn keeps Pipecat's start, and the answer
    still counts from the server's stop."""
    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    service = ServerVadService()
    observer.observe(Metadata(is_realtime_service=True), T0, service)
    _server_turn(service, observer, audio_end_ms=2500, frames=80)  # past 1,600 ms pushed
    turn.end(end_time=T0 + 3000 * MS)
    (ended,) = exporter.get_finished_spans()
    assert attr.WORKFLOW_SPEECH_END_MS not in (ended.attributes or {})

    provider, exporter, observer = _setup()
    turn = provider.get_tracer("pipecat.turn").start_span("turn", start_time=T0)
    turn.set_attribute("turn.number", 1)
    plain = RealtimeService()  # no handlers to wrap: nothing read, nothing kept
    observer.observe(Metadata(is_realtime_service=True), T0, plain)
    observer.observe(InputAudio(FRAME), T0 + 20 * MS, MIC)
    observer.observe(ProposedStopped(), T0 + 600 * MS, plain)
    observer.observe(UserStopped(), T0 + 605 * MS, Other())
    observer.observe(ServiceAudio(), T0 + 900 * MS, plain)
    observer.observe(ResponseEnd(), T0 + 1200 * MS, plain)
    turn.end(end_time=T0 + 3000 * MS)
    spans = exporter.get_finished_spans()
    assert attr.WORKFLOW_SPEECH_END_MS not in (
        next(s for s in spans if s.name == "turn").attributes or {}
    )
    (step,) = _answers(spans)
    assert step.start_time == T0 + 600 * MS
    assert len(observer._heard) == 0  # no server turns read: the caller's audio not kept
