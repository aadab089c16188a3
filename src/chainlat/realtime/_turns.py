"""The turns of a realtime session, read from its events as they pass.

`RealtimeTurns` is fed every event the client sends and receives (a mapping or an SDK
model, with the instant it passed) and makes one chainlat workflow per turn:

- a turn starts where the caller stopped speaking: at the server's
  ``input_audio_buffer.speech_stopped``, whose ``audio_end_ms`` counts the session's audio
  (from the client's first ``input_audio_buffer.append``) and includes the silence the
  VAD waited on (``silence_duration_ms``), so the turn starts at the first append +
  ``audio_end_ms`` - that silence; without server VAD, at the client's
  ``input_audio_buffer.commit`` (or ``response.create`` outside a turn). Under
  ``semantic_vad`` the server waits as long as its model decides, and ``audio_end_ms``
  holds a wait no event states: the turn starts there (less any silence the session
  states) and says its start is no known end of the words
  (``chainlat.workflow.start_unknown``, `chainlat._core.voice.SEMANTIC_VAD_START`);
- the end of the turn was detected on the audio up to ``audio_end_ms``: the server had it
  once the client sent it, at the ``input_audio_buffer.append`` that brought the audio
  sent to that length (each append's length read in the session's input format from the
  length of its base64), or at the ``speech_stopped`` received when the appends seen do
  not reach it; at the turn's start when the client committed. The end-of-turn part of
  the first output's wait runs from the turn's start to there; the round trip after it
  (the audio up, the detection down) is overhead;
- each response is an inference step (operation ``realtime``), from the server's first
  event of it received (the ``speech_stopped`` of a response its VAD makes, else the
  ``response.created``: the round trip of a ``response.create`` is no time of the
  model's) to ``response.done``; its first token, and the turn's first output, is the
  first audio delta received; usage from ``response.done``;
- a function call is a tool step, from the ``response.done`` of the response that made
  it (its ``response.function_call_arguments.done`` comes a moment before) to the
  ``conversation.item.create`` sent with its output;
- the turn ends at the ``response.done`` of a response that calls no tool
  (``completed``), at a barge-in (``speech_started`` or ``conversation.item.truncate``
  during the turn, or a response cancelled: ``interrupted``), at a failed response (an
  error), or when the session closes (``session_closed``);
- after that ``response.done`` the client may still be playing the answer: the turn is
  held (its end stays the ``response.done``) until the client's next word on it. A
  ``conversation.item.truncate`` of the answer's audio at ``audio_end_ms`` short of the
  audio the client received for that item says the caller cut the answer off: the turn
  ends ``interrupted``, there. The next turn's start (``speech_stopped``, a commit, a
  ``response.create``), a truncate at the audio's end, or the session's close end it
  ``completed``, at its ``response.done``. A ``speech_started`` alone does not decide
  it: whether the audio was still playing, only the client knows, and it says so with
  the truncate. Nor is a truncate waited for past :data:`PLAYOUT_SLACK_MS` after the
  audio could have finished playing (each item in real time from its first delta): the
  first event after that (a client streaming its microphone sends appends all along) ends
  the turn ``completed`` too, so that a session left idle exports its last turn.

Only event types, ids, audio positions, tool names, usage and the length of the audio
deltas are read: never the audio, the transcript, the instructions or a tool's
arguments.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from chainlat._core import attributes as attr
from chainlat._core.errors import internal_errors
from chainlat._core.voice import SEMANTIC_VAD_START, SERVER_VAD_SILENCE_MS

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from chainlat._runtime.interface import InferenceHandle, StepHandle, WorkflowHandle

logger = logging.getLogger("chainlat.realtime")

Clock = Callable[[], int]

_AUDIO_DELTAS: Final = frozenset(
    {
        "response.output_audio.delta",
        "response.audio.delta",
        "response.output_text.delta",
        "response.text.delta",
    }
)
"""The first of these in a response is its first output (the audio; text in a text-only
session). Transcript deltas are not: the caller hears the audio."""
_SPOKEN_DELTAS: Final = frozenset({"response.output_audio.delta", "response.audio.delta"})
PCM16_BYTES_PER_MS: Final = 48.0
"""The default audio, PCM16 mono at 24 kHz: bytes per millisecond."""
_G711_BYTES_PER_MS: Final = 8.0
PLAYOUT_SLACK_MS: Final = 2_000
"""How long after a held answer's audio could have finished playing a truncate is still
waited for: a client's jitter buffer, and a playout started late."""
_APPENDS_KEPT: Final = 4096
"""The client's latest appends kept to find when it sent an audio position (80 s of 20 ms
chunks; a turn's end of speech is a moment before its detection)."""


