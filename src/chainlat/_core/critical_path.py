"""The critical-path walk, and the walk to the first output.

Walk back from the workflow's end: the last child to end, then the child that ended
last before that one started, recursing into each child (the method of Jaeger's
critical-path view). The tree walked is built by :func:`chainlat._core.rollup.compute_rollup`.

"Before" allows for the clock: a trace whose clock writes starts to the millisecond
(OpenTelemetry JS) shows a sibling starting up to a millisecond before its predecessor
ended, although it started after. Both walks take ``slack_ns``, the resolution of the
trace's clock (:func:`chainlat._core.clock.resolution_ns`): a child that ends no more than
that after the walk's instant is taken, cut at the instant, as if it ended there.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Final

from chainlat._core.records import SpanRecord


@dataclass(frozen=True, slots=True)
class PathPiece:
    """A stretch of the critical path: the span it was spent in, what it counts as, and the
    steps (span id, name) that join the path here, in path order."""

    span_id: int
    start_ns: int
    end_ns: int
    kind: str
    steps: tuple[tuple[int, str], ...]
    shown_on: int = 0
    """The span a view draws the stretch on: the span itself, or for a call seen twice
    (the wire-level span inside or moved under the call that counts) the counted call, so
    the call shows its whole time on the path, not the part outside its twin."""


@dataclass(slots=True)
class Node:
    rec: SpanRecord
    start: int
    end: int
    attribution: str  # the kind its own time counts as, or "overhead"
    owner: Node | None  # the innermost step around it, itself included
    parent: Node | None = None
    enclosing: Node | None = None  # for a step: the step around it
    kids: list[Node] = field(default_factory=list)


def first_output_of(
    calls: list[Node], first_token: dict[int, int], user_facing: set[int]
) -> tuple[int, Node]:
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
        last = max(streamed, key=_start_end)
        return first_token[last.rec.span_id], last
    call = max(calls, key=_end)
    return call.end, call


SHORTCUT = True
"""Whether the wait for the first output may be read off the total's walk (see
`critical_segments`); the tests turn it off to hold both ways to the same numbers."""


_start: Final = operator.attrgetter("start")
_end: Final = operator.attrgetter("end")
_start_end: Final = operator.attrgetter("start", "end")


def critical_segments(top: Node, slack_ns: int = 0) -> tuple[list[tuple[Node, int, int]], bool]:
    """The critical path as (node, start, end) pieces, in time order, and whether the
    children of every node the walk entered are disjoint in time (touching allowed).

    When they are, the walk takes every child of every node it enters, one after the
    other, and `wait_segments` to any instant gives these same pieces, cut at that
    instant: no two children of one node can tie or cross there, so neither the cut
    nor its tie-break changes a choice. Children that overlap within ``slack_ns`` are not
    disjoint: the walk cuts the earlier one, and `wait_segments` must walk again.
    """
    segments: list[tuple[Node, int, int]] = []
    disjoint = True
    # Each frame: node, the time the walk has reached inside it, its children
    # sorted by end (ties: longest last, so it wins), and the next candidate.
    stack: list[tuple[Node, int, list[Node], int]] = []

    def push(node: Node, limit: int) -> None:
        nonlocal disjoint
        kids = [k for k in node.kids if k.end > k.start]
        # By end, ties longest last (so it wins): two stable sorts with keys read in C,
        # the order of the key (end, -start) without a Python call per child.
        kids.sort(key=_start, reverse=True)
        kids.sort(key=_end)
        if disjoint:
            previous_end = node.start
            for kid in kids:
                if kid.start < previous_end:
                    disjoint = False
                    break
                previous_end = kid.end
        stack.append((node, node.end if node.end < limit else limit, kids, len(kids) - 1))

    push(top, top.end)
    while stack:
        node, t, kids, i = stack.pop()
        reach = t + slack_ns
        while i >= 0 and (kids[i].end > reach or kids[i].start >= t):
            i -= 1
        if i < 0:
            if node.start < t:
                segments.append((node, node.start, t))
            continue
        child = kids[i]
        child_end = child.end if child.end < t else t
        if child_end < t:
            segments.append((node, child_end, t))
        stack.append((node, child.start, kids, i - 1))
        if child.kids:
            push(child, child_end)
        else:  # a leaf lies on the path from its start to its end (push keeps end > start)
            segments.append((child, child.start, child_end))
    segments.reverse()
    return segments, disjoint


def wait_segments(
    top: Node, cut: int, favoured: set[int], slack_ns: int = 0
) -> list[tuple[Node, int, int]]:
    """The critical path to the instant ``cut``, as if the run had ended then (every span
    cut there), where the ``favoured`` nodes (by ``id``) win ties of end time: the same
    walk as :func:`critical_segments`, with the same allowance for the clock."""
    segments: list[tuple[Node, int, int]] = []
    stack: list[tuple[Node, int, list[tuple[int, bool, int, int, Node]], int]] = []

    def push(node: Node, limit: int) -> None:
        # Decorated tuples rather than a key function: this runs at every workflow's end.
        ordered = sorted(
            [
                (k.end if k.end < cut else cut, id(k) in favoured, -k.start, n, k)
                for n, k in enumerate(node.kids)
                if k.start < cut and k.end > k.start
            ]
        )
        end = node.end if node.end < cut else cut
        stack.append((node, end if end < limit else limit, ordered, len(ordered) - 1))

    push(top, cut)
    while stack:
        node, t, kids, i = stack.pop()
        reach = t + slack_ns
        while i >= 0 and (kids[i][0] > reach or kids[i][4].start >= t):
            i -= 1
        if i < 0:
            if node.start < t:
                segments.append((node, node.start, t))
            continue
        child_end = kids[i][0] if kids[i][0] < t else t
        child = kids[i][4]
        if child_end < t:
            segments.append((node, child_end, t))
        stack.append((node, child.start, kids, i - 1))
        if child.kids:
            push(child, child_end)
        else:
            segments.append((child, child.start, child_end))
    segments.reverse()
    return segments
