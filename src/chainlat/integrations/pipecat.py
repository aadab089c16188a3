"""A Pipecat observer that adds what Pipecat's own traces lack (docs/voice.md, Pipecat).

Pipecat (``pipecat-ai``, read in the source of 1.14.0) writes a ``turn`` span per turn and
``stt``, ``llm``, ``tts`` spans under it, but no span for a function call (a tool it runs
inside a turn reads as overhead), and its first audio is where the TTS service pushed its
first frame, a few ms before the output transport plays it. The observer records:

- each function call as a chainlat tool step (``execute_tool {name}``, the attributes
  ``chainlat.tool`` writes) under the turn's span: from the ``FunctionCallInProgressFrame``
  the LLM service pushes right before it runs the handler (services/llm_service.py
  1886-1893) to the final ``FunctionCallResultFrame`` its result callback pushes (1937);
  a handler that raised is a failed step (the frame's ``error``), a cancelled call
  (``FunctionCallCancelFrame``) one ended ``cancelled``;
- the end of the caller's words (``first_output=True``): the VAD's stop less the silence
  it waited (``VADUserStoppedSpeakingFrame.timestamp - stop_secs``, where Pipecat's
  ``turn.user_bot_latency_seconds`` counts from: observers/user_bot_latency_observer.py
  648-653), as ``chainlat.workflow.speech_end_ms`` on the turn, from its start: the turn
  starts there (``chainlat._core.turn_start``). Pipecat's own ``turn`` opens when the
  caller starts speaking (the first at the pipeline's start), and a speech-to-speech turn
  (``OpenAIRealtimeLLMService``) has no ``stt`` span to find the end of the words by;
- a speech-to-speech service's answer (an LLM service that pushes ``TTSAudioRawFrame``s)
  as an inference step (``realtime {model}``, ``gen_ai.operation.name`` ``realtime``)
  under the turn: from the ``UserStoppedSpeakingFrame`` it asks at (with the server's turn
  detection off, ``OpenAIRealtimeLLMService`` commits the audio and creates the response
  there: services/openai/realtime/llm.py 604-607) to the ``LLMFullResponseEndFrame`` it
  pushes at ``response.done`` (1090-1122), its first token at the first audio it pushed
  (``response.output_audio.delta``, 979-1019). Pipecat's own ``llm_response`` span is the
  handling of ``response.done`` alone (0.3-1.3 ms), the frame pushed inside it: the step
  ends with that span (written at its end when it is still open), so that the readers
  take the two for the same call seen twice and keep its usage. An answer that calls a
  function pushes no audio: its step has no first token and ends at its ``response.done``,
  or at its first call's start when the service started that first (it runs a call at
  ``response.function_call_arguments.done``, which the server sends before
  ``response.done``: 1172-1208; the caller's wait goes on in the tool from there, and the
  path to the first output runs through the answer); the answer after the call counts from
  the call's result (from the end of the answer that called, when the result came first:
  the service then owes the create, 1109-1114). A service is
  speech to speech when its ``LLMServiceMetadataFrame`` says so (``is_realtime_service``);
  an answer asked neither by a ``UserStoppedSpeakingFrame`` nor by the server in its turn
  gets no step;
- with the server's turn detection on (the service's default), the server asks the answer
  itself, at its ``input_audio_buffer.speech_stopped``: the service hands that event on as a
  bare ``ProposedUserStoppedSpeakingFrame``, pushed as it arrived (1223-1229), and the
  answer's step counts from that push (the ``UserStoppedSpeakingFrame`` Pipecat's user
  aggregator pushes after it asks nothing). No VAD frame is pushed, and the service drops
  the event's ``audio_end_ms``, the end of the speech on the session's audio clock, silence
  included: the observer reads it, and the silence the server waits on (its
  ``session.updated``, else the service's settings, else OpenAI's default), by wrapping the
  service's two handlers of them (``_handle_evt_speech_stopped`` and
  ``_handle_evt_session_updated``, 1215-1229 and 968-975 of pipecat-ai 1.14.0's
  services/openai/realtime/llm.py; a service without them is read as before, its turns
  keeping Pipecat's start). The end of the words is then the instant the input transport
  pushed the caller's audio at ``audio_end_ms`` less the silence, counted over the
  ``InputAudioRawFrame`` frames it pushed, each of which the service appends as it gets it
  (its audio clock); the turn starts there;
- the turn's first output (``first_output=True``, the default) where the caller's audio
  starts: the output transport's write of the turn's first audio frame. No frame is pushed
  at that instant: the transport's audio task pushes a ``BotStartedSpeakingFrame`` first,
  then writes the chunk, then pushes the chunk (an ``OutputAudioRawFrame`` it cut from the
  TTS audio, so its first push is the transport's) once the write returned
  (transports/base_output.py 643-666, 744-765, 1019-1050). A transport plays as it writes
  (Daily's write completes when its device took the chunk, the websocket's sleeps the
  chunk's time: the write returns after the chunk's playing time), so the mark is that
  push less the chunk's playing time, never before the ``BotStartedSpeakingFrame``, which
  precedes the write by the event loop's turns (0.9-9.6 ms in the interop case). The
  turn's span gets ``chainlat.workflow.first_output_ms`` from its own start, what
  ``run.first_output()`` writes, which every reader uses over its own rules: in the interop
  case it reads 0.5 to 2.4 ms after the instant the output transport began writing.

Frames reach an observer through a queue of its own (pipeline/worker_observer.py): each
instant is the frame's push on the pipeline clock, put on the spans' clock, never the
moment the observer got to it. Failures of the observer are logged once and swallowed.

Example::

    from chainlat.integrations.pipecat import observer

    task = PipelineTask(pipeline, enable_tracing=True, observers=[observer()])
"""

