"""What a model call's span says, by any convention: its model, provider, tokens, time to
first token, output, and a voice turn's end and the framework's own latency figure.

Every convention names these differently; each reading here takes the first usable value
of its keys in a fixed order (the response's model before the request's, the GenAI keys
before the older ones), so a call gets the same reading from any reader.
:mod:`chainlat._core.conventions` classifies spans and re-exports these readings.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
from collections.abc import Callable, Container, Iterable, Mapping
from typing import Final

from chainlat._core.attributes import (
    AI_MODEL_ID,
    AI_MODEL_PROVIDER,
    AI_RESPONSE_FINISH_REASON,
    AI_RESPONSE_MS_TO_FIRST_CHUNK,
    AI_STREAM_MS_TO_FIRST_CHUNK,
    AI_USAGE_COMPLETION_TOKENS,
    AI_USAGE_INPUT_TOKENS,
    AI_USAGE_OUTPUT_TOKENS,
    AI_USAGE_PROMPT_TOKENS,
    AUDIO_INPUT_SECONDS,
    DECISION_MODEL_NAME,
    DECISION_PROVIDER,
    DECISION_REQUEST_MODEL_NAME,
    DECISION_RESPONSE_MODEL_NAME,
    DECISION_SYSTEM,
    DECISION_TOKEN_COUNT_INPUT,
    DECISION_TOKEN_COUNT_OUTPUT,
    EMBEDDING_MODEL_NAME,
    END_REASONS,
    GEN_AI_AGENT_INVOCATION_END_REASON,
    GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
    GEN_AI_COMPLETION_FINISH_REASON,
    GEN_AI_IS_STREAMING,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_STREAM,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,
    GEN_AI_SYSTEM,
    GEN_AI_USAGE_COMPLETION_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_PROMPT_TOKENS,
    GENKIT_NAME,
    HTTP_METHOD,
    HTTP_REQUEST_METHOD,
    LANGFUSE_MODEL_NAME,
    LATENCY_TTFT_MS,
    LIVEKIT_E2E_LATENCY,
    LIVEKIT_INTERRUPTED,
    LIVEKIT_RESPONSE_TTFB,
    LIVEKIT_RESPONSE_TTFT,
    LLM_IS_STREAMING,
    LLM_MODEL_NAME,
    LLM_PROVIDER,
    LLM_REQUEST_MODEL_NAME,
    LLM_RESPONSE_MODEL_NAME,
    LLM_SYSTEM,
    LLM_TOKEN_COUNT_COMPLETION,
    LLM_TOKEN_COUNT_PROMPT,
    MLFLOW_LLM_MODEL,
    OP_SPEECH_TO_TEXT,
    OP_TEXT_TO_SPEECH,
    PIPECAT_ENDED_BY_CONVERSATION_END,
    PIPECAT_TTFB,
    PIPECAT_USER_BOT_LATENCY,
    PIPECAT_WAS_INTERRUPTED,
    RERANKER_MODEL_NAME,
    SPEECH_INPUT_CHARACTERS,
)
from chainlat._core.convention_table import ANY_VALUE as ANY_VALUE
from chainlat._core.convention_table import CONVENTIONS as CONVENTIONS
from chainlat._core.convention_table import FIRST_TOKEN_EVENTS as FIRST_TOKEN_EVENTS
from chainlat._core.convention_table import OUTPUT_KEYS as _OUTPUT_KEYS
from chainlat._core.convention_table import SECONDS_WHEN_MARKED, UNTIMED_KEYS, UsageObject
from chainlat._core.convention_table import Convention as Convention

MODEL_KEYS: Final = (
    GEN_AI_RESPONSE_MODEL,
    LLM_RESPONSE_MODEL_NAME,
    DECISION_RESPONSE_MODEL_NAME,
    GEN_AI_REQUEST_MODEL,
    LLM_REQUEST_MODEL_NAME,
    DECISION_REQUEST_MODEL_NAME,
    LLM_MODEL_NAME,
    DECISION_MODEL_NAME,
    EMBEDDING_MODEL_NAME,
    RERANKER_MODEL_NAME,
    AI_MODEL_ID,
    LANGFUSE_MODEL_NAME,
    MLFLOW_LLM_MODEL,
    GENKIT_NAME,  # last: the action's name, a model's only on a model action's span
)
PROVIDER_KEYS: Final = (
    GEN_AI_PROVIDER_NAME,
    GEN_AI_SYSTEM,
    LLM_PROVIDER,
    LLM_SYSTEM,
    DECISION_PROVIDER,
    DECISION_SYSTEM,
    AI_MODEL_PROVIDER,
)
USAGE_OBJECTS: Final[Mapping[str, UsageObject]] = {
    key: usage for c in CONVENTIONS for key, usage in c.usage.items()
}
"""Keys whose value is a JSON object of token counts (`Convention.usage`) -> how it reads."""
INPUT_TOKEN_KEYS: Final = (
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_PROMPT_TOKENS,
    LLM_TOKEN_COUNT_PROMPT,
    DECISION_TOKEN_COUNT_INPUT,
    AI_USAGE_INPUT_TOKENS,
    AI_USAGE_PROMPT_TOKENS,
    *USAGE_OBJECTS,  # last: a count of a key of its own is read first
)
OUTPUT_TOKEN_KEYS: Final = (
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_COMPLETION_TOKENS,
    LLM_TOKEN_COUNT_COMPLETION,
    DECISION_TOKEN_COUNT_OUTPUT,
    AI_USAGE_OUTPUT_TOKENS,
    AI_USAGE_COMPLETION_TOKENS,
    *USAGE_OBJECTS,
)
TTFT_MS_KEYS: Final = (
    LATENCY_TTFT_MS,
    GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,
    AI_RESPONSE_MS_TO_FIRST_CHUNK,
    AI_STREAM_MS_TO_FIRST_CHUNK,
)
TTFT_SECONDS_KEYS: Final = (
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
    PIPECAT_TTFB,
    LIVEKIT_RESPONSE_TTFT,
    LIVEKIT_RESPONSE_TTFB,  # from the TTS's first text: records.anchor_first_audio places it
)


def model_of(attributes: Mapping[str, object]) -> str | None:
    """The model of a model call: the response's, else the request's, else any convention's.

    Example:
        >>> model_of({"gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-0806"})
        'gpt-4o-0806'
    """
    return first_text(attributes, MODEL_KEYS)


def provider_of(attributes: Mapping[str, object]) -> str | None:
    """The model provider, as the instrumentation named it (``openai``, ``aws.bedrock``).

    Example:
        >>> provider_of({"gen_ai.system": "openai"})
        'openai'
    """
    return first_text(attributes, PROVIDER_KEYS)


def input_tokens_of(attributes: Mapping[str, object]) -> int | None:
    """Input (prompt) tokens of a model call; a count of 0 is none (rule 21).

    Example:
        >>> input_tokens_of({"llm.token_count.prompt": "120"})
        120
    """
    return first_count(attributes, INPUT_TOKEN_KEYS)


def output_tokens_of(attributes: Mapping[str, object]) -> int | None:
    """Output (completion) tokens of a model call; 0 beside no input count is none (rule 21).

    Example:
        >>> output_tokens_of({"gen_ai.usage.completion_tokens": 30})
        30
    """
    return _output_counted(
        input_tokens_of(attributes), first_count(attributes, OUTPUT_TOKEN_KEYS, _OUTPUT)
    )


def call_readings(
    attributes: Mapping[str, object],
) -> tuple[int | None, int | None, float | None, str | None]:
    """A model call's input and output tokens, time to first token (ms) and model: the four
    readings above in one call, as the rollup reads them for every model call.

    Example:
        >>> call_readings({"gen_ai.usage.input_tokens": 12, "gen_ai.request.model": "gpt-4o"})
        (12, None, None, 'gpt-4o')
    """
    return read_call(attributes, call_plan(tuple(attributes)))


_Keys = tuple[str, ...]
CallPlan = tuple[_Keys, _Keys, _Keys, _Keys, _Keys]
"""The keys each reading of :func:`call_readings` would find among a span's keys, in its
order: input tokens, output tokens, first token in ms, in seconds, model."""

_plans: dict[tuple[str, ...], CallPlan] = {}


def call_plan(keys: tuple[str, ...]) -> CallPlan:
    """Where :func:`call_readings` looks, for spans with these keys (remembered: the model
    calls of an application or a file carry the same few key lists, their values aside)."""
    plan = _plans.get(keys)
    if plan is None:
        present = frozenset(keys)
        # A span a row calls untimed (Pipecat's realtime llm_response) gives no first token:
        # its keys of one say another instant (convention_table, Convention.untimed).
        timed = present.isdisjoint(UNTIMED_KEYS)
        ms_keys, seconds_keys = _ttft_keys(present) if timed else ((), ())
        plan = tuple(  # type: ignore[assignment]
            tuple(key for key in group if key in present)
            for group in (INPUT_TOKEN_KEYS, OUTPUT_TOKEN_KEYS, ms_keys, seconds_keys, MODEL_KEYS)
        )
        if len(_plans) >= 4096:
            _plans.clear()  # keys made of ids: do not let them grow the cache
        _plans[keys] = plan  # type: ignore[assignment]
    return plan  # type: ignore[return-value]


def _ttft_keys(present: Container[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The time-to-first-token keys read in ms and in seconds on a span with the keys
    ``present`` (looked up, never scanned): a row's ``seconds`` move from the first to the
    second where its mark is."""
    moved = frozenset().union(
        *(keys for marks, keys in SECONDS_WHEN_MARKED if any(m in present for m in marks))
    )
    if not moved:
        return TTFT_MS_KEYS, TTFT_SECONDS_KEYS
    return (
        tuple(key for key in TTFT_MS_KEYS if key not in moved),
        (*TTFT_SECONDS_KEYS, *(key for key in TTFT_MS_KEYS if key in moved)),
    )


