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

import operator
from collections.abc import Iterable, Mapping
from dataclasses import replace
from itertools import repeat
from typing import Final

from chainlat._core import attributes as attr
from chainlat._core import clock, critical_path, voice
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
    STEP_NAME_KEYS,
    WIRE,
    SpanKindLabel,
    SpanRecord,
    call_record,
    classify,
    source_of,
    step_name_of,
)
from chainlat._core.tree import Tally, flat_tree, grow, plan
from chainlat._core.twins import find_twins, normalised, same_model

__all__ = [
    "CACHE_READ_KEYS",
    "STEP_NAME_KEYS",
    "WIRE",
    "PathPiece",
    "Rollup",
    "SpanKindLabel",
    "SpanRecord",
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
    end_of_turn_ns: int | None = None,
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
        end_of_turn_ns: For a voice turn started at the end of the caller's words: the
            instant the framework decided their turn was over. The wait for the first
            output before it is the end-of-turn wait (``first_output_end_of_turn_ms``, a
            part of the overhead; `voice.end_of_turn_cut`).
    """
    # Runs for every workflow (on the export worker, or in the application's thread when
    # it reads the rollup) and for every run the CLI reads: written for speed (locals, no
    # per-span generators), tested against the definition. Four phases: how the spans are
    # read (twins, the wire), the tree and its counts, the critical path, the wait for the
    # first output; the first three in one pass for a flat workflow (`tree.flat_tree`).
    records = spans if isinstance(spans, list) else list(spans)
    top = Node(root, root.start_ns, max(root.end_ns, root.start_ns), "overhead", None)
    tally = Tally()
    # The common shape (every span a step of the workflow, one after another) in one pass;
    # any other, or a walk drawn as pieces, through the general phases.
    flat = flat_tree(top, records, tally) if pieces is None else None
    renamed: Mapping[int, str] = {}
    speech: list[Node] | None = None
    slack = 0
    if flat is not None:
        split, path, segments = flat
        disjoint = True
    else:
        records = normalised(root.span_id, records)
        found = plan(root.span_id, records)
        renamed = found.renamed
        grow(top, found, tally)
        # A voice run's path gives the overhead a streaming model call runs through to
        # that call (see `voice.fill_model_gaps`); other runs' paths are not changed.
        speech = tally.calls if voice.has_speech(tally.calls) else None
        # Siblings that overlap by no more than the rounding of their starts are sequential.
        if clock.may_be_coarse(root.start_ns):
            slack = clock.slack_ns(_starts(root, records), _ends(root, records))
        split, path, segments, disjoint = _walk(top, renamed, pieces, speech, slack)
    output_ns = first_output_ns
    source: Node | None = None
    # First tokens that are no time are not known, never used (docs/attributes.md, rule 15).
    unusable = _unusable(records, tally) if tally.calls else None
    bounded = False
    if output_ns is None and tally.calls:
        if unusable:
            output_ns, source, bounded = _bounded_output(tally, unusable)
        else:
            output_ns, source = first_output_of(tally.calls, tally.first_token, tally.user_facing)
    waits = None
    wait_path: list[tuple[Node, int, int]] | None = None
    if output_ns is not None:
        output_ns = min(max(output_ns, top.start), top.end)
        waits, wait_path = _wait(
            top, output_ns, source, segments, disjoint, speech, split, slack, end_of_turn_ns
        )
    cost = None
    if prices is not None and tally.calls:
        cost = _cost(
            tally.calls, prices, tally.tokens_in, tally.tokens_out, records, tally.group_of
        )
    speech_ms = _speech_ms(segments, wait_path) if speech is not None else {}
    if end_of_turn_ns is not None and output_ns is not None:
        speech_ms["first_output.end_of_turn"] = _end_of_turn_ms(top, end_of_turn_ns, output_ns)
    rollup = _rollup(top, tally, split, path, output_ns, waits, cost, speech_ms)
    if unusable:
        rollup = _unusable_marked(rollup, tally, renamed, unusable, bounded)
    if tally.unrecorded - tally.at_wire:
        rollup = _unrecorded(rollup, tally, renamed, output_ns, first_output_ns, source)
    _release(top, tally.stand_ins)
    return rollup


def _release(top: Node, stand_ins: list[Node]) -> None:
    """Unlink the finished tree under ``top``. Its nodes point back at each other (a step
    owns itself, each node points at its parent), so they would wait for the cyclic garbage
    collector, which walks every one of them; unlinked, they go when the rollup returns."""
    stack = [top, *stand_ins]
    while stack:
        node = stack.pop()
        stack += node.kids  # a stand-in's are its parent's: they are unlinked twice
        node.parent = node.owner = node.enclosing = None


def _starts(root: SpanRecord, records: list[SpanRecord]) -> list[int]:
    found = list(map(_START_NS, records))  # a C loop: this runs for every run rolled up
    found.append(root.start_ns)
    return found


def _ends(root: SpanRecord, records: list[SpanRecord]) -> list[int]:
    found = list(map(_END_NS, records))
    found.append(root.end_ns)
    return found


_START_NS: Final = operator.attrgetter("start_ns")
_END_NS: Final = operator.attrgetter("end_ns")


def _walk(
    top: Node,
    renamed: Mapping[int, str],
    pieces: list[PathPiece] | None,
    speech: list[Node] | None = None,
    slack_ns: int = 0,
) -> tuple[dict[str, int], list[str], list[tuple[Node, int, int]], bool]:
    """Phase 3: the critical path's split by kind, its step names, its segments, and
    whether the children of every node it entered are disjoint (see `critical_segments`);
    ``speech``: the model calls of a run with a speech call, whose gaps the path fills;
    ``slack_ns``: the resolution of the trace's clock, when coarser than a nanosecond."""
    split = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
    path: list[str] = []
    on_path: set[int] = set()
    segments, disjoint = critical_segments(top, slack_ns)
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
            rec = step.rec
            chain.append(
                rec.step_name or renamed.get(rec.span_id) or rec.name
                if renamed
                else rec.step_name or rec.name
            )
            chain_ids.append(rec.span_id)
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
    speech: list[Node] | None,
    split: Mapping[str, int],
    slack_ns: int = 0,
    end_of_turn_ns: int | None = None,
) -> tuple[dict[str, int], list[tuple[Node, int, int]]]:
    """Phase 4: the wait for the first output at ``output_ns``, split by kind along the
    critical path to that instant; and that path, kept for a run with a speech call or an
    end of turn. ``split``: the whole path's split by kind, summed from ``segments``;
    ``slack_ns``: as for `_walk`; ``end_of_turn_ns``: as for `compute_rollup`."""
    waits = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
    wait_path: list[tuple[Node, int, int]] = []
    keep = speech is not None or end_of_turn_ns is not None
    if disjoint and critical_path.SHORTCUT and not keep:
        # The same cut, from the other end: the whole path's split, less what lies after
        # the output (segments are in time order, and end to end). The output mostly comes
        # late in a run, so this reads a few segments rather than most.
        waits.update(split)
        for node, seg_start, seg_end in reversed(segments):
            if seg_end <= output_ns:
                break
            waits[node.attribution] -= seg_end - (seg_start if seg_start > output_ns else output_ns)
        return waits, wait_path
    if disjoint and critical_path.SHORTCUT:
        # No two spans of one parent overlap: the walk to the cut is the walk to the
        # end, cut there (see `critical_segments`), so the path is walked once.
        for node, seg_start, seg_end in segments:
            if seg_start >= output_ns:
                break
            seg_end = seg_end if seg_end < output_ns else output_ns
            wait_path.append((node, seg_start, seg_end))
        wait_path = _cut(wait_path, top, end_of_turn_ns)
        return _waits_of(wait_path), wait_path
    # At the output's instant the walk goes through the call that gave it, whatever else
    # ends there too (everything running at that instant is cut).
    favoured: set[int] = set()
    while source is not None:
        favoured.add(id(source))
        source = source.parent
    wait_path = critical_path.wait_segments(top, output_ns, favoured, slack_ns)
    if speech is not None:
        wait_path = voice.fill_model_gaps(wait_path, speech)
    wait_path = _cut(wait_path, top, end_of_turn_ns)
    return _waits_of(wait_path), wait_path


