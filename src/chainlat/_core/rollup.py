"""Pure rollup: the spans of one workflow in, chain latency out.

Nothing here touches OpenTelemetry; the span processor (live) and the trace
readers (offline) both turn spans into :class:`SpanRecord` and call
:func:`compute_rollup`, so a workflow gets the same numbers either way.

How the wall time is split: walk the critical path back from the workflow's
end (the last child to end, then the child that ended last before that one
started, recursing into each child: the method of Jaeger's critical-path
view), and give each instant on it to the innermost *step* that covers it.
Instants no step covers are overhead, so the four kinds always sum to the
total. Spans that are not steps (HTTP client spans, framework spans) are
transparent: the walk goes through them, their own time belongs to the step
around them, or to overhead. A step nested in a step of the same kind (the
HTTP-level model call inside a hand-written ``chainlat.inference``) is the
same operation seen twice and is counted once; when one of its spans is
HTTP-level, the wire times it: the other spans' extra time is the client's
work, not the model's (docs/attributes.md, rules of the rollup).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from chainlat._core import attributes as attr
from chainlat._core import conventions, voice
from chainlat._core.prices import Prices, price_of

SpanKindLabel = Literal["inference", "data", "tool", "workflow"]

_NS_PER_MS: Final = 1_000_000
_STEP_KINDS: Final = frozenset(("inference", "data", "tool"))


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
    operation: str | None = None
    """``gen_ai.operation.name`` of a model call (the speech split reads it)."""

    @property
    def label(self) -> str:
        """The step's key in budgets and reports: its step name, else its span name."""
        return self.step_name or self.name


