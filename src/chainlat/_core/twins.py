"""Model calls seen twice: two instrumentations of one call, counted once.

A framework's span and the wire-level span of one call (rules 2 and 3 of the rollup in
docs/attributes.md): :func:`find_twins` pairs them, :func:`timed_by_wire` finds the
calls whose time the wire decides.
"""

from __future__ import annotations

import re
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from dataclasses import replace
from operator import attrgetter
from typing import Final

from chainlat._core.conventions import STREAM_ENDS
from chainlat._core.records import (
    WIRE,
    SpanRecord,
    anchor_first_audio,
    answered_before_tools,
    extend_to_children,
)


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

    Twins need not overlap by half: a framework's call span and a wire span of the same
    model, with equal token counts, under the same parent and adjacent in time (no span of
    that parent starts or ends between them, or in their overlap), are one call.
    OpenInference's LlamaIndex instrumentation ends ``OpenAI.stream_chat`` before the
    request goes out, so ``chainlat.instrument_httpx()``'s span of that request starts
    after it ended; timed to its first-token event, it overlaps the wire's span by as
    little as the request went out late.

    A call nested in another call (through transparent spans) is that call seen twice
    already (rule 1 of the rollup), so it is nobody's twin: matching it by time alone
    could pair it with a parallel call's span, and give each call the other's tokens.
    """
    records = spans if isinstance(spans, list) else list(spans)
    calls = [r for r in records if r.kind == "inference" and r.span_id != root_id]
    if len(calls) < 2:
        return {}
    first = calls[0].source
    for r in calls:  # a loop, not all() over a generator: this runs for every run read
        if r.source != first:
            break
    else:
        return {}  # the common case: one instrumentation
    by_id = {r.span_id: r for r in records}
    calls = [r for r in calls if not _inside_call(r, by_id, root_id)]
    if len({r.source for r in calls}) < 2:
        # The calls of one source (each wire span inside its framework's call): no twins,
        # and no pair to look at (n^2 of them: 8,000 calls, 5 s).
        return {}
    calls.sort(key=lambda r: (r.start_ns - r.end_ns, r.start_ns, r.span_id))  # longest first
    primaries: list[SpanRecord] = []
    starts: list[tuple[int, int]] = []  # (start, index in primaries), in order of start
    longest = 0  # the longest primary's duration
    beside: dict[tuple[int | None, bool], list[SpanRecord]] = {}
    """The primaries by parent and whether on the wire: a twin beside a call is the wire's
    span under the same parent (see `_adjacent_twin`)."""
    matched: set[tuple[int, str | None]] = set()  # (primary, source) pairs already used
    twins: dict[int, SpanRecord] = {}
    for rec in calls:
        best: SpanRecord | None = None
        best_rank = (0, 0)
        duration = rec.end_ns - rec.start_ns
        # Only a primary that starts before ``rec`` ends, and at most the longest one's
        # duration before it starts, can overlap it: those are looked at, in the order they
        # became primaries (every primary for every call: 3,000 calls, 9,000,000 pairs).
        low = bisect_left(starts, (rec.start_ns - longest, -1))
        high = bisect_left(starts, (rec.end_ns, -1))
        for index in sorted(index for _, index in starts[low:high]):
            primary = primaries[index]
            if primary.source == rec.source or (primary.span_id, rec.source) in matched:
                continue
            if not same_model(primary.model, rec.model):
                continue
            overlap = min(primary.end_ns, rec.end_ns) - max(primary.start_ns, rec.start_ns)
            if overlap <= 0 or 2 * overlap < duration:
                continue
            rank = (_same_tokens(primary, rec), overlap)
            if best is None or rank > best_rank:
                best, best_rank = primary, rank
        if best is None:
            others = beside.get((rec.parent_id, rec.source != WIRE), [])
            best = _adjacent_twin(rec, others, matched, records)
        if best is None:
            insort(starts, (rec.start_ns, len(primaries)))
            primaries.append(rec)
            beside.setdefault((rec.parent_id, rec.source == WIRE), []).append(rec)
            longest = max(longest, duration)
        else:
            matched.add((best.span_id, rec.source))
            twins[rec.span_id] = best
    return twins


def _adjacent_twin(
    rec: SpanRecord,
    primaries: list[SpanRecord],
    matched: set[tuple[int, str | None]],
    records: list[SpanRecord],
) -> SpanRecord | None:
    """The call ``rec`` is beside in time, not overlapping, by the rule of :func:`find_twins`."""
    if rec.input_tokens is None:
        return None
    for primary in primaries:
        if (
            primary.parent_id != rec.parent_id
            or primary.source == rec.source
            or WIRE not in (primary.source, rec.source)
            or (primary.span_id, rec.source) in matched
            or not same_model(primary.model, rec.model)
            or _same_tokens(primary, rec) != 1
            or (
                primary.output_tokens is not None
                and rec.output_tokens is not None
                and primary.output_tokens != rec.output_tokens
            )
        ):
            continue
        early, late = (primary, rec) if primary.start_ns <= rec.start_ns else (rec, primary)
        if not _between(early, late, records):
            return primary
    return None


_ALWAYS_CALLS: Final = frozenset(("chainlat", WIRE))
"""Sources whose model-call spans are calls by definition: the application's own
``chainlat.inference`` (it said so) and a request on the wire."""


def request_builders(root_id: int, records: list[SpanRecord]) -> set[int]:
    """Model-call spans that are request building, not calls (span ids).

    A model-call span with no token counts, no output, no first token and no exception,
    inside the interval of a real call (one with any of them) of the same model and source,
    or just before such a call of the same named model and source under the same parent (no
    span of that parent starts or ends between them), is the client preparing that call.
    OpenInference's LlamaIndex instrumentation marks ``OpenAI._prepare_chat_with_tools``
    as an LLM span, a sibling that ends before ``OpenAI.achat`` starts. Its time is the
    call's overhead. chainlat's own calls and wire-level spans are never request building.
    """
    empty = [
        r
        for r in records
        if r.kind == "inference"
        and r.span_id != root_id
        and r.source not in _ALWAYS_CALLS
        and r.input_tokens is None
        and r.output_tokens is None
        and r.ttft_ms is None
        and not r.has_output
        and not r.failed
    ]
    if not empty:
        return set()
    real = [
        r
        for r in records
        if r.kind == "inference"
        and r.span_id != root_id
        and (
            r.input_tokens is not None
            or r.output_tokens is not None
            or r.ttft_ms is not None
            or r.has_output
        )
    ]
    builders: set[int] = set()
    for e in empty:
        for c in real:
            if c.source != e.source or not same_model(c.model, e.model):
                continue
            if c.start_ns <= e.start_ns and e.end_ns <= c.end_ns:
                builders.add(e.span_id)
                break
            if (
                e.model is not None
                and c.model is not None
                and c.parent_id == e.parent_id
                and e.end_ns <= c.start_ns
                and not _between(e, c, records)
            ):
                builders.add(e.span_id)
                break
    return builders


def _between(early: SpanRecord, late: SpanRecord, records: list[SpanRecord]) -> bool:
    """Whether a span of their parent, other than the two, starts or ends between the end of
    ``early`` and the start of ``late`` (in their overlap, when they overlap)."""
    gap_start, gap_end = sorted((early.end_ns, late.start_ns))
    return any(
        other.parent_id == early.parent_id
        and other is not early
        and other is not late
        and (gap_start < other.start_ns < gap_end or gap_start < other.end_ns < gap_end)
        for other in records
    )


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


def same_model(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return True
    return a == b or _model_key(a) == _model_key(b)


_SNAPSHOT: Final = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def _model_key(model: str) -> str:
    # One model as different instrumentations name it: a response model with its snapshot
    # date (gpt-4o-mini-2024-07-18), a router's provider prefix (openai/gpt-4o-mini).
    return _SNAPSHOT.sub("", model.rsplit("/", 1)[-1].lower())


def timed_by_wire(
    root_id: int,
    records: list[SpanRecord],
    wires: list[SpanRecord],
    twins: dict[int, SpanRecord],
    by_parent: dict[int, list[SpanRecord]],
) -> set[int]:
    """The model calls that a wire-level span times, by span id (see rule 3 of the rollup).

    For each HTTP-level model call: every inference span around it (through transparent
    spans and workflows) is the same call, and so is the span whose twin it is, or whose
    twin holds it. A wire span that is such a span's twin beside it, not inside it, is
    moved under it (in ``by_parent``, and out of ``twins``), so the walk finds it there.
    """
    by_id = {r.span_id: r for r in records}
    timed: set[int] = set()
    moved_out: dict[int, set[int]] = {}
    """Parent id -> the spans (by identity) moved out of its children."""
    arrived: list[tuple[int, SpanRecord]] = []
    """(call id, span) for each span moved under a call, in the order of the moves."""
    children: dict[int, set[int]] = {}
    """Parent id -> its children (by identity) as ``by_parent`` holds them, made when asked."""

    def _child_of(parent_id: int, span: SpanRecord) -> bool:
        found = children.get(parent_id)
        if found is None:
            found = children[parent_id] = {id(s) for s in by_parent.get(parent_id, ())}
        return id(span) in found and id(span) not in moved_out.get(parent_id, ())

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
            # Beside the call's span: moved under it (the call's interval covers it). A span
            # whose parent is the call already stays where it is; each span moves once.
            parent_id = wire.parent_id if outer is None else outer.parent_id
            moved = wire if outer is None else outer
            if parent_id is not None and parent_id != call.span_id and _child_of(parent_id, moved):
                moved_out.setdefault(parent_id, set()).add(id(moved))
                arrived.append((call.span_id, moved))
            twins.pop(moved.span_id, None)
    # Each parent's list filtered once: a scan and a delete per moved span made 8,000
    # calls beside their wire spans under one parent quadratic (4.7 s).
    for parent_id, gone in moved_out.items():
        by_parent[parent_id][:] = [s for s in by_parent[parent_id] if id(s) not in gone]
    for call_id, moved in arrived:
        by_parent.setdefault(call_id, []).append(moved)
    return timed


def normalised(root_id: int, records: list[SpanRecord]) -> list[SpanRecord]:
    """The spans of a workflow as the rollup and the steps read them: a streamed call joined
    to the record of its stream's end (:func:`join_stream_ends`), each span timed to
    its last child (:func:`~chainlat._core.records.extend_to_children`), a call that asked
    for tools ended by their start (:func:`~chainlat._core.records.answered_before_tools`),
    LiveKit's first audio placed (:func:`~chainlat._core.records.anchor_first_audio`), and
    request building (:func:`request_builders`) made transparent. The same list when
    nothing changes, so the common case costs four passes and no copy."""
    records = join_stream_ends(root_id, records)
    records = anchor_first_audio(answered_before_tools(extend_to_children(root_id, records)))
    builders = request_builders(root_id, records)
    if not builders:
        return records
    return [replace(r, kind=None) if r.span_id in builders else r for r in records]


_NAME: Final = attrgetter("name")


def join_stream_ends(root_id: int, records: list[SpanRecord]) -> list[SpanRecord]:
    """``records``, with each streamed call whose span ended with the response's headers
    timed to the record its instrumentation wrote when the stream was read to its end
    (`STREAM_ENDS`: Logfire's ``streaming response from ...``), and that record made
    transparent: one call, not two (docs/attributes.md, rule 20). The same list when no
    record ends a stream.

    A stream's end record is written under the call's parent, after the call's span ended.
    Its call is the model call under the same parent, of the same source and model, that
    ended last at or before it and carries no output of its own (the answer is the end
    record's: its tokens, its output), each call joined once, the end records taken in the
    order they ended. The joined call takes the end record's end, and its tokens, output
    and finish where the call's span has none; it is ``extended`` (its end is not its own
    span's). An end record that finds no call stays a call of its own, zero-length.
    """
    if STREAM_ENDS.isdisjoint(map(_NAME, records)):  # a C loop: every run read
        return records
    ends = sorted(
        (r for r in records if r.name in STREAM_ENDS and r.kind == "inference"),
        key=lambda r: (r.end_ns, r.span_id),
    )
    # The calls that may be joined, by parent and source, in the order they ended: each
    # end record makes those ended by its end available, and takes the latest of them (a
    # stack), so that many streams under one parent cost no pairwise comparison.
    waiting: dict[tuple[int | None, str | None], list[SpanRecord]] = {}
    for r in records:
        if (
            r.kind == "inference"
            and r.span_id != root_id
            and r.name not in STREAM_ENDS
            and not r.has_output
        ):
            waiting.setdefault((r.parent_id, r.source), []).append(r)
    for group in waiting.values():
        group.sort(key=lambda r: (r.end_ns, r.start_ns), reverse=True)  # popped from the end
    available: dict[tuple[int | None, str | None], list[SpanRecord]] = {}
    joined: dict[int, SpanRecord] = {}
    """Call id -> the call timed to its stream's end."""
    hidden: set[int] = set()
    for end in ends:
        key = (end.parent_id, end.source)
        pending = waiting.get(key, [])
        stack = available.setdefault(key, [])
        while pending and pending[-1].end_ns <= end.end_ns:
            stack.append(pending.pop())
        found: SpanRecord | None = None
        for index in range(len(stack) - 1, -1, -1):  # the latest-ending first
            if same_model(stack[index].model, end.model):
                found = stack.pop(index)
                break
        if found is None:
            continue
        joined[found.span_id] = replace(
            found,
            end_ns=end.end_ns,
            extended=True,
            input_tokens=_either(found.input_tokens, end.input_tokens),
            output_tokens=_either(found.output_tokens, end.output_tokens),
            cache_read_tokens=_either(found.cache_read_tokens, end.cache_read_tokens),
            model=found.model or end.model,
            has_output=end.has_output,
            asked_tools=found.asked_tools or end.asked_tools,
            failed=found.failed or end.failed,
        )
        hidden.add(end.span_id)
    if not joined:
        return records
    return [
        joined.get(r.span_id, r) if r.span_id not in hidden else replace(r, kind=None)
        for r in records
    ]


def _either(own: int | None, end: int | None) -> int | None:
    return own if own is not None else end