class RealtimeResponseFailed(Exception):
    """A realtime response that ended ``failed`` or ``incomplete`` (its status details'
    type, never its text)."""


def field_of(event: object, key: str) -> Any:
    """``event[key]`` of a mapping or ``event.key`` of an SDK model; None when absent."""
    if isinstance(event, Mapping):
        return event.get(key)
    return getattr(event, key, None)


def _int(value: object) -> int | None:
    return value if type(value) is int else None


@dataclass
class _Turn:
    workflow: WorkflowHandle
    responses: dict[str, InferenceHandle] = field(default_factory=dict)
    """Open responses by id; "" for one asked for (or started) before its id is known."""
    tools: dict[str, StepHandle] = field(default_factory=dict)
    first_output: bool = False
    calls_pending: bool = False
    calls: dict[str, str] = field(default_factory=dict)
    """Function calls whose arguments are done, by call id (their names), waiting for their
    response's ``response.done`` to start as tool steps."""
    audio_ms: dict[str, float] = field(default_factory=dict)
    """The answer's audio received, by item id: milliseconds of playout."""
    done_ns: int | None = None
    """When the answer was done (its last ``response.done``): the turn is held while its
    audio may still play (see the module)."""
    audio_start_ns: dict[str, int] = field(default_factory=dict)
    """When each item's first audio delta came, by item id."""
    played_ns: int = 0
    """The earliest instant the audio received could have finished playing: each item in
    real time from its first delta."""


