"""Span records: each span of a workflow reduced to what the rollup needs.

The span processor (live) and every trace reader (offline) turn spans into
:class:`SpanRecord` through :func:`call_record`, so a workflow gets the same numbers
either way. Which convention wrote a model call
(:func:`chainlat._core.conventions.source_of`) tells two
instrumentations of one call apart (see :mod:`chainlat._core.twins`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat._core import call_readings, conventions, voice
from chainlat._core.attributes import SpanKind

_NS_PER_MS: Final = 1_000_000

SpanKindLabel = SpanKind
"""The kind of a span in a workflow: a step kind, or ``workflow`` (kept name)."""


@dataclass(slots=True)
class SpanRecord:
    """One span of a workflow, reduced to what the rollup needs.

    Treated as immutable, but not frozen: a frozen dataclass costs a microsecond
    more per instance, and the trace readers make one per span read.
    """

    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    kind: SpanKindLabel | None = None
    """The step kind, ``workflow`` for a (nested) workflow, None if transparent."""
    cache_hit: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    """Time to first token of a model call; not used by the rollup, kept for budgets."""
    model: str | None = None
    """The model of a model call, when known: tells the same call seen twice from two."""
    source: str | None = None
    """The convention that classified the span (``chainlat``, ``gen_ai``, ``openinference``...):
    two instrumentations seeing one call write two spans of different sources."""
    step_name: str | None = None
    """``chainlat.step.name``: the name the application gave the step, when it gave one."""
    user_facing: bool = False
    """``chainlat.step.user_facing``: this call's first token is the workflow's first output."""
    cache_read_tokens: int | None = None
    """Input tokens read from the provider's prompt cache (priced apart)."""
    extended: bool = False
    """The span ended before its own events or children, or before the record of its
    stream's end (``twins.join_stream_ends``), and is timed to the last of them
    (``end_ns``): an instrumentation that ends its span when a stream is handed back."""
    has_output: bool = False
    """A model call that carries its output (messages, a response id, finish reasons)."""
    ttft_marked: bool = False
    """The first token was marked by the application (``call.first_token()``), not derived
    from a stream by an instrumentation: it wins over the wire's first chunk."""
    operation: str | None = None
    """``gen_ai.operation.name`` of a model call (the speech split reads it)."""
    failed: bool = False
    """The span recorded an exception (an ``exception`` event): a failed call is a call,
    never request building."""
    unrecorded_end: bool = False
    """Its own events come after its end: the instrumentation ended the span before the work
    it stands for (a stream handed back before it was read), so its real end is not in the
    trace; timed to its last event (``extended``), it is still a lower bound."""
    ttft_unusable: str | None = None
    """A model call's time to first token that is present but no time (``metrics.ttfb =
    -1``), or whose instant no span marks (a LiveKit ``tts_node`` of a streamed TTS): its
    first token is not known, never guessed (docs/attributes.md, rule 15)."""
    streamed: bool | None = None
    """Whether the model call's span says it streamed (``gen_ai.request.stream``,
    ``llm.is_streaming``); None when it does not say (docs/attributes.md, rule 17). False
    also for a call of chainlat's own API (``chainlat.inference``): its application marks a
    streamed call's first token (``call.first_token()``), so one it did not mark gave its
    output when it ended."""
    asked_tools: bool = False
    """The model call answered by asking for tools (its finish reason): it had answered
    before any tool it asked for started (docs/attributes.md, rule 19)."""

    @property
    def label(self) -> str:
        """The step's key in budgets and reports: its step name, else its span name."""
        return self.step_name or self.name


EXCEPTION_EVENT: Final = "exception"
"""The event OpenTelemetry's ``Span.record_exception`` writes."""


WIRE: Final = conventions.WIRE_SOURCE
"""The source of a model call traced at the HTTP level (``chainlat.instrument_httpx()``):
the span that times the call as the server answered it (see `compute_rollup`)."""


CallFields = tuple[
    int | None,
    int | None,
    float | None,
    str | None,
    str,
    bool,
    int | None,
    bool,
    bool,
    str | None,
    str | None,
    bool | None,
    bool,
]
"""What a model call's attributes give its record: input and output tokens, time to first
token (ms), model, source convention, user-facing, cache-read tokens, what
:func:`call_marks` says (carries its output, first token marked, operation), a time to
first token present but unusable (``ttft_unusable``), whether it says it streamed, and
whether it answered by asking for tools."""


