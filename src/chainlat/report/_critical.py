"""The critical path of a run as drawable pieces: which span each instant on it belongs to.

The rollup (:func:`chainlat._core.rollup.compute_rollup`) keeps only the split and
the step names of its critical path. A waterfall needs the pieces: for each instant
on the path, the span it was spent in. This module builds the rollup's span tree
(twins merged, children clipped to their parent, spans that are not steps made
transparent) and walks it with the rollup's own walk, so the steps it marks are the
steps the rollup names; ``tests/test_explorer_data.py`` checks that on random trees.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from chainlat._core.rollup import (
    SpanRecord,
    _critical_segments,
    _Node,
    find_twins,
)
from chainlat._core.runs import StepTiming, WorkflowRun

_STEP_KINDS: Final = frozenset(("inference", "data", "tool"))


@dataclass(frozen=True, slots=True)
class Piece:
    """One stretch of the critical path, spent in one span (the workflow's own time: its id)."""

    span_id: int
    start_ns: int
    end_ns: int
    kind: str
    """What the stretch counts as: ``inference``, ``data``, ``tool`` or ``overhead``."""


@dataclass(frozen=True, slots=True)
class CriticalPath:
    """The pieces of the critical path in time order, and the steps on it in path order."""

    pieces: tuple[Piece, ...]
    steps: tuple[int, ...]
    """Span ids of the steps on the path, in the order of the rollup's ``critical_path``."""
    names: dict[int, str]
    """The name the rollup gives each step on the path: its step name, a twin's, its span's."""
    twins: dict[int, int]
    """A call seen twice: the span id of each duplicate, mapped to the span that counts."""


def critical_path(root: SpanRecord, spans: Sequence[SpanRecord]) -> CriticalPath:
    """The critical path of the workflow span ``root`` over its descendants ``spans``."""
    root_id = root.span_id
    records = list(spans)
    by_parent: dict[int, list[SpanRecord]] = {}
    for rec in records:
        if rec.parent_id is not None and rec.span_id != root_id:
            by_parent.setdefault(rec.parent_id, []).append(rec)
    twins = find_twins(root_id, records)
    widened: dict[int, tuple[int, int]] = {}
    renamed: dict[int, str] = {}  # a counted call named only by its twin
    for rec in records:
        primary = twins.get(rec.span_id)
        if primary is not None:
            low, high = widened.get(primary.span_id, (primary.start_ns, primary.end_ns))
            widened[primary.span_id] = (min(low, rec.start_ns), max(high, rec.end_ns))
            if rec.step_name and not primary.step_name:
                renamed[primary.span_id] = rec.step_name

    top = _Node(root, root.start_ns, max(root.end_ns, root.start_ns), "overhead", None)
    queue = [top]
    seen = {root_id}
    while queue:
        parent = queue.pop()
        for rec in by_parent.get(parent.rec.span_id, ()):
            if rec.span_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(rec.span_id)
            start, end = widened.get(rec.span_id, (rec.start_ns, rec.end_ns))
            start = min(max(start, parent.start), parent.end)
            end = max(min(end, parent.end), start)
            kind = None if rec.span_id in twins else rec.kind
            if kind in _STEP_KINDS:
                assert kind is not None
                attribution: str = kind
                counted = parent.attribution != kind
            else:
                attribution = parent.attribution
                counted = kind == "workflow"
            node = _Node(rec, start, end, attribution, parent.owner)
            if counted:
                node.owner = node
                node.enclosing = parent.owner
            if kind is None:
                node.kids = parent.kids  # transparent: its children are its parent's
            else:
                parent.kids.append(node)
            if rec.span_id in by_parent:
                queue.append(node)

    pieces: list[Piece] = []
    steps: list[int] = []
    names: dict[int, str] = {}
    on_path: set[int] = set()
    for node, start, end in _critical_segments(top):
        pieces.append(Piece(node.rec.span_id, start, end, node.attribution))
        step = node.owner
        chain: list[int] = []
        while step is not None and id(step) not in on_path:
            rec = step.rec
            chain.append(rec.span_id)
            names[rec.span_id] = rec.step_name or renamed.get(rec.span_id) or rec.name
            on_path.add(id(step))
            step = step.enclosing
        steps += reversed(chain)
    twin_ids = {twin: primary.span_id for twin, primary in twins.items()}
    return CriticalPath(tuple(pieces), tuple(steps), names, twin_ids)


def step_spans(run: WorkflowRun) -> list[int | None]:
    """The span id of each of ``run.steps`` (None for a run read without its spans).

    A step is the span of its name (step name or span name) whose interval it covers (a
    step seen twice is widened to both spans, and may be either), taken in start order.
    """
    if run.root is None:
        return [None] * len(run.steps)
    by_name: dict[str, list[SpanRecord]] = {}
    for span in run.spans:
        rec = span.record
        by_name.setdefault(rec.name, []).append(rec)
        if rec.step_name and rec.step_name != rec.name:
            by_name.setdefault(rec.step_name, []).append(rec)
    for candidates in by_name.values():
        candidates.sort(key=lambda r: (r.start_ns, r.span_id))
    used: set[int] = set()
    found: list[int | None] = []
    for step in run.steps:
        match = None
        for rec in by_name.get(step.name, ()):
            if (
                rec.span_id not in used
                and step.start_ns <= rec.start_ns
                and rec.end_ns <= max(step.end_ns, rec.start_ns)
            ):
                match = rec.span_id
                break
        if match is not None:
            used.add(match)
        found.append(match)
    return found


def critical_steps(run: WorkflowRun) -> set[int]:
    """Indexes into ``run.steps`` of the steps on the run's critical path.

    From the spans when the run has them; otherwise (a run judged live) from the
    rollup's step names: for each name on the path, the step of that name not yet taken
    that ended last (of parallel calls of one name, the one the run waited for).
    """
    if run.root is not None:
        found = critical_path(run.root.record, run.records)
        path = set(found.steps)
        return {
            i
            for i, span_id in enumerate(step_spans(run))
            if span_id is not None and found.twins.get(span_id, span_id) in path
        }
    return _by_names(run.steps, run.rollup.critical_path)


def _by_names(steps: Sequence[StepTiming], names: Sequence[str]) -> set[int]:
    chosen: set[int] = set()
    for name in names:
        candidates = [i for i, step in enumerate(steps) if step.name == name and i not in chosen]
        if candidates:
            chosen.add(max(candidates, key=lambda i: (steps[i].end_ns, -i)))
    return chosen