class RealtimeTurns:
    """One workflow per turn of a realtime session, from its events (see the module).

    Example:
        >>> turns = RealtimeTurns(tracer_provider=provider)  # doctest: +SKIP
        >>> turns.sent({"type": "input_audio_buffer.append", "audio": "..."})  # doctest: +SKIP
        >>> turns.received(event)  # doctest: +SKIP

    Args:
        workflow: The turns' workflow name.
        variant: A configuration label (``chainlat.variant``).
        model: The model, when the session events do not say (they do: ``session.model``).
        provider: ``gen_ai.provider.name`` of the responses.
        tracer_provider: Default: the one ``configure()`` set up.
        clock: The spans' clock (``time.time_ns``, or the one given to ``configure``).
    """

    def __init__(
        self,
        *,
        workflow: str = "realtime-turn",
        variant: str | None = None,
        model: str | None = None,
        provider: str = "openai",
        tracer_provider: TracerProvider | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.workflow_name = workflow
        self.variant = variant
        self.model = model or "unknown"
        self._model_given = model is not None
        self.provider = provider
        self._tracer_provider = tracer_provider
        self._clock = clock or time.time_ns
        self.audio_start_ns: int | None = None
        """When the client sent the session's first audio: the audio clock's zero."""
        self.vad = True
        self.silence_ms = SERVER_VAD_SILENCE_MS
        self.semantic = False
        """The server's turn detection is ``semantic_vad``: a turn's start is no known end of
        the words (`SEMANTIC_VAD_START`)."""
        self.create_response = True
        self.input_bytes_per_ms = PCM16_BYTES_PER_MS
        self.output_bytes_per_ms = PCM16_BYTES_PER_MS
        self._sent_audio_ms = 0.0
        self._appends: deque[tuple[float, int]] = deque(maxlen=_APPENDS_KEPT)
        """(the session's audio sent, in ms, after an append; when it was sent)."""
        self._turn: _Turn | None = None
        self._last_ns = 0

    # -- the doors ---------------------------------------------------------------------

    def now(self) -> int:
        """The span clock's now."""
        return self._clock()

    def sent(self, event: object, now_ns: int | None = None) -> None:
        """An event the client sent (``now_ns``: when, on the span clock; default now)."""
        with internal_errors("tracing a realtime client event"):
            self._sent(event, self._in_order(now_ns))

    def received(self, event: object, now_ns: int | None = None) -> None:
        """An event the client received."""
        with internal_errors("tracing a realtime server event"):
            self._received(event, self._in_order(now_ns))

    def _in_order(self, now_ns: int | None) -> int:
        """The instant an event is taken at: never before one already taken. A send is
        stamped before the SDK's await, during which the receiving task may hand over a
        later event (a speech_stopped starting a turn): a truncate then stamped earlier
        would end the turn before it began."""
        now = self._clock() if now_ns is None else now_ns
        self._last_ns = max(now, self._last_ns)
        return self._last_ns

    def closed(self, now_ns: int | None = None) -> None:
        """The session ended: an open turn ends ``session_closed``."""
        with internal_errors("ending a realtime turn"):
            if self._turn is not None and not self._release_held():
                self._end_turn(self._in_order(now_ns), "session_closed")

    # -- client events -----------------------------------------------------------------

    def _sent(self, event: object, now: int) -> None:
        self._release_heard(now)
        kind = field_of(event, "type")
        if kind == "input_audio_buffer.append":
            if self.audio_start_ns is None:
                self.audio_start_ns = now
            size = _decoded_size(field_of(event, "audio"))
            if size:
                self._sent_audio_ms += size / self.input_bytes_per_ms
                self._appends.append((self._sent_audio_ms, now))
        elif kind == "input_audio_buffer.commit":
            self._release_held()
            if self._turn is None:
                self._start_turn(now, now)
        elif kind == "response.create":
            # The response step starts at its response.created, the server's answer: the
            # request's round trip before it is no time of the model's (docs/voice.md).
            self._release_held()
            if self._turn is None:
                self._start_turn(now, now)
        elif kind == "conversation.item.create":
            item = field_of(event, "item")
            if field_of(item, "type") == "function_call_output" and self._turn is not None:
                call_id = str(field_of(item, "call_id"))
                name = self._turn.calls.pop(call_id, None)
                if name is not None:  # answered before its response was done
                    self._turn.tools[call_id] = self._start_tool(self._turn, name, now)
                tool = self._turn.tools.pop(call_id, None)
                if tool is not None:
                    self._finish(tool, now)
        elif kind == "conversation.item.truncate":
            turn = self._turn
            if turn is not None and turn.done_ns is not None:
                self._truncated_after_done(turn, event, now)
            elif turn is not None:
                self._end_turn(now, "interrupted")
        elif kind == "session.update":
            self._read_session(field_of(event, "session"), from_server=False)

    # -- server events -----------------------------------------------------------------

    def _received(self, event: object, now: int) -> None:
        self._release_heard(now)
        kind = field_of(event, "type")
        turn = self._turn
        if kind in _AUDIO_DELTAS:
            if turn is not None and turn.done_ns is None:
                self._first_output(turn, str(field_of(event, "response_id") or ""), now)
                if kind in _SPOKEN_DELTAS:
                    self._count_audio(turn, event, now)
        elif kind == "input_audio_buffer.speech_stopped":
            if turn is not None and not self._release_held():
                self._end_turn(now, "interrupted")
            end_ms = _int(field_of(event, "audio_end_ms"))
            start = now
            if end_ms is not None and self.audio_start_ns is not None:
                spoken_ms = max(end_ms - self.silence_ms, 0)
                start = min(self.audio_start_ns + spoken_ms * 1_000_000, now)
            # The detection fired on the audio up to audio_end_ms: the server had it once
            # the client sent it, and the rest of the wait is the wire's and the server's.
            sent = self._sent_at(end_ms) if end_ms is not None else None
            detected = now if sent is None else min(max(sent, start), now)
            turn = self._start_turn(start, detected)
            if turn is not None and self.semantic:
                turn.workflow.set_attribute(attr.WORKFLOW_START_UNKNOWN, SEMANTIC_VAD_START)
            if turn is not None and self.create_response:
                self._start_response(turn, now)
        elif kind == "input_audio_buffer.speech_started":
            if turn is not None and turn.done_ns is None:
                self._end_turn(now, "interrupted")
        elif kind == "response.created":
            response_id = str(field_of(field_of(event, "response"), "id") or "")
            if turn is not None and self._release_held():
                turn = None
            if turn is None:
                turn = self._start_turn(now, now)
            if turn is not None:
                handle = turn.responses.pop("", None)
                if handle is None and response_id not in turn.responses:
                    handle = self._start_response(turn, now, key=None)
                if handle is not None:
                    turn.responses[response_id] = handle
                    handle.set_attribute(attr.GEN_AI_RESPONSE_ID, response_id)
        elif kind == "response.function_call_arguments.done":
            if turn is not None:
                name = str(field_of(event, "name") or "function")
                turn.calls[str(field_of(event, "call_id"))] = name
                turn.calls_pending = True
        elif kind == "response.done":
            if turn is not None and turn.done_ns is None:
                self._response_done(turn, field_of(event, "response"), now)
        elif kind in ("session.created", "session.updated"):
            self._read_session(field_of(event, "session"), from_server=True)

    def _response_done(self, turn: _Turn, response: object, now: int) -> None:
        response_id = str(field_of(response, "id") or "")
        handle = turn.responses.pop(response_id, None) or turn.responses.pop("", None)
        status = field_of(response, "status")
        error: Exception | None = None
        if status in ("failed", "incomplete"):
            details = field_of(response, "status_details")
            reason = field_of(details, "reason") or field_of(details, "type") or status
            error = RealtimeResponseFailed(f"realtime response {status}: {reason}")
        if handle is not None:
            self._record_usage(handle, field_of(response, "usage"))
            self._finish(handle, now, error)
        # The calls start as the response that made them ends: their arguments are done a
        # moment before its response.done, and a tool step overlapping the response would
        # leave the response off the first output's critical path.
        for call_id, name in turn.calls.items():
            turn.tools[call_id] = self._start_tool(turn, name, now)
        turn.calls.clear()
        if status == "cancelled":
            self._end_turn(now, "interrupted")
        elif error is not None:
            self._end_turn(now, None, error)
        elif not turn.responses:
            output = field_of(response, "output") or ()
            called = turn.calls_pending or any(
                field_of(item, "type") == "function_call" for item in output
            )
            turn.calls_pending = False
            if not called and not turn.tools:
                turn.done_ns = now  # held while the answer may still play

    def _sent_at(self, audio_ms: int) -> int | None:
        """When the client sent the session's audio up to ``audio_ms`` (its append that
        reached it); None when the appends kept do not say."""
        found = None
        for reached_ms, sent_ns in reversed(self._appends):
            if reached_ms < audio_ms:
                break
            found = sent_ns
        appends = self._appends
        if found is None or (len(appends) == appends.maxlen and appends[0][0] >= audio_ms):
            return None  # past the audio sent, or maybe before the appends kept
        return found

    def _count_audio(self, turn: _Turn, event: object, now: int) -> None:
        """Add an audio delta's playout time to its item's, from the length of its base64
        (never decoded: the audio is not read)."""
        size = _decoded_size(field_of(event, "delta"))
        if size is None:
            return
        item = str(field_of(event, "item_id") or "")
        played_ms = turn.audio_ms.get(item, 0.0) + size / self.output_bytes_per_ms
        turn.audio_ms[item] = played_ms
        start = turn.audio_start_ns.setdefault(item, now)
        turn.played_ns = max(turn.played_ns, start + round(played_ms * 1_000_000))

    def _truncated_after_done(self, turn: _Turn, event: object, now: int) -> None:
        """A truncate of a held turn's answer: ``interrupted`` when it cuts the audio the
        client received short (by a millisecond or more), else the answer was heard out; a
        truncate of an item this answer gave no audio for is not about it."""
        end_ms = _int(field_of(event, "audio_end_ms"))
        received_ms = turn.audio_ms.get(str(field_of(event, "item_id") or ""))
        if received_ms is None:
            return  # not this answer's audio
        if end_ms is not None and end_ms + 1 > received_ms:
            self._release_held()
        else:
            turn.done_ns = None
            self._end_turn(now, "interrupted")

    def _release_heard(self, now: int) -> None:
        """End a held turn ``completed`` when ``now`` is :data:`PLAYOUT_SLACK_MS` past the
        instant its audio could have finished playing: no truncate is waited for any more."""
        turn = self._turn
        if turn is None or turn.done_ns is None:
            return
        if now - max(turn.done_ns, turn.played_ns) >= PLAYOUT_SLACK_MS * 1_000_000:
            self._release_held()

    def _release_held(self) -> bool:
        """End a held turn ``completed`` at its ``response.done``; whether there was one."""
        turn = self._turn
        if turn is None or turn.done_ns is None:
            return False
        self._end_turn(turn.done_ns, "completed")
        return True

    # -- session settings --------------------------------------------------------------

    def _read_session(self, session: object, *, from_server: bool) -> None:
        if session is None:
            return
        model = field_of(session, "model")
        if from_server and isinstance(model, str) and model and not self._model_given:
            self.model = model
        self._read_formats(session)
        audio_in = field_of(field_of(session, "audio"), "input")
        missing = object()
        detection: object = missing
        if audio_in is not None and _has(audio_in, "turn_detection"):
            detection = field_of(audio_in, "turn_detection")
        elif _has(session, "turn_detection"):
            detection = field_of(session, "turn_detection")
        if detection is missing:
            return
        if detection is None:
            self.vad = False
            return
        self.vad = True
        kind = field_of(detection, "type")
        if isinstance(kind, str):
            self.semantic = kind == "semantic_vad"
        silence = _int(field_of(detection, "silence_duration_ms"))
        if silence is not None:
            self.silence_ms = silence  # semantic_vad waits at least that too
        elif self.semantic:
            self.silence_ms = 0  # the model decides how long: no silence known to take back
        create = field_of(detection, "create_response")
        if isinstance(create, bool):
            self.create_response = create

    def _read_formats(self, session: object) -> None:
        """The audio formats' bytes per millisecond: GA ``audio.input.format`` and
        ``audio.output.format``, or the beta's ``input_audio_format`` and
        ``output_audio_format`` (see `_bytes_per_ms`)."""
        audio = field_of(session, "audio")
        for direction in ("input", "output"):
            fmt = field_of(field_of(audio, direction), "format")
            if fmt is None:
                fmt = field_of(session, f"{direction}_audio_format")
            rate = _bytes_per_ms(fmt)
            if rate is not None:
                setattr(self, f"{direction}_bytes_per_ms", rate)

    # -- spans -------------------------------------------------------------------------

    def _start_turn(self, start_ns: int, detected_ns: int) -> _Turn | None:
        """Open a turn that started at ``start_ns`` (the end of the caller's words, a
        moment ago or now), its end detected at ``detected_ns``."""
        from chainlat._runtime.interface import mark_end_of_turn
        from chainlat._runtime.spans import workflow

        spec = workflow(
            self.workflow_name,
            variant=self.variant,
            started_at_ns=start_ns,
            tracer_provider=self._tracer_provider,
        )
        self._turn = _Turn(spec.start())
        mark_end_of_turn(self._turn.workflow, detected_ns)
        return self._turn

    def _child(self, turn: _Turn, start: Callable[[], Any]) -> Any:
        from opentelemetry import context, trace

        token = context.attach(trace.set_span_in_context(turn.workflow.span))
        try:
            return start()
        finally:
            context.detach(token)

    def _start_response(
        self, turn: _Turn, now: int, key: str | None = ""
    ) -> InferenceHandle | None:
        from chainlat._runtime.interface import start_step_at
        from chainlat._runtime.spans import inference

        spec = inference(
            self.model,
            provider=self.provider,
            operation=attr.OP_REALTIME,
            user_facing=True,
            tracer_provider=self._tracer_provider,
        )
        handle: InferenceHandle = self._child(turn, lambda: start_step_at(spec, now))
        if key is not None:
            turn.responses[key] = handle
        return handle

    def _start_tool(self, turn: _Turn, name: str, now: int) -> StepHandle:
        from chainlat._runtime.interface import start_step_at
        from chainlat._runtime.spans import tool

        handle: StepHandle = self._child(
            turn, lambda: start_step_at(tool(name, tracer_provider=self._tracer_provider), now)
        )
        return handle

    def _first_output(self, turn: _Turn, response_id: str, now: int) -> None:
        handle = turn.responses.get(response_id) or turn.responses.get("")
        if handle is None and turn.responses:
            handle = next(iter(turn.responses.values()))
        if handle is not None:
            handle.first_token(at_ns=now)
        if not turn.first_output:
            turn.first_output = True
            turn.workflow.first_output(at_ns=now)

    @staticmethod
    def _record_usage(handle: InferenceHandle, usage: object) -> None:
        if usage is None:
            return
        handle.record_usage(
            _int(field_of(usage, "input_tokens")), _int(field_of(usage, "output_tokens"))
        )
        for details, key in (
            ("input_token_details", attr.GEN_AI_USAGE_AUDIO_INPUT_TOKENS),
            ("output_token_details", attr.GEN_AI_USAGE_AUDIO_OUTPUT_TOKENS),
        ):
            audio = _int(field_of(field_of(usage, details), "audio_tokens"))
            if audio is not None:
                handle.set_attribute(key, audio)

    @staticmethod
    def _finish(handle: StepHandle, now: int, error: Exception | None = None) -> None:
        from chainlat._runtime.interface import finish_step

        finish_step(handle, error, end_ns=now)

    def _end_turn(self, now: int, reason: str | None, error: Exception | None = None) -> None:
        turn, self._turn = self._turn, None
        if turn is None:
            return
        for handle in [*turn.tools.values(), *turn.responses.values()]:
            self._finish(handle, now)
        if reason is not None:
            turn.workflow.end_reason(reason)
        self._finish(turn.workflow, now, error)


def _decoded_size(audio: object) -> int | None:
    """The bytes a base64 string decodes to, from its length (the audio is not decoded)."""
    if not isinstance(audio, str):
        return None
    padding = len(audio) - len(audio.rstrip("="))
    return len(audio) * 3 // 4 - padding


def _bytes_per_ms(fmt: object) -> float | None:
    """Bytes per millisecond of an audio format: GA ``{"type": "audio/pcm", "rate": 24000}``,
    ``audio/pcmu``, ``audio/pcma``, or the beta's ``pcm16``, ``g711_ulaw``, ``g711_alaw``."""
    kind = fmt if isinstance(fmt, str) else field_of(fmt, "type")
    if kind in ("audio/pcm", "pcm16"):
        rate = None if isinstance(fmt, str) else _int(field_of(fmt, "rate"))
        return (rate or 24_000) * 2 / 1000
    if kind in ("audio/pcmu", "audio/pcma", "g711_ulaw", "g711_alaw"):
        return _G711_BYTES_PER_MS
    return None


def _has(value: object, key: str) -> bool:
    if isinstance(value, Mapping):
        return key in value
    fields = getattr(value, "model_fields_set", None)
    if isinstance(fields, set):
        return key in fields
    return hasattr(value, key)