from __future__ import annotations

import inspect
import math
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.sdk.trace import SpanProcessor

from chainlat._core import attributes as attr
from chainlat._core.errors import internal_errors, warn_once
from chainlat._core.voice import SEMANTIC_VAD_START, SERVER_VAD_SILENCE_MS

if TYPE_CHECKING:
    from collections.abc import Callable

    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import ReadableSpan, Span
    from opentelemetry.trace import TracerProvider

__all__ = ["ChainlatObserver", "observer"]

TURN_SCOPE: Final = "pipecat.turn"
"""The tracer scope of Pipecat's turn spans (utils/tracing/turn_trace_observer.py 73)."""
SERVICE_SCOPE: Final = "pipecat"
"""The tracer scope of Pipecat's service spans (utils/tracing/service_decorators.py 1446)."""
RESPONSE_SPAN: Final = "llm_response"
"""A realtime service's handling of ``response.done`` (service_decorators.py 1413-1449)."""
_NS_PER_MS: Final = 1_000_000
MAX_OPEN_CALLS: Final = 1024
"""Function calls the observer waits for a result of at once; past it the oldest goes."""
MAX_MARKED: Final = 64
"""Turns whose first output the observer remembers marking (a session has one open)."""
MAX_HEARD: Final = 4096
"""The caller's latest audio frames kept to find where the server's ``audio_end_ms`` was
pushed (80 s of 20 ms frames; the server's silence is well under a second)."""
MAX_STOPS: Final = 16
"""The server's ``speech_stopped`` figures kept until their frame is observed."""
_SPEECH_STOPPED: Final = "_handle_evt_speech_stopped"
_SESSION_UPDATED: Final = "_handle_evt_session_updated"
"""``OpenAIRealtimeLLMService``'s handlers of ``input_audio_buffer.speech_stopped`` and
``session.updated`` (pipecat-ai 1.14.0, services/openai/realtime/llm.py 1223 and 968)."""


@dataclass(frozen=True)
class Frames:
    """The Pipecat frame classes the observer reads (the real ones unless a test says)."""

    call_started: type
    call_result: type
    call_cancelled: type
    bot_started_speaking: type
    audio: type
    output_transport: type
    vad_stopped: type | None = None
    user_stopped: type | None = None
    llm_service: type | None = None
    tts_audio: type | None = None
    response_end: type | None = None
    service_metadata: type | None = None
    proposed_stopped: type | None = None
    input_audio: type | None = None