@dataclass(frozen=True, slots=True)
class Rollup:
    """Where the wall time of one workflow run went, in milliseconds.

    ``inference_ms + data_ms + tool_ms + overhead_ms == total_ms``: the split
    follows the critical path, so time spent in parallel branches that did not
    decide the end is not in it. The ``*_sum_ms`` fields are plain sums of step
    durations instead, and exceed the wall time when steps overlap.
    """

    total_ms: float
    """Wall time of the workflow."""
    inference_ms: float
    """Critical-path time inside model calls."""
    data_ms: float
    """Critical-path time inside data stages (retrieval, feature fetch, ETL)."""
    tool_ms: float
    """Critical-path time inside tool calls."""
    overhead_ms: float
    """Critical-path time outside every step: glue code and waiting."""
    inference_sum_ms: float = 0.0
    data_sum_ms: float = 0.0
    tool_sum_ms: float = 0.0
    parallelism: float = 0.0
    """Sum of the top-level step durations divided by the total (0 when empty)."""
    step_count: int = 0
    inference_count: int = 0
    data_count: int = 0
    tool_count: int = 0
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    critical_path: tuple[str, ...] = field(default=())
    """Names of the steps on the critical path, in time order."""
    first_output_ms: float | None = None
    """From the start to the first output the user saw (see :func:`compute_rollup`)."""
    first_output_inference_ms: float | None = None
    """The critical-path split of the wait for the first output; the four sum to it."""
    first_output_data_ms: float | None = None
    first_output_tool_ms: float | None = None
    first_output_overhead_ms: float | None = None
    cost_usd: float | None = None
    """What the run's model calls cost, when prices were given; None otherwise."""
    speech_to_text_ms: float | None = None
    """Critical-path time in ``speech_to_text`` calls, a part of ``inference_ms``; None
    when the run made no speech call (also the three below; see `chainlat._core.voice`)."""
    text_to_speech_ms: float | None = None
    first_output_speech_to_text_ms: float | None = None
    first_output_text_to_speech_ms: float | None = None

    def kind_ms(self, kind: str) -> float:
        """The critical-path share of ``inference``, ``data``, ``tool`` or ``overhead``."""
        return {
            "total": self.total_ms,
            "inference": self.inference_ms,
            "data": self.data_ms,
            "tool": self.tool_ms,
            "overhead": self.overhead_ms,
        }[kind]

    def first_output_split(self) -> dict[str, float] | None:
        """The wait for the first output by kind (inference, data, tool, overhead), if known."""
        if self.first_output_ms is None:
            return None
        return {
            "inference": self.first_output_inference_ms or 0.0,
            "data": self.first_output_data_ms or 0.0,
            "tool": self.first_output_tool_ms or 0.0,
            "overhead": self.first_output_overhead_ms or 0.0,
        }

    def to_attributes(self) -> dict[str, float | int | tuple[str, ...]]:
        """The ``chainlat.chain.*`` span attributes."""
        found: dict[str, float | int | tuple[str, ...]] = {
            attr.CHAIN_TOTAL_MS: self.total_ms,
            attr.CHAIN_INFERENCE_MS: self.inference_ms,
            attr.CHAIN_DATA_MS: self.data_ms,
            attr.CHAIN_TOOL_MS: self.tool_ms,
            attr.CHAIN_OVERHEAD_MS: self.overhead_ms,
            attr.CHAIN_INFERENCE_SUM_MS: self.inference_sum_ms,
            attr.CHAIN_DATA_SUM_MS: self.data_sum_ms,
            attr.CHAIN_TOOL_SUM_MS: self.tool_sum_ms,
            attr.CHAIN_PARALLELISM: self.parallelism,
            attr.CHAIN_STEP_COUNT: self.step_count,
            attr.CHAIN_INFERENCE_COUNT: self.inference_count,
            attr.CHAIN_DATA_COUNT: self.data_count,
            attr.CHAIN_TOOL_COUNT: self.tool_count,
            attr.CHAIN_CACHE_HITS: self.cache_hits,
            attr.CHAIN_INPUT_TOKENS: self.input_tokens,
            attr.CHAIN_OUTPUT_TOKENS: self.output_tokens,
            attr.CHAIN_CRITICAL_PATH: self.critical_path,
        }
        if self.first_output_ms is not None:
            found[attr.CHAIN_FIRST_OUTPUT_MS] = self.first_output_ms
            found[attr.CHAIN_FIRST_OUTPUT_INFERENCE_MS] = self.first_output_inference_ms or 0.0
            found[attr.CHAIN_FIRST_OUTPUT_DATA_MS] = self.first_output_data_ms or 0.0
            found[attr.CHAIN_FIRST_OUTPUT_TOOL_MS] = self.first_output_tool_ms or 0.0
            found[attr.CHAIN_FIRST_OUTPUT_OVERHEAD_MS] = self.first_output_overhead_ms or 0.0
        if self.cost_usd is not None:
            found[attr.CHAIN_COST_USD] = self.cost_usd
        for key, value in (
            (attr.CHAIN_SPEECH_TO_TEXT_MS, self.speech_to_text_ms),
            (attr.CHAIN_TEXT_TO_SPEECH_MS, self.text_to_speech_ms),
            (attr.CHAIN_FIRST_OUTPUT_SPEECH_TO_TEXT_MS, self.first_output_speech_to_text_ms),
            (attr.CHAIN_FIRST_OUTPUT_TEXT_TO_SPEECH_MS, self.first_output_text_to_speech_ms),
        ):
            if value is not None:
                found[key] = value
        return found

    @classmethod
    def from_attributes(cls, attributes: Mapping[str, object]) -> Rollup | None:
        """Read a rollup back from span attributes; None when they are absent or malformed."""
        try:
            get = attributes.get
            path = get(attr.CHAIN_CRITICAL_PATH, ())
            # Positional, in the order of the fields: this runs once per run read.
            return cls(
                _as_float(attributes[attr.CHAIN_TOTAL_MS]),
                _as_float(attributes[attr.CHAIN_INFERENCE_MS]),
                _as_float(attributes[attr.CHAIN_DATA_MS]),
                _as_float(attributes[attr.CHAIN_TOOL_MS]),
                _as_float(attributes[attr.CHAIN_OVERHEAD_MS]),
                _as_float(get(attr.CHAIN_INFERENCE_SUM_MS, 0.0)),
                _as_float(get(attr.CHAIN_DATA_SUM_MS, 0.0)),
                _as_float(get(attr.CHAIN_TOOL_SUM_MS, 0.0)),
                _as_float(get(attr.CHAIN_PARALLELISM, 0.0)),
                _as_int(get(attr.CHAIN_STEP_COUNT, 0)),
                _as_int(get(attr.CHAIN_INFERENCE_COUNT, 0)),
                _as_int(get(attr.CHAIN_DATA_COUNT, 0)),
                _as_int(get(attr.CHAIN_TOOL_COUNT, 0)),
                _as_int(get(attr.CHAIN_CACHE_HITS, 0)),
                _as_int(get(attr.CHAIN_INPUT_TOKENS, 0)),
                _as_int(get(attr.CHAIN_OUTPUT_TOKENS, 0)),
                tuple(map(str, path)) if isinstance(path, (list, tuple)) else (),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_INFERENCE_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_DATA_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_TOOL_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_OVERHEAD_MS)),
                _optional_float(get(attr.CHAIN_COST_USD)),
                _optional_float(get(attr.CHAIN_SPEECH_TO_TEXT_MS)),
                _optional_float(get(attr.CHAIN_TEXT_TO_SPEECH_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_SPEECH_TO_TEXT_MS)),
                _optional_float(get(attr.CHAIN_FIRST_OUTPUT_TEXT_TO_SPEECH_MS)),
            )
        except (KeyError, TypeError, ValueError, OverflowError):
            return None