def read_call(
    attributes: Mapping[str, object], plan: CallPlan
) -> tuple[int | None, int | None, float | None, str | None]:
    """:func:`call_readings` of ``attributes``, by the plan of its keys: the same first
    usable value of each reading (most spans have one key of a reading, or none)."""
    get = attributes.get
    in_keys, out_keys, ms_keys, seconds_keys, model_keys = plan
    tokens_in = _count_among(get, in_keys, _INPUT)
    return (
        tokens_in,
        _output_counted(tokens_in, _count_among(get, out_keys, _OUTPUT)),
        _ttft_among(get, ms_keys, seconds_keys),
        _text_among(get, model_keys),
    )


def is_http_level(attributes: Mapping[str, object]) -> bool:
    """Whether a model call was traced at the HTTP level (``http.request.method``, as
    chainlat.httpx and every HTTP instrumentation of the stable conventions write it, or the
    older ``http.method``): such a span times the call as the server answered it.

    Example:
        >>> is_http_level({"chainlat.step.kind": "inference", "http.request.method": "POST"})
        True
    """
    return HTTP_REQUEST_METHOD in attributes or HTTP_METHOD in attributes


def ttft_ms_of(attributes: Mapping[str, object]) -> float | None:
    """Time to first token in milliseconds; finite and non-negative, else None.

    ``chainlat.latency.ttft_ms`` and strands-agents' ``gen_ai.server.time_to_first_token``
    are milliseconds (the latter in seconds on OpenLIT's spans: ``Convention.seconds``);
    the GenAI keys (also pydantic-ai's) are seconds. First-token span
    events (:data:`FIRST_TOKEN_EVENTS`) are read by the readers and the span processor.

    Example:
        >>> ttft_ms_of({"gen_ai.response.time_to_first_chunk": 0.25})
        250.0
    """
    if attributes.keys().isdisjoint(_TTFT_KEYS):  # none there (the common case), asked in C
        return None
    if not attributes.keys().isdisjoint(UNTIMED_KEYS):  # another instant's (call_plan)
        return None
    present = attributes.__contains__  # absent keys skipped in C
    ms_keys, seconds_keys = _ttft_keys(attributes)
    return _ttft_among(attributes.get, filter(present, ms_keys), filter(present, seconds_keys))


