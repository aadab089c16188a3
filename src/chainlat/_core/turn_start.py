"""Where a voice turn starts: the end of the caller's words, whoever wrote the trace.

What a caller waits for is the time from the end of their words to the first sound of the
answer (docs/voice.md). A framework opens its turn span elsewhere: Pipecat's ``turn`` when
the caller *starts* speaking, LiveKit's ``agent_turn`` after the end-of-turn wait (482 to
591 ms after the caller stopped, in the runs of docs/voice.md). Each rule below finds the
end of the words in what the framework wrote, and the instant it decided the turn was over
when the trace says so (the end-of-turn wait between them is a part of the first output's
split, `chainlat._core.voice.end_of_turn_cut`). chainlat's own turns need no rule: the
workflow span starts at ``user_stopped_speaking()`` or ``started_at_ns=`` already.

- **LiveKit Agents** (livekit-agents 1.8.9): the end of the last ``user_speaking`` span of
  the turn, the caller's speech ended at the VAD's end of speech backdated by the silence
  it waited on (voice/agent_session.py 2263-2284, fed by voice/agent_activity.py
  2469-2488); the turn's ``user_speaking`` is the last one to start before the
  ``agent_turn`` opens and to end after the turn before it opened (a caller speaking over
  an answer starts the next turn). The decision: the end of the ``eou_wait`` span
  (voice/audio_recognition.py 2133-2180, ended ``committed`` at 1881) started within
  that speech or after it, else the ``agent_turn``'s opening. With a realtime model
  (``AgentSession(llm=RealtimeModel(...))``) the same rule holds when the session has a
  VAD of its own: ``user_speaking`` is then the VAD's, backdated as above, while the
  server's ``speech_started`` / ``speech_stopped`` only interrupt and commit
  (voice/agent_activity.py 2258-2290), and the server's turn detection opens the turn (its
  ``realtime_inference``, 4339): the decision is then never after the ``agent_turn``'s
  opening. Without one, ``user_speaking`` ends when the server's
  ``input_audio_buffer.speech_stopped`` is received (2282-2290, no ``last_speaking_time``;
  the plugin drops its ``audio_end_ms``: llm/_realtime/openai.py 1907-1914), after the
  server VAD's silence and the audio's transit, which no span records (324-366 ms after
  the words with a 300 ms silence, in the runs of tests/interop/README.md). Such a
  ``user_speaking`` hangs from the ``agent_session``, a VAD's from the ``user_turn`` it
  opened (voice/audio_recognition.py 1455-1464, 2080-2090): the turn then starts there,
  and says its start is no end of the words (``TurnStart.unknown_start``), so that what
  counts from it is a lower bound (docs/attributes.md, rule 16).
- **Pipecat** (pipecat-ai 1.14.0): the end of the turn's last ``stt`` span less its
  ``metrics.ttfb``. Pipecat's STT time to first byte counts from the VAD's stop less
  ``stop_secs`` (services/stt_service.py 636-644: "the actual speech end time"), as its
  ``turn.user_bot_latency_seconds`` does (observers/user_bot_latency_observer.py 648-653),
  to the finalized transcript (stt_service.py 529-541), and the span ends on that
  transcript (utils/tracing/service_decorators.py 755-760). With ``stop_secs = 0`` Pipecat
  measures no STT time to first byte (stt_service.py 637-638): the turn then starts where
  Pipecat opened it, and says so (``TurnStart.unknown_start``). No span says when the VAD
  stopped: the wait for it stays in the speech-to-text part, as Pipecat counts it.
  chainlat's Pipecat observer (``chainlat.integrations.pipecat``) writes that instant on
  the turn (``chainlat.workflow.speech_end_ms``: the VAD's stop less ``stop_secs``, what
  ``turn.user_bot_latency_seconds`` counts from): its mark wins, and it is the only one a
  speech-to-speech turn has (``OpenAIRealtimeLLMService``: no ``stt`` span). In such a
  turn the decision is the start of the observer's first answer step (``realtime
  {model}``): the ``UserStoppedSpeakingFrame`` the service asked at, once Pipecat's user
  aggregator decided the caller had finished. Without the observer's mark such a turn
  keeps Pipecat's start, the caller's first word, and says so: what counts from it holds
  their speech (a bound, docs/attributes.md, rule 16).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from chainlat._core import attributes as attr
from chainlat._core.records import SpanRecord

_NS_PER_MS: Final = 1_000_000
_LIVEKIT_REALTIME_INFERENCE: Final = "realtime_inference"
"""A realtime model's response under LiveKit's ``agent_turn`` (voice/agent_activity.py 4339)."""
_PIPECAT_REALTIME_RESPONSE: Final = "llm_response"
"""A speech-to-speech service's handling of ``response.done`` under Pipecat's ``turn``
(utils/tracing/service_decorators.py 1413-1449): the turn was spoken, with no ``stt``."""
_LIVEKIT_USER_TURN: Final = "user_turn"
"""The caller's turn as LiveKit's audio recognition saw it, opened by a VAD's or an STT's
start of speech (voice/audio_recognition.py 2080-2090); its ``user_speaking`` hangs from it."""


@dataclass(frozen=True, slots=True)
class TurnStart:
    """The end of the caller's words, and the instant the turn was decided if known."""

    speech_end_ns: int
    end_of_turn_ns: int | None
    """When the framework decided the caller had finished; None when the trace does not
    say (the end-of-turn wait is then not split out)."""
    rule: str
    """Which rule found it: ``livekit.user_speaking``, ``pipecat.observer``,
    ``pipecat.stt_ttfb``."""
    unknown_start: str | None = None
    """Why ``speech_end_ns`` is not the end of the words, which the trace does not hold
    (the run's `WorkflowRun.unknown_start`); None when it is the end of the words."""