def _as_float(value: object) -> float:
    if type(value) is float:  # the common case, checked first: a finite double
        if value - value == 0.0:  # False for NaN and the infinities
            return value
        raise ValueError(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    number = float(value)
    if not math.isfinite(number):
        # "NaN" is how protobuf's JSON mapping writes a NaN double: a rollup holding one
        # is no rollup (the readers rebuild it from the spans), never a number that
        # passes every limit.
        raise ValueError(value)
    return number


def _optional_float(value: object) -> float | None:
    return None if value is None else _as_float(value)


def _as_int(value: object) -> int:
    if type(value) is int:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(value)
    return int(value)  # int("nan") and int(float("inf")) raise ValueError / OverflowError


classify: Final = conventions.classify
"""The step kind of a span from its attributes, chainlat's own or another instrumentation's
(see :mod:`chainlat._core.conventions` and docs/integrations.md)."""


WIRE: Final = "http"
"""The source of a model call traced at the HTTP level (``chainlat.instrument_httpx()``):
the span that times the call as the server answered it (see `compute_rollup`)."""


def source_of(attributes: Mapping[str, object]) -> str:
    """The convention a span's kind came from: two instrumentations of one call differ here.

    Another convention's marker wins over ``chainlat.step.kind``, which chainlat's span
    processor adds to the foreign steps of a workflow. A model call that carries an HTTP
    request method was traced at the wire: its source is `WIRE`.
    """
    if conventions.OPENINFERENCE_SPAN_KIND in attributes:
        return "openinference"
    if conventions.LANGSMITH_SPAN_KIND in attributes:
        return "langsmith"
    if conventions.TRACELOOP_SPAN_KIND in attributes or conventions.LLM_REQUEST_TYPE in attributes:
        return "traceloop"
    if conventions.is_http_level(attributes):
        return WIRE
    if conventions.STEP_KIND in attributes:
        return "chainlat"
    if conventions.GEN_AI_OPERATION_NAME in attributes:
        return "gen_ai"
    return "other"


def call_details(
    attributes: Mapping[str, object],
) -> tuple[int | None, int | None, float | None, str | None, str]:
    """What any convention says of a model call: input and output tokens, time to first
    token (ms), model and the source convention."""
    return (
        conventions.input_tokens_of(attributes),
        conventions.output_tokens_of(attributes),
        conventions.ttft_ms_of(attributes),
        conventions.model_of(attributes),
        source_of(attributes),
    )


def call_record(
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    kind: SpanKindLabel | None,
    attributes: Mapping[str, object],
    ttft_ms: float | None = None,
) -> SpanRecord:
    """A span's record, with :func:`call_details` for a model call."""
    cache_hit = attributes.get(attr.CACHE_HIT) is True
    step_name = step_name_of(attributes)
    if kind != "inference":
        record = SpanRecord(span_id, parent_id, name, start_ns, end_ns, kind, cache_hit)
        if step_name is not None:
            record.step_name = step_name
        return record
    tokens_in, tokens_out, ttft, model, source = call_details(attributes)
    return SpanRecord(
        span_id,
        parent_id,
        name,
        start_ns,
        end_ns,
        kind,
        cache_hit,
        tokens_in,
        tokens_out,
        ttft_ms if ttft_ms is not None else ttft,
        model,
        source,
        step_name,
        attributes.get(attr.USER_FACING) is True,
        cache_read_tokens_of(attributes),
        voice.operation_of(attributes),
    )


CACHE_READ_KEYS: Final = (
    attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
)


def step_name_of(attributes: Mapping[str, object]) -> str | None:
    """``chainlat.step.name``, when it is a non-blank string."""
    name = attributes.get(attr.STEP_NAME)
    return name if type(name) is str and name.strip() else None


def cache_read_tokens_of(attributes: Mapping[str, object]) -> int | None:
    """Input tokens read from a prompt cache, as any convention writes them."""
    return conventions._first_count(attributes, CACHE_READ_KEYS)


@dataclass(frozen=True, slots=True)
class PathPiece:
    """A stretch of the critical path: the span it was spent in, what it counts as, and the
    steps (span id, name) that join the path here, in path order."""

    span_id: int
    start_ns: int
    end_ns: int
    kind: str
    steps: tuple[tuple[int, str], ...]


@dataclass(slots=True)
class _Node:
    rec: SpanRecord
    start: int
    end: int
    attribution: str  # the kind its own time counts as, or "overhead"
    owner: _Node | None  # the innermost step around it, itself included
    parent: _Node | None = None
    enclosing: _Node | None = None  # for a step: the step around it
    kids: list[_Node] = field(default_factory=list)


def find_twins(root_id: int, spans: Iterable[SpanRecord]) -> dict[int, SpanRecord]:
    """Model calls seen twice: each duplicate span's id, mapped to the span that counts.

    Two instrumentations of one call (a framework's callback span and the wire-level
    span, which callbacks do not make current, so it lands beside the framework
    span rather than inside it) write two inference spans of different sources that
    overlap in time, for the same model. Whatever their parent links, the longer one
    counts and the other is the same call seen twice. Spans of one source are never
    twins: two parallel calls of one model are two calls. Each span is the twin of
    at most one other, matched by the same input tokens first, then by the largest
    overlap (at least half the shorter).

    A call nested in another call (through transparent spans) is that call seen twice
    already (rule 1 of the rollup), so it is nobody's twin: matching it by time alone
    could pair it with a parallel call's span, and give each call the other's tokens.
    """
    records = spans if isinstance(spans, list) else list(spans)
    calls = [r for r in records if r.kind == "inference" and r.span_id != root_id]
    if len(calls) < 2:
        return {}
    first = calls[0].source
    if all(r.source == first for r in calls):
        return {}  # the common case: one instrumentation
    by_id = {r.span_id: r for r in records}
    calls = [r for r in calls if not _inside_call(r, by_id, root_id)]
    calls.sort(key=lambda r: (r.start_ns - r.end_ns, r.start_ns, r.span_id))  # longest first
    primaries: list[SpanRecord] = []
    matched: set[tuple[int, str | None]] = set()  # (primary, source) pairs already used
    twins: dict[int, SpanRecord] = {}
    for rec in calls:
        best: SpanRecord | None = None
        best_rank = (0, 0)
        duration = rec.end_ns - rec.start_ns
        for primary in primaries:
            if primary.source == rec.source or (primary.span_id, rec.source) in matched:
                continue
            if not _same_model(primary.model, rec.model):
                continue
            overlap = min(primary.end_ns, rec.end_ns) - max(primary.start_ns, rec.start_ns)
            if overlap <= 0 or 2 * overlap < duration:
                continue
            rank = (_same_tokens(primary, rec), overlap)
            if best is None or rank > best_rank:
                best, best_rank = primary, rank
        if best is None:
            primaries.append(rec)
        else:
            matched.add((best.span_id, rec.source))
            twins[rec.span_id] = best
    return twins


def _inside_call(rec: SpanRecord, by_id: Mapping[int, SpanRecord], root_id: int) -> bool:
    """Whether ``rec`` lies in a model call: its nearest data, tool or inference ancestor
    (transparent spans and workflows looked through, as the rollup does) is inference."""
    parent = by_id.get(rec.parent_id) if rec.parent_id is not None else None
    for _ in range(len(by_id)):  # bounded: a malformed trace may have a cycle
        if parent is None or parent.span_id == root_id:
            return False
        if parent.kind == "inference":
            return True
        if parent.kind in ("data", "tool"):
            return False
        parent = by_id.get(parent.parent_id) if parent.parent_id is not None else None
    return False


def _same_tokens(a: SpanRecord, b: SpanRecord) -> int:
    """1 when both spans count the same input tokens, -1 when they differ, 0 when unknown."""
    if a.input_tokens is None or b.input_tokens is None:
        return 0
    return 1 if a.input_tokens == b.input_tokens else -1


def _same_model(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return True
    return a == b or _model_key(a) == _model_key(b)


_SNAPSHOT: Final = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def _model_key(model: str) -> str:
    # One model as different instrumentations name it: a response model with its snapshot
    # date (gpt-4o-mini-2024-07-18), a router's provider prefix (openai/gpt-4o-mini).
    return _SNAPSHOT.sub("", model.rsplit("/", 1)[-1].lower())


def compute_rollup(
    root: SpanRecord,
    spans: Iterable[SpanRecord],
    *,
    first_output_ns: int | None = None,
    prices: Prices | None = None,
    pieces: list[PathPiece] | None = None,
) -> Rollup:
    """Roll the spans of one workflow up into chain latency.

    The first output is the instant the user saw the answer begin: ``first_output_ns``
    when the application marked it (``run.first_output()``); else the first token of
    the earliest model call marked ``user_facing`` (a call that did not stream gives
    its output when it ends); else the first token of the last streamed model call
    (the one that started last); else the end of the model call that ended last; no
    model call, no first output. Its wait is split by kind along the critical path
    to that instant, the same walk as the total's.

    Args:
        root: The workflow span.
        spans: Its descendants, in any order; spans not connected to ``root``
            are ignored, and children are clipped to their parent's interval.
        first_output_ns: The first output, when the application marked it.
        pieces: When given, the critical path is appended to it as drawable pieces
            (a waterfall draws the path from the rollup's own walk).
        prices: Model prices: the cost of the run's model calls, when each has a price
            and token counts.
    """
    # Runs at the end of every workflow, in the application's thread: written for
    # speed (locals, no per-span generators), tested against the definition.
    root_id = root.span_id
    records = spans if isinstance(spans, list) else list(spans)
    by_parent: dict[int, list[SpanRecord]] = {}
    wires: list[SpanRecord] = []
    for rec in records:
        parent_id = rec.parent_id
        if parent_id is not None and rec.span_id != root_id:
            siblings = by_parent.get(parent_id)
            if siblings is None:
                by_parent[parent_id] = [rec]
            else:
                siblings.append(rec)
        if rec.source == WIRE:
            wires.append(rec)
    twins = find_twins(root_id, records)
    widened: dict[int, tuple[int, int]] = {}
    twin_records = {r.span_id: r for r in records if r.span_id in twins} if twins else {}
    renamed: dict[int, str] = {}  # a counted call named only by its twin
    for twin_id, primary in twins.items():
        twin = twin_records[twin_id]
        if twin.step_name and not primary.step_name:
            renamed[primary.span_id] = twin.step_name
        if primary.source == WIRE:
            continue  # the wire times the call: its twin's extra time is not the model's
        low, high = widened.get(primary.span_id, (primary.start_ns, primary.end_ns))
        widened[primary.span_id] = (min(low, twin.start_ns), max(high, twin.end_ns))
    wire_timed = _timed_by_wire(root_id, records, wires, twins, by_parent) if wires else set()

    top = _Node(root, root.start_ns, max(root.end_ns, root.start_ns), "overhead", None)
    counts = {"inference": 0, "data": 0, "tool": 0}
    sums = {"inference": 0, "data": 0, "tool": 0}
    step_count = 0
    top_level_ns = 0
    calls: list[_Node] = []  # counted inference steps
    group_of: dict[int, int] = {}  # span id of an inference span -> its counted call's
    tokens_in: dict[int, int] = {}
    tokens_out: dict[int, int] = {}
    cached: set[int] = set()
    first_token: dict[int, int] = {}  # counted call -> its earliest first token (ns)
    user_facing: set[int] = set()
    seen_twice: list[SpanRecord] = []

    queue = [top]
    seen = {root_id}
    while queue:
        parent = queue.pop()
        children = by_parent.get(parent.rec.span_id)
        if children is None:
            continue
        p_start, p_end = parent.start, parent.end
        p_attribution, p_owner, p_kids = parent.attribution, parent.owner, parent.kids
        for rec in children:
            span_id = rec.span_id
            if span_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(span_id)
            start = rec.start_ns
            end = rec.end_ns
            if widened and span_id in widened:
                start, end = widened[span_id]
            if start < p_start:
                start = p_start
            elif start > p_end:
                start = p_end
            if end > p_end:
                end = p_end
            if end < start:
                end = start
            kind = rec.kind
            if twins and span_id in twins:
                seen_twice.append(rec)
                kind = None  # the call counts once, as its twin
            if kind in _STEP_KINDS:
                assert kind is not None
                attribution: str = kind
                counted = p_attribution != kind
                if wire_timed and kind == "inference":
                    if span_id in wire_timed:
                        # The wire times the call: the instants no wire span of it covers
                        # are the client's work, as the kind around says (overhead).
                        attribution = p_attribution
                    if p_owner is not None and p_owner.rec.span_id in wire_timed:
                        counted = False  # the same call, as it reached the wire
            else:
                attribution = p_attribution
                counted = kind == "workflow"
            node = _Node(rec, start, end, attribution, p_owner, parent)
            if counted:
                node.owner = node
                node.enclosing = p_owner
                step_count += 1
                if p_owner is None:
                    top_level_ns += end - start
                if kind in _STEP_KINDS:
                    assert kind is not None
                    counts[kind] += 1
                    sums[kind] += end - start
                if kind == "inference":
                    calls.append(node)
            if kind == "inference":
                group = node.owner
                if group is not None:
                    key = group.rec.span_id
                    group_of[span_id] = key
                    _add_usage(rec, key, tokens_in, tokens_out, cached)
                    if rec.ttft_ms is not None or rec.user_facing:
                        _add_output(rec, key, first_token, user_facing)
            if kind is None or (kind == "workflow" and span_id in by_parent):
                # Transparent, or a nested workflow (whose own time is not a step's
                # either): its children take its place among its parent's children, so a
                # framework span that ends last cannot hide the steps beside it from the
                # critical path; its own time is its parent's either way.
                node.kids = p_kids
            else:
                p_kids.append(node)
            if span_id in by_parent:
                queue.append(node)
    for rec in seen_twice:
        call = group_of.get(twins[rec.span_id].span_id)
        if call is not None:
            _add_usage(rec, call, tokens_in, tokens_out, cached)
            _add_output(rec, call, first_token, user_facing)

    split = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
    path: list[str] = []
    on_path: set[int] = set()
    segments, disjoint = _critical_segments(top)
    speech = voice.has_speech(calls)
    if speech:
        segments = voice.fill_model_gaps(segments, calls)
    for node, seg_start, seg_end in segments:
        split[node.attribution] += seg_end - seg_start
        step = node.owner
        if pieces is not None:
            pieces.append(PathPiece(node.rec.span_id, seg_start, seg_end, node.attribution, ()))
        if step is None or id(step) in on_path:
            continue
        chain: list[str] = []
        chain_ids: list[int] = []
        while step is not None and id(step) not in on_path:
            chain.append(
                step.rec.step_name or renamed.get(step.rec.span_id) or step.rec.name
                if renamed
                else step.rec.step_name or step.rec.name
            )
            chain_ids.append(step.rec.span_id)
            on_path.add(id(step))
            step = step.enclosing
        chain.reverse()
        path += chain
        if pieces is not None:
            chain_ids.reverse()
            last = pieces[-1]
            pieces[-1] = PathPiece(
                last.span_id,
                last.start_ns,
                last.end_ns,
                last.kind,
                tuple(zip(chain_ids, chain, strict=True)),
            )

    total = top.end - top.start
    call_keys = [n.rec.span_id for n in calls]
    output_ns = first_output_ns
    source: _Node | None = None
    if output_ns is None and calls:
        output_ns, source = _first_output(calls, first_token, user_facing)
    first_output: dict[str, float] | None = None
    wait_path: list[tuple[_Node, int, int]] = []
    if output_ns is not None:
        output_ns = min(max(output_ns, top.start), top.end)
        waits = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
        if disjoint and _SHORTCUT:
            # No two spans of one parent overlap: the walk to the cut is the walk to the
            # end, cut there (see `_critical_segments`), so the path is walked once.
            for node, seg_start, seg_end in segments:
                if seg_start >= output_ns:
                    break
                waits[node.attribution] += min(seg_end, output_ns) - seg_start
                if speech:
                    wait_path.append((node, seg_start, min(seg_end, output_ns)))
        else:
            # At the output's instant the walk goes through the call that gave it,
            # whatever else ends there too (everything running at that instant is cut).
            favoured: set[int] = set()
            while source is not None:
                favoured.add(id(source))
                source = source.parent
            wait_path = _wait_segments(top, output_ns, favoured)
            if speech:
                wait_path = voice.fill_model_gaps(wait_path, calls)
            for node, seg_start, seg_end in wait_path:
                waits[node.attribution] += seg_end - seg_start
        first_output = {k: v / _NS_PER_MS for k, v in waits.items()}
        first_output["total"] = (output_ns - top.start) / _NS_PER_MS
    speech_ms: dict[str, float] = {}
    if speech:
        for prefix, path_pieces in (("", segments), ("first_output.", wait_path)):
            if prefix and first_output is None:
                continue
            for op, ns in voice.speech_split(path_pieces).items():
                speech_ms[prefix + op] = ns / _NS_PER_MS
    cost = None
    if prices is not None and calls:
        cost = _cost(calls, prices, tokens_in, tokens_out, records, group_of)
    return Rollup(
        total_ms=total / _NS_PER_MS,
        inference_ms=split["inference"] / _NS_PER_MS,
        data_ms=split["data"] / _NS_PER_MS,
        tool_ms=split["tool"] / _NS_PER_MS,
        overhead_ms=split["overhead"] / _NS_PER_MS,
        inference_sum_ms=sums["inference"] / _NS_PER_MS,
        data_sum_ms=sums["data"] / _NS_PER_MS,
        tool_sum_ms=sums["tool"] / _NS_PER_MS,
        parallelism=top_level_ns / total if total > 0 else 0.0,
        step_count=step_count,
        inference_count=counts["inference"],
        data_count=counts["data"],
        tool_count=counts["tool"],
        cache_hits=sum(1 for k in call_keys if k in cached),
        input_tokens=sum(tokens_in.get(k, 0) for k in call_keys),
        output_tokens=sum(tokens_out.get(k, 0) for k in call_keys),
        critical_path=tuple(path),
        first_output_ms=first_output["total"] if first_output else None,
        first_output_inference_ms=first_output["inference"] if first_output else None,
        first_output_data_ms=first_output["data"] if first_output else None,
        first_output_tool_ms=first_output["tool"] if first_output else None,
        first_output_overhead_ms=first_output["overhead"] if first_output else None,
        cost_usd=cost,
        speech_to_text_ms=speech_ms.get("speech_to_text"),
        text_to_speech_ms=speech_ms.get("text_to_speech"),
        first_output_speech_to_text_ms=speech_ms.get("first_output.speech_to_text"),
        first_output_text_to_speech_ms=speech_ms.get("first_output.text_to_speech"),
    )


def _timed_by_wire(
    root_id: int,
    records: list[SpanRecord],
    wires: list[SpanRecord],
    twins: dict[int, SpanRecord],
    by_parent: dict[int, list[SpanRecord]],
) -> set[int]:
    """The model calls that a wire-level span times, by span id (see `compute_rollup`).

    For each HTTP-level model call: every inference span around it (through transparent
    spans and workflows) is the same call, and so is the span whose twin it is, or whose
    twin holds it. A wire span that is such a span's twin beside it, not inside it, is
    moved under it (in ``by_parent``, and out of ``twins``), so the walk finds it there.
    """
    by_id = {r.span_id: r for r in records}
    timed: set[int] = set()
    for wire in wires:
        if wire.kind != "inference" or wire.span_id == root_id:
            continue
        outer: SpanRecord | None = None
        parent = by_id.get(wire.parent_id) if wire.parent_id is not None else None
        for _ in range(len(by_id)):  # bounded: a malformed trace may have a cycle
            if parent is None or parent.span_id == root_id or parent.kind in ("data", "tool"):
                break
            if parent.kind == "inference" and parent.source != WIRE:
                timed.add(parent.span_id)
                if outer is None:
                    outer = parent
            parent = by_id.get(parent.parent_id) if parent.parent_id is not None else None
        call = twins.get(wire.span_id) if outer is None else twins.get(outer.span_id, outer)
        if call is None or call.source == WIRE:
            continue  # a call of its own, or the wire span counts and times it
        timed.add(call.span_id)
        if outer is None or call is not outer:
            # Beside the call's span: moved under it (the call's interval covers it).
            parent_id = wire.parent_id if outer is None else outer.parent_id
            moved = wire if outer is None else outer
            siblings = by_parent.get(parent_id, []) if parent_id is not None else []
            for i, sibling in enumerate(siblings):
                if sibling is moved:
                    del siblings[i]
                    by_parent.setdefault(call.span_id, []).append(moved)
                    break
            twins.pop(moved.span_id, None)
    return timed


def _add_output(
    rec: SpanRecord, key: int, first_token: dict[int, int], user_facing: set[int]
) -> None:
    # A call seen by several spans: its first token is the earliest any of them saw.
    if rec.ttft_ms is not None:
        instant = rec.start_ns + round(rec.ttft_ms * _NS_PER_MS)
        known = first_token.get(key)
        if known is None or instant < known:
            first_token[key] = instant
    if rec.user_facing:
        user_facing.add(key)


def _first_output(
    calls: list[_Node], first_token: dict[int, int], user_facing: set[int]
) -> tuple[int, _Node]:
    """The documented rule of :func:`compute_rollup` without an application mark: the
    instant, and the call that gave the output."""
    marked = [n for n in calls if n.rec.span_id in user_facing]
    if marked:
        instant, call = min(
            ((first_token.get(n.rec.span_id, n.end), n) for n in marked), key=lambda p: p[0]
        )
        return instant, call
    streamed = [n for n in calls if n.rec.span_id in first_token]
    if streamed:
        last = max(streamed, key=lambda n: (n.start, n.end))
        return first_token[last.rec.span_id], last
    call = max(calls, key=lambda n: n.end)
    return call.end, call


def _cost(
    calls: list[_Node],
    prices: Prices,
    tokens_in: Mapping[int, int],
    tokens_out: Mapping[int, int],
    records: list[SpanRecord],
    group_of: Mapping[int, int],
) -> float | None:
    """The cost of every counted call; None when one has no price or no token counts."""
    models: dict[int, str] = {}
    cache_reads: dict[int, int] = {}
    for rec in records:
        key = group_of.get(rec.span_id)
        if key is None:
            continue
        if rec.model is not None and (key not in models or rec.span_id == key):
            models[key] = rec.model
        if rec.cache_read_tokens is not None:
            cache_reads[key] = max(cache_reads.get(key, 0), rec.cache_read_tokens)
    total = 0.0
    for node in calls:
        key = node.rec.span_id
        price = price_of(prices, models.get(key))
        if price is None or (key not in tokens_in and key not in tokens_out):
            return None
        total += price.cost(tokens_in.get(key, 0), tokens_out.get(key, 0), cache_reads.get(key, 0))
    return total


def _add_usage(
    rec: SpanRecord,
    key: int,
    tokens_in: dict[int, int],
    tokens_out: dict[int, int],
    cached: set[int],
) -> None:
    # The same call seen by several spans: its tokens once (the largest count seen).
    if rec.input_tokens is not None:
        tokens_in[key] = max(tokens_in.get(key, 0), rec.input_tokens)
    if rec.output_tokens is not None:
        tokens_out[key] = max(tokens_out.get(key, 0), rec.output_tokens)
    if rec.cache_hit:
        cached.add(key)


_SHORTCUT = True
"""Whether the wait for the first output may be read off the total's walk (see
`_critical_segments`); the tests turn it off to hold both ways to the same numbers."""


def _by_end(node: _Node) -> tuple[int, int]:
    return (node.end, -node.start)


def _critical_segments(top: _Node) -> tuple[list[tuple[_Node, int, int]], bool]:
    """The critical path as (node, start, end) pieces, in time order, and whether the
    children of every node the walk entered are disjoint in time (touching allowed).

    When they are, the walk takes every child of every node it enters, one after the
    other, and `_wait_segments` to any instant gives these same pieces, cut at that
    instant: no two children of one node can tie or cross there, so neither the cut
    nor its tie-break changes a choice.
    """
    segments: list[tuple[_Node, int, int]] = []
    disjoint = True
    # Each frame: node, the time the walk has reached inside it, its children
    # sorted by end (ties: longest last, so it wins), and the next candidate.
    stack: list[tuple[_Node, int, list[_Node], int]] = []

    def push(node: _Node) -> None:
        nonlocal disjoint
        kids = [k for k in node.kids if k.end > k.start]
        kids.sort(key=_by_end)
        if disjoint:
            previous_end = node.start
            for kid in kids:
                if kid.start < previous_end:
                    disjoint = False
                    break
                previous_end = kid.end
        stack.append((node, node.end, kids, len(kids) - 1))

    push(top)
    while stack:
        node, t, kids, i = stack.pop()
        while i >= 0 and (kids[i].end > t or kids[i].start >= t):
            i -= 1
        if i < 0:
            if node.start < t:
                segments.append((node, node.start, t))
            continue
        child = kids[i]
        if child.end < t:
            segments.append((node, child.end, t))
        stack.append((node, child.start, kids, i - 1))
        if child.kids:
            push(child)
        else:  # a leaf lies on the path from its start to its end (push keeps end > start)
            segments.append((child, child.start, child.end))
    segments.reverse()
    return segments, disjoint


def _wait_segments(top: _Node, cut: int, favoured: set[int]) -> list[tuple[_Node, int, int]]:
    """The critical path to the instant ``cut``, as if the run had ended then (every span
    cut there), where the ``favoured`` nodes (by ``id``) win ties of end time: the same
    walk as :func:`_critical_segments`."""
    segments: list[tuple[_Node, int, int]] = []
    stack: list[tuple[_Node, int, list[tuple[int, bool, int, int, _Node]], int]] = []

    def push(node: _Node) -> None:
        # Decorated tuples rather than a key function: this runs at every workflow's end.
        ordered = sorted(
            [
                (k.end if k.end < cut else cut, id(k) in favoured, -k.start, n, k)
                for n, k in enumerate(node.kids)
                if k.start < cut and k.end > k.start
            ]
        )
        stack.append((node, node.end if node.end < cut else cut, ordered, len(ordered) - 1))

    push(top)
    while stack:
        node, t, kids, i = stack.pop()
        while i >= 0 and (kids[i][0] > t or kids[i][4].start >= t):
            i -= 1
        if i < 0:
            if node.start < t:
                segments.append((node, node.start, t))
            continue
        child_end = kids[i][0]
        child = kids[i][4]
        if child_end < t:
            segments.append((node, child_end, t))
        stack.append((node, child.start, kids, i - 1))
        if child.kids:
            push(child)
        else:
            segments.append((child, child.start, child_end))
    segments.reverse()
    return segments
