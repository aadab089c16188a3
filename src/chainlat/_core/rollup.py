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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final

from chainlat._core import attributes as attr
from chainlat._core import critical_path, voice
from chainlat._core.chain import Rollup
from chainlat._core.critical_path import (
    Node,
    PathPiece,
    critical_segments,
    first_output_of,
)
from chainlat._core.prices import Prices, price_of
from chainlat._core.records import (
    CACHE_READ_KEYS,
    WIRE,
    SpanKindLabel,
    SpanRecord,
    cache_read_tokens_of,
    call_details,
    call_record,
    classify,
    source_of,
    step_name_of,
)
from chainlat._core.twins import find_twins, normalised, same_model, timed_by_wire

__all__ = [
    "CACHE_READ_KEYS",
    "WIRE",
    "PathPiece",
    "Rollup",
    "SpanKindLabel",
    "SpanRecord",
    "cache_read_tokens_of",
    "call_details",
    "call_record",
    "classify",
    "compute_rollup",
    "find_twins",
    "same_model",
    "source_of",
    "step_name_of",
]

_NS_PER_MS: Final = 1_000_000
_STEP_KINDS: Final = frozenset(attr.STEP_KINDS)


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
    # speed (locals, no per-span generators), tested against the definition. Four phases:
    # how the spans are read (twins, the wire), the tree and its counts, the critical
    # path, the wait for the first output.
    records = normalised(root.span_id, spans if isinstance(spans, list) else list(spans))
    plan = _plan(root.span_id, records)
    top = Node(root, root.start_ns, max(root.end_ns, root.start_ns), "overhead", None)
    tally = _Tally()
    _grow(top, plan, tally)
    # A voice run's path gives the overhead a streaming model call runs through to that
    # call (see `voice.fill_model_gaps`); other runs' paths are not changed.
    speech = tally.calls if voice.has_speech(tally.calls) else None
    split, path, segments, disjoint = _walk(top, plan.renamed, pieces, speech)
    output_ns = first_output_ns
    source: Node | None = None
    if output_ns is None and tally.calls:
        output_ns, source = first_output_of(tally.calls, tally.first_token, tally.user_facing)
    waits = None
    wait_path: list[tuple[Node, int, int]] | None = None
    if output_ns is not None:
        output_ns = min(max(output_ns, top.start), top.end)
        waits, wait_path = _wait(top, output_ns, source, segments, disjoint, speech)
    cost = None
    if prices is not None and tally.calls:
        cost = _cost(
            tally.calls, prices, tally.tokens_in, tally.tokens_out, records, tally.group_of
        )
    speech_ms = _speech_ms(segments, wait_path) if speech is not None else {}
    rollup = _rollup(top, tally, split, path, output_ns, waits, cost, speech_ms)
    if tally.unrecorded - tally.at_wire:
        rollup = _unrecorded(rollup, tally, plan.renamed, output_ns, first_output_ns, source)
    return rollup


@dataclass(slots=True)
class _Plan:
    """Phase 1, how the spans are read: the tree, the calls seen twice, the wire's calls."""

    by_parent: dict[int, list[SpanRecord]]
    twins: dict[int, SpanRecord]
    widened: dict[int, tuple[int, int]]
    """A counted call's interval, widened to its twin's (unless the wire times it)."""
    renamed: dict[int, str]
    """A counted call named only by its twin."""
    wire_timed: set[int]


def _plan(root_id: int, records: list[SpanRecord]) -> _Plan:
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
    renamed: dict[int, str] = {}
    for twin_id, primary in twins.items():
        twin = twin_records[twin_id]
        if twin.step_name and not primary.step_name:
            renamed[primary.span_id] = twin.step_name
        if primary.source == WIRE:
            continue  # the wire times the call: its twin's extra time is not the model's
        low, high = widened.get(primary.span_id, (primary.start_ns, primary.end_ns))
        widened[primary.span_id] = (min(low, twin.start_ns), max(high, twin.end_ns))
    wire_timed = timed_by_wire(root_id, records, wires, twins, by_parent) if wires else set()
    return _Plan(by_parent, twins, widened, renamed, wire_timed)