def pipecat_frames() -> Frames:
    """Pipecat's frame classes, imported now (Pipecat is an optional dependency)."""
    from pipecat.frames.frames import (  # type: ignore[import-not-found,unused-ignore]
        BotStartedSpeakingFrame,
        FunctionCallCancelFrame,
        FunctionCallInProgressFrame,
        FunctionCallResultFrame,
        InputAudioRawFrame,
        LLMFullResponseEndFrame,
        LLMServiceMetadataFrame,
        OutputAudioRawFrame,
        ProposedUserStoppedSpeakingFrame,
        TTSAudioRawFrame,
        UserStoppedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.services.llm_service import (  # type: ignore[import-not-found,unused-ignore]
        LLMService,
    )
    from pipecat.transports.base_output import (  # type: ignore[import-not-found,unused-ignore]
        BaseOutputTransport,
    )

    return Frames(
        FunctionCallInProgressFrame,
        FunctionCallResultFrame,
        FunctionCallCancelFrame,
        BotStartedSpeakingFrame,
        OutputAudioRawFrame,
        BaseOutputTransport,
        VADUserStoppedSpeakingFrame,
        UserStoppedSpeakingFrame,
        LLMService,
        TTSAudioRawFrame,
        LLMFullResponseEndFrame,
        LLMServiceMetadataFrame,
        ProposedUserStoppedSpeakingFrame,
        InputAudioRawFrame,
    )


class OpenTurns(SpanProcessor):
    """A span processor that keeps Pipecat's open ``turn`` spans, to mark and to parent to,
    and follows its ``llm_response`` spans (a realtime answer's step ends with them)."""

    def __init__(self) -> None:
        self.open: dict[int, Span] = {}
        self.handling: dict[int, tuple[int, list[Callable[[int], None]]]] = {}
        """The open ``llm_response`` spans: their start, and what to call at their end."""
        self.handled: tuple[int, int] | None = None
        """The start and end of the last ``llm_response`` that ended."""

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        scope = span.instrumentation_scope
        if scope is None:
            return
        if span.name == "turn" and scope.name == TURN_SCOPE:
            self.open[span.context.span_id] = span
        elif span.name == RESPONSE_SPAN and scope.name == SERVICE_SCOPE:
            self.handling[span.context.span_id] = (span.start_time or 0, [])

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        self.open.pop(context.span_id, None)
        handling = self.handling.pop(context.span_id, None)
        if handling is not None:
            start, waiting = handling
            end = span.end_time or start
            self.handled = (start, end)
            for call in waiting:
                call(end)

    def shutdown(self) -> None:
        self.open.clear()
        self.handling.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def at(self, ns: int) -> Span | None:
        """The turn open at ``ns``: the latest started at or before it."""
        started = [s for s in self.open.values() if (s.start_time or 0) <= ns]
        return max(started, key=lambda s: s.start_time or 0, default=None)

    def after_handling(self, ns: int, call: Callable[[int], None]) -> None:
        """Call ``call`` with the end of the ``llm_response`` that holds ``ns`` (at once if
        it ended, at its end if still open), or with ``ns`` when none holds it."""
        for start, waiting in self.handling.values():
            if start <= ns:
                waiting.append(call)
                return
        handled = self.handled
        call(handled[1] if handled is not None and handled[0] <= ns <= handled[1] else ns)


@dataclass
class _ServerTurns:
    """What a speech-to-speech service's server turn detection said, read from the
    service's handlers of its events (it hands neither figure on)."""

    ends: deque[int] = field(default_factory=lambda: deque(maxlen=MAX_STOPS))
    """The ``audio_end_ms`` of each ``speech_stopped`` whose frame is not observed yet."""
    silence_ms: int | None = None
    """The silence the server waits on, from its ``session.updated``."""
    semantic: bool | None = None
    """Whether its ``session.updated`` says ``semantic_vad`` (None: it said no turn
    detection, or none was read)."""


@dataclass
class _Call:
    name: str
    start_ns: int
    turn: Span | None


@dataclass
class _Response:
    """A speech-to-speech service's answer: asked at ``start_ns``, its first audio at
    ``first_ns`` (None: it pushed none, as an answer that calls a function)."""

    model: str
    start_ns: int
    first_ns: int | None
    turn: Span
    call_ns: int | None = None
    """The start of the first function call it asked for (an answer with no audio)."""
    end_ns: int | None = None
    """The end of Pipecat's handling of its ``response.done``, once known."""


class ChainlatObserver:
    """The observer's reading of frames; :func:`observer` makes it a Pipecat observer."""

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        *,
        first_output: bool = True,
        frames: Frames | None = None,
    ) -> None:
        from opentelemetry import trace

        provider = tracer_provider or trace.get_tracer_provider()
        self._tracer = provider.get_tracer(attr.TRACER_NAME)
        self.turns = OpenTurns()
        add = getattr(provider, "add_span_processor", None)
        if add is not None:  # an SDK provider; the API's proxy records nothing anyway
            add(self.turns)
        self._frames = frames or pipecat_frames()
        self._calls: dict[str, _Call] = {}
        """Function calls started and not ended, oldest first (at most `MAX_OPEN_CALLS`)."""
        self._marked: dict[int, None] = {}
        """The turns whose first output is marked, oldest first (the last `MAX_MARKED`)."""
        self._speaking: tuple[Span, int] | None = None
        """The turn and push of a ``BotStartedSpeakingFrame``, until its first audio frame."""
        self._asked_ns: int | None = None
        """The push of the last ``UserStoppedSpeakingFrame``: a realtime service asks then."""
        self._response: _Response | None = None
        self._calling = False
        """A function call began in the answer asked at ``_asked_ns``, not ended yet."""
        self._owed = False
        self._first_call_ns: int | None = None
        """The start of the first call since ``_asked_ns``: the answer asked then called it."""
        self._settling: _Response | None = None
        """An answer that called a function, ended, its step not written: it ends at its
        first call's start when that came first, which the observer may not have read yet."""
        """A call's result came before the answer that called it ended: the service asks
        the next answer at that end."""
        self._realtime_services: set[int] = set()
        """The services that said they are speech to speech (``is_realtime_service``)."""
        self._server_turns: dict[int, _ServerTurns] = {}
        """By service: what its server turn detection said (`_listen`)."""
        self._asked_by_server = False
        """The server asked the answer at its ``speech_stopped``: the user aggregator's
        ``UserStoppedSpeakingFrame`` after it asks nothing."""
        self._heard: deque[tuple[float, int]] = deque(maxlen=MAX_HEARD)
        """The caller's audio frames as pushed: the audio's length up to each frame's end
        (ms) and the push, oldest first; kept while a service's turns are the server's."""
        self._heard_ms = 0.0
        self._mark_first_output = first_output

    async def on_push_frame(self, data: Any) -> None:
        """Pipecat's ``BaseObserver.on_push_frame``: one frame pushed (its first push)."""
        with internal_errors("observing a Pipecat frame"):
            self.observe(data.frame, self._wall_ns(data), data.source)

    @staticmethod
    def _wall_ns(data: Any) -> int:
        """The push on the spans' clock: the pipeline clock read beside ``time.time_ns()``."""
        clock = data.source.get_clock()
        offset = time.time_ns() - int(clock.get_time())
        return int(data.timestamp) + offset

    def observe(self, frame: object, at_ns: int, source: object = None) -> None:
        """Read one frame pushed at ``at_ns`` (ns on the spans' clock) by ``source``."""
        frames = self._frames
        if isinstance(frame, frames.call_started):
            call_id = str(getattr(frame, "tool_call_id", ""))
            if call_id not in self._calls:  # broadcast: once downstream, once upstream
                if len(self._calls) >= MAX_OPEN_CALLS:
                    # A call whose result never came (the pipeline dropped it): the oldest
                    # goes, so a long session holds a bounded number.
                    del self._calls[next(iter(self._calls))]
                    warn_once(
                        "pipecat.open_calls",
                        "chainlat: Pipecat observer: over %d function calls without a "
                        "result; the oldest are no longer timed (logged once)",
                        MAX_OPEN_CALLS,
                    )
                name = str(getattr(frame, "function_name", "") or "function")
                self._calls[call_id] = _Call(name, at_ns, self.turns.at(at_ns))
                self._calling = self._asked_ns is not None and self._response is None
                if self._calling and self._first_call_ns is None:
                    self._first_call_ns = at_ns
                settling = self._settling
                if settling is not None and settling.call_ns is None:
                    settling.call_ns = at_ns
                    self._settle(settling)
        elif isinstance(frame, frames.call_result):
            properties = getattr(frame, "properties", None)
            if properties is not None and getattr(properties, "is_final", True) is False:
                return  # an intermediate update: the call goes on
            call = self._calls.pop(str(getattr(frame, "tool_call_id", "")), None)
            if call is not None:
                error = getattr(frame, "error", None)
                self._tool(call, at_ns, str(error) if error else None)
                self._answered_by_tool(at_ns)
        elif isinstance(frame, frames.call_cancelled):
            call = self._calls.pop(str(getattr(frame, "tool_call_id", "")), None)
            if call is not None:
                self._tool(call, at_ns, "cancelled")
                self._answered_by_tool(at_ns)
        elif frames.service_metadata is not None and isinstance(frame, frames.service_metadata):
            if getattr(frame, "is_realtime_service", False) is True and source is not None:
                self._realtime_services.add(id(source))
                self._listen(source)
        elif frames.input_audio is not None and isinstance(frame, frames.input_audio):
            if self._server_turns:
                self._hear(frame, at_ns)
        elif id(source) in self._realtime_services:
            self._realtime(frame, at_ns, source)
        elif frames.user_stopped is not None and isinstance(frame, frames.user_stopped):
            if self._asked_by_server:  # pushed after the server's stop, which asked
                self._asked_by_server = False
                return
            self._settle(self._settling, force=True)
            self._asked_ns = at_ns
            self._first_call_ns = None
        elif not self._mark_first_output:
            return
        elif frames.vad_stopped is not None and isinstance(frame, frames.vad_stopped):
            self._speech_end(frame, at_ns)
        elif isinstance(frame, frames.bot_started_speaking):
            turn = self.turns.at(at_ns)
            if isinstance(source, frames.output_transport) and turn is not None:
                self._speaking = self._speaking or (turn, at_ns)
        elif isinstance(frame, frames.audio) and isinstance(source, frames.output_transport):
            speaking, self._speaking = self._speaking, None
            if speaking is not None:
                # Pushed once written, and a transport's write plays the chunk (Daily's,
                # the websocket's): the caller heard it from its playing time before,
                # never before the speaking frame that preceded the write.
                turn, started_ns = speaking
                self._first_output(turn, max(at_ns - _playing_ns(frame), started_ns))

    def _tool(self, call: _Call, end_ns: int, error: str | None) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        parent = call.turn
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self._tracer.start_span(
            attr.tool_span_name(call.name),
            context=context,
            kind=SpanKind.INTERNAL,
            start_time=call.start_ns,
            attributes={
                attr.GEN_AI_OPERATION_NAME: attr.OP_EXECUTE_TOOL,
                attr.GEN_AI_TOOL_NAME: call.name,
                attr.STEP_KIND: "tool",
            },
        )
        if error is not None:
            span.set_attribute(attr.ERROR_TYPE, "cancelled" if error == "cancelled" else "error")
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=max(end_ns, call.start_ns))

    def _realtime(self, frame: object, at_ns: int, source: object) -> None:
        """A speech-to-speech service's answer: from the caller's stop (or the call's
        result) it was asked at to its ``LLMFullResponseEndFrame``, its first audio the
        first ``TTSAudioRawFrame`` it pushed. An answer that calls a function pushes no
        audio: its step has no first token (Pipecat's ``llm_response`` of it, the same
        call seen twice, keeps its usage)."""
        frames = self._frames
        if frames.proposed_stopped is not None and isinstance(frame, frames.proposed_stopped):
            self._server_stop(source, at_ns)
        elif frames.tts_audio is not None and isinstance(frame, frames.tts_audio):
            if self._response is None and self._asked_ns is not None:
                self._settle(self._settling, force=True)
                self._response = self._asked(source, at_ns, at_ns)
        elif frames.response_end is not None and isinstance(frame, frames.response_end):
            response, self._response = self._response, None
            if response is None and self._asked_ns is not None:
                response = self._asked(source, at_ns, None)
                if response is not None:
                    self._settle(self._settling, force=True)
                    response.call_ns = self._first_call_ns
                    self._settling = response
            if response is not None or self._asked_ns is not None:
                # The next answer is asked by a call's result: at it, or at this end when
                # the result came first (the service owes the create: llm.py 1109-1114).
                self._asked_ns = at_ns if self._owed else None
                self._calling = self._owed = False
                self._first_call_ns = None
            if response is not None:
                # Pushed inside Pipecat's handling of response.done (its llm_response span):
                # the step ends with that span, which is then the same call seen twice.
                self.turns.after_handling(at_ns, lambda end: self._handled(response, end))

    def _server_stop(self, source: object, at_ns: int) -> None:
        """The server's turn detection said the caller stopped: the service pushes this as
        its ``speech_stopped`` arrives, and the server asks the answer there. The end of the
        words is that event's ``audio_end_ms`` less the silence the server waited, on the
        audio the input transport pushed."""
        self._settle(self._settling, force=True)
        self._asked_ns = at_ns
        self._first_call_ns = None
        self._asked_by_server = True
        state = self._server_turns.get(id(source))
        if state is None or not state.ends:
            return  # the handler was not wrapped: the turn keeps Pipecat's start
        end_ms = state.ends.popleft()
        if not self._mark_first_output:
            return
        # What the session.updated did not say, the service's settings do.
        settings = getattr(getattr(source, "_settings", None), "session_properties", None)
        silence = state.silence_ms if state.silence_ms is not None else _silence_of(settings)
        semantic = state.semantic if state.semantic is not None else _is_semantic(settings)
        spoken = self._heard_at(end_ms - (SERVER_VAD_SILENCE_MS if silence is None else silence))
        if spoken is not None:
            self._mark_speech_end(spoken, at_ns, SEMANTIC_VAD_START if semantic else None)

    def _listen(self, service: object) -> None:
        """Read what the service's server turn detection says and the service drops: each
        ``speech_stopped``'s ``audio_end_ms`` and the ``session.updated``'s silence, by
        wrapping its handlers of the two (`_SPEECH_STOPPED`, `_SESSION_UPDATED`) on this
        instance. A service without them is left alone."""
        if id(service) in self._server_turns:
            return
        stopped = getattr(service, _SPEECH_STOPPED, None)
        updated = getattr(service, _SESSION_UPDATED, None)
        if not (inspect.iscoroutinefunction(stopped) and inspect.iscoroutinefunction(updated)):
            return
        state = self._server_turns[id(service)] = _ServerTurns()

        async def speech_stopped(event: Any) -> Any:
            with internal_errors("reading a Pipecat realtime speech_stopped"):
                end = getattr(event, "audio_end_ms", None)
                if isinstance(end, int) and not isinstance(end, bool) and end >= 0:
                    state.ends.append(end)
            return await stopped(event)

        async def session_updated(event: Any) -> Any:
            with internal_errors("reading a Pipecat realtime session.updated"):
                session = getattr(event, "session", None)
                state.silence_ms = _silence_of(session)
                state.semantic = _is_semantic(session)
            return await updated(event)

        setattr(service, _SPEECH_STOPPED, speech_stopped)
        setattr(service, _SESSION_UPDATED, session_updated)

    def _hear(self, frame: object, at_ns: int) -> None:
        """One frame of the caller's audio, pushed by the input transport at ``at_ns`` (its
        end): the service appends it to the session's audio as it gets it."""
        playing = _playing_ns(frame)
        if playing > 0:
            self._heard_ms += playing / _NS_PER_MS
            self._heard.append((self._heard_ms, at_ns))

    def _heard_at(self, position_ms: float) -> int | None:
        """The instant the caller said the audio at ``position_ms`` of the session's audio:
        the push of the frame holding it, less the frame's audio after it; None when that
        frame is not among those kept (or not pushed yet)."""
        found: tuple[float, int] | None = None
        for end_ms, pushed in reversed(self._heard):
            if end_ms < position_ms:
                break
            found = (end_ms, pushed)
        else:
            return None  # before the first frame kept, or no frame at all
        if found is None:
            return None  # past the last frame pushed
        end_ms, pushed = found
        return pushed - round((end_ms - position_ms) * _NS_PER_MS)

    def _asked(self, source: object, at_ns: int, first_ns: int | None) -> _Response | None:
        """The answer asked at ``_asked_ns``, in the turn open at ``at_ns``; None when the
        ask is before that turn (an answer the turn did not ask)."""
        turn = self.turns.at(at_ns)
        start_ns = self._asked_ns
        if turn is None or start_ns is None or start_ns < (turn.start_time or 0):
            return None
        return _Response(_model_of(source), start_ns, first_ns, turn)

    def _answered_by_tool(self, at_ns: int) -> None:
        """A realtime service asks its next answer with a call's result: that answer counts
        from the result (the last, when calls run side by side), the tool before it a step
        of its own; from the end of the answer that called, when that came later."""
        if not self._realtime_services or self._response is not None:
            return
        self._settle(self._settling, force=True)
        if self._calling:
            self._owed = True
        else:
            self._asked_ns = at_ns
            self._first_call_ns = None

    def _handled(self, response: _Response, end_ns: int) -> None:
        """Pipecat's handling of the answer's ``response.done`` ended at ``end_ns`` (called
        from its span's end: never raising into it)."""
        with internal_errors("writing a Pipecat realtime answer"):
            response.end_ns = end_ns
            if response.first_ns is not None:  # a spoken answer: its step now
                self._inference(response, end_ns)
            else:
                self._settle(response)

    def _settle(self, response: _Response | None, *, force: bool = False) -> None:
        """Write the step of an answer that called a function once its end is known: its
        ``response.done`` handled, or the start of its first call when that came first (the
        service runs a call at ``response.function_call_arguments.done``, which the server
        sends before ``response.done``: llm.py 1172-1208; the caller's wait goes on in the
        tool from there). ``force``: the next answer was asked, write it as it is."""
        if response is None or response.end_ns is None:
            if response is not None and force:
                self._settling = None  # its handling never ended: no step
            return
        if response.call_ns is None and not force:
            return  # its call may be pushed yet
        if self._settling is response:
            self._settling = None
        end_ns = response.end_ns
        if response.call_ns is not None:
            end_ns = min(end_ns, response.call_ns)
        self._inference(response, end_ns)

    def _inference(self, response: _Response, end_ns: int) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        span = self._tracer.start_span(
            f"{attr.OP_REALTIME} {response.model}",
            context=trace.set_span_in_context(response.turn),
            kind=SpanKind.CLIENT,
            start_time=response.start_ns,
            attributes={
                attr.GEN_AI_OPERATION_NAME: attr.OP_REALTIME,
                attr.GEN_AI_REQUEST_MODEL: response.model,
                attr.STEP_KIND: "inference",
            },
        )
        first = response.first_ns
        if first is not None:  # an answer that called a function spoke no first token
            span.set_attribute(attr.LATENCY_TTFT_MS, (first - response.start_ns) / _NS_PER_MS)
            span.add_event(attr.FIRST_TOKEN_EVENT, timestamp=first)
            end_ns = max(end_ns, first)
        span.end(end_time=max(end_ns, response.start_ns))

    def _speech_end(self, frame: object, at_ns: int) -> None:
        """The VAD's end of the caller's words (its stamp less the silence it waited, as
        Pipecat's user-bot latency counts it) on the turn open at its push; the last stop
        before the turn's first output wins (the caller paused, then went on)."""
        stamp = getattr(frame, "timestamp", None)
        stop_s = getattr(frame, "stop_secs", 0.0) or 0.0
        if not isinstance(stamp, (int, float)) or not isinstance(stop_s, (int, float)):
            return
        end_ns_float = (stamp - stop_s) * 1e9
        if not math.isfinite(end_ns_float):  # a NaN or infinite stamp or silence: no instant
            return
        self._mark_speech_end(round(end_ns_float), at_ns)

    def _mark_speech_end(self, end_ns: int, at_ns: int, unknown: str | None = None) -> None:
        """The end of the caller's words at ``end_ns``, said at ``at_ns``, on the turn open
        then, unless its first output is marked already or it is outside the turn.
        ``unknown``: why that is no known end of the words (rule 16), said on the turn."""
        turn = self.turns.at(at_ns)
        if turn is None or not turn.is_recording() or turn.context.span_id in self._marked:
            return
        start = turn.start_time or end_ns
        if start <= end_ns <= at_ns:
            turn.set_attribute(attr.WORKFLOW_SPEECH_END_MS, (end_ns - start) / _NS_PER_MS)
            if unknown is not None:
                turn.set_attribute(attr.WORKFLOW_START_UNKNOWN, unknown)

    def _first_output(self, turn: Span, at_ns: int) -> None:
        if not turn.is_recording():
            return
        span_id = turn.context.span_id
        if span_id in self._marked:
            return
        self._marked[span_id] = None
        if len(self._marked) > MAX_MARKED:  # turns long ended: none is marked again
            del self._marked[next(iter(self._marked))]
        start = turn.start_time or at_ns
        turn.set_attribute(attr.WORKFLOW_FIRST_OUTPUT_MS, max(at_ns - start, 0) / _NS_PER_MS)
        turn.add_event(attr.FIRST_OUTPUT_EVENT, timestamp=at_ns)