def call_fields(attributes: Mapping[str, object]) -> CallFields:
    """:data:`CallFields` of a model call, each read once, by the rules :func:`call_record`
    reads them with (the trace readers' :func:`~chainlat.traces._derive.derive` uses it).

    :func:`call_record` reads the same inline, on the export's path: calling this from it
    cost 21,000 instructions more a ten-step workflow's records (142,139 → 163,105,
    ``benchmarks/callgrind_rollup.py``). ``tests/traces/test_derive_rules.py`` holds the two
    equal over fuzzed attributes."""
    plan, source, carries_output, cache_keys = _by_keys(attributes)
    tokens_in, tokens_out, ttft, model = conventions.read_call(attributes, plan)
    has_output, ttft_marked, operation = call_marks(attributes, ttft, source, carries_output)
    return (
        tokens_in,
        tokens_out,
        ttft,
        model,
        source,
        attributes.get(attr.USER_FACING) is True,
        conventions.first_count(attributes, cache_keys, _CACHE_READ) if cache_keys else None,
        has_output,
        ttft_marked,
        operation,
        None if ttft is not None else call_readings.unusable_ttft(attributes, plan),
        record_streamed(attributes, source),
        carries_output is not False and call_readings.asked_tools(attributes),
    )


def record_streamed(attributes: Mapping[str, object], source: str | None) -> bool | None:
    """:attr:`SpanRecord.streamed` of a model call from ``source``: what its span says, else
    False for chainlat's own API call (not another instrumentation's span that chainlat's
    processor tagged, ``chainlat.step.foreign``), else None."""
    # Most spans carry none of the keys: asked in C, without the call that reads them.
    said = (
        None if attributes.keys().isdisjoint(_STREAM_KEYS) else conventions.streamed_of(attributes)
    )
    if said is None and source == "chainlat" and attributes.get(attr.STEP_FOREIGN) is not True:
        return False
    return said


_STREAM_KEYS: Final = call_readings.SAYS_STREAMING
_GIVES_INSTANT: Final = call_readings.GIVES_INSTANT


_ByKeys = tuple[conventions.CallPlan, str, bool, tuple[str, ...]]
_details: dict[tuple[str, ...], _ByKeys] = {}


def _by_keys(attributes: Mapping[str, object]) -> _ByKeys:
    """What depends on which keys a model call carries, not on their values: where its
    readings are (:func:`~chainlat._core.conventions.call_plan`), its source, whether it
    carries its output, and its cache-read keys. Remembered per key list."""
    keys = tuple(attributes)
    known = _details.get(keys)
    if known is None:
        present = dict.fromkeys(keys)
        known = (
            conventions.call_plan(keys),
            conventions.source_of(present),
            conventions.has_output(present),
            tuple(key for key in CACHE_READ_KEYS if key in present),
        )
        if len(_details) >= 4096:
            _details.clear()
        _details[keys] = known
    return known


def call_record(
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    kind: SpanKindLabel | None,
    attributes: Mapping[str, object],
    ttft_ms: float | None = None,
    _new: Any = object.__new__,
) -> SpanRecord:
    """A span's record, with a model call's fields read as :func:`call_fields` reads them."""
    # Every field set here, without the class's __init__: a call through the type costs a
    # thousand instructions more, once per span of every workflow exported
    # (tests/core/test_call_record.py compares each field with the constructor's record).
    record: SpanRecord = _new(SpanRecord)
    record.span_id = span_id
    record.parent_id = parent_id
    record.name = name
    record.start_ns = start_ns
    record.end_ns = end_ns
    record.kind = kind
    record.cache_hit = attributes.get(attr.CACHE_HIT) is True
    record.step_name = (
        None if attributes.keys().isdisjoint(STEP_NAME_KEYS) else step_name_of(attributes)
    )
    record.extended = record.failed = record.unrecorded_end = False
    if kind != "inference":
        record.input_tokens = record.output_tokens = record.ttft_ms = record.model = None
        record.ttft_unusable = record.streamed = None
        record.source = record.cache_read_tokens = record.operation = None
        record.user_facing = record.has_output = record.ttft_marked = False
        record.asked_tools = False
        return record
    plan, source, carries_output, cache_keys = _by_keys(attributes)
    record.input_tokens, record.output_tokens, ttft, record.model = conventions.read_call(
        attributes, plan
    )
    if ttft_ms is not None:
        ttft = ttft_ms
    unusable = None
    if ttft is None:
        unusable = call_readings.unusable_ttft(attributes, plan)
        if unusable is None and not attributes.keys().isdisjoint(_GIVES_INSTANT):
            ttft, unusable = call_readings.first_token_at(attributes, start_ns, end_ns)
    record.ttft_ms = ttft
    record.ttft_unusable = unusable
    record.source = source
    record.user_facing = attributes.get(attr.USER_FACING) is True
    record.cache_read_tokens = (
        conventions.first_count(attributes, cache_keys, _CACHE_READ) if cache_keys else None
    )
    record.has_output, record.ttft_marked, record.operation = call_marks(
        attributes, ttft, source, carries_output
    )
    record.streamed = record_streamed(attributes, source)
    record.asked_tools = carries_output is not False and call_readings.asked_tools(attributes)
    return record