@dataclass(slots=True)
class _Tally:
    """Phase 2, what the tree counts: steps by kind, and each counted call's usage."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_STEP_KINDS, 0))
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_STEP_KINDS, 0))
    step_count: int = 0
    top_level_ns: int = 0
    calls: list[Node] = field(default_factory=list)
    """The counted inference steps."""
    group_of: dict[int, int] = field(default_factory=dict)
    """Span id of an inference span -> its counted call's."""
    tokens_in: dict[int, int] = field(default_factory=dict)
    tokens_out: dict[int, int] = field(default_factory=dict)
    cached: set[int] = field(default_factory=set)
    first_token: dict[int, int] = field(default_factory=dict)
    """Counted call -> its first token (ns)."""
    user_facing: set[int] = field(default_factory=set)
    wired: set[int] = field(default_factory=set)
    """Calls whose tokens a wire-level span counted."""
    marked: set[int] = field(default_factory=set)
    """Calls whose first token the application marked."""
    unrecorded: set[int] = field(default_factory=set)
    """Calls one of whose spans ended before its own events (its end is not recorded)."""
    at_wire: set[int] = field(default_factory=set)
    """Calls an HTTP-level span saw: the wire times them, whatever their other spans say."""
    steps: list[Node] = field(default_factory=list)
    """The counted steps that are not model calls (data stages, tools, nested workflows)."""

    def add_call_span(self, rec: SpanRecord, key: int) -> None:
        """One span of the counted call ``key``: its tokens and first token, once."""
        _add_usage(rec, key, self.tokens_in, self.tokens_out, self.cached, self.wired)
        if rec.ttft_ms is not None or rec.user_facing:
            _add_output(rec, key, self.first_token, self.user_facing, self.marked)
        self.add_timing(rec, key)

    def add_timing(self, rec: SpanRecord, key: int) -> None:
        """Whether a span of the counted call ``key`` leaves its end unrecorded, or times it
        at the wire."""
        if rec.unrecorded_end:
            self.unrecorded.add(key)
        if rec.source == WIRE:
            self.at_wire.add(key)


def _grow(top: Node, plan: _Plan, tally: _Tally) -> None:
    """Phase 2: the tree of nodes under ``top``, each clipped to its parent, with what it
    counts as; transparent spans and nested workflows hand their children to their parent."""
    by_parent, twins, widened, wire_timed = (
        plan.by_parent, plan.twins, plan.widened, plan.wire_timed,
    )  # fmt: skip
    seen_twice: list[SpanRecord] = []
    queue = [top]
    seen = {top.rec.span_id}
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
            start, end = widened[span_id] if widened and span_id in widened else (
                rec.start_ns, rec.end_ns,
            )  # fmt: skip
            start = p_start if start < p_start else p_end if start > p_end else start
            end = start if end < start else p_end if end > p_end else end
            kind = rec.kind
            if twins and span_id in twins:
                seen_twice.append(rec)
                kind = None  # the call counts once, as its twin
            if kind in _STEP_KINDS:
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
            node = Node(rec, start, end, attribution, p_owner, parent)
            if counted:
                _count(node, kind, p_owner, tally)
            if kind == "inference" and node.owner is not None:
                key = node.owner.rec.span_id
                tally.group_of[span_id] = key
                tally.add_call_span(rec, key)
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
        call = tally.group_of.get(twins[rec.span_id].span_id)
        if call is not None:
            _add_usage(rec, call, tally.tokens_in, tally.tokens_out, tally.cached, tally.wired)
            _add_output(rec, call, tally.first_token, tally.user_facing, tally.marked)
            tally.add_timing(rec, call)


def _count(node: Node, kind: str | None, enclosing: Node | None, tally: _Tally) -> None:
    """A counted step: a model call, data stage, tool call or nested workflow."""
    node.owner = node
    node.enclosing = enclosing
    tally.step_count += 1
    length = node.end - node.start
    if enclosing is None:
        tally.top_level_ns += length
    if kind in _STEP_KINDS:
        assert kind is not None
        tally.counts[kind] += 1
        tally.sums[kind] += length
    if kind == "inference":
        tally.calls.append(node)
    else:
        tally.steps.append(node)


