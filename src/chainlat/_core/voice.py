"""Voice turns: the rollup's split of model time by speech operation, and turn outcomes.

A cascade voice agent spends a turn in speech to text, a language model and text to
speech. The rollup gives each instant of the critical path to the innermost step
covering it (`chainlat._core.rollup`); here the instants given to model calls are split
again by the call's ``gen_ai.operation.name``, for the whole turn and for the wait for
the first output (the first audio byte of the user-facing ``text_to_speech`` call).
The speech parts are parts of ``inference_ms``: ``inference - speech_to_text -
text_to_speech`` is the language model's share. See docs/voice.md.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Final, Protocol, Self, TypeVar

from chainlat._core import attributes as attr
from chainlat._core import conventions


class _Record(Protocol):
    @property
    def operation(self) -> str | None: ...


class _Node(Protocol):
    @property
    def rec(self) -> _Record: ...
    @property
    def attribution(self) -> str: ...
    @property
    def owner(self) -> _Node | None: ...
    @property
    def enclosing(self) -> _Node | None: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def kids(self) -> list[Self]: ...


N = TypeVar("N", bound=_Node)


SERVER_VAD_SILENCE_MS: Final = 500
"""OpenAI Realtime's default ``silence_duration_ms`` for ``server_vad``: the silence its
turn detection waits on, which its ``speech_stopped``'s ``audio_end_ms`` includes."""

SEMANTIC_VAD_START: Final = (
    "the server's semantic_vad decided the caller had finished after a wait its model "
    "chose (up to 8 s), which its speech_stopped's audio_end_ms holds and no event says"
)
"""Why a turn started from a ``semantic_vad`` ``speech_stopped`` is no known end of the
caller's words: OpenAI's ``server_vad`` waits a fixed silence, which ``audio_end_ms``
includes and which is taken back; ``semantic_vad`` "dynamically sets a timeout" (the
Realtime API reference: 8, 4 and 2 s at most for its eagerness ``low``, ``medium`` and
``high``), and what of it ``audio_end_ms`` holds is not said. The turn starts at
``audio_end_ms`` less any silence the session states (a start too late) and says so
(``chainlat.workflow.start_unknown``, docs/attributes.md rule 16)."""

UNKNOWN_START_QUANTITIES: Final = frozenset(
    {
        "total",
        "overhead",
        "first_output",
        "first_output_split",
        "first_output_speech_to_text",
        "first_output_text_to_speech",
        "first_output_end_of_turn",
    }
)
"""What a voice turn whose start is later than the end of the caller's words
(``WorkflowRun.unknown_start``) only bounds: the time from its start (its total, the first
output and the wait's parts) and the overhead before its first step."""

SPEECH_QUANTITIES: Final = (
    "speech_to_text",
    "text_to_speech",
    "first_output_speech_to_text",
    "first_output_text_to_speech",
    "first_output_end_of_turn",
)
"""Quantities of voice runs: the critical-path time in each speech operation, for the whole
run and for the wait for the first output, and the wait for the end of the caller's turn to
be detected (`end_of_turn_cut`)."""


def speech_ms(rollup: object, quantity: str) -> float | None:
    """A `SPEECH_QUANTITIES` value of a rollup; None for a run without speech calls."""
    value = getattr(rollup, quantity + "_ms", None)
    return value if isinstance(value, float) else None


def has_speech(calls: Iterable[_Node]) -> bool:
    """Whether any counted model call is a speech call."""
    return any(node.rec.operation in attr.SPEECH_OPERATIONS for node in calls)


def speech_split(segments: Iterable[tuple[_Node, int, int]]) -> dict[str, int]:
    """Nanoseconds of the critical-path ``segments`` spent in each speech operation."""
    out = dict.fromkeys(attr.SPEECH_OPERATIONS, 0)
    for node, start, end in segments:
        if node.attribution != "inference":
            continue
        owner = node.owner
        operation = owner.rec.operation if owner is not None else None
        if operation in out:
            assert operation is not None
            out[operation] += end - start
    return out