def named_record(rec: SpanRecord, attributes: Mapping[str, object]) -> SpanRecord | None:
    """The record of a span no attribute classifies but its name does (Haystack's
    ``haystack.agent.step.llm``: :func:`conventions.kind_by_name`), read as a span of that
    kind is; None when the name says nothing.

    The readers and the live rollup both ask it, so a workflow's recorded rollup counts the
    calls a reader counts.
    """
    named = conventions.kind_by_name(rec.name)
    if named is None:
        return None
    kind, source = named
    found = call_record(
        rec.span_id, rec.parent_id, rec.name, rec.start_ns, rec.end_ns, kind, attributes,
        rec.ttft_ms,
    )  # fmt: skip
    found.extended, found.unrecorded_end = rec.extended, rec.unrecorded_end
    found.failed = rec.failed
    if kind == "inference" and found.source == "other":
        found.source = source
    return found


def call_marks(
    attributes: Mapping[str, object],
    ttft_ms: float | None,
    source: str | None,
    carries_output: bool | None = None,
) -> tuple[bool, bool, str | None]:
    """What a model call's attributes say beyond its numbers, for a call of that first token
    and source: whether it carries its output (``carries_output``, when already known),
    whether its first token is the application's own mark, and its operation (the speech
    split of the rollup reads it)."""
    return (
        conventions.has_output(attributes) if carries_output is None else carries_output,
        ttft_ms is not None
        and source == "chainlat"
        and attributes.get(attr.LATENCY_TTFT_MS) is not None,
        voice.operation_of(attributes),
    )


def apply_events(record: SpanRecord, events: Iterable[tuple[str, int]]) -> None:
    """What a span's events say of it, as (name, time in ns) pairs: its first token, when no
    attribute gave one (the earliest first-token event of any convention), and its end, when
    an event comes after it (the span is then timed to its last event, ``extended``, and its
    real end is not recorded, ``unrecorded_end``); and whether it recorded an exception
    (``failed``).

    OpenInference's LlamaIndex instrumentation ends ``OpenAI.stream_chat`` when the stream
    is handed back, 1 ms in, and records its "First Token Stream Event" 200 ms later.
    """
    first: int | None = None
    last = record.end_ns
    names = conventions.FIRST_TOKEN_EVENTS
    for name, time_ns in events:
        if name in names and (first is None or time_ns < first):
            first = time_ns
        elif name == EXCEPTION_EVENT:
            record.failed = True
        if time_ns > last:
            last = time_ns
    if first is not None and record.ttft_ms is None and first >= record.start_ns:
        record.ttft_ms = (first - record.start_ns) / _NS_PER_MS
    if last > record.end_ns:
        record.end_ns = last
        record.extended = True
        record.unrecorded_end = True


LIVEKIT: Final = "livekit"
"""Source of LiveKit Agents' ``tts_node`` (``lk.response.ttfb``), whose first audio
:func:`anchor_first_audio` places."""
_TTS_ADAPTER: Final = "tts_stream_adapter"
_TTS_REQUEST: Final = "tts_request"
_AGENT_SPEAKING: Final = "agent_speaking"
_REALTIME_INFERENCE: Final = "realtime_inference"
_STREAMED_TTS: Final = (
    "lk.response.ttfb, counted from a first text no span marks (a streamed TTS: no "
    "tts_request under a tts_stream_adapter)"
)


_SOURCE: Final = operator.attrgetter("source")
_PARENT: Final = operator.attrgetter("parent_id")
_NAME: Final = operator.attrgetter("name")