def _ttft_among(
    get: Callable[[str], object], ms_keys: Iterable[str], seconds_keys: Iterable[str]
) -> float | None:
    """The first usable first token among ``ms_keys``, else among ``seconds_keys``, in ms."""
    for key in ms_keys:
        value = get(key)
        ms = None if value is None else _duration(value)
        if ms is not None:
            return ms if ms <= _MAX_TTFT_MS else None
    for key in seconds_keys:
        value = get(key)
        seconds = None if value is None else _duration(value)
        if seconds is not None:
            return seconds * 1000.0 if seconds * 1000.0 <= _MAX_TTFT_MS else None
    return None


def unusable_ttft(attributes: Mapping[str, object], plan: CallPlan) -> str | None:
    """What makes a model call's time to first token unusable, ``key = value``, when a key of
    it is present and none of its values is a time (:func:`read_call` read None): negative,
    a boolean, a list, a string that is no number, not finite (also a number a reader could
    not hold: its value is then None), or past :data:`_MAX_TTFT_MS`. None when no key of it is
    present, or one is usable (docs/attributes.md, rule 15: such a call's first token is not
    known, and is never guessed).

    Example:
        >>> unusable_ttft({"metrics.ttfb": -1}, call_plan(("metrics.ttfb",)))
        'metrics.ttfb = -1'
    """
    ms_keys, seconds_keys = plan[2], plan[3]
    if not (ms_keys or seconds_keys):
        return None
    if _ttft_among(attributes.get, ms_keys, seconds_keys) is not None:
        return None
    for key in (*ms_keys, *seconds_keys):  # every present value unusable: the first named
        if key in attributes:
            return f"{key} = {_shown(attributes[key])}"
    return None