def _cut(
    path: list[tuple[Node, int, int]], top: Node, end_of_turn_ns: int | None
) -> list[tuple[Node, int, int]]:
    """The wait's path with its end-of-turn stretch given to the run (`voice.end_of_turn_cut`)."""
    return path if end_of_turn_ns is None else voice.end_of_turn_cut(path, top, end_of_turn_ns)[0]


def _waits_of(path: list[tuple[Node, int, int]]) -> dict[str, int]:
    waits = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
    for node, seg_start, seg_end in path:
        waits[node.attribution] += seg_end - seg_start
    return waits


def _end_of_turn_ms(top: Node, end_of_turn_ns: int, output_ns: int) -> float:
    """The stretch of the wait `_cut` gave to the run: from its start to the decision."""
    return max(min(end_of_turn_ns, output_ns) - top.start, 0) / _NS_PER_MS


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
    tally: Tally,
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
    # Positional, in the order of the fields (a call by keyword costs twice as much), once
    # per workflow exported.
    return Rollup(
        total / _NS_PER_MS,  # total_ms
        split["inference"] / _NS_PER_MS,  # inference_ms
        split["data"] / _NS_PER_MS,  # data_ms
        split["tool"] / _NS_PER_MS,  # tool_ms
        split["overhead"] / _NS_PER_MS,  # overhead_ms
        tally.sums["inference"] / _NS_PER_MS,  # inference_sum_ms
        tally.sums["data"] / _NS_PER_MS,  # data_sum_ms
        tally.sums["tool"] / _NS_PER_MS,  # tool_sum_ms
        tally.top_level_ns / total if total > 0 else 0.0,  # parallelism
        tally.step_count,  # step_count
        tally.counts["inference"],  # inference_count
        tally.counts["data"],  # data_count
        tally.counts["tool"],  # tool_count
        sum(map(tally.cached.__contains__, call_keys)),  # cache_hits
        sum(map(tally.tokens_in.get, call_keys, repeat(0))),  # input_tokens
        sum(map(tally.tokens_out.get, call_keys, repeat(0))),  # output_tokens
        tuple(path),  # critical_path
        first,  # first_output_ms
        None if waits is None else waits["inference"] / _NS_PER_MS,  # first_output_inference_ms
        None if waits is None else waits["data"] / _NS_PER_MS,  # first_output_data_ms
        None if waits is None else waits["tool"] / _NS_PER_MS,  # first_output_tool_ms
        None if waits is None else waits["overhead"] / _NS_PER_MS,  # first_output_overhead_ms
        cost,  # cost_usd
        speech_ms.get("speech_to_text"),  # speech_to_text_ms
        speech_ms.get("text_to_speech"),  # text_to_speech_ms
        speech_ms.get("first_output.speech_to_text"),  # first_output_speech_to_text_ms
        speech_ms.get("first_output.text_to_speech"),  # first_output_text_to_speech_ms
        speech_ms.get("first_output.end_of_turn"),  # first_output_end_of_turn_ms
    )