def fill_model_gaps(
    segments: list[tuple[N, int, int]], calls: Iterable[N]
) -> list[tuple[N, int, int]]:
    """The critical path with its overhead given to the model calls running through it.

    The walk of the critical path takes, before a step, the sibling that *ended* before
    the step started. A text-to-speech call started on the model's first sentence starts
    while the model still streams: nothing ended before it, and the walk would call the
    time the model spent writing that sentence overhead. In a run with a speech call, an
    overhead stretch of the path that a model call beside it (the same step around
    both) was running through is that call's time, the latest-started call's where
    several ran; the path goes through it. Runs without speech calls are not changed.
    """
    # A call timed at the wire counts as inference only inside its wire span (the client's
    # time around it is the kind around): that span covers the gap, as the call's.
    models: list[tuple[N, _Node | None]] = []
    for call in calls:
        if call.attribution == "inference":
            models.append((call, call.enclosing))
        else:
            models.extend(
                (kid, call.enclosing) for kid in call.kids if kid.attribution == "inference"
            )
    out: list[tuple[N, int, int]] = []
    for node, start, end in segments:
        if node.attribution != "overhead":
            out.append((node, start, end))
            continue
        around = node.owner
        covering = [c for c, outer in models if outer is around and c.start < end and c.end > start]
        if not covering:
            out.append((node, start, end))
            continue
        cuts = sorted(
            {start, end, *(t for c in covering for t in (c.start, c.end) if start < t < end)}
        )
        for low, high in itertools.pairwise(cuts):
            running = [c for c in covering if c.start <= low and c.end >= high]
            piece = max(running, key=lambda c: c.start) if running else node
            if out and out[-1][0] is piece and out[-1][2] == low:
                out[-1] = (piece, out[-1][1], high)
            else:
                out.append((piece, low, high))
    return out


def end_of_turn_cut(
    path: list[tuple[N, int, int]], top: N, committed_ns: int
) -> tuple[list[tuple[N, int, int]], int]:
    """The wait for the first output with its stretch before ``committed_ns`` given to the
    run itself (overhead), and that stretch's length: the end-of-turn wait.

    The run starts where the caller stopped speaking; the framework answers only once it
    has decided they finished (endpointing: a VAD's silence, an end-of-utterance model),
    at ``committed_ns``. Whatever a span of the turn did before that instant (Pipecat's
    ``stt`` opens when the caller starts speaking; LiveKit can start a reply early) did not
    bring the answer closer than the decision: the caller waited for the decision. The
    stretch is overhead, ``first_output_end_of_turn_ms`` names it (a part of
    ``first_output_overhead_ms``, as the speech parts are parts of the inference time).
    ``path``: the wait's segments, in time order, end to end from the run's start.
    """
    if not path or committed_ns <= path[0][1]:
        return path, 0
    start = path[0][1]
    out: list[tuple[N, int, int]] = [(top, start, min(committed_ns, path[-1][2]))]
    for node, low, high in path:
        if high <= committed_ns:
            continue
        out.append((node, max(low, committed_ns), high))
    return out, out[0][2] - start


_OPERATIONS: Final = {
    attr.OP_SPEECH_TO_TEXT: attr.OP_SPEECH_TO_TEXT,
    attr.OP_TEXT_TO_SPEECH: attr.OP_TEXT_TO_SPEECH,
    "stt": attr.OP_SPEECH_TO_TEXT,  # Pipecat's service spans
    "tts": attr.OP_TEXT_TO_SPEECH,
}


def operation_of(attributes: Mapping[str, object]) -> str | None:
    """``gen_ai.operation.name`` of a model call, with Pipecat's ``stt`` and ``tts`` read as
    the conventions' ``speech_to_text`` and ``text_to_speech``, and LiveKit's ``tts_node``
    as ``text_to_speech``."""
    value = attributes.get(attr.GEN_AI_OPERATION_NAME)
    if not isinstance(value, str):
        # LiveKit's tts_node names no operation; its first audio says what it is.
        return attr.OP_TEXT_TO_SPEECH if attr.LIVEKIT_RESPONSE_TTFB in attributes else None
    # A str subclass (Agent Framework's ``OtelAttr`` members) is kept as the plain string.
    return _OPERATIONS.get(value, str.__str__(value))


end_reason_of: Final = conventions.end_reason_of
"""How a turn ended, one of `END_REASONS` (`chainlat._core.conventions.end_reason_of`)."""


def is_interrupted(attributes: Mapping[str, object]) -> bool:
    """Whether a turn ended by barge-in: its latency is not the latency of an answer."""
    return end_reason_of(attributes) == "interrupted"