class _Span(Protocol):
    """What the rules read of a span: its record and its attributes (a ``TracedSpan``)."""

    @property
    def record(self) -> SpanRecord: ...
    @property
    def attributes(self) -> Mapping[str, object]: ...


MAX_WHY_CHARS: Final = 300
"""The most of a turn's own word on its start (``chainlat.workflow.start_unknown``) kept."""


def said_unknown_start(attributes: Mapping[str, object]) -> str | None:
    """Why a turn's start is no known end of the caller's words, when what placed it said so
    on the span (``chainlat.workflow.start_unknown``: ``chainlat.realtime`` and chainlat's
    Pipecat observer under a server's ``semantic_vad``); None when it did not."""
    why = attributes.get(attr.WORKFLOW_START_UNKNOWN)
    if not isinstance(why, str) or not why.strip():
        return None
    return why[:MAX_WHY_CHARS]


def is_voice_turn(record: SpanRecord, attributes: Mapping[str, object]) -> bool:
    """Whether a run root is a framework's voice turn that a rule here may move."""
    if record.name == attr.LIVEKIT_AGENT_TURN_SPAN:
        return True
    return record.name == attr.PIPECAT_TURN_SPAN and attr.PIPECAT_TURN_NUMBER in attributes


def backdated_on_purpose(child: _Span, parent: _Span) -> bool:
    """Whether a span that starts before its parent was started there by its framework on
    purpose, not by a skewed clock: Pipecat's ``stt`` starts at the start of the caller's
    speech (its VAD's ``start_secs`` before the VAD said so: utils/tracing/
    service_decorators.py 632-640, 676-679), the turn it belongs to opens when the turn
    tracker hears of that speech, a few ms later. And a framework's voice turn inside the
    application's workflow (docs/voice.md, "Wrapped"): the workflow starts at the end of the
    caller's words (``user_stopped_speaking()``), the framework's turn when they started
    speaking. The rollup clips such a child to its parent as any child (docs/voice.md, "A
    turn"); the readers do not call it clock skew."""
    if child.record.name == attr.PIPECAT_STT_SPAN:
        return (
            parent.record.name == attr.PIPECAT_TURN_SPAN
            and attr.PIPECAT_TURN_NUMBER in parent.attributes
        )
    return is_voice_turn(child.record, child.attributes) and parent.record.kind == "workflow"


def turn_start(
    turn: _Span, spans: Iterable[_Span], children: Mapping[int, Sequence[_Span]]
) -> TurnStart | None:
    """Where the voice turn rooted at ``turn`` starts, by its framework's rule; None when no
    rule applies or the trace does not say. ``spans``: every span of the trace;
    ``children``: them by parent id."""
    rec = turn.record
    if rec.name == attr.LIVEKIT_AGENT_TURN_SPAN:
        return _livekit(rec, spans)
    if rec.name == attr.PIPECAT_TURN_SPAN and attr.PIPECAT_TURN_NUMBER in turn.attributes:
        return _pipecat(rec, turn.attributes, children.get(rec.span_id, ()))
    return None