def _unrecorded(
    rollup: Rollup,
    tally: Tally,
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


_TTFT_UNUSABLE: Final = operator.attrgetter("ttft_unusable")


def _unusable(records: list[SpanRecord], tally: Tally) -> dict[int, str]:
    """The counted calls whose first token is not known, with what each gives (rule 15): a
    span of the call gives a time to first token that is no time and none gives a usable
    one, or the first token comes before the call's start (taken out of
    ``tally.first_token``: it is never used as an instant)."""
    found: dict[int, str] = {}
    first_token = tally.first_token
    if any(map(_TTFT_UNUSABLE, records)):  # a C loop: this runs for every run rolled up
        group_of = tally.group_of
        for rec in records:
            why = rec.ttft_unusable
            if why is not None:
                key = group_of.get(rec.span_id)
                if key is not None and key not in first_token and key not in found:
                    found[key] = why
    if first_token:
        for node in tally.calls:
            key = node.rec.span_id
            instant = first_token.get(key)
            start = min(node.start, node.rec.start_ns)
            if instant is not None and instant < start:
                del first_token[key]
                found[key] = f"a first token {(start - instant) / _NS_PER_MS:g} ms before its start"
    return found


def _bounded_output(tally: Tally, unusable: Mapping[int, str]) -> tuple[int, Node, bool]:
    """The first output of a run with calls whose first token is not known, the call that
    gave it, and whether it is a lower bound (rule 15).

    The rule of `first_output_of` is asked with each such call's first token at its start,
    the earliest it can be. When it picks another call, that call's output does not depend
    on them: measured. When it picks one of them, the output is not known: it is at least
    that call's start, and at least the output the rule gives without such calls (in a
    voice turn, the model's first token the voice waits for)."""
    calls, first_token, user_facing = tally.calls, tally.first_token, tally.user_facing
    earliest = dict(first_token)
    for node in calls:
        if node.rec.span_id in unusable:
            earliest[node.rec.span_id] = node.start
    _, picked = first_output_of(calls, earliest, user_facing)
    if picked.rec.span_id not in unusable:
        instant, source = first_output_of(calls, first_token, user_facing)
        return instant, source, False
    instant, source = picked.start, picked
    known = [n for n in calls if n.rec.span_id not in unusable]
    if known:
        other, by = first_output_of(known, first_token, user_facing)
        if other > instant:
            instant, source = other, by
    return instant, source, True


def _unusable_marked(
    rollup: Rollup,
    tally: Tally,
    renamed: Mapping[int, str],
    unusable: Mapping[int, str],
    bounded: bool,
) -> Rollup:
    """``rollup`` marked with the calls whose first token is not known, what each gives, and
    whether the first output depends on one (docs/attributes.md, rule 15)."""
    calls = [n for n in tally.calls if n.rec.span_id in unusable]
    return replace(
        rollup,
        unusable=tuple(n.rec.step_name or renamed.get(n.rec.span_id) or n.rec.name for n in calls),
        unusable_values=tuple(unusable[n.rec.span_id] for n in calls),
        unusable_parts=("first_output", "first_output_split") if bounded else (),
    )


def _within(node: Node, ancestor: Node) -> bool:
    """Whether ``node`` is ``ancestor`` or inside it."""
    current: Node | None = node
    while current is not None:
        if current is ancestor:
            return True
        current = current.parent
    return False


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