def _walk(
    top: Node,
    renamed: Mapping[int, str],
    pieces: list[PathPiece] | None,
    speech: list[Node] | None = None,
) -> tuple[dict[str, int], list[str], list[tuple[Node, int, int]], bool]:
    """Phase 3: the critical path's split by kind, its step names, its segments, and
    whether the children of every node it entered are disjoint (see `critical_segments`);
    ``speech``: the model calls of a run with a speech call, whose gaps the path fills."""
    split = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
    path: list[str] = []
    on_path: set[int] = set()
    segments, disjoint = critical_segments(top)
    if speech is not None:
        segments = voice.fill_model_gaps(segments, speech)
    for node, seg_start, seg_end in segments:
        split[node.attribution] += seg_end - seg_start
        step = node.owner
        if pieces is not None:
            shown = step if step is not None and step.rec.kind == node.rec.kind else node
            pieces.append(
                PathPiece(
                    node.rec.span_id, seg_start, seg_end, node.attribution, (), shown.rec.span_id
                )
            )
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
                last.shown_on,
            )
    return split, path, segments, disjoint


def _wait(
    top: Node,
    output_ns: int,
    source: Node | None,
    segments: list[tuple[Node, int, int]],
    disjoint: bool,
    speech: list[Node] | None = None,
) -> tuple[dict[str, int], list[tuple[Node, int, int]]]:
    """Phase 4: the wait for the first output at ``output_ns``, split by kind along the
    critical path to that instant; and that path, kept for a run with a speech call."""
    waits = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
    wait_path: list[tuple[Node, int, int]] = []
    if disjoint and critical_path.SHORTCUT:
        # No two spans of one parent overlap: the walk to the cut is the walk to the
        # end, cut there (see `critical_segments`), so the path is walked once.
        for node, seg_start, seg_end in segments:
            if seg_start >= output_ns:
                break
            waits[node.attribution] += min(seg_end, output_ns) - seg_start
            if speech is not None:
                wait_path.append((node, seg_start, min(seg_end, output_ns)))
        return waits, wait_path
    # At the output's instant the walk goes through the call that gave it, whatever else
    # ends there too (everything running at that instant is cut).
    favoured: set[int] = set()
    while source is not None:
        favoured.add(id(source))
        source = source.parent
    wait_path = critical_path.wait_segments(top, output_ns, favoured)
    if speech is not None:
        wait_path = voice.fill_model_gaps(wait_path, speech)
    for node, seg_start, seg_end in wait_path:
        waits[node.attribution] += seg_end - seg_start
    return waits, wait_path


def _speech_ms(
    segments: list[tuple[Node, int, int]], wait_path: list[tuple[Node, int, int]] | None
) -> dict[str, float]:
    """The critical-path time in each speech operation, for the whole run and (when the
    run has a first output) for the wait for it, keyed ``first_output.{operation}``."""
    found: dict[str, float] = {}
    for prefix, path_pieces in (("", segments), ("first_output.", wait_path)):
        if path_pieces is None:
            continue
        for operation, ns in voice.speech_split(path_pieces).items():
            found[prefix + operation] = ns / _NS_PER_MS
    return found


def _rollup(
    top: Node,
    tally: _Tally,
    split: Mapping[str, int],
    path: list[str],
    output_ns: int | None,
    waits: Mapping[str, int] | None,
    cost: float | None,
    speech_ms: Mapping[str, float],
) -> Rollup:
    """The phases' results in milliseconds."""
    total = top.end - top.start
    call_keys = [n.rec.span_id for n in tally.calls]
    first = None if output_ns is None or waits is None else (output_ns - top.start) / _NS_PER_MS
    return Rollup(
        total_ms=total / _NS_PER_MS,
        inference_ms=split["inference"] / _NS_PER_MS,
        data_ms=split["data"] / _NS_PER_MS,
        tool_ms=split["tool"] / _NS_PER_MS,
        overhead_ms=split["overhead"] / _NS_PER_MS,
        inference_sum_ms=tally.sums["inference"] / _NS_PER_MS,
        data_sum_ms=tally.sums["data"] / _NS_PER_MS,
        tool_sum_ms=tally.sums["tool"] / _NS_PER_MS,
        parallelism=tally.top_level_ns / total if total > 0 else 0.0,
        step_count=tally.step_count,
        inference_count=tally.counts["inference"],
        data_count=tally.counts["data"],
        tool_count=tally.counts["tool"],
        cache_hits=sum(1 for k in call_keys if k in tally.cached),
        input_tokens=sum(tally.tokens_in.get(k, 0) for k in call_keys),
        output_tokens=sum(tally.tokens_out.get(k, 0) for k in call_keys),
        critical_path=tuple(path),
        first_output_ms=first,
        first_output_inference_ms=None if waits is None else waits["inference"] / _NS_PER_MS,
        first_output_data_ms=None if waits is None else waits["data"] / _NS_PER_MS,
        first_output_tool_ms=None if waits is None else waits["tool"] / _NS_PER_MS,
        first_output_overhead_ms=None if waits is None else waits["overhead"] / _NS_PER_MS,
        cost_usd=cost,
        speech_to_text_ms=speech_ms.get("speech_to_text"),
        text_to_speech_ms=speech_ms.get("text_to_speech"),
        first_output_speech_to_text_ms=speech_ms.get("first_output.speech_to_text"),
        first_output_text_to_speech_ms=speech_ms.get("first_output.text_to_speech"),
    )