def _silence_of(session: object) -> int | None:
    """The silence a session's server turn detection waits on (its
    ``audio.input.turn_detection``): its ``silence_duration_ms``; else 0 for
    ``semantic_vad`` (its model decides how long: no silence known to take back, and the
    turn says its start is no known end of the words, `SEMANTIC_VAD_START`), as
    ``chainlat.realtime`` reads it; None when the session does not say."""
    detection = _detection_of(session)
    if detection is None:
        return None
    silence = getattr(detection, "silence_duration_ms", None)
    if isinstance(silence, int) and not isinstance(silence, bool) and silence >= 0:
        return silence
    return 0 if getattr(detection, "type", None) == "semantic_vad" else None


def _is_semantic(session: object) -> bool | None:
    """Whether a session's server turn detection is ``semantic_vad``; None when the
    session does not say."""
    detection = _detection_of(session)
    if detection is None:
        return None
    return getattr(detection, "type", None) == "semantic_vad"


def _detection_of(session: object) -> object | None:
    """A session's ``audio.input.turn_detection``; None when off or not said."""
    audio_in = getattr(getattr(session, "audio", None), "input", None)
    detection: object = getattr(audio_in, "turn_detection", None)
    if detection is None or isinstance(detection, bool):
        return None
    return detection


def _model_of(service: object) -> str:
    """The model a Pipecat service was set up with (its settings' ``model``)."""
    model = getattr(getattr(service, "_settings", None), "model", None)
    return model if isinstance(model, str) and model else "realtime"


