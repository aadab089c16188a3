"""What a what-if found: each run's estimate, and per workflow its totals, split and steps.

Example::

    result = whatif(runs, swap={"chat gpt-4o": "gpt-4o-mini"})
    for w in result.workflows:
        print(w.workflow, w.before.p95, "->", w.after.p95)
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup
from chainlat._core.stats import percentile
from chainlat.analysis.whatif.timeline import counted_steps

if TYPE_CHECKING:
    from chainlat._core.latency import LatencyProfile
    from chainlat._core.prices import Prices
    from chainlat._core.runs import WorkflowRun
    from chainlat.analysis.whatif.basis import Basis
    from chainlat.analysis.whatif.changes import Change
    from chainlat.budgets import BudgetReport, Budgets, NotJudgedReason

__all__ = [
    "KINDS",
    "Percentiles",
    "RunEstimate",
    "StepEffect",
    "WhatIfResult",
    "WorkflowEffect",
    "effects",
    "judge",
]

KINDS: Final = ("inference", "data", "tool", "overhead")


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Nearest-rank p50, p95 and p99 of a set of totals, in milliseconds."""

    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Percentiles:
        """The percentiles of a non-empty set of values."""
        ordered = sorted(values)
        return cls(percentile(ordered, 50), percentile(ordered, 95), percentile(ordered, 99))


@dataclass(frozen=True, slots=True)
class RunEstimate:
    """One recorded run and its re-estimate."""

    workflow: str
    variant: str | None
    trace_id: str
    before: Rollup
    after: Rollup
    changed_steps: int
    """Steps whose duration was re-estimated (or dropped) in this run."""
    run: WorkflowRun = field(repr=False, compare=False)
    after_root: SpanRecord = field(repr=False, compare=False)
    after_spans: tuple[SpanRecord, ...] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class StepEffect:
    """One step name of a workflow, before and after."""

    step: str
    after_name: str
    """The name after a swap (``chat gpt-4o-mini``), ``(dropped)``, or the same name."""
    kind: str
    occurrences: int
    before_p50_ms: float
    after_p50_ms: float
    critical_before: float
    """Share of runs with the step on the critical path, before."""
    critical_after: float


@dataclass(frozen=True, slots=True)
class WorkflowEffect:
    """One workflow (and variant): its totals, split and steps before and after."""

    workflow: str
    variant: str | None
    runs: int
    before: Percentiles
    after: Percentiles
    share_before: dict[str, float]
    """Critical-path share of inference, data, tool and overhead: sum over runs / sum of totals."""
    share_after: dict[str, float]
    steps: tuple[StepEffect, ...]
    first_output_before: Percentiles | None = None
    """Of the time to first output (ms), for the runs that measured one."""
    first_output_after: Percentiles | None = None
    first_output_bounds: int = 0
    """Runs whose first output is a bound, not a measurement (docs/attributes.md, rules 13,
    15, 16 and 17): left out of the first output's percentiles, before and after."""
    cost_before: float | None = None
    """Mean US dollars per run, with prices; the swapped calls at their new model's price."""
    cost_after: float | None = None


@dataclass(frozen=True)
class WhatIfResult:
    """What :func:`whatif` found."""

    changes: tuple[Change, ...]
    workflows: tuple[WorkflowEffect, ...]
    runs: tuple[RunEstimate, ...] = field(repr=False)
    profiles: dict[str, LatencyProfile] = field(repr=False)
    """The profiles used: fitted from the runs, overridden by a profile file."""
    notes: tuple[str, ...] = ()
    """Assumptions the estimate had to make, one line each."""
    basis: tuple[Basis, ...] = ()
    """What the swapped calls were predicted from, per step, new model and mode: which
    fit, on how many calls, over which tokens, and how far it was extrapolated."""
    budget_before: BudgetReport | None = field(default=None, repr=False)
    """The verdict of the budgets on the recorded runs, when budgets were given."""
    budget_after: BudgetReport | None = field(default=None, repr=False)
    """The same on the estimated runs."""


def effects(
    estimates: Sequence[RunEstimate], changes: Sequence[Change], prices: Prices | None = None
) -> list[WorkflowEffect]:
    """Per workflow and variant, in order of first appearance: before and after."""
    groups: dict[tuple[str, str | None], list[RunEstimate]] = {}
    for estimate in estimates:
        groups.setdefault((estimate.workflow, estimate.variant), []).append(estimate)
    swaps = {c.step: c.model for c in changes if c.kind == "swap" and c.model is not None}
    drops = {c.step for c in changes if c.kind == "drop"}
    return [
        WorkflowEffect(
            workflow=workflow,
            variant=variant,
            runs=len(members),
            before=Percentiles.of(e.before.total_ms for e in members),
            after=Percentiles.of(e.after.total_ms for e in members),
            share_before=_shares([e.before for e in members]),
            share_after=_shares([e.after for e in members]),
            steps=_step_effects(members, swaps, drops),
            first_output_before=_first_outputs(e.before for e in members if _measured(e)),
            first_output_after=_first_outputs(e.after for e in members if _measured(e)),
            first_output_bounds=sum(not _measured(e) for e in members),
            cost_before=_mean([_cost_before(e, prices) for e in members]),
            cost_after=_mean([_cost_after(e, swaps, prices) for e in members]),
        )
        for (workflow, variant), members in groups.items()
    ]


