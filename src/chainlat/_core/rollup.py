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
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from itertools import repeat
from typing import Final

from chainlat._core import attributes as attr
from chainlat._core import call_readings, clock, critical_path, voice
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
    LIVEKIT,
    STEP_NAME_KEYS,
    WIRE,
    SpanKindLabel,
    SpanRecord,
    call_record,
    step_name_of,
)
from chainlat._core.tree import TreeCounts, flat_tree, grow, plan
from chainlat._core.twins import find_twins, normalised, same_model

__all__ = [
    "CACHE_READ_KEYS",
    "NESTED_LEVELS",
    "STEP_NAME_KEYS",
    "WIRE",
    "NestedRun",
    "PathPiece",
    "Rollup",
    "SpanKindLabel",
    "SpanRecord",
    "call_record",
    "compute_rollup",
    "find_twins",
    "nested_rollup",
    "same_model",
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
    output_pieces: list[PathPiece] | None = None,
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
        output_pieces: When given, the critical path to the first output (the walk whose
            split is the first output's) is appended to it as drawable pieces.
    """
    # Runs for every workflow (on the export worker, or in the application's thread when
    # it reads the rollup) and for every run the CLI reads: written for speed (locals, no
    # per-span generators), tested against the definition. Four phases: how the spans are
    # read (twins, the wire), the tree and its counts, the critical path, the wait for the
    # first output; the first three in one pass for a flat workflow (`tree.flat_tree`).
    records = spans if isinstance(spans, list) else list(spans)
    top = Node(root, root.start_ns, max(root.end_ns, root.start_ns), "overhead", None)
    tally = TreeCounts()
    # The common shape (every span a step of the workflow, one after another) in one pass;
    # any other, or a walk drawn as pieces, through the general phases.
    flat = flat_tree(top, records, tally) if pieces is None and output_pieces is None else None
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
            output_ns, source, bounded, picked = _bounded_output(tally, unusable)
            unusable = _listed(unusable, picked if bounded else None)
        else:
            output_ns, source = first_output_of(tally.calls, tally.first_token, tally.user_facing)
    waits = None
    wait_path: list[tuple[Node, int, int]] | None = None
    if output_ns is not None:
        output_ns = min(max(output_ns, top.start), top.end)
        waits, wait_path = _wait(
            top,
            output_ns,
            source,
            segments,
            disjoint,
            speech,
            split,
            slack,
            end_of_turn_ns,
            keep=output_pieces is not None,
        )
        if output_pieces is not None:
            _draw(wait_path, renamed, output_pieces)
    cost = None
    if prices is not None and tally.calls:
        cost = _cost(
            tally.calls, prices, tally.tokens_in, tally.tokens_out, records, tally.group_of
        )
    speech_ms = _speech_ms(segments, wait_path) if speech is not None else {}
    if end_of_turn_ns is not None and output_ns is not None:
        speech_ms["first_output.end_of_turn"] = _end_of_turn_ms(top, end_of_turn_ns, output_ns)
    rollup = _rollup(top, tally, split, path, output_ns, waits, cost, speech_ms, _uncounted(tally))
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
    stack = [top]
    while stack:
        node = stack.pop()
        stack += node.kids
        node.parent = node.owner = node.enclosing = None
    # A stand-in is in no node's kids, and its kids are its parent's, unlinked above: walked
    # again for each stand-in, a run of n AI SDK calls (a stand-in each) cost n^2.
    for node in stand_ins:
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
            pieces.append(_piece(node, seg_start, seg_end))
        if step is None or id(step) in on_path:
            continue
        chain, chain_ids = _joining(step, on_path, renamed)
        path += chain
        if pieces is not None:
            pieces[-1] = replace(pieces[-1], steps=tuple(zip(chain_ids, chain, strict=True)))
    return split, path, segments, disjoint


def _piece(node: Node, seg_start: int, seg_end: int) -> PathPiece:
    """A stretch of a path as drawn: on the step around it when of its kind (see `PathPiece`)."""
    step = node.owner
    shown = step if step is not None and step.rec.kind == node.rec.kind else node
    return PathPiece(node.rec.span_id, seg_start, seg_end, node.attribution, (), shown.rec.span_id)


def _joining(
    step: Node, on_path: set[int], renamed: Mapping[int, str]
) -> tuple[list[str], list[int]]:
    """The names and span ids of ``step`` and the steps around it not yet on the path (by
    ``id`` in ``on_path``, which they join), outermost first."""
    chain: list[str] = []
    chain_ids: list[int] = []
    found: Node | None = step
    while found is not None and id(found) not in on_path:
        rec = found.rec
        chain.append(
            rec.step_name or renamed.get(rec.span_id) or rec.name
            if renamed
            else rec.step_name or rec.name
        )
        chain_ids.append(rec.span_id)
        on_path.add(id(found))
        found = found.enclosing
    chain.reverse()
    chain_ids.reverse()
    return chain, chain_ids


def _draw(
    path: list[tuple[Node, int, int]], renamed: Mapping[int, str], pieces: list[PathPiece]
) -> None:
    """``path`` appended to ``pieces`` as `_walk` draws the whole run's: each stretch, and
    the steps that join the path there."""
    on_path: set[int] = set()
    for node, seg_start, seg_end in path:
        piece = _piece(node, seg_start, seg_end)
        step = node.owner
        if step is not None and id(step) not in on_path:
            chain, chain_ids = _joining(step, on_path, renamed)
            piece = replace(piece, steps=tuple(zip(chain_ids, chain, strict=True)))
        pieces.append(piece)


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
    *,
    keep: bool = False,
) -> tuple[dict[str, int], list[tuple[Node, int, int]]]:
    """Phase 4: the wait for the first output at ``output_ns``, split by kind along the
    critical path to that instant; and that path, kept for a run with a speech call or an
    end of turn, or when ``keep`` asks for it. ``split``: the whole path's split by kind,
    summed from ``segments``; ``slack_ns``: as for `_walk`; ``end_of_turn_ns``: as for
    `compute_rollup`."""
    waits = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
    wait_path: list[tuple[Node, int, int]] = []
    keep = keep or speech is not None or end_of_turn_ns is not None
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
    tally: TreeCounts,
    split: Mapping[str, int],
    path: list[str],
    output_ns: int | None,
    waits: Mapping[str, int] | None,
    cost: float | None,
    speech_ms: Mapping[str, float],
    uncounted: int,
) -> Rollup:
    """The phases' results in milliseconds; ``uncounted``, the calls without token counts."""
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
        (),  # unrecorded (`_unrecorded` marks them)
        (),  # unrecorded_parts
        (),  # unusable (`_unusable_marked` marks them)
        (),  # unusable_values
        (),  # unusable_parts
        uncounted,  # uncounted_calls
    )


def _unrecorded(
    rollup: Rollup,
    tally: TreeCounts,
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


def _unusable(records: list[SpanRecord], tally: TreeCounts) -> dict[int, str]:
    """The counted calls whose first token is not known, with what each gives (rule 15): a
    span of the call gives a time to first token that is no time and none gives a usable
    one, or the first token comes before the call's start or after its end (taken out of
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
            if instant is None:
                continue
            start = min(node.start, node.rec.start_ns)
            end = max(node.end, node.rec.end_ns)
            if instant < start:
                del first_token[key]
                found[key] = f"a first token {(start - instant) / _NS_PER_MS:g} ms before its start"
            elif instant > end:
                del first_token[key]
                found[key] = f"a first token {(instant - end) / _NS_PER_MS:g} ms after its end"
    if len(first_token) < len(tally.calls) and not voice.has_speech(tally.calls):
        _stream_unknown(records, tally, found)
    return found


def _stream_unknown(records: list[SpanRecord], tally: TreeCounts, found: dict[int, str]) -> None:
    """Add to ``found`` the counted calls with no first token that may have streamed (rule
    17 of docs/attributes.md): a span of the call says it streamed, or none says whether it
    did (``SpanRecord.streamed``: chainlat's wire says, and a call of its API is taken at its
    application's word). Their end is no first output: it is at least their start.

    A call whose span says it did not stream, an embedding or a speech call (a voice run's
    first output is its first audio: not asked here) gives its output when it ends."""
    first_token, group_of = tally.first_token, tally.group_of
    said: dict[int, bool] = {}  # call -> whether a span of it said it streamed (yes wins)
    for rec in records:
        if rec.kind != "inference":
            continue
        key = group_of.get(rec.span_id)
        if key is None or key in first_token:
            continue
        if rec.streamed is not None:
            said[key] = said.get(key, False) or rec.streamed
    for node in tally.calls:
        key = node.rec.span_id
        if key in first_token or key in found:
            continue
        streamed = said.get(key)
        if streamed:
            found[key] = call_readings.STREAMED_UNMARKED
        elif streamed is None and node.rec.operation not in _NEVER_STREAMED:
            found[key] = call_readings.MAYBE_STREAMED


_NEVER_STREAMED: Final = frozenset(("embeddings", *attr.SPEECH_OPERATIONS))
"""Operations whose output is no stream of text the user reads as it comes: an embedding;
the voice's (its first output is the first audio, by the voice's own rules)."""


def _listed(unusable: dict[int, str], picked: int | None) -> dict[int, str]:
    """The calls whose first token is not known that a run names (``Rollup.unusable``):
    every one whose trace gives a value that is no time (rule 15) or that says it streamed
    with no first token, and one that only may have streamed when the first output depends
    on it (``picked``): the others gave their output when they ended, or at a first token no
    figure of the run depends on, which is not said of every call of every such trace."""
    if call_readings.MAYBE_STREAMED not in unusable.values():
        return unusable
    return {
        key: why
        for key, why in unusable.items()
        if why != call_readings.MAYBE_STREAMED or key == picked
    }


def _bounded_output(tally: TreeCounts, unusable: Mapping[int, str]) -> tuple[int, Node, bool, int]:
    """The first output of a run with calls whose first token is not known, the call that
    gave it, whether it is a lower bound (rules 15 and 17), and the call the rule picked.

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
    key = picked.rec.span_id
    if key not in unusable:
        instant, source = first_output_of(calls, first_token, user_facing)
        return instant, source, False, key
    instant, source = picked.start, picked
    known = [n for n in calls if n.rec.span_id not in unusable]
    if known:
        other, by = first_output_of(known, first_token, user_facing)
        if other > instant:
            instant, source = other, by
    return instant, source, True, key


def _uncounted(tally: TreeCounts) -> int:
    """How many model calls the trace gives no token counts for (``Rollup.uncounted_calls``,
    docs/attributes.md, rule 21): neither count known, not answered from a cache, not a
    speech call (counted in seconds and characters, not tokens)."""
    # Not asked by the counts' lengths: a count may be kept under a key that is no counted
    # call's (a span of a call the walk did not count), as the token totals leave it out.
    tokens_in, tokens_out, cached = tally.tokens_in, tally.tokens_out, tally.cached
    return sum(
        1
        for n in tally.calls
        if n.rec.span_id not in tokens_in
        and n.rec.span_id not in tokens_out
        and n.rec.span_id not in cached
        and n.rec.operation not in attr.SPEECH_OPERATIONS
    )


def _unusable_marked(
    rollup: Rollup,
    tally: TreeCounts,
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


# --- nested runs, composed --------------------------------------------------------------------

NESTED_LEVELS: Final = 16
"""How many levels of nested runs a run's step names reach into: its steps
(`chainlat._core.steps.spliced_steps`) and its critical path's names hold those of the runs
nested in it, and of those nested in them, to this depth; a nested run deeper than that is
one step of it, its own steps its own run's. A chain of N nested runs then holds at most
16 N of each in all, not N² / 2; the rollup's figures still count every step."""


@dataclass(slots=True)
class NestedRun:
    """A run's own figures, in nanoseconds, kept for the run around it to compose
    (`nested_rollup`): the nested run stands in there as one leaf, and these take its place.

    Made only for a *plain* run: every model call of one source (no twins, no request
    building), no speech call, no LiveKit node, no unrecorded end, no clock coarser for its
    starts than for its ends. A run around any other is walked whole.
    """

    rollup: Rollup
    start_ns: int
    end_ns: int
    last_end_ns: int
    """The latest end of any span under it: past its end, the walk around it would extend it."""
    split_ns: dict[str, int]
    sums_ns: dict[str, int]
    counts: dict[str, int]
    step_count: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    path: tuple[str, ...]
    path_levels: tuple[int, ...]
    """How many nested runs down each name of ``path`` is (0: a step of its own)."""
    inner: bool
    """Its critical path passes through a span under it, or it has none (so its name joins
    the path of the run around it)."""
    sources: frozenset[str | None]
    gcd_starts: int
    gcd_ends: int
    outputs: _Outputs


_Outputs = tuple[int | None, tuple[int, int] | None, int | None]
"""What decides a first output among a run's calls (`first_output_of`): the earliest output
of a user-facing call, the (start, end) of the streamed call that started last, the end of
the call that ended last; None where there is no such call."""


def nested_rollup(
    root: SpanRecord,
    spans: list[SpanRecord],
    nested: Mapping[int, NestedRun],
    *,
    first_output_ns: int | None = None,
) -> NestedRun | None:
    """The rollup of the run of ``root`` from its own spans ``spans``, where each nested run
    root among them (``nested``, by span id) is a leaf standing in for its whole subtree,
    with its figures composed in; None where that composition may differ from the walk of
    every span (`compute_rollup` over all of them), which then has to be done.

    The composition is that walk's result when the nested run is plain (see `NestedRun`),
    lies inside every span around it (no extension, no clipping), has only transparent spans
    between it and ``root``, and overlaps no span beside it on the walk; the clock's
    resolution leaves no slack; and the first output neither comes from a nested run nor
    falls inside one. Its walk is then the walk inside it, with its gaps the outer run's
    overhead (rule 4 of docs/attributes.md hands its children to its parent, where nothing
    else competes with them), so the split, the counts, the tokens, the path's step names
    and the wait for a first output after it add up. Time and memory: linear in ``spans``
    and the number of nested runs.
    """
    root_id = root.span_id
    sources: set[str | None] = set()
    for rec in spans:
        if rec.unrecorded_end or rec.ttft_unusable is not None:
            return None  # bounds, not figures (rules 13 and 15): walked whole
        if rec.kind == "inference" and rec.ttft_ms is None and rec.streamed is not False:
            return None  # perhaps a first token not known (rule 17): walked whole
        if rec.kind == "inference" and rec.span_id != root_id:
            if rec.operation in _SPEECH or rec.source == LIVEKIT or _maybe_builder(rec):
                return None
            sources.add(rec.source)
    for figures in nested.values():
        sources |= figures.sources
    if len(sources) > 1:
        return None
    records = normalised(root_id, spans)
    gcd_starts = math.gcd(root.start_ns, *map(_START_NS, records))
    gcd_ends = math.gcd(root.end_ns, *map(_END_NS, records))
    for figures in nested.values():
        gcd_starts = math.gcd(gcd_starts, figures.gcd_starts)
        gcd_ends = math.gcd(gcd_ends, figures.gcd_ends)
    if _slack(gcd_starts, gcd_ends):
        return None
    top = Node(root, root.start_ns, max(root.end_ns, root.start_ns), "overhead", None)
    tally = TreeCounts()
    try:
        grow(top, plan(root_id, records), tally)
        return _composed(top, tally, nested, first_output_ns, sources, gcd_starts, gcd_ends, spans)
    finally:
        _release(top, tally.stand_ins)


def _composed(
    top: Node,
    tally: TreeCounts,
    nested: Mapping[int, NestedRun],
    first_output_ns: int | None,
    sources: set[str | None],
    gcd_starts: int,
    gcd_ends: int,
    spans: list[SpanRecord],
) -> NestedRun | None:
    """`nested_rollup` once the tree is grown: its conditions checked, its figures composed."""
    first_token = tally.first_token
    if any(
        not n.start <= first_token.get(n.rec.span_id, n.start) <= max(n.end, n.rec.end_ns)
        for n in tally.calls
    ):
        return None  # a first token outside its call is none (rule 15): walked whole
    leaves = {n.rec.span_id: n for n in tally.steps if n.rec.span_id in nested and not n.kids}
    if len(leaves) != len(nested) or not _alone(leaves, nested):
        return None
    here = _outputs(tally)
    output_ns, source = first_output_ns, None
    if output_ns is None:
        found = _first_output_here(here, [f.outputs for f in nested.values()])
        if found is False:
            return None  # a nested run's call may give it, or ties with one here
        if found:
            output_ns, source = first_output_of(tally.calls, tally.first_token, tally.user_facing)
    split, _, segments, disjoint = _walk(top, {}, None)
    waits = None
    if output_ns is not None:
        output_ns = min(max(output_ns, top.start), top.end)
        if any(n.start < output_ns < n.end for n in leaves.values()):
            return None  # the first output cut inside a nested run
        waits, wait_path = _wait(top, output_ns, source, segments, disjoint, None, split)
        if disjoint and critical_path.SHORTCUT:
            wait_path = [s for s in segments if s[2] <= output_ns]
        if not _compose_split(waits, wait_path, nested):
            return None
    if not _compose_split(split, segments, nested):
        return None
    path, levels, inner = _spliced_path(top, segments, nested)
    inner = inner or not spans  # a run with nothing under it is a leaf of the walk around it
    cache_hits = input_tokens = output_tokens = 0
    for figures in nested.values():
        tally.step_count += figures.step_count
        for kind in _STEP_KINDS:
            tally.counts[kind] += figures.counts[kind]
            tally.sums[kind] += figures.sums_ns[kind]
        cache_hits += figures.cache_hits
        input_tokens += figures.input_tokens
        output_tokens += figures.output_tokens
    uncounted = _uncounted(tally) + sum(f.rollup.uncounted_calls for f in nested.values())
    rollup = _rollup(top, tally, split, path, output_ns, waits, None, {}, uncounted)
    if nested:
        rollup = replace(
            rollup,
            cache_hits=rollup.cache_hits + cache_hits,
            input_tokens=rollup.input_tokens + input_tokens,
            output_tokens=rollup.output_tokens + output_tokens,
        )
    outputs = _merged_outputs(here, [f.outputs for f in nested.values()])
    return NestedRun(
        rollup,
        top.start,
        top.end,
        max([*map(_END_NS, spans), *(f.last_end_ns for f in nested.values())], default=top.start),
        split,
        dict(tally.sums),
        dict(tally.counts),
        tally.step_count,
        rollup.cache_hits,
        rollup.input_tokens,
        rollup.output_tokens,
        tuple(path),
        tuple(levels),
        inner,
        frozenset(sources),
        gcd_starts,
        gcd_ends,
        outputs,
    )


def _alone(leaves: Mapping[int, Node], nested: Mapping[int, NestedRun]) -> bool:
    """Whether each nested run's leaf is whole (not clipped, nothing under it past its end),
    a step of its own with only transparent spans above it, and overlaps nothing beside it."""
    lists: dict[int, list[Node]] = {}
    for span_id, node in leaves.items():
        rec = node.rec
        if (
            node.start != rec.start_ns
            or node.end != rec.end_ns
            or node.end <= node.start
            or nested[span_id].last_end_ns > node.end
            or node.owner is not node
            or node.enclosing is not None
            or node.attribution != "overhead"
            or node.parent is None
        ):
            return False
        lists.setdefault(id(node.parent.kids), node.parent.kids)
    for kids in lists.values():
        ordered = sorted(kids, key=_START_THEN_END)
        reach = -1  # the latest end of the kids before
        for i, kid in enumerate(ordered):
            if kid.rec.span_id in leaves and (
                reach > kid.start or (i + 1 < len(ordered) and ordered[i + 1].start < kid.end)
            ):
                return False  # sorted by start: the kid after it starts first of those after
            reach = max(reach, kid.end)
    return True


def _compose_split(
    split: dict[str, int], segments: list[tuple[Node, int, int]], nested: Mapping[int, NestedRun]
) -> bool:
    """``split`` with each whole nested run on ``segments`` counted as its own split rather
    than as overhead; False when one lies on them only in part."""
    for node, seg_start, seg_end in segments:
        figures = nested.get(node.rec.span_id)
        if figures is None or node.kids or node.owner is not node:
            continue
        if seg_start != node.start or seg_end != node.end:
            return False
        split[node.attribution] -= seg_end - seg_start
        for kind, ns in figures.split_ns.items():
            split[kind] += ns
    return True


def _spliced_path(
    top: Node, segments: list[tuple[Node, int, int]], nested: Mapping[int, NestedRun]
) -> tuple[list[str], list[int], bool]:
    """The critical path's step names as `_walk` gives them, each nested run's name followed
    by its own path (or neither, when its walk stayed on its own span), to
    :data:`NESTED_LEVELS` levels of nested runs; each name's level; and whether the walk
    passed through a span below ``top``."""
    path: list[str] = []
    levels: list[int] = []
    on_path: set[int] = set()
    inner = False
    for node, _, _ in segments:
        figures = nested.get(node.rec.span_id) if node.owner is node else None
        if node is not top:
            inner = inner or figures is None or figures.inner
        step = node.owner
        if step is None or id(step) in on_path:
            continue
        if figures is not None:
            on_path.add(id(step))
            if figures.inner:
                path.append(step.rec.step_name or step.rec.name)
                levels.append(0)
                for name, level in zip(figures.path, figures.path_levels, strict=True):
                    if level < NESTED_LEVELS:
                        path.append(name)
                        levels.append(level + 1)
            continue
        chain: list[str] = []
        while step is not None and id(step) not in on_path:
            chain.append(step.rec.step_name or step.rec.name)
            on_path.add(id(step))
            step = step.enclosing
        chain.reverse()
        path += chain
        levels += [0] * len(chain)
    return path, levels, inner


def _outputs(tally: TreeCounts) -> _Outputs:
    calls, first_token, user_facing = tally.calls, tally.first_token, tally.user_facing
    facing = [first_token.get(n.rec.span_id, n.end) for n in calls if n.rec.span_id in user_facing]
    streamed = [(n.start, n.end) for n in calls if n.rec.span_id in first_token]
    return (
        min(facing, default=None),
        max(streamed, default=None),
        max((n.end for n in calls), default=None),
    )


def _merged_outputs(here: _Outputs, others: list[_Outputs]) -> _Outputs:
    facing = [o[0] for o in (here, *others) if o[0] is not None]
    streamed = [o[1] for o in (here, *others) if o[1] is not None]
    last = [o[2] for o in (here, *others) if o[2] is not None]
    return (min(facing, default=None), max(streamed, default=None), max(last, default=None))


def _first_output_here(here: _Outputs, others: list[_Outputs]) -> bool | None:
    """Whether the first output of the whole run comes from a call among ``here`` (True),
    from no call (None), or perhaps from a nested run's (False: one gives it, or ties)."""
    facing = [o[0] for o in others if o[0] is not None]
    if here[0] is not None or facing:
        return here[0] is not None and all(here[0] < t for t in facing)  # the earliest
    streamed = [o[1] for o in others if o[1] is not None]
    if here[1] is not None or streamed:
        return here[1] is not None and all(here[1] > t for t in streamed)  # started last
    last = [o[2] for o in others if o[2] is not None]
    if here[2] is not None or last:
        return here[2] is not None and all(here[2] > t for t in last)  # ended last
    return None


def _maybe_builder(rec: SpanRecord) -> bool:
    """A model-call span that `twins.request_builders` might make transparent."""
    return (
        rec.source not in _ALWAYS_CALLS
        and rec.input_tokens is None
        and rec.output_tokens is None
        and rec.ttft_ms is None
        and not rec.has_output
        and not rec.failed
    )


def _slack(gcd_starts: int, gcd_ends: int) -> int:
    """`clock.slack_ns` of starts and ends with these greatest common divisors."""
    start = _resolution(gcd_starts)
    if start == clock.EXACT_NS:
        return 0
    return start if start > _resolution(gcd_ends) else 0


def _resolution(common: int) -> int:
    for unit in clock.UNITS_NS:
        if common % unit == 0:
            return unit
    return clock.EXACT_NS


_START_THEN_END: Final = operator.attrgetter("start", "end")
_SPEECH: Final = frozenset(attr.SPEECH_OPERATIONS)
_ALWAYS_CALLS: Final = frozenset(("chainlat", WIRE))