def _unrecorded(
    rollup: Rollup,
    tally: _Tally,
    renamed: Mapping[int, str],
    output_ns: int | None,
    marked_ns: int | None,
    source: Node | None,
) -> Rollup:
    """``rollup`` marked with the calls whose end the trace does not record, and what that
    leaves unknown (docs/attributes.md, rule 13).

    Such a call, timed to its last event, ran on for an unknown time, up to the end of the
    span around it: the critical path from there to the end of the run may be the call's
    (inference) where the trace shows overhead. Nothing before the recorded end moves when
    that is the only unrecorded call and every other step ended before it: the walk back
    from the real end reaches the call's start as the walk from the recorded one does.
    Otherwise the path before it may move too, and data and tool time are unknown as well.
    """
    unknown = [n for n in tally.calls if n.rec.span_id in tally.unrecorded - tally.at_wire]
    recorded_end = min(n.end for n in unknown)
    parts = ["inference", "overhead"]
    alone = len(unknown) == 1 and all(
        n.end < recorded_end or _within(n, unknown[0]) for n in (*tally.calls, *tally.steps)
    )
    if not alone:
        parts += ["data", "tool"]
    if output_ns is not None:
        from_token = marked_ns is not None or (
            source is not None and source.rec.span_id in tally.first_token
        )
        if not from_token:
            # The end of a call gave it: which call ended last, or first, is not known.
            # A first token or the application's mark is an instant recorded as such.
            parts.append("first_output")
        if output_ns > recorded_end:
            parts.append("first_output_split")
    names = tuple(n.rec.step_name or renamed.get(n.rec.span_id) or n.rec.name for n in unknown)
    return replace(rollup, unrecorded=names, unrecorded_parts=tuple(parts))


def _within(node: Node, ancestor: Node) -> bool:
    """Whether ``node`` is ``ancestor`` or inside it."""
    current: Node | None = node
    while current is not None:
        if current is ancestor:
            return True
        current = current.parent
    return False


def _add_output(
    rec: SpanRecord,
    key: int,
    first_token: dict[int, int],
    user_facing: set[int],
    marked: set[int],
) -> None:
    # A call seen by several spans: its first token is the application's own mark
    # (``call.first_token()``) when it made one, else the earliest any span saw: an explicit
    # mark wins over the first chunk an HTTP-level span saw, 5 to 17 ms earlier.
    if rec.ttft_ms is not None and (rec.ttft_marked or key not in marked):
        instant = rec.start_ns + round(rec.ttft_ms * _NS_PER_MS)
        known = first_token.get(key)
        if rec.ttft_marked and key not in marked:
            marked.add(key)
            known = None
        if known is None or instant < known:
            first_token[key] = instant
    if rec.user_facing:
        user_facing.add(key)


def _cost(
    calls: list[Node],
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
    wired: set[int],
) -> None:
    # The same call seen by several spans: its tokens once. The wire's counts (or the
    # provider SDK's own span's, which carries the HTTP method too) win over a framework's:
    # OpenLLMetry's anthropic instrumentation counts one output token too many. Between
    # spans of equal standing, the largest count seen.
    wire = rec.source == WIRE
    if not wire and key in wired:
        if rec.cache_hit:
            cached.add(key)
        return
    if (
        wire
        and key not in wired
        and (rec.input_tokens is not None or rec.output_tokens is not None)
    ):
        wired.add(key)
        tokens_in.pop(key, None)
        tokens_out.pop(key, None)
    if rec.input_tokens is not None:
        tokens_in[key] = max(tokens_in.get(key, 0), rec.input_tokens)
    if rec.output_tokens is not None:
        tokens_out[key] = max(tokens_out.get(key, 0), rec.output_tokens)
    if rec.cache_hit:
        cached.add(key)
