"""Runs from a trace: which of its spans are runs, and each run with its steps and outcome.

What a user waited for is one run (docs/attributes.md, rules 5 and 14): a span classified
``workflow`` makes a run, and so does the top of a trace that a convention marks as a run
root (an OpenInference CHAIN, a Haystack pipeline's run); with ``roots`` every local root
does. A run root inside another run root of the same name is that run seen twice (Google
ADK's invocation span and its agent span); a session that holds turns (LiveKit's
``agent_session``, Pipecat's ``conversation``) is no run, its turns are; any other run root
inside a run is a nested run, a step of the run around it and judged by its own name.

Outcomes recorded after the fact (``chainlat.record_outcome(trace_id=...)``) are small
``record_outcome`` spans in the run's trace; :func:`runs_of_trace` merges them onto the
workflow: the workflow span they are a child of, else the trace's only top-level workflow.
An outcome on the workflow span itself comes first; later outcome spans override it, in
order of their end time.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, overload

from chainlat._core import attributes as attr
from chainlat._core import conventions, turn_start
from chainlat._core.recorded import recorded_rollup, with_first_output
from chainlat._core.records import named_record
from chainlat._core.rollup import NestedRun, Rollup, SpanRecord, nested_rollup
from chainlat._core.runs import (
    Attributes,
    StepTiming,
    TracedSpan,
    WorkflowRun,
    built_run,
    marked_first_output,
    steps_of,
)
from chainlat._core.steps import spliced_steps


def _outcome(attributes: Attributes) -> tuple[bool | None, float | None]:
    success = attributes.get(attr.OUTCOME_SUCCESS)
    score = attributes.get(attr.OUTCOME_SCORE)
    number: float | None = None
    if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
        number = float(score)
    return (success if isinstance(success, bool) else None), number


def is_outcome(span: TracedSpan) -> bool:
    """A ``record_outcome`` span: an outcome graded after the run, not a step."""
    return span.record.name == attr.OUTCOME_SPAN_NAME and span.record.kind is None


def workflow_name(span: TracedSpan) -> str:
    """The name of the workflow a run-root span ran: one rule for every command."""
    return conventions.workflow_name_of(span.attributes, span.record.name)


def runs_of_trace(
    trace_id: str, spans: Iterable[TracedSpan], *, origin: str = "", roots: bool = False
) -> list[WorkflowRun]:
    """Every workflow run of one trace, with outcomes merged, in start order.

    A run is made by every span classified ``workflow`` (chainlat's workflow, GenAI
    ``invoke_workflow`` / ``invoke_agent``, OpenLLMetry workflows and agents,
    OpenInference agents), by a top-level span that a convention marks as a run
    root (an OpenInference CHAIN without a parent), and with ``roots`` by every local
    root of the trace (a span whose parent is not in it: ``POST /chat``), so that a
    plain service with model calls can be budgeted. A workflow nested in another is
    a run of its own (``nested=True``: budgets judge it) and a step of the outer run.
    Runs get their recorded rollup when the workflow span carries one
    (``chainlat.chain.*``), else one computed from the spans. Linear in the spans of
    the trace, nested workflows too where each run's figures add up from its own spans and
    those of the runs nested in it (see :func:`_composed_runs`).
    """
    if not isinstance(spans, (list, tuple)):
        spans = list(spans)
    flat = _flat_run(spans)
    if flat is not None:
        top, descendants = flat
        # A lone voice turn (a Pipecat turn with no conversation above it) starts by its
        # framework's rule too; the index of spans is built only for such a turn.
        voice = turn_start.is_voice_turn(top.record, top.attributes)
        by_span = {s.record.span_id: s for s in spans} if voice else None
        return [_run(top, descendants, trace_id, origin, _outcome(top.attributes), spans=by_span)]
    by_id, children, workflows, late = _index(spans, roots=roots)
    cycles = _parent_cycles(list(by_id.values()), by_id) if roots else {}
    workflows.extend(by_id[span_id] for span_id in cycles)
    if not workflows:
        return []
    if len(workflows) > 1:
        workflows.sort(key=lambda s: (s.record.start_ns, s.record.span_id))
        workflows = _one_request_one_run(workflows, by_id)
    elif conventions.is_container(workflows[0].record.name):
        return []
    run_ids = {w.record.span_id for w in workflows}
    around = {id(w): _inside_run(w, by_id, run_ids) for w in workflows}
    nested = {key: outer is not None for key, outer in around.items()}
    tops = [w for w in workflows if not nested[id(w)]]

    outcomes = _merged_outcomes(workflows, tops, late)
    if COMPOSE and len(tops) < len(workflows) and not cycles and len(by_id) == len(spans):
        composed = _composed_runs(
            workflows, around, children, run_ids, by_id, trace_id, origin, outcomes
        )
        if composed is not None:
            return composed

    return [
        _run(
            top,
            _descendants(top, children),
            trace_id,
            origin,
            outcomes[top.record.span_id],
            nested=nested[id(top)],
            incomplete=cycles.get(top.record.span_id),
            spans=by_id,
        )
        for top in workflows
    ]


def _run(
    top: TracedSpan,
    descendants: list[TracedSpan],
    trace_id: str,
    origin: str,
    outcome: tuple[bool | None, float | None],
    *,
    nested: bool = False,
    incomplete: str | None = None,
    spans: Mapping[int, TracedSpan] | None = None,
) -> WorkflowRun:
    """The run of the run root ``top`` and its ``descendants``, with its recorded rollup
    when it can be trusted; a framework's voice turn started where the caller stopped
    speaking (`chainlat._core.turn_start`; ``spans``: the trace's, by id)."""
    records = [span.record for span in descendants]
    end_of_turn: int | None = None
    unknown_start: str | None = None
    # The application's mark counts from the span's own start, before a rule moves it.
    marked = marked_first_output(top)
    if spans is not None and turn_start.is_voice_turn(top.record, top.attributes):
        found = turn_start.turn_start(top, spans.values(), _children_of(descendants, top))
        if found is not None and found.speech_end_ns <= top.record.end_ns:
            top = TracedSpan(
                replace(top.record, start_ns=found.speech_end_ns),
                top.attributes,
                top.error,
                top.origin,
            )
            end_of_turn = found.end_of_turn_ns
            unknown_start = found.unknown_start
    if unknown_start is None:
        unknown_start = turn_start.said_unknown_start(top.attributes)
    root = top.record
    if incomplete is None and not _cut_by_barge_in(top):
        incomplete = _ended_after(root, records)
    steps = steps_of(root, records)
    recorded, rebuilt = recorded_rollup(top.attributes, root, records, steps, marked)
    return _read_run(
        top,
        root,
        records,
        recorded,
        steps,
        tuple(descendants),
        trace_id,
        origin,
        outcome,
        nested=nested,
        rebuilt=rebuilt,
        incomplete=incomplete,
        end_of_turn_ns=end_of_turn,
        first_output_ns=marked,
        unknown_start=unknown_start,
    )


def _read_run(
    top: TracedSpan,
    root: SpanRecord,
    records: list[SpanRecord],
    rollup: Rollup | None,
    steps: tuple[StepTiming, ...],
    spans: Sequence[TracedSpan],
    trace_id: str,
    origin: str,
    outcome: tuple[bool | None, float | None],
    *,
    nested: bool,
    rebuilt: str,
    incomplete: str | None,
    end_of_turn_ns: int | None = None,
    first_output_ns: int | None = None,
    unknown_start: str | None = None,
) -> WorkflowRun:
    """A run read from a trace, with what its root span says of it (name, variant, error,
    origin) and its outcome: the one call of `built_run` for both ways a run is rolled up."""
    variant = top.attributes.get(attr.VARIANT)
    success, score = outcome
    return built_run(
        workflow_name(top),
        root,
        records,
        rollup=rollup,
        steps=steps,
        traced=top,
        spans=spans,
        trace_id=trace_id,
        error=top.error,
        origin=origin or top.origin,
        variant=str(variant) if variant is not None else None,
        success=success,
        score=score,
        nested=nested,
        rebuilt=rebuilt,
        incomplete=incomplete,
        end_of_turn_ns=end_of_turn_ns,
        first_output_ns=first_output_ns,
        unknown_start=unknown_start,
    )


def _children_of(descendants: list[TracedSpan], top: TracedSpan) -> dict[int, list[TracedSpan]]:
    """The children of ``top`` among its descendants, by parent id (the rules read them)."""
    top_id = top.record.span_id
    return {top_id: [s for s in descendants if s.record.parent_id == top_id]}


def _ended_after(root: SpanRecord, records: list[SpanRecord]) -> str | None:
    """Why a run is not whole when a step of it ended after its workflow span (a model call
    read from a generator after the ``with`` block exited): the workflow's figures, recorded
    or rebuilt within its span, do not hold the step's time; None when none did.

    An instrumentation that stamps a step's end late by its own bookkeeping is not that:
    LiteLLM writes a streamed call's span from its logging callback, 1.7 ms after the agent's
    workflow ended on a 500 ms run (the sim's server spans end inside the workflow). A step
    that ends no later than `LATE_END_SHARE` of the run's duration (at most `LATE_END_NS`)
    after it, with no first token past its end, is clipped to the workflow as any child is:
    the run's figures can be off by that much at most."""
    end = root.end_ns
    allowed = min(LATE_END_NS, int((end - root.start_ns) * LATE_END_SHARE))
    late = next(
        (
            rec
            for rec in records
            if rec.end_ns > end
            and rec.kind in _STEP_KINDS
            and (
                rec.end_ns - end > allowed
                or (rec.ttft_ms is not None and rec.start_ns + rec.ttft_ms * 1e6 > end)
            )
        ),
        None,
    )
    if late is None:
        return None
    after_ms = (late.end_ns - end) / 1_000_000
    return (
        f"step `{late.label}` ended after its workflow, {after_ms:g} ms past its end "
        "(finished out of its context: a generator or task read after the block exited), so "
        "the run's total, split and first output do not hold it"
    )


def _cut_by_barge_in(top: TracedSpan) -> bool:
    """A framework's voice turn ended by the caller speaking over the answer: the framework
    ends the turn when it hears them and only then stops the calls the barge-in cut (a
    Pipecat ``tts`` span ended 15.7 ms after its interrupted ``turn``, in the run of
    tests/data/foreign/pipecat/README.md). Those steps are clipped to the turn as any
    child is, not a run lost: the answer was cut there, and the turn is left out of the
    percentiles anyway."""
    return (
        turn_start.is_voice_turn(top.record, top.attributes)
        and conventions.end_reason_of(top.attributes) == "interrupted"
    )


_STEP_KINDS: Final[frozenset[str]] = frozenset(attr.STEP_KINDS)
LATE_END_SHARE: Final = 0.01
"""A step may end this share of its run's duration after the run (see `_ended_after`)."""
LATE_END_NS: Final = 5_000_000
"""... and never more than 5 ms after it."""


def _flat_run(spans: Sequence[TracedSpan]) -> tuple[TracedSpan, list[TracedSpan]] | None:
    """The workflow span and its steps in one loop when the trace is that alone (the common
    shape: no parent, each step a child of it with a step kind, ids distinct), else None:
    the run :func:`_index` and :func:`_descendants` would find, with no loop of theirs."""
    top: TracedSpan | None = None
    others: list[TracedSpan] = []
    append = others.append
    for span in spans:
        kind = span.record.kind
        if kind == "workflow":
            if top is not None or span.record.parent_id is not None:
                return None
            top = span
        elif kind is None:
            return None  # perhaps a run root, or an outcome span
        else:
            append(span)
    if top is None:
        return None
    top_id = top.record.span_id
    ids = {top_id}
    add = ids.add
    for span in others:
        rec = span.record
        if rec.parent_id != top_id:
            return None
        add(rec.span_id)
    if len(ids) != len(others) + 1:
        return None  # an id twice: the walk keeps the first
    return top, others


def _index(
    spans: Iterable[TracedSpan], *, roots: bool
) -> tuple[dict[int, TracedSpan], dict[int, list[TracedSpan]], list[TracedSpan], list[TracedSpan]]:
    """A trace's spans by id and by parent, its run roots (see :func:`runs_of_trace`), and
    its outcome spans."""
    by_id: dict[int, TracedSpan] = {}
    children: dict[int, list[TracedSpan]] = {}
    workflows: list[TracedSpan] = []
    late: list[TracedSpan] = []
    untyped: list[TracedSpan] = []  # no kind: a run root or an outcome, perhaps
    outcome_name = attr.OUTCOME_SPAN_NAME
    for span in spans:
        rec = span.record
        by_id[rec.span_id] = span
        parent_id = rec.parent_id
        if parent_id is not None:
            siblings = children.get(parent_id)
            if siblings is None:
                children[parent_id] = [span]
            else:
                siblings.append(span)
        kind = rec.kind
        if kind == "workflow":
            workflows.append(span)
        elif kind is None:
            untyped.append(span)
            if rec.name == outcome_name:
                late.append(span)
    for span in untyped:
        rec = span.record
        named = named_record(rec, span.attributes)
        if named is not None:
            # A span no attribute classifies, known by its name: its record as if one had.
            span.record = rec = named
            if rec.kind == "workflow":
                workflows.append(span)
            continue
        if (rec.parent_id is None or rec.parent_id not in by_id) and (
            (roots and not is_outcome(span)) or is_run_root(span)
        ):
            workflows.append(span)
    return by_id, children, workflows, late


def _merged_outcomes(
    workflows: list[TracedSpan], tops: list[TracedSpan], late: list[TracedSpan]
) -> dict[int, tuple[bool | None, float | None]]:
    """Each run's outcome (by its root's span id): its own, then the ``record_outcome``
    spans in order of their end, each onto its parent, else onto the only top-level run."""
    outcomes = {w.record.span_id: _outcome(w.attributes) for w in workflows}
    late.sort(key=lambda s: s.record.end_ns)
    for span in late:
        parent_id = span.record.parent_id
        if parent_id is not None and parent_id in outcomes:
            target = parent_id
        elif len(tops) == 1:
            target = tops[0].record.span_id
        else:
            continue
        success, score = _outcome(span.attributes)
        old_success, old_score = outcomes[target]
        outcomes[target] = (
            success if success is not None else old_success,
            score if score is not None else old_score,
        )
    return outcomes


def _descendants(top: TracedSpan, children: Mapping[int, list[TracedSpan]]) -> list[TracedSpan]:
    """The spans under a run's root, outcome spans left out (merged onto the run instead)."""
    found: list[TracedSpan] = []
    stack = [top.record.span_id]
    seen = set(stack)
    outcome_name = attr.OUTCOME_SPAN_NAME
    while stack:
        for child in children.get(stack.pop(), ()):
            rec = child.record
            child_id = rec.span_id
            if child_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(child_id)
            if rec.kind is None and rec.name == outcome_name:  # is_outcome(child)
                continue
            found.append(child)
            stack.append(child_id)
    return found


def _parent_cycles(spans: list[TracedSpan], by_id: Mapping[int, TracedSpan]) -> dict[int, str]:
    """One span of each cycle of parents (a span that is its own parent, or a ring of them):
    no root leads to them, so ``roots`` makes it a run, marked incomplete, rather than let a
    request vanish."""
    found: dict[int, str] = {}
    done: set[int] = set()
    for span in spans:
        path: list[int] = []
        on_path: dict[int, int] = {}
        span_id: int | None = span.record.span_id
        while span_id is not None and span_id in by_id and span_id not in done:
            if span_id in on_path:
                ring = path[on_path[span_id] :]
                first = min(ring, key=lambda i: (by_id[i].record.start_ns, i))
                found[first] = (
                    "its root span is its own parent"
                    if len(ring) == 1
                    else f"its root span is part of a cycle of {len(ring)} parents"
                )
                break
            on_path[span_id] = len(path)
            path.append(span_id)
            span_id = by_id[span_id].record.parent_id
        done.update(path)
    return found


def is_run_root(span: TracedSpan) -> bool:
    """A top-level span that a convention marks as a run (an OpenInference CHAIN root)."""
    return conventions.is_run_root(span.attributes, span.record.name, top_level=True)


def _one_request_one_run(
    workflows: list[TracedSpan], by_id: Mapping[int, TracedSpan]
) -> list[TracedSpan]:
    """The run roots that are runs (docs/attributes.md, rule 14): a session or conversation
    holding turns is none (its turns are), and a run root inside a run root of the same
    name is that run seen twice (Google ADK's invocation span and its agent span, both
    named after the agent), a step of it and no run of its own."""
    kept = [w for w in workflows if not conventions.is_container(w.record.name)]
    run_ids = {w.record.span_id for w in kept}
    names: dict[int, str] = {}
    found: list[TracedSpan] = []
    for w in kept:
        outer = _inside_run(w, by_id, run_ids)
        if outer is not None:
            outer_name = names.get(outer.record.span_id)
            if outer_name is None:
                outer_name = names[outer.record.span_id] = workflow_name(outer)
            mine = names.get(w.record.span_id)
            if mine is None:
                mine = names[w.record.span_id] = workflow_name(w)
            if mine == outer_name:
                continue
        found.append(w)
    return found


def _inside_run(
    span: TracedSpan, by_id: Mapping[int, TracedSpan], run_ids: set[int]
) -> TracedSpan | None:
    """The nearest run root around ``span``, None when it is inside none."""
    seen = {span.record.span_id}
    parent_id = span.record.parent_id
    while parent_id is not None and parent_id not in seen:
        parent = by_id.get(parent_id)
        if parent is None:
            return None
        if parent_id in run_ids:
            return parent
        seen.add(parent_id)
        parent_id = parent.record.parent_id
    return None


# --- nested runs, in time and memory linear in the spans ---------------------------------------

COMPOSE = True
"""Whether a run with runs nested in it is rolled up from its own spans and their figures
(`nested_rollup`), where that is exact; the tests turn it off to hold both ways to the same
runs."""


@dataclass(slots=True)
class _Nested:
    """What a run leaves for the run around it: its figures, its steps and their levels."""

    figures: NestedRun
    steps: tuple[StepTiming, ...]
    levels: tuple[int, ...]
    kinds: dict[str, int]
    """Its steps by kind, every level counted (a recorded rollup is checked against them)."""


def _composed_runs(
    workflows: list[TracedSpan],
    around: Mapping[int, TracedSpan | None],
    children: Mapping[int, list[TracedSpan]],
    run_ids: set[int],
    by_id: Mapping[int, TracedSpan],
    trace_id: str,
    origin: str,
    outcomes: Mapping[int, tuple[bool | None, float | None]],
) -> list[WorkflowRun] | None:
    """The runs of a trace where some run inside another (see :func:`runs_of_trace`), each
    from its own spans, the runs nested in it standing in for theirs (`nested_rollup`):
    innermost first, so that each run's figures are there for the run around it. A run is
    walked whole, as before, where that is not exact; its steps reach into
    :data:`~chainlat._core.rollup.NESTED_LEVELS` levels of nested runs and its
    ``spans`` are read from the trace when asked for, so that neither is held N times for
    a chain of N. None for a trace whose runs nest in a cycle."""
    depth: dict[int, int] = {}
    for w in workflows:
        chain: list[TracedSpan] = []
        span: TracedSpan | None = w
        while span is not None and span.record.span_id not in depth:
            if len(chain) > len(workflows):
                return None  # runs nested in a cycle of parents
            chain.append(span)
            span = around[id(span)]
        level = -1 if span is None else depth[span.record.span_id]
        for inner in reversed(chain):
            level += 1
            depth[inner.record.span_id] = level
    kept: dict[int, _Nested] = {}
    runs: dict[int, WorkflowRun] = {}
    context = (trace_id, origin, by_id)
    for top in sorted(workflows, key=lambda w: -depth[w.record.span_id]):
        span_id = top.record.span_id
        outer = around[id(top)]
        run, left = _composed_run(
            top, children, run_ids, kept, context, outcomes[span_id], outer is not None
        )
        runs[span_id] = run
        if left is not None and outer is not None:
            kept[span_id] = left
    return [runs[w.record.span_id] for w in workflows]


def _composed_run(
    top: TracedSpan,
    children: Mapping[int, list[TracedSpan]],
    run_ids: set[int],
    kept: Mapping[int, _Nested],
    context: _Context,
    outcome: tuple[bool | None, float | None],
    nested: bool,
) -> tuple[WorkflowRun, _Nested | None]:
    """One run of :func:`_composed_runs`, and what it leaves for the run around it (None
    when that run must walk its spans whole)."""
    root = top.record
    own, below = _own_spans(top, children, run_ids)
    if turn_start.is_voice_turn(root, top.attributes):  # started elsewhere: walked whole
        full = _descendants(top, children)
        trace_id, origin, by_id = context
        return _run(
            top, full, trace_id, origin, outcome, nested=nested, spans=by_id
        ), None  # fmt: skip
    marked = marked_first_output(top)
    if all(clear and span_id in kept for span_id, clear in below.items()):
        inner = [kept[span_id] for span_id in below]
        records = [span.record for span in own]
        figures = nested_rollup(
            root, records, {k: kept[k].figures for k in below}, first_output_ns=marked
        )
        spliced = None
        if figures is not None:
            spliced = spliced_steps(steps_of(root, records), [(v.steps, v.levels) for v in inner])
        if figures is not None and spliced is not None:
            steps, levels = spliced
            kinds = _kinds(step for step, level in zip(steps, levels, strict=True) if not level)
            for found in inner:
                for kind, count in found.kinds.items():
                    kinds[kind] += count
            left = _Nested(figures, steps, levels, kinds)
            spans = tuple(own) if not below else SpansBelow(children, root.span_id)
            run = _built(top, records, spans, steps, kinds, figures.rollup, marked, context,
                         outcome, nested)  # fmt: skip
            return run, left
    # Walked whole, as without nested runs: the run around it walks it whole too.
    full = _descendants(top, children) if below else own
    records = [span.record for span in full]
    figures = None if below else nested_rollup(root, records, {}, first_output_ns=marked)
    steps = steps_of(root, records)
    kinds = _kinds(steps)
    whole = None if figures is None else _Nested(figures, steps, (0,) * len(steps), kinds)
    computed = None if figures is None else figures.rollup
    run = _built(top, records, tuple(full), steps, kinds, computed, marked, context, outcome,
                 nested)  # fmt: skip
    return run, whole


_Context = tuple[str, str, Mapping[int, TracedSpan]]
"""The trace id, the origin, and the trace's spans by id."""


def _built(
    top: TracedSpan,
    records: list[SpanRecord],
    spans: Sequence[TracedSpan],
    steps: tuple[StepTiming, ...],
    kinds: Mapping[str, int],
    computed: Rollup | None,
    marked: int | None,
    context: _Context,
    outcome: tuple[bool | None, float | None],
    nested: bool,
) -> WorkflowRun:
    """A run of :func:`_composed_run`, as :func:`_run` builds it: its recorded rollup when
    it can be trusted (checked against every step's kind, ``kinds``), else ``computed``,
    else the rollup of ``records`` (then its every span)."""
    root = top.record
    trace_id, origin, _ = context
    if computed is None:
        recorded, rebuilt = recorded_rollup(top.attributes, root, records, steps, marked)
    else:
        # Its records are its own spans only: the checks that read them are the figures'.
        recorded, rebuilt = recorded_rollup(top.attributes, root, [], (), marked)
        if recorded is not None and (
            kinds["inference"] > recorded.inference_count
            or kinds["data"] > recorded.data_count
            or kinds["tool"] > recorded.tool_count
        ):
            recorded = None  # as `more_steps` finds it
        elif recorded is not None and recorded.first_output_ms is None and records:
            recorded = with_first_output(recorded, computed)
    return _read_run(
        top,
        root,
        records,
        recorded if recorded is not None else computed,
        steps,
        spans,
        trace_id,
        origin,
        outcome,
        nested=nested,
        rebuilt=rebuilt,
        incomplete=_ended_after(root, records),
    )


def _kinds(steps: Iterable[StepTiming]) -> dict[str, int]:
    found = dict.fromkeys(_STEP_KINDS, 0)
    for step in steps:
        if step.kind in found:
            found[step.kind] += 1
    return found


def _own_spans(
    top: TracedSpan, children: Mapping[int, list[TracedSpan]], run_ids: set[int]
) -> tuple[list[TracedSpan], dict[int, bool]]:
    """The spans under a run's root that are no nested run's (:func:`_descendants`' walk,
    stopped at each nested run root, kept as a span of this run), and the nested run roots
    found, each with whether only transparent spans lie between it and the root."""
    found: list[TracedSpan] = []
    below: dict[int, bool] = {}
    top_id = top.record.span_id
    stack = [(top_id, True)]
    seen = {top_id}
    outcome_name = attr.OUTCOME_SPAN_NAME
    while stack:
        parent_id, clear = stack.pop()
        for child in children.get(parent_id, ()):
            rec = child.record
            child_id = rec.span_id
            if child_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(child_id)
            if rec.kind is None and rec.name == outcome_name:
                continue
            found.append(child)
            if child_id in run_ids:
                below[child_id] = clear
            else:
                stack.append((child_id, clear and rec.kind is None))
    return found, below


class SpansBelow(Sequence[TracedSpan]):
    """The spans under a run's root, as :func:`_descendants` finds them, walked from the
    trace's index each time they are read: a run with runs nested in it keeps no copy of
    theirs (a chain of N nested runs would hold N² / 2)."""

    __slots__ = ("_children", "_root_id")

    def __init__(self, children: Mapping[int, list[TracedSpan]], root_id: int) -> None:
        self._children = children
        self._root_id = root_id

    def __iter__(self) -> Iterator[TracedSpan]:
        stack = [self._root_id]
        seen = set(stack)
        outcome_name = attr.OUTCOME_SPAN_NAME
        children = self._children
        while stack:
            for child in children.get(stack.pop(), ()):
                rec = child.record
                child_id = rec.span_id
                if child_id in seen:
                    continue
                seen.add(child_id)
                if rec.kind is None and rec.name == outcome_name:
                    continue
                yield child
                stack.append(child_id)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (tuple, SpansBelow)):
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a tuple, and read afresh

    def __repr__(self) -> str:
        return f"SpansBelow({tuple(self)!r})"

    def __bool__(self) -> bool:
        return next(iter(self), None) is not None

    @overload
    def __getitem__(self, index: int) -> TracedSpan: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[TracedSpan]: ...

    def __getitem__(self, index: int | slice) -> TracedSpan | Sequence[TracedSpan]:
        return tuple(self)[index]