def anchor_first_audio(records: list[SpanRecord]) -> list[SpanRecord]:
    """``records``, with each LiveKit ``tts_node`` timed from where its
    ``lk.response.ttfb`` counts from, the TTS getting its first text, and its first audio
    placed where the caller hears it.

    A non-streamed TTS runs under a ``tts_stream_adapter`` span, one ``tts_request`` per
    sentence, each started as its text goes out (livekit-agents 1.8.9 tts/stream_adapter.py
    112, tts/tts.py 303, 318 and 492): the node starts with the first of them. The node
    itself opens when the model's first text of the segment reaches it
    (voice/agent_activity.py 3675-3713), and a sentence is sent once written: the wait
    between is the model's, not the voice's.

    The first audio is the start of the turn's ``agent_speaking`` span (a sibling of the
    node under ``agent_turn``) that starts within the node: LiveKit starts it at the audio
    sink's own ``playback_started`` time (voice/generation.py 614-616,
    voice/agent_activity.py 3269-3290, voice/agent_session.py 2204), the instant its first
    frame reached the output; ``lk.e2e_latency`` ends there too (3412-3421). Without it
    (the answer cut before a frame played), the first audio is ``lk.response.ttfb`` after
    the first ``tts_request``: that ttfb counts from the request object's construction
    (tts/tts.py 303), a loop turn or more before its span starts (318), so the audio is
    placed that much late (0.1-4.2 ms in the runs of docs/voice.md). A streamed TTS marks
    the moment its first text goes out with no span (tts/tts.py 697-700): without
    ``agent_speaking`` its first audio is not known (``ttft_unusable``), rather than placed
    too early; the node is still the voice, the turn's first output, which the rollup then
    gives as a lower bound (the model's first token, which the voice waits for:
    docs/attributes.md, rule 15).

    A realtime model's response (``AgentSession(llm=RealtimeModel(...))``) is one
    ``realtime_inference`` span under ``agent_turn``, opened when LiveKit's generation task
    starts (voice/agent_activity.py 4334-4349), with the OpenAI plugin's
    ``gen_ai.response.time_to_first_chunk`` (telemetry/utils.py 151-152), which counts from
    the ``response.created`` received, not from the span's start (llm/_realtime/openai.py
    2335): it is the inference with operation ``realtime``, its first audio the start of
    the turn's ``agent_speaking`` within it, set from the sink's first frame as in a
    cascade (voice/agent_activity.py 4458-4470). Without ``agent_speaking`` it keeps the
    plugin's first chunk. The same list when there is no such node.
    """
    livekit = LIVEKIT in map(_SOURCE, records)  # C loops: this runs for every run read
    if not livekit and _REALTIME_INFERENCE not in map(_NAME, records):
        return records
    nodes = [
        r
        for r in records
        if livekit
        and r.source == LIVEKIT
        and (r.ttft_ms is not None or r.ttft_unusable is not None)
    ]
    responses = [r for r in records if r.name == _REALTIME_INFERENCE and r.kind == "inference"]
    if not nodes and not responses:
        return records
    by_parent: dict[int, list[SpanRecord]] = {}
    for rec in records:
        if rec.parent_id is not None:
            by_parent.setdefault(rec.parent_id, []).append(rec)
    placed: dict[int, SpanRecord] = {}
    for response in responses:
        heard = min(
            (
                s.start_ns
                for s in by_parent.get(response.parent_id or 0, ())
                if s.name == _AGENT_SPEAKING and response.start_ns <= s.start_ns <= response.end_ns
            ),
            default=None,
        )
        placed[response.span_id] = (
            replace(response, operation=attr.OP_REALTIME)
            if heard is None
            else replace(
                response,
                operation=attr.OP_REALTIME,
                ttft_ms=(heard - response.start_ns) / _NS_PER_MS,
                user_facing=True,
                ttft_unusable=None,
            )
        )
    for node in nodes:
        starts = [
            request.start_ns
            for adapter in by_parent.get(node.span_id, ())
            if adapter.name == _TTS_ADAPTER
            for request in by_parent.get(adapter.span_id, ())
            if request.name == _TTS_REQUEST
        ]
        first = min(starts, default=-1)
        begun = first if node.start_ns <= first <= node.end_ns else node.start_ns
        heard = min(
            (
                s.start_ns
                for s in by_parent.get(node.parent_id or 0, ())
                if s.name == _AGENT_SPEAKING and begun <= s.start_ns <= node.end_ns
            ),
            default=None,
        )
        if heard is not None:  # the sink's own playback start: the first audio, exactly
            placed[node.span_id] = replace(
                node,
                start_ns=begun,
                ttft_ms=(heard - begun) / _NS_PER_MS,
                user_facing=True,
                ttft_unusable=None,
            )
        elif node.ttft_ms is None:  # lk.response.ttfb no time (rule 15): the voice all the same
            placed[node.span_id] = replace(node, user_facing=True)
        elif node.start_ns <= first <= node.end_ns:
            placed[node.span_id] = replace(node, start_ns=first, user_facing=True)
        else:
            placed[node.span_id] = replace(
                node, ttft_ms=None, user_facing=True, ttft_unusable=_STREAMED_TTS
            )
    return [placed.get(r.span_id, r) for r in records]