def _livekit(turn: SpanRecord, spans: Iterable[_Span]) -> TurnStart | None:
    speaking: list[SpanRecord] = []
    waits: list[SpanRecord] = []
    user_turns: set[int] = set()  # the user_turn spans: a VAD's (or an STT's) speech
    before = None  # the start of the agent turn before this one
    realtime = False  # the turn answered by a realtime model (its realtime_inference)
    for span in spans:
        rec = span.record
        if rec.parent_id == turn.span_id and rec.name == _LIVEKIT_REALTIME_INFERENCE:
            realtime = True
        elif rec.name == _LIVEKIT_USER_TURN:
            user_turns.add(rec.span_id)
        elif rec.name == attr.LIVEKIT_USER_SPEAKING_SPAN:
            speaking.append(rec)
        elif rec.name == attr.LIVEKIT_EOU_WAIT_SPAN:
            # Not asked whether it ended "committed" (the trace readers keep no such key):
            # a wait ended by the caller resuming started before the speech that resumed.
            waits.append(rec)
        elif (
            rec.name == attr.LIVEKIT_AGENT_TURN_SPAN
            and rec.start_ns < turn.start_ns
            and (before is None or rec.start_ns > before)
        ):
            before = rec.start_ns
    mine = [
        s
        for s in speaking
        if s.start_ns < turn.start_ns
        and s.end_ns <= turn.end_ns
        and (before is None or s.end_ns > before)
    ]
    if not mine:
        return None
    speech = max(mine, key=lambda s: (s.start_ns, s.end_ns))
    decided = [w.end_ns for w in waits if speech.start_ns <= w.start_ns <= turn.start_ns]
    end_of_turn = max(decided) if decided else turn.start_ns
    unknown = None
    if realtime:
        # The server's turn detection answered: LiveKit's own endpointing, still waiting when
        # the agent turn opened, did not decide it (its eou_wait ended 135 ms after, in the
        # runs of tests/interop/README.md).
        end_of_turn = min(end_of_turn, turn.start_ns)
        if speech.parent_id not in user_turns:
            unknown = (
                "LiveKit ended the caller's speech when the server's speech_stopped arrived "
                "(no VAD of the session's own): after the server's silence and the audio's "
                "transit, which the trace does not hold"
            )
    return TurnStart(
        speech.end_ns, max(end_of_turn, speech.end_ns), "livekit.user_speaking", unknown
    )


def _pipecat(
    turn: SpanRecord, attributes: Mapping[str, object], kids: Iterable[_Span]
) -> TurnStart | None:
    marked = attributes.get(attr.WORKFLOW_SPEECH_END_MS)
    if isinstance(marked, (int, float)) and not isinstance(marked, bool):
        speech_end = turn.start_ns + round(marked * _NS_PER_MS) if math.isfinite(marked) else -1
        if turn.start_ns <= speech_end <= turn.end_ns:
            return TurnStart(speech_end, _pipecat_asked(speech_end, kids), "pipecat.observer")
    last: SpanRecord | None = None
    heard = spoke = False  # an stt span; a speech-to-speech service's llm_response
    for span in kids:
        rec = span.record
        heard = heard or rec.name == attr.PIPECAT_STT_SPAN
        spoke = spoke or rec.name == _PIPECAT_REALTIME_RESPONSE
        if (
            rec.name == attr.PIPECAT_STT_SPAN
            and rec.ttft_ms is not None
            and (last is None or rec.end_ns > last.end_ns)
        ):
            last = rec
    if last is None or last.ttft_ms is None:
        if heard:
            why = "its STT measured no time to first byte (stop_secs = 0)"
        elif spoke:
            why = "its speech-to-speech service writes no stt span (chainlat's observer marks it)"
        else:
            return None  # a turn of text: it starts where it was asked
        return TurnStart(
            turn.start_ns,
            None,
            "pipecat.turn",
            "Pipecat opened the turn when the caller started speaking (the first at the "
            f"pipeline's start), and no span says where they stopped: {why}",
        )
    speech_end = last.end_ns - round(last.ttft_ms * _NS_PER_MS)
    if not last.start_ns <= speech_end <= last.end_ns:
        return None  # a time to first byte longer than the span: not this span's speech
    return TurnStart(speech_end, None, "pipecat.stt_ttfb")


def _pipecat_asked(speech_end: int, kids: Iterable[_Span]) -> int | None:
    """When Pipecat decided the caller had finished, in a speech-to-speech turn: the start of
    the observer's first answer step (``realtime {model}``), which starts at the
    ``UserStoppedSpeakingFrame`` the service asked at; None in a turn with no such step, or
    when another span of the turn started between the end of the words and it (an earlier
    observer wrote no step for an answer that called a function: its first step then
    starts at a call's result, after the tool, long after the decision)."""
    asked: int | None = None
    others: int | None = None
    for span in kids:
        start = span.record.start_ns
        if start < speech_end:
            continue
        if span.attributes.get(attr.GEN_AI_OPERATION_NAME) == attr.OP_REALTIME:
            asked = start if asked is None else min(asked, start)
        else:
            others = start if others is None else min(others, start)
    if asked is None or (others is not None and others < asked):
        return None
    return asked