def _step_effects(
    members: Sequence[RunEstimate], swaps: Mapping[str, str], drops: Collection[str]
) -> tuple[StepEffect, ...]:
    before: dict[str, list[float]] = {}
    after: dict[str, list[float]] = {}
    kinds: dict[str, str] = {}
    renamed: dict[str, str] = {}
    for estimate in members:
        after_by_id = {r.span_id: r for r in estimate.after_spans}
        for span_id, rec in counted_steps(estimate.run).items():
            kinds.setdefault(rec.label, rec.kind or "")
            before.setdefault(rec.label, []).append((rec.end_ns - rec.start_ns) / 1e6)
            new = after_by_id.get(span_id)
            if new is not None:
                after.setdefault(rec.label, []).append((new.end_ns - new.start_ns) / 1e6)
                renamed.setdefault(rec.label, new.label)
    steps = []
    for name, durations in before.items():
        # The step's name on the estimated runs' critical path: its span's new name,
        # which a swap changes only when the name ends with the old model.
        new_label = renamed.get(name)
        after_name = "(dropped)" if name in drops else new_label or name
        if name in swaps and after_name == name:
            after_name = f"{name} -> {swaps[name]}"
        new_durations = after.get(name, [])
        on_path_after = (
            0 if new_label is None else sum(new_label in e.after.critical_path for e in members)
        )
        steps.append(
            StepEffect(
                step=name,
                after_name=after_name,
                kind=kinds[name],
                occurrences=len(durations),
                before_p50_ms=percentile(sorted(durations), 50),
                after_p50_ms=percentile(sorted(new_durations), 50) if new_durations else 0.0,
                critical_before=sum(name in e.before.critical_path for e in members) / len(members),
                critical_after=on_path_after / len(members),
            )
        )
    return tuple(steps)


def _measured(estimate: RunEstimate) -> bool:
    """Whether the run's first output was measured, before and after the change (a bound
    stays one: the calls it rests on are the same, and so is a start that is no end of the
    caller's words, rule 16)."""
    return not (
        estimate.run.first_output_bound
        or estimate.before.bound_in("first_output")
        or estimate.after.bound_in("first_output")
    )


def _first_outputs(rollups: Iterable[Rollup]) -> Percentiles | None:
    found = [r.first_output_ms for r in rollups if r.first_output_ms is not None]
    return Percentiles.of(found) if found else None


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean, when every value is known: a partial mean would compare unlike runs."""
    if not values or any(v is None for v in values):
        return None
    return math.fsum(v for v in values if v is not None) / len(values)


def _cost_before(estimate: RunEstimate, prices: Prices | None) -> float | None:
    """The run's cost as the judge takes it: from ``prices`` when given (they win over a
    recorded cost), else as recorded."""
    if prices and estimate.run.spans:
        return estimate.before.cost_usd
    return estimate.run.rollup.cost_usd


def _cost_after(
    estimate: RunEstimate, swaps: Mapping[str, str], prices: Prices | None
) -> float | None:
    """The estimated run's cost: each swapped call at its new model's price."""
    if not prices:
        return None
    labels = {i: rec.label for i, rec in counted_steps(estimate.run).items()}
    spans = [
        replace(rec, model=swaps[labels[rec.span_id]]) if labels.get(rec.span_id) in swaps else rec
        for rec in estimate.after_spans
    ]
    return compute_rollup(estimate.after_root, spans, prices=prices).cost_usd


def _shares(rollups: Sequence[Rollup]) -> dict[str, float]:
    total = math.fsum(r.total_ms for r in rollups)
    return {k: (math.fsum(r.kind_ms(k) for r in rollups) / total if total else 0.0) for k in KINDS}


def judge(
    estimates: Sequence[RunEstimate], budgets: Budgets, allow: Iterable[NotJudgedReason] = ()
) -> tuple[BudgetReport, BudgetReport]:
    """The budgets' verdicts on the recorded runs and on their estimates (``allow``: the
    reasons for not judging a limit that do not fail it)."""
    from chainlat import budgets as budget_module
    from chainlat._core.runs import build_run

    before = [
        build_run(
            e.workflow, e.run.root_record, e.run.records, rollup=e.before, trace_id=e.trace_id
        )
        for e in estimates
    ]
    after = [
        build_run(e.workflow, e.after_root, e.after_spans, rollup=e.after, trace_id=e.trace_id)
        for e in estimates
    ]
    allowed = tuple(allow)
    return (
        budget_module.evaluate(before, budgets, allow=allowed),
        budget_module.evaluate(after, budgets, allow=allowed),
    )