INSTANT_KEYS: Final = tuple(key for c in CONVENTIONS for key in c.instants)
"""Keys that give a call's first token as an instant, an ISO 8601 date (`Convention.instants`)."""

GIVES_INSTANT: Final = frozenset(INSTANT_KEYS)
"""The same keys as a set: a span with none of them gives no instant (asked in C)."""

_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def first_token_at(
    attributes: Mapping[str, object], start_ns: int, end_ns: int
) -> tuple[float | None, str | None]:
    """A model call's time to first token (ms) from a key of `INSTANT_KEYS`, for a span from
    ``start_ns`` to ``end_ns``; or, when such a key holds no instant within the span (Mastra
    repeats an earlier call's on a later one), None and why, ``key = value``: a first token
    that is no time of this call (docs/attributes.md, rule 15). (None, None) without one.

    Example:
        >>> start = 1_765_000_000_000_000_000  # 2025-12-06T05:46:40Z
        >>> first_token_at(
        ...     {"mastra.completion_start_time": "2025-12-06T05:46:40.043Z"},
        ...     start, start + 100_000_000)
        (43.0, None)
    """
    for key in INSTANT_KEYS:
        value = attributes.get(key)
        if value is None:
            continue
        at = _instant_ns(value)
        if at is not None and start_ns <= at <= end_ns:
            return (at - start_ns) / 1e6, None
        return None, f"{key} = {_shown(value)}"
    return None, None