def _playing_ns(frame: object) -> int:
    """How long a frame of 16-bit PCM (Pipecat's only output format) plays; 0 when its
    audio, rate or channels cannot be read (the frame then marks its push as it is)."""
    audio = getattr(frame, "audio", b"")
    if not isinstance(audio, bytes | bytearray | memoryview):
        return 0
    try:
        rate = int(getattr(frame, "sample_rate", 0) or 0)
        rate *= int(getattr(frame, "num_channels", 1) or 1)
    except (TypeError, ValueError, OverflowError):
        return 0
    return len(audio) * 1_000_000_000 // (2 * rate) if rate > 0 else 0


_observer_type: type | None = None


def observer(
    tracer_provider: TracerProvider | None = None, *, first_output: bool = True
) -> ChainlatObserver:
    """A Pipecat observer (a ``BaseObserver``) adding function calls as tool steps, a
    speech-to-speech service's answers as inference steps, the end of the caller's words as
    each turn's start and the first audio at the output transport as its first output.

    Pass it before the pipeline runs (its span processor joins ``tracer_provider``, default
    the global one, to see Pipecat's turns start). ``first_output=False`` leaves the first
    output to Pipecat's spans (its TTS's first audio, a few ms before the transport plays it).

    Example::

        from chainlat.integrations.pipecat import observer

        task = PipelineTask(pipeline, enable_tracing=True, observers=[observer()])
    """
    global _observer_type
    if _observer_type is None:
        from pipecat.observers.base_observer import (  # type: ignore[import-not-found,unused-ignore]
            BaseObserver,
        )

        class PipecatObserver(ChainlatObserver, BaseObserver):  # type: ignore[misc]
            def __init__(self, provider: TracerProvider | None, mark: bool) -> None:
                BaseObserver.__init__(self, observe_every_push=False)
                ChainlatObserver.__init__(self, provider, first_output=mark)

        _observer_type = PipecatObserver
    made: ChainlatObserver = _observer_type(tracer_provider, first_output)
    return made