def answered_before_tools(records: list[SpanRecord]) -> list[SpanRecord]:
    """``records`` with each model call that answered by asking for tools (``asked_tools``)
    ended where the first tool beside it (a sibling) started inside its span: a tool the
    call asked for runs after the call answered, so a call span still open then was ended
    late (docs/attributes.md, rule 19). Mastra 1.71 ends its ``chat`` span on the step's
    last chunk, after the step's tools ran: the tool's 26 ms were the call's, and the
    critical path went around the tool. The same list when no call asked for tools."""
    asking = [r for r in records if r.asked_tools]
    if not asking:
        return records
    tool_starts: dict[int | None, list[int]] = {}
    for r in records:
        if r.kind == "tool":
            tool_starts.setdefault(r.parent_id, []).append(r.start_ns)
    ends: dict[int, int] = {}
    for call in asking:
        inside = [s for s in tool_starts.get(call.parent_id, ()) if call.start_ns < s < call.end_ns]
        if inside:
            ends[call.span_id] = min(inside)
    if not ends:
        return records
    return [replace(r, end_ns=ends[r.span_id]) if r.span_id in ends else r for r in records]


def extend_to_children(root_id: int, records: list[SpanRecord]) -> list[SpanRecord]:
    """``records``, with every span below the root that ends before one of its children
    timed to the end of its last descendant (a copy, marked ``extended``); the same list
    when none does. The workflow span itself keeps its end: its children are clipped to it.
    """
    if list(map(_PARENT, records)).count(root_id) == len(records):  # a C loop: per run read
        return records  # the common shape, every span a child of the workflow: nothing to do
    by_id: dict[int, SpanRecord] = {}
    twice: set[int] = set()  # ids seen twice in a malformed trace: never extended
    for rec in records:
        if rec.span_id in by_id:
            twice.add(rec.span_id)
        by_id[rec.span_id] = rec
    ends: dict[int, int] = {}
    for rec in records:
        # Push each span's end up its ancestors: bounded by the depth, cycles cut by `seen`.
        end = rec.end_ns
        if end < rec.start_ns:
            continue  # a malformed span extends nothing
        parent_id = rec.parent_id
        seen = {rec.span_id}
        while parent_id is not None and parent_id != root_id and parent_id not in seen:
            parent = by_id.get(parent_id)
            if (
                parent is None
                or parent_id in twice
                or parent.end_ns < parent.start_ns
                or end <= max(parent.end_ns, ends.get(parent_id, 0))
            ):
                break
            ends[parent_id] = end
            seen.add(parent_id)
            parent_id = parent.parent_id
    if not ends:
        return records
    return [
        replace(r, end_ns=ends[r.span_id], extended=True) if r.span_id in ends else r
        for r in records
    ]


CACHE_READ_KEYS: Final = (
    attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
    *call_readings.USAGE_OBJECTS,  # last: a count of a key of its own is read first
)
_CACHE_READ: Final = call_readings.CACHE_READ


STEP_NAME_KEYS: Final = (
    attr.STEP_NAME,
    attr.HAYSTACK_COMPONENT_NAME,
    attr.HAYSTACK_TOOL_NAME,
    attr.AI_TOOL_CALL_NAME,
)
"""Where a step's name is: chainlat's ``chainlat.step.name``, else the name a framework gave
the step where its span names only the kind of span (``haystack.component.run``,
``ai.toolCall``)."""


def step_name_of(attributes: Mapping[str, object]) -> str | None:
    """The step's name (:data:`STEP_NAME_KEYS`, the first that is a non-blank string)."""
    for key in STEP_NAME_KEYS:
        name = attributes.get(key)
        if isinstance(name, str) and name.strip():
            return str.__str__(name)  # a str subclass (an enum's member) as its plain string
    return None
