"""The critical path of a run as drawable pieces: which span each instant on it belongs to;
and the path to its first output (the first audio of a voice turn) the same way.

The rollup (:func:`chainlat._core.rollup.compute_rollup`) keeps only the split and
the step names of its critical path. A waterfall needs the pieces: for each instant
on the path, the span it was spent in. The rollup hands them out of its own walk, so
the steps drawn are the steps it names; ``tests/report/test_explorer_data.py`` checks that
on random trees.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

from chainlat._core import attributes as attr
from chainlat._core.rollup import PathPiece, SpanRecord, compute_rollup, find_twins
from chainlat._core.runs import StepTiming, WorkflowRun, marked_first_output

_STEP_KINDS: Final = frozenset(attr.STEP_KINDS)


@dataclass(frozen=True, slots=True)
class Piece:
    """One stretch of the critical path, spent in one span (the workflow's own time: its id)."""

    span_id: int
    start_ns: int
    end_ns: int
    kind: str
    """What the stretch counts as: ``inference``, ``data``, ``tool`` or ``overhead``."""
    shown_on: int = 0
    """The span that draws it: a call seen twice shows its whole time on the path on the span
    that counts, not on its twin inside."""


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
    to_output: tuple[Piece, ...] = ()
    """The critical path to the first output (the walk whose split is the first output's:
    the wait for the first audio of a voice turn), in time order; empty without one."""
    output_steps: tuple[int, ...] = ()
    """Span ids of the steps on the path to the first output, in path order (their names
    are in ``names`` too)."""


def critical_path(
    root: SpanRecord,
    spans: Sequence[SpanRecord],
    *,
    first_output_ns: int | None = None,
    end_of_turn_ns: int | None = None,
) -> CriticalPath:
    """The critical path of the workflow span ``root`` over its descendants ``spans``, and
    the path to its first output: the rollup's own walks
    (:func:`~chainlat._core.rollup.compute_rollup` with ``pieces`` and ``output_pieces``;
    ``first_output_ns`` and ``end_of_turn_ns`` as for it, `run_path` passes a run's)."""
    records = list(spans)
    found: list[PathPiece] = []
    to_output: list[PathPiece] = []
    compute_rollup(
        root,
        records,
        pieces=found,
        output_pieces=to_output,
        first_output_ns=first_output_ns,
        end_of_turn_ns=end_of_turn_ns,
    )
    names: dict[int, str] = {}
    steps = _steps(found, names)
    output_steps = _steps(to_output, names)
    twins = find_twins(root.span_id, records)
    twin_ids = {twin: primary.span_id for twin, primary in twins.items()}
    return CriticalPath(
        _pieces(found), tuple(steps), names, twin_ids, _pieces(to_output), tuple(output_steps)
    )


def run_path(run: WorkflowRun) -> CriticalPath | None:
    """The critical paths of a run read with its spans, to its end and to its first output
    as its rollup found it (the application's mark, the end of the caller's turn); None
    for a run without spans."""
    if run.root is None:
        return None
    return critical_path(
        run.root.record,
        run.records,
        first_output_ns=marked_first_output(run.root),
        end_of_turn_ns=run.end_of_turn_ns,
    )


def _steps(found: Sequence[PathPiece], names: dict[int, str]) -> list[int]:
    steps: list[int] = []
    for piece in found:
        for span_id, name in piece.steps:
            steps.append(span_id)
            names[span_id] = name
    return steps


def _pieces(found: Sequence[PathPiece]) -> tuple[Piece, ...]:
    return tuple(Piece(p.span_id, p.start_ns, p.end_ns, p.kind, p.shown_on) for p in found)


_START_NS: Final = attrgetter("start_ns")


def step_spans(run: WorkflowRun) -> list[int | None]:
    """The span id of each of ``run.steps`` (None for a run read without its spans).

    A step is the span of its name (step name or span name) whose interval it covers (a
    step seen twice is widened to both spans, and may be either), or that starts with it
    (a call that asked for tools is ended by their start: docs/attributes.md, rule 19),
    taken in start order.
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
    unused_from: dict[str, int] = {}
    """By name: the index of its first span not matched yet."""
    found: list[int | None] = []
    for step in run.steps:
        match = None
        candidates = by_name.get(step.name, [])
        # Skipped at once, not read for each step (a run of thousands of calls of one name
        # read them all, n^2): the spans that start before the step (not it), and the first
        # ones matched already (all of them, when the calls started at one instant).
        first = bisect_left(candidates, step.start_ns, key=_START_NS)
        for index in range(max(first, unused_from.get(step.name, 0)), len(candidates)):
            rec = candidates[index]
            if (
                rec.span_id not in used
                and step.start_ns <= rec.start_ns
                and (rec.end_ns <= max(step.end_ns, rec.start_ns) or rec.start_ns == step.start_ns)
            ):
                match = rec.span_id
                break
        if match is not None:
            used.add(match)
            index = unused_from.get(step.name, 0)
            while index < len(candidates) and candidates[index].span_id in used:
                index += 1
            unused_from[step.name] = index
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