def _instant_ns(value: object) -> int | None:
    """An ISO 8601 date with its offset (``2026-12-07T11:42:25.426Z``) as ns since the epoch;
    also written as a JSON string, in quotes (Langfuse's)."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text[:1] == '"':
        text = _unquoted(text)
    try:
        at = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if at.tzinfo is None:
        return None  # a local time of no known zone
    return (at - _EPOCH) // datetime.timedelta(microseconds=1) * 1000


STREAM_KEYS: Final = (GEN_AI_REQUEST_STREAM, GEN_AI_IS_STREAMING, LLM_IS_STREAMING)
"""Where a model-call span says whether its call streamed: the GenAI conventions'
``gen_ai.request.stream`` (chainlat's wire writes it too), OpenLLMetry's two (LiteLLM writes
the older one, as the text ``True`` or ``False``)."""

STREAM_VALUES: Final[Mapping[str, Mapping[str, bool]]] = {
    key: said for c in CONVENTIONS for key, said in c.streamed.items()
}
"""Where the value of a key says whether the call streamed (`Convention.streamed`: the AI
SDK's operation ids), asked after `STREAM_KEYS`."""

SAYS_STREAMING: Final = frozenset((*STREAM_KEYS, *STREAM_VALUES))
"""Every key that may say whether a call streamed: a span with none of them says nothing."""

_STREAM_WORDS: Final = {"true": True, "false": False}


def streamed_of(attributes: Mapping[str, object]) -> bool | None:
    """Whether a model-call span says its call streamed: the first of `STREAM_KEYS` whose
    value is a boolean, or its text (``true``, ``False``), else a value of `STREAM_VALUES`
    that says; None when none says.

    A call that may have streamed is not taken for one that did not: the end of such a call
    is no first output (docs/attributes.md, rule 17), and an HTTP span of another
    instrumentation inside it may have seen only its headers (rule 18).

    Example:
        >>> streamed_of({"llm.is_streaming": "True"}), streamed_of({"gen_ai.request.model": "m"})
        (True, None)
        >>> streamed_of({"ai.operationId": "ai.generateText.doGenerate"})
        False
    """
    if attributes.keys().isdisjoint(SAYS_STREAMING):  # none there (the common case), in C
        return None
    for key in STREAM_KEYS:
        value = attributes.get(key)
        if value is True or value is False:
            return value
        if isinstance(value, str):
            said = _STREAM_WORDS.get(value.strip().lower())
            if said is not None:
                return said
    for key, says in STREAM_VALUES.items():
        value = attributes.get(key)
        if isinstance(value, str) and value in says:
            return says[value]
    return None


TOOL_FINISH_REASONS: Final = frozenset(("tool_calls", "tool-calls", "tool_use", "function_call"))
"""The finish reasons of a call that answered by asking for tools: OpenAI's ``tool_calls``
(and its older ``function_call``), the AI SDK's and Mastra's ``tool-calls``, Anthropic's
``tool_use``."""

_FINISH_KEYS: Final = (
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_COMPLETION_FINISH_REASON,
    AI_RESPONSE_FINISH_REASON,
)


def asked_tools(attributes: Mapping[str, object]) -> bool:
    """Whether a model call's span says the call answered by asking for tools: a finish
    reason of `TOOL_FINISH_REASONS`, as a list, a JSON list in a string (Mastra's) or one
    string (docs/attributes.md, rule 19).

    Example:
        >>> asked_tools({"gen_ai.response.finish_reasons": '["tool-calls"]'})
        True
        >>> asked_tools({"gen_ai.response.finish_reasons": ("stop",)})
        False
    """
    if attributes.keys().isdisjoint(_FINISH_KEYS):  # none there (the common case), in C
        return False
    for key in _FINISH_KEYS:
        value = attributes.get(key)
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except ValueError:
                    continue
            else:
                value = (text,)
        if isinstance(value, list | tuple) and any(
            isinstance(v, str) and v.strip().lower() in TOOL_FINISH_REASONS for v in value
        ):
            return True
    return False


STREAMED_UNMARKED: Final = "says it streamed, and no span of it marks its first token"
"""What a model call gives for its first token when a span of it says it streamed but none
says when its first token came (rule 17): not known."""
MAYBE_STREAMED: Final = (
    "may have streamed: no span of it says whether it did, nor when its first token came"
)
"""What a model call gives for its first token when no span of it says whether it streamed
and none marks a first token (rule 17): its end is not known to be its first output."""
STREAM_UNKNOWN: Final = frozenset((STREAMED_UNMARKED, MAYBE_STREAMED))
"""The first-token values of rule 17, which are phrases, not a value a trace gave (rule 15)."""


def _shown(value: object) -> str:
    """A value as a trace writes it, cut short: ``-1``, ``true``, ``[0.001]``, ``"abc"``."""
    if value is None:
        return "a number no reader can hold (NaN, infinite or out of range)"
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= 40 else text[:39] + "…"


_TTFT_KEYS: Final = frozenset((*TTFT_MS_KEYS, *TTFT_SECONDS_KEYS))
_MAX_TTFT_MS = 1e12
"""About 31 years: a larger time to first token is no measurement, and in nanoseconds it
would not fit a span's clock."""


def has_output(attributes: Mapping[str, object]) -> bool:
    """Whether a model call span carries its output: an output message, a response id or
    finish reasons (small keys only: a reader keeps every key read here).

    Example:
        >>> has_output({"gen_ai.response.id": "r1"}), has_output({"llm.model_name": "gpt-4o"})
        (True, False)
    """
    return not attributes.keys().isdisjoint(_OUTPUT_KEYS)  # in C, for a dict


def end_reason_of(attributes: Mapping[str, object]) -> str | None:
    """How a voice turn ended, one of ``completed``, ``interrupted`` (barge-in) and
    ``session_closed``; None when the span does not say.

    ``gen_ai.agent.invocation.end_reason``, else Pipecat's ``turn.was_interrupted``: an
    interrupted Pipecat turn that ``turn.ended_by_conversation_end`` was closed with the
    session, not by the caller speaking over the answer; else LiveKit's ``lk.interrupted``.

    Example:
        >>> end_reason_of({"turn.was_interrupted": True})
        'interrupted'
    """
    value = attributes.get(GEN_AI_AGENT_INVOCATION_END_REASON)
    if isinstance(value, str) and value in END_REASONS:
        return value
    interrupted = attributes.get(PIPECAT_WAS_INTERRUPTED)
    if interrupted is None:
        interrupted = attributes.get(LIVEKIT_INTERRUPTED)
    if interrupted is True:
        ended = attributes.get(PIPECAT_ENDED_BY_CONVERSATION_END) is True
        return "session_closed" if ended else "interrupted"
    return "completed" if interrupted is False else None


def user_bot_latency_ms_of(attributes: Mapping[str, object]) -> float | None:
    """A voice framework's own measure of a turn's first audio, in milliseconds: from the
    caller's end of speech to the bot starting to speak (Pipecat's
    ``turn.user_bot_latency_seconds``, LiveKit's ``lk.e2e_latency``), which chainlat's
    first output is checked against (docs/voice.md); None if absent.

    Example:
        >>> user_bot_latency_ms_of({"turn.user_bot_latency_seconds": 0.75})
        750.0
    """
    value = attributes.get(PIPECAT_USER_BOT_LATENCY)
    if value is None:
        value = attributes.get(LIVEKIT_E2E_LATENCY)
    seconds = None if value is None else _duration(value)
    return None if seconds is None else seconds * 1000.0


_SPEECH_INPUT: Final = {
    OP_TEXT_TO_SPEECH: SPEECH_INPUT_CHARACTERS,
    OP_SPEECH_TO_TEXT: AUDIO_INPUT_SECONDS,
}
_MAX_SPEECH_INPUT: Final = 1e9


def speech_input_of(attributes: Mapping[str, object]) -> float | None:
    """A speech call's input, what its latency profile is fitted on: the characters spoken
    (text to speech) or the seconds of audio heard (speech to text); None if absent.

    Example:
        >>> speech_input_of({"gen_ai.operation.name": "text_to_speech",
        ...                  "chainlat.speech.input_characters": 42})
        42.0
    """
    operation = attributes.get(GEN_AI_OPERATION_NAME)
    key = _SPEECH_INPUT.get(operation) if isinstance(operation, str) else None
    if key is None:
        return None
    value = attributes.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= _MAX_SPEECH_INPUT else None


def first_text(attributes: Mapping[str, object], keys: tuple[str, ...]) -> str | None:
    """The first non-empty, non-placeholder string among ``keys``."""
    if attributes.keys().isdisjoint(keys):  # none there (the common case), asked in C
        return None
    # Most keys are absent: skipped in C.
    return _text_among(attributes.get, filter(attributes.__contains__, keys))


def _text_among(get: Callable[[str], object], keys: Iterable[str]) -> str | None:
    for key in keys:
        value = get(key)
        if isinstance(value, str):
            text = value.strip()
            if text[:1] == '"':  # JSON text (MLflow's): asked inline, most values are not
                text = _unquoted(text)
            if text and text.casefold() != "unknown":
                return text
    return None


def _unquoted(text: str) -> str:
    """A string written as JSON text, ``text`` starting with its quote (MLflow writes
    ``"gpt-4o"``, Langfuse an instant in its quotes), as the string itself; any other text
    as it is."""
    if len(text) < 2 or text[-1] != '"':
        return text
    try:
        found = json.loads(text)
    except ValueError:
        return text
    return found.strip() if isinstance(found, str) else text


_INPUT: Final = 0
_OUTPUT: Final = 1
CACHE_READ: Final = 2
"""Which names of a usage object (`USAGE_OBJECTS`) a count is read by: its input's, its
output's, or its cache reads' (``side`` of `first_count`)."""


def first_count(
    attributes: Mapping[str, object], keys: tuple[str, ...], side: int = _INPUT
) -> int | None:
    """The first token count among ``keys``; a usage object's by its names for ``side``."""
    if attributes.keys().isdisjoint(keys):  # none there (the common case), asked in C
        return None
    # Most keys are absent: skipped in C.
    return _count_among(attributes.get, filter(attributes.__contains__, keys), side)


def _count_among(get: Callable[[str], object], keys: Iterable[str], side: int) -> int | None:
    """The first count among ``keys`` for ``side``; an input of 0 tokens is no count
    (docs/attributes.md, rule 21: no model reads nothing), and the next key is asked."""
    for key in keys:
        usage = USAGE_OBJECTS.get(key)  # a JSON object of counts, not one count
        count = _count(get(key)) if usage is None else _usage_count(get(key), usage, side)
        if count is not None and (count or side != _INPUT):
            return count
    return None


def _output_counted(tokens_in: int | None, tokens_out: int | None) -> int | None:
    """``tokens_out``, unless it is 0 beside no input count: a usage of nothing, written
    where no usage came (rule 21: the OpenAI Agents SDK writes 0 and 0 for a stream that
    asked for none), is not known."""
    return None if tokens_out == 0 and tokens_in is None else tokens_out


def _usage_count(value: object, usage: UsageObject, side: int) -> int | None:
    """The input, output or cache-read tokens (``side``) of a usage object written as JSON
    text: the first of its names with a count, plus that name's parts (`UsageObject`)."""
    found = _usage_object(value) if isinstance(value, str) else None
    if found is None:
        return None
    names = (usage.input, usage.output, usage.cache_read)[side]
    for name in names:
        count = _count(found.get(name) if "." not in name else _at(found, name))
        if count is None:
            continue
        prefix = usage.parts.get(name)
        if prefix is not None:
            named = (*usage.input, *usage.output)  # a name read is never a part
            for key, part in found.items():
                if key.startswith(prefix) and not key.startswith(usage.not_parts):
                    part_count = None if key in named else _count(part)
                    count += part_count or 0
        return count
    return None


@functools.lru_cache(maxsize=256)
def _usage_object(text: str) -> dict[str, object] | None:
    """The object a usage value's JSON text holds, None when it holds none (not JSON, not an
    object, nested past the parser's depth). Remembered: a call's input, output and cache
    reads are read from one value, and a span's record is made more than once (live, then
    by a reader). The object is shared: never changed."""
    try:
        found = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _at(found: dict[str, object], path: str) -> object:
    """The value at a dotted ``path`` of nested objects (``prompt_tokens_details.cached_tokens``),
    None where the path leads nowhere."""
    value: object = found
    for step in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _count(value: object) -> int | None:
    """A non-negative int, a string of ASCII digits (OTLP JSON's 64-bit ints), or a whole float."""
    if type(value) is int:
        return value if value >= 0 else None
    if isinstance(value, str):
        return int(value) if value.isascii() and value.isdigit() else None
    if type(value) is float and value.is_integer() and value >= 0:
        return int(value)
    return None


def _duration(value: object) -> float | None:
    """A finite, non-negative number, also from a numeric string (protobuf JSON doubles)."""
    if type(value) is float or type(value) is int:
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) and number >= 0 else None
