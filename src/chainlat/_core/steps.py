"""The steps of a run: its model calls, data stages, tool calls and nested workflows.

Which spans are steps follows the rollup: a span classified as inference, data or tool
counts, unless it sits inside a step of the same kind (the HTTP-level model span inside a
hand-written ``chainlat.inference`` is the same call seen twice), and a call seen by two
instrumentations beside each other (:func:`~chainlat._core.twins.find_twins`) is one
step. A nested workflow counts as a step of the outer one.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from chainlat._core.attributes import STEP_KINDS, WORKFLOW_KIND_VALUE, SpanKind
from chainlat._core.records import SpanRecord
from chainlat._core.rollup import NESTED_LEVELS, Rollup
from chainlat._core.twins import find_twins, normalised

StepKindName = SpanKind

_NS_PER_MS: Final = 1_000_000
_COUNTED: Final = frozenset(STEP_KINDS)
_STEP_KINDS: Final = frozenset((*STEP_KINDS, WORKFLOW_KIND_VALUE))


@dataclass(slots=True, unsafe_hash=True)
class StepTiming:
    """One step of a run: a model call, data stage, tool call or nested workflow.

    Treated as immutable; not frozen for the reader's speed (see ``WorkflowRun``).
    """

    name: str
    """The step's key in budgets and reports: its ``chainlat.step.name`` when it has one
    (``plan``), else its span name (``chat gpt-4o``, ``data retrieve-docs``)."""
    kind: StepKindName
    start_ns: int
    end_ns: int
    depth: int = 0
    """0 for a step directly in the workflow, 1 for a step inside that step, ..."""
    ttft_ms: float | None = None
    """Time to first token, for streamed model calls."""
    cache_hit: bool = False
    span_name: str = ""
    """The span name, also when the step has a step name."""
    model: str | None = None
    """The model of a model call, when known."""
    extended: bool = False
    """The step's span ended before its own events or children; it is timed to the last of
    them (the reports say so)."""
    operation: str | None = None
    """A model call's operation (``gen_ai.operation.name``: ``chat``, ``text_to_speech``),
    when known: budgets limit every call of an operation."""

    @property
    def duration_ms(self) -> float:
        """Wall time of the step."""
        return (self.end_ns - self.start_ns) / _NS_PER_MS


def steps_of(root: SpanRecord, spans: Iterable[SpanRecord]) -> tuple[StepTiming, ...]:
    """The steps under a workflow span, in start order (ties: outer first)."""
    records = normalised(root.span_id, spans if isinstance(spans, list) else list(spans))
    twins = find_twins(root.span_id, records)
    if not twins:
        flat = _flat_steps(root.span_id, records)
        if flat is not None:
            return flat
    by_parent: dict[int, list[SpanRecord]] = {}
    for rec in records:
        if rec.parent_id is not None and rec.span_id != root.span_id:
            by_parent.setdefault(rec.parent_id, []).append(rec)
    found: list[StepTiming] = []
    position: dict[int, int] = {}  # span id -> index in ``found``, for twins
    # Each frame: a span, the kind of the innermost step around it ("" for
    # none), the depth a step found below it gets, and the index in ``found``
    # of the step that owns it (-1: the workflow itself).
    stack: list[tuple[SpanRecord, str, int, int]] = [(root, "", 0, -1)]
    seen = {root.span_id}
    while stack:
        parent, around, depth, owner = stack.pop()
        for rec in by_parent.get(parent.span_id, ()):
            if rec.span_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(rec.span_id)
            kind = rec.kind
            if twins and rec.span_id in twins:
                stack.append((rec, around, depth, owner))  # the same call, counted as its twin
                continue
            if kind == "workflow" or (kind in _COUNTED and kind != around):
                start_ns = rec.start_ns
                end_ns = rec.end_ns
                found.append(
                    StepTiming(
                        rec.step_name or rec.name,
                        kind,  # a step kind, checked above
                        start_ns,
                        end_ns if end_ns > start_ns else start_ns,
                        depth,
                        rec.ttft_ms,
                        rec.cache_hit,
                        rec.name,
                        rec.model,
                        rec.extended,
                        rec.operation,
                    )
                )
                position[rec.span_id] = len(found) - 1
                # As in the rollup, a nested workflow takes the kind around it.
                inner = kind if kind in _COUNTED else around
                stack.append((rec, inner, depth + 1, len(found) - 1))
                continue
            if kind is not None and kind == around and owner >= 0 and found[owner].kind == kind:
                found[owner] = _absorbed(found[owner], rec)
            stack.append((rec, around, depth, owner))
    if twins:
        _merge_twins(found, position, twins, records)
    if len(found) > 1:
        found.sort(key=_START_THEN_DEPTH)  # stable: ties keep the order found
    return tuple(found)


def _absorbed(outer: StepTiming, rec: SpanRecord) -> StepTiming:
    """The step ``outer`` with what ``rec``, the same operation seen twice inside it, adds:
    its first token and cache hit, and its model when ``outer`` has none."""
    ttft = outer.ttft_ms
    if ttft is None and rec.ttft_ms is not None:
        ttft = (rec.start_ns - outer.start_ns) / _NS_PER_MS + rec.ttft_ms
    if (
        ttft == outer.ttft_ms
        and (outer.cache_hit or not rec.cache_hit)
        and (outer.model is not None or rec.model is None)
        and (outer.operation is not None or rec.operation is None)
    ):
        return outer
    return StepTiming(
        outer.name,
        outer.kind,
        outer.start_ns,
        outer.end_ns,
        outer.depth,
        ttft,
        outer.cache_hit or rec.cache_hit,
        outer.span_name,
        outer.model or rec.model,
        outer.extended,
        outer.operation or rec.operation,
    )


def _flat_steps(root_id: int, records: list[SpanRecord]) -> tuple[StepTiming, ...] | None:
    """The steps of a workflow whose spans are all its children (the common shape), as
    :func:`steps_of` finds them, in one loop; None for any other shape."""
    ids: set[int] = set()
    add = ids.add
    found: list[StepTiming] = []
    append = found.append
    for rec in records:
        if rec.parent_id != root_id or rec.span_id == root_id:
            return None
        add(rec.span_id)
        kind = rec.kind
        if kind is None or kind not in _STEP_KINDS:
            continue
        # Every field set here, without the class's __init__: a call of it costs about a
        # thousand instructions more per step (tests/traces/test_fast_reader_check.py holds the
        # steps equal to the full walk's, made by it).
        start_ns, end_ns = rec.start_ns, rec.end_ns
        step = _new(StepTiming)
        step.name = rec.step_name or rec.name
        step.kind = kind  # a step kind, checked above
        step.start_ns = start_ns
        step.end_ns = end_ns if end_ns > start_ns else start_ns
        step.depth = 0
        step.ttft_ms = rec.ttft_ms
        step.cache_hit = rec.cache_hit
        step.span_name = rec.name
        step.model = rec.model
        step.extended = rec.extended
        step.operation = rec.operation
        append(step)
    if len(ids) != len(records):
        return None  # a span id twice: the general walk keeps the first
    if len(found) > 1:
        found.sort(key=_START_THEN_DEPTH)
    return tuple(found)


def more_steps(steps: Sequence[StepTiming], recorded: Rollup) -> bool:
    """Whether the trace holds more model calls, data stages or tools than ``recorded``
    counted: spans the live rollup never saw."""
    inference = data = tool = 0
    for step in steps:
        kind = step.kind
        if kind == "inference":
            inference += 1
        elif kind == "data":
            data += 1
        elif kind == "tool":
            tool += 1
    return (
        inference > recorded.inference_count
        or data > recorded.data_count
        or tool > recorded.tool_count
    )


def _merge_twins(
    found: list[StepTiming],
    position: Mapping[int, int],
    twins: Mapping[int, SpanRecord],
    records: Iterable[SpanRecord],
) -> None:
    """Give each counted call the extent, first token and cache hit its twin saw."""
    for rec in records:
        primary = twins.get(rec.span_id)
        i = position.get(primary.span_id) if primary is not None else None
        if i is None:
            continue
        step = found[i]
        start_ns = min(step.start_ns, rec.start_ns)
        # A first token is timed from the step's start, which the twin may move earlier.
        if step.ttft_ms is not None:
            ttft: float | None = step.ttft_ms + (step.start_ns - start_ns) / _NS_PER_MS
        elif rec.ttft_ms is not None:
            ttft = (rec.start_ns - start_ns) / _NS_PER_MS + rec.ttft_ms
        else:
            ttft = None
        # A step name given to either span names the call (the framework's span may
        # be the one counted, while the application named the wire-level call, or back).
        named = step.name != step.span_name
        found[i] = StepTiming(
            step.name if named or rec.step_name is None else rec.step_name,
            step.kind,
            start_ns,
            max(step.end_ns, rec.end_ns),
            step.depth,
            ttft,
            step.cache_hit or rec.cache_hit,
            step.span_name,
            step.model or rec.model,
            step.extended or rec.extended,
            step.operation or rec.operation,
        )


_START_THEN_DEPTH: Final = operator.attrgetter("start_ns", "depth")
_new: Final = object.__new__


def spliced_steps(
    own: Sequence[StepTiming], nested: Sequence[tuple[Sequence[StepTiming], Sequence[int]]]
) -> tuple[tuple[StepTiming, ...], tuple[int, ...]] | None:
    """The steps of a run from its own (``own``: `steps_of` over its spans, each nested run
    root a step with nothing under it) and those of each nested run (its steps and their
    levels of nesting), in start order, as `steps_of` over every span orders them; with each
    step's level (0: the run's own), none deeper than
    :data:`~chainlat._core.rollup.NESTED_LEVELS`. None when two steps of different runs tie
    in that order (`steps_of` must walk them all).

    A nested run is a step with only transparent spans above it (`nested_rollup` checks),
    so its steps are one level deeper in the run around it."""
    keyed: list[tuple[int, int, int, int, StepTiming]] = [
        (step.start_ns, step.depth, 0, 0, step) for step in own
    ]
    for group, (steps, levels) in enumerate(nested, 1):
        for step, level in zip(steps, levels, strict=True):
            if level < NESTED_LEVELS:
                keyed.append((step.start_ns, step.depth + 1, group, level + 1, step))
    keyed.sort(key=_KEY)  # stable: each run's own order holds within it
    found: list[StepTiming] = []
    found_levels: list[int] = []
    previous: tuple[int, int, int, int, StepTiming] | None = None
    for item in keyed:
        if previous is not None and previous[:2] == item[:2] and previous[2] != item[2]:
            return None
        previous = item
        found.append(_deeper(item[4]) if item[2] else item[4])
        found_levels.append(item[3])
    return tuple(found), tuple(found_levels)


_KEY: Final = operator.itemgetter(0, 1)


def _deeper(step: StepTiming) -> StepTiming:
    """``step`` one level deeper (every field set, without the class's __init__: a run nested
    sixteen deep is copied sixteen times)."""
    found = _new(StepTiming)
    found.name, found.kind, found.start_ns, found.end_ns = (
        step.name, step.kind, step.start_ns, step.end_ns,
    )  # fmt: skip
    found.depth = step.depth + 1
    found.ttft_ms, found.cache_hit, found.span_name, found.model = (
        step.ttft_ms, step.cache_hit, step.span_name, step.model,
    )  # fmt: skip
    found.extended, found.operation = step.extended, step.operation
    return found
