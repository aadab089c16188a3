"""Judging runs against budgets: each run's per-run limits (:func:`check_run`) and every
limit over many runs (:func:`evaluate`), one :class:`~chainlat.budgets.verdict.LimitVerdict`
per limit.

Pure: runs in, verdicts out; nothing is read from OpenTelemetry.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from chainlat._core.errors import shown
from chainlat._core.runs import BudgetViolation, Unit, WorkflowRun
from chainlat._core.stats import Samples, Stats, WorkflowStats
from chainlat.budgets._cost import run_cost
from chainlat.budgets._values import percentile_of_key
from chainlat.budgets.measures import Measure, over, run_checks, worse
from chainlat.budgets.messages import operation_target, step_target, target_of
from chainlat.budgets.opt_outs import absent_verdicts, apply_opt_outs
from chainlat.budgets.unrecorded import (
    UnknownStart,
    Unrecorded,
    Unusable,
    unknown_start_why,
    unrecorded_why,
    unusable_why,
)
from chainlat.budgets.verdict import (
    BudgetReport,
    LimitVerdict,
    NotJudgedReason,
    VerdictStatus,
)

if TYPE_CHECKING:
    from chainlat._core.prices import Prices
    from chainlat.budgets.model import Budgets, WorkflowBudget


def check_run(run: WorkflowRun, budget: WorkflowBudget) -> list[BudgetViolation]:
    """The per-run limits of ``budget`` that ``run`` broke (percentiles are not judged here).

    A step's ``max`` and ``ttft`` apply to each of its occurrences; the
    violation reports the worst one. A value that is not a finite number breaks the limit.

    Example::

        broken = check_run(run, budgets.workflows["support-chat"])
        assert not broken, "; ".join(map(str, broken))
    """
    violations: list[BudgetViolation] = []
    for target, limit, measure in run_checks(budget):
        actual = measure.of(run)
        if actual is not None and over(actual, limit):
            violations.append(BudgetViolation(run.workflow, target, limit, actual))
    if budget.cost is not None and run.cost_usd is not None and over(run.cost_usd, budget.cost):
        violations.append(BudgetViolation(run.workflow, "cost", budget.cost, run.cost_usd, "USD"))
    return violations


def unjudged_in_run(
    run: WorkflowRun, budget: WorkflowBudget, prices: Prices | None = None
) -> str | None:
    """Why a per-run limit of ``budget`` cannot be judged on ``run`` (a run not read whole, a
    cost limit on a run without a cost), or None: a run that broke nothing is kept only
    when this is None.

    Example::

        if not check_run(run, budget) and unjudged_in_run(run, budget) is None:
            print("kept")
    """
    if run.incomplete is not None:
        return run.incomplete
    if budget.cost is not None:
        cost = run_cost(run, prices)
        if cost.usd is None:
            return cost.why
    return None


@dataclass(slots=True)
class _RunTally:
    judged: int = 0
    broken: int = 0
    worst: float | None = None
    worst_run: WorkflowRun | None = None
    unjudged: int = 0
    """Runs that have the measure but whose value could not be judged."""
    reason: NotJudgedReason | None = None
    why: str | None = None
    """The first unjudged run's reason and why."""

    def not_judged(self, reason: NotJudgedReason | None, why: str | None) -> None:
        self.unjudged += 1
        if self.reason is None:
            self.reason, self.why = reason, why


class _Tallies:
    """What ``evaluate`` keeps while the runs stream by: statistics, per-run tallies, and the
    runs whose cost or whose spans are not all known, by workflow."""

    def __init__(self, budgets: Budgets) -> None:
        self.budgets = budgets
        self.checks = {name: run_checks(budget) for name, budget in budgets.workflows.items()}
        self.runs: dict[tuple[str, str], _RunTally] = {}
        self.unpriced: dict[str, _RunTally] = {}
        """Runs whose cost is unknown, for the cost percentiles."""
        self.incomplete: dict[str, _RunTally] = {}
        self.unrecorded: dict[str, Unrecorded] = {}
        """Runs with a model call whose end the trace does not record, by workflow."""
        self.unusable: dict[str, Unusable] = {}
        """Runs with a call whose first token the trace gives by a value that is no time."""
        self.unknown_start: dict[str, UnknownStart] = {}
        """Voice turns whose start is no end of the caller's words (rule 16)."""
        self.stats = Stats(
            include_errors=budgets.includes_errors,
            include_interrupted=budgets.includes_interrupted,
            count_operations=budgets.limits_operations,
        )
        self.prices = budgets.model_prices()

    def add(self, run: WorkflowRun) -> None:
        budgets, stats = self.budgets, self.stats
        budget = budgets.workflows.get(run.workflow)
        if budget is None:
            stats.add(run)
            return
        if run.incomplete is not None:
            self.incomplete.setdefault(run.workflow, _RunTally()).not_judged(
                "incomplete_run", run.incomplete
            )
        if run.interrupted and not budgets.includes_interrupted(run.workflow):
            # The answer of a turn interrupted by barge-in was cut: its latency is no
            # answer's, for a per-run limit as for a percentile. The statistics count it,
            # and every output says how many were left out.
            stats.add(run)
            return
        unrecorded = bool(run.rollup.unrecorded)
        if unrecorded:
            self.unrecorded.setdefault(run.workflow, Unrecorded()).add(run)
        unusable = bool(run.rollup.unusable)
        if unusable:
            self.unusable.setdefault(run.workflow, Unusable()).add(run)
        late = run.unknown_start is not None
        if late:
            self.unknown_start.setdefault(run.workflow, UnknownStart()).add(run)
        cost = run_cost(run, self.prices) if budget.cost or budget.cost_percentiles else None
        stats.add(run, cost.usd if cost is not None else None)
        # A failed run is in no percentile (unless include_errors): its cost is not missed.
        counted = not run.error or budgets.includes_errors(run.workflow)
        if cost is not None and cost.usd is None and counted:
            self.unpriced.setdefault(run.workflow, _RunTally()).not_judged(cost.reason, cost.why)
        for target, limit, measure in self.checks[run.workflow]:
            actual = measure.of(run)
            # A first token that is no time leaves a bound, or no value where one should be
            # (a call's time to first token): neither kept nor broken is known (rule 15).
            unknown = unusable and measure.unusable(run)
            if actual is None and not unknown:
                continue
            key = (run.workflow, target)  # a tally made once, not per run by setdefault
            tally = self.runs.get(key) or self.runs.setdefault(key, _RunTally())
            if unrecorded and measure.unrecorded(run):
                # A bound, not a measurement (rule 13): neither kept nor broken is known.
                tally.not_judged("unrecorded_end", unrecorded_why(run))
            elif late and measure.unknown_start(run):
                # From a start that is no end of the caller's words: a bound (rule 16).
                tally.not_judged("unknown_start", unknown_start_why(run))
            elif unknown or actual is None:
                tally.not_judged("unusable_value", unusable_why(run))
            elif actual < 0 and math.isfinite(actual):
                # A recorded rollup no duration can be (chainlat.chain.total_ms = -100).
                why = f"a run records {actual:g} ms for {target}, which no duration can be"
                tally.not_judged("impossible_value", why)
            else:
                _count(tally, actual, limit, run)
        if budget.cost is not None and cost is not None:
            tally = self.runs.setdefault((run.workflow, "cost"), _RunTally())
            if cost.usd is None:
                tally.not_judged(cost.reason, cost.why)
            else:
                _count(tally, cost.usd, budget.cost, run)


def evaluate(
    runs: Iterable[WorkflowRun],
    budgets: Budgets,
    *,
    allow: Iterable[NotJudgedReason] = (),
    late_spans: Mapping[str, int] | None = None,
    dropped_runs: Mapping[str, int] | None = None,
) -> BudgetReport:
    """Judge runs against budgets: per-run limits on each run, percentiles over all of them.

    Streams ``runs`` once, keeping one float per sample (see :mod:`chainlat._core.stats`).
    A limit that cannot be judged is ``not_judged`` with its ``reason`` (a workflow or step
    no run has, fewer than ``min_runs`` samples, no sample at all, ...) and fails the gate
    unless ``allow`` names its reason or the budget marks the workflow or step
    ``optional``. A measured value that is not a finite number (NaN, infinity) is never
    within a limit: the run breaks each per-run limit it is measured against, and a
    percentile over samples holding one is broken, with that value as its actual.

    ``late_spans``: spans a reader dropped from runs it had handed out (they came after the
    settle window), by workflow, as :class:`~chainlat.traces.ReadCounters` fills it while
    ``runs`` is read: the limits of those workflows that were not broken are not judged
    (``incomplete_run``). ``dropped_runs``: runs a reader could not read at all (their
    workflow span ends before it starts), by workflow, likewise.

    Example::

        report = evaluate(read_runs(["traces.jsonl"]), load_budgets("chainlat.toml"))
        print(report.summary)
    """
    tally = _Tallies(budgets)
    for run in runs:
        tally.add(run)
    stats, checks, tallies = tally.stats, tally.checks, tally.runs
    unpriced, incomplete = tally.unpriced, tally.incomplete

    verdicts: list[LimitVerdict] = []
    for name, budget in budgets.workflows.items():
        found = _run_verdicts(name, budget, checks[name], tallies)
        workflow_stats = stats.workflows.get(name)
        found.extend(
            _percentile_verdicts(
                name,
                budget,
                budgets,
                workflow_stats,
                tally.unrecorded.get(name, Unrecorded()),
                tally.unusable.get(name, Unusable()),
                tally.unknown_start.get(name, UnknownStart()),
            )
        )
        if name in unpriced:
            found = [_cost_unknown(v, unpriced[name]) for v in found]
        if budget.error_rate is not None:
            found.append(_error_rate_verdict(name, budget.error_rate, budgets, workflow_stats))
        found = absent_verdicts(found, name, budget, stats, budgets.source)
        if budget.operations:
            found = [_no_call(v, budget, workflow_stats) for v in found]
        why = _incomplete_why(name, late_spans, incomplete.get(name, _RunTally()), dropped_runs)
        if why:
            found = [_incomplete(v, why) for v in found]
        verdicts.extend(found)
    return BudgetReport(apply_opt_outs(verdicts, budgets, allow), stats, budgets.source)


def _count(tally: _RunTally, actual: float, limit: float, run: WorkflowRun) -> None:
    tally.judged += 1
    if over(actual, limit):
        tally.broken += 1
    if worse(actual, tally.worst):
        tally.worst, tally.worst_run = actual, run


def _incomplete(verdict: LimitVerdict, why: str) -> LimitVerdict:
    """A limit judged over runs a reader could not read whole: kept is not known (a dropped
    span may be the slow one); broken stays broken."""
    if verdict.status == "broken":
        return verdict
    return replace(verdict, status="not_judged", reason="incomplete_run", why=why)


def _incomplete_why(
    name: str,
    late_spans: Mapping[str, int] | None,
    runs: _RunTally,
    dropped_runs: Mapping[str, int] | None = None,
) -> str:
    dropped = dropped_runs.get(name, 0) if dropped_runs else 0
    if dropped:
        return (
            f"{dropped} of its runs have a workflow span that ends before it starts and were "
            "left out unread: a run the gate cannot see may be the slow one"
        )
    late = late_spans.get(name, 0) if late_spans else 0
    if late:
        return (
            f"{late} spans of its runs arrived after their trace was judged and were left out "
            "(raise --settle-lines)"
        )
    if runs.unjudged:
        return f"{runs.unjudged} of its runs could not be read whole: {runs.why}"
    return ""


def _cost_unknown(verdict: LimitVerdict, unpriced: _RunTally) -> LimitVerdict:
    """A cost percentile over runs some of whose cost is unknown is not judged: the runs
    left out would be the very ones that cost the most, or the least."""
    if verdict.unit != "USD" or verdict.kind != "percentile" or verdict.status == "broken":
        return verdict
    total = verdict.runs + unpriced.unjudged
    return replace(
        verdict,
        status="not_judged",
        reason=unpriced.reason,
        why=f"{unpriced.unjudged} of {total} runs have no cost: {unpriced.why}",
        unjudged_runs=unpriced.unjudged,
    )


def _run_verdicts(
    name: str,
    budget: WorkflowBudget,
    checks: list[tuple[str, float, Measure]],
    tallies: dict[tuple[str, str], _RunTally],
) -> list[LimitVerdict]:
    run_limits: list[tuple[str, float, Unit]] = [
        (target, limit, "ms") for target, limit, _ in checks
    ]
    if budget.cost is not None:
        run_limits.append(("cost", budget.cost, "USD"))
    found: list[LimitVerdict] = []
    for target, limit, unit in run_limits:
        tally = tallies.get((name, target), _RunTally())
        if tally.judged == 0 and not tally.unjudged:
            found.append(_no_data(name, target, limit, unit))
            continue
        status: VerdictStatus = "broken" if tally.broken else "ok"
        why = None
        if tally.unjudged and not tally.broken:
            status = "not_judged"
            why = f"{tally.unjudged} of {tally.judged + tally.unjudged} runs: {tally.why}"
        found.append(
            LimitVerdict(
                name,
                target,
                limit,
                tally.worst,
                status,
                tally.judged,
                tally.broken,
                worst_run=tally.worst_run if tally.broken else None,
                unit=unit,
                reason=tally.reason if status == "not_judged" else None,
                why=why,
                unjudged_runs=tally.unjudged,
            )
        )
    return found


def _no_data(
    name: str, target: str, limit: float, unit: Unit, percentile: float | None = None
) -> LimitVerdict:
    return LimitVerdict(
        name,
        target,
        limit,
        None,
        "not_judged",
        0,
        percentile=percentile,
        unit=unit,
        reason="no_data",
        why=f"no run of {shown(name)} has a value for {target}",
    )


def _no_samples(
    name: str,
    target: str,
    limit: float,
    unit: Unit,
    q: float,
    samples: Samples | None,
    stats: WorkflowStats | None,
) -> LimitVerdict:
    """A percentile without a sample: every run left out (failed, or a cache hit), or no
    run with a value for it."""
    verdict = _no_data(name, target, limit, unit, q)
    if samples is not None and len(samples):
        why = f"every sample of {target} is a cache hit, left out by exclude_cache_hits"
        return replace(verdict, reason="no_runs", why=why)
    if stats is not None and stats.runs and stats.errors == stats.runs:
        why = (
            f"all {stats.runs} runs of {shown(name)} failed, and failed runs are not in the "
            "percentiles (include_errors = true counts them)"
        )
        return replace(verdict, reason="no_runs", why=why)
    return verdict


def _effective(samples: Samples, exclude_cached: bool, min_runs: int) -> float | None:
    """The effective sample size of weighted samples when it is below ``min_runs`` (with a
    rounding's leeway: twenty runs of one weight are worth twenty), else None."""
    if not samples.weighted:
        return None
    worth = samples.effective_count(exclude_cached=exclude_cached)
    return worth if worth < min_runs * (1 - 1e-9) else None


def _left_out(stats: WorkflowStats | None) -> str:
    """What the percentiles left out and why, when voice turns were interrupted."""
    if stats is None or not stats.interrupted or stats.include_interrupted:
        return ""
    return (
        f" ({stats.interrupted} interrupted turns left out of the percentiles: "
        "include_interrupted = true counts them)"
    )


def _too_few(count: int, min_runs: int) -> str:
    return f"{count} of the {min_runs} runs min_runs asks for: record more runs or lower min_runs"


def _error_rate_verdict(
    name: str, limit: float, budgets: Budgets, stats: WorkflowStats | None
) -> LimitVerdict:
    min_runs = budgets.min_runs_for(name)
    if stats is None or stats.runs == 0:
        return _no_data(name, "error_rate", limit, "%")
    rate = 100.0 * stats.errors / stats.runs
    status: VerdictStatus
    reason: NotJudgedReason | None = None
    why = None
    if stats.runs < min_runs:
        status, reason, why = "not_judged", "not_enough_runs", _too_few(stats.runs, min_runs)
    else:
        status = "broken" if rate > limit else "ok"
    return LimitVerdict(
        name,
        "error_rate",
        limit,
        rate,
        status,
        stats.runs,
        broken_runs=stats.errors,
        min_runs=min_runs,
        unit="%",
        reason=reason,
        why=why,
    )


def _percentile_verdicts(
    name: str,
    budget: WorkflowBudget,
    budgets: Budgets,
    stats: WorkflowStats | None,
    unrecorded: Unrecorded,
    unusable: Unusable,
    unknown_start: UnknownStart,
) -> list[LimitVerdict]:
    min_runs = budgets.min_runs_for(name)
    exclude = budgets.excludes_cache_hits(name)
    found: list[LimitVerdict] = []

    def judge(
        target: str, q: float, limit: float, samples: Samples | None, unit: Unit = "ms"
    ) -> None:
        count = samples.count(exclude_cached=exclude) if samples is not None else 0
        if samples is None or not count:
            found.append(_no_samples(name, target, limit, unit, q, samples, stats))
            return
        actual = samples.percentile(q, exclude_cached=exclude)
        assert actual is not None
        odd = samples.nonfinite(exclude_cached=exclude)
        status: VerdictStatus
        reason: NotJudgedReason | None = None
        why = None
        if odd is not None:
            # No percentile of a set holding NaN means anything: broken, whatever min_runs.
            actual, status = odd, "broken"
        elif count < min_runs:
            status, reason = "not_judged", "not_enough_runs"
            why = _too_few(count, min_runs) + _left_out(stats)
        elif (worth := _effective(samples, exclude, min_runs)) is not None:
            status, reason = "not_judged", "not_enough_runs"
            why = (
                f"{count} runs weighted by their sampling probability have effective sample "
                f"size {worth:.1f} ((Σw)²/Σw², Kish), fewer than the {min_runs} runs min_runs "
                "asks for: a few heavy runs decide the percentile"
            )
        elif over(actual, limit):
            status = "broken"
        elif (lowest := samples.sorted(exclude_cached=exclude)[0]) < 0:
            status, reason = "not_judged", "impossible_value"
            why = f"a sample of {target} is {lowest:g}, which no {unit} value can be"
        else:
            status = "ok"
        found.append(
            LimitVerdict(
                name,
                target,
                limit,
                actual,
                status,
                count,
                percentile=q,
                min_runs=min_runs,
                unit=unit,
                reason=reason,
                why=why,
            )
        )

    for key in sorted(budget.percentiles, key=lambda k: percentile_of_key(k, "")):
        q = percentile_of_key(key, "")
        for quantity, limit in budget.percentiles[key].items():
            samples = stats.quantities[quantity] if stats is not None else None
            judge(target_of(key, quantity), q, limit, samples)
            found[-1] = unknown_start.verdict(found[-1], quantity in unknown_start.quantities)
            found[-1] = unusable.verdict(found[-1], quantity in unusable.quantities)
            found[-1] = unrecorded.verdict(found[-1], quantity in unrecorded.quantities)
    for key in sorted(budget.cost_percentiles, key=lambda k: percentile_of_key(k, "cost_")):
        q = percentile_of_key(key, "cost_")
        cost = stats.cost if stats is not None else None
        judge(key, q, budget.cost_percentiles[key], cost, "USD")
    for target, q, limit, samples, ends, tokens in _call_percentiles(
        budget, stats, unrecorded, unusable
    ):
        judge(target, q, limit, samples)
        found[-1] = unusable.verdict(found[-1], tokens)
        found[-1] = unrecorded.verdict(found[-1], ends)
    return found


def _call_percentiles(
    budget: WorkflowBudget,
    stats: WorkflowStats | None,
    unrecorded: Unrecorded,
    unusable: Unusable,
) -> Iterator[tuple[str, float, float, Samples | None, bool, bool]]:
    """The percentile limits over steps and over the calls of an operation: (target,
    percentile, limit, the samples it is judged on, whether a call whose end the trace does
    not record may be among them, whether a call whose first token is no time may be). A
    call's first output is measured even when its end is not; its duration is a bound, and
    which operation an unrecorded call had is not kept, so a duration limit on any operation
    is not judged when a run had one (fail closed); a first-output limit likewise when a
    run had a call whose first token is no time (rule 15)."""
    for step, limits in budget.steps.items():
        step_stats = stats.steps.get(step) if stats is not None else None
        for key in sorted(limits.percentiles, key=lambda k: percentile_of_key(k, "")):
            samples = step_stats.duration if step_stats is not None else None
            yield (
                step_target(step, key),
                percentile_of_key(key, ""),
                limits.percentiles[key],
                samples,
                step in unrecorded.steps,
                False,
            )
        for key in sorted(limits.ttft_percentiles, key=lambda k: percentile_of_key(k, "ttft_")):
            samples = step_stats.ttft if step_stats is not None else None
            q = percentile_of_key(key, "ttft_")
            yield (
                step_target(step, key),
                q,
                limits.ttft_percentiles[key],
                samples,
                False,
                step in unusable.steps,
            )
    for operation, op_limits in budget.operations.items():
        calls = stats.operations.get(operation) if stats is not None else None
        for key in sorted(op_limits.percentiles, key=lambda k: percentile_of_key(k, "")):
            q = percentile_of_key(key, "")
            per_call = op_limits.percentiles[key]
            for name, limit in (
                ("latency", per_call.latency),
                ("first_output", per_call.first_output),
            ):
                if limit is None:
                    continue
                samples = (
                    None if calls is None else calls.duration if name == "latency" else calls.ttft
                )
                ends = name == "latency" and unrecorded.runs > 0
                tokens = name == "first_output" and unusable.runs > 0
                target = operation_target(operation, f"{key}.{name}")
                yield target, q, limit, samples, ends, tokens


def _no_call(
    verdict: LimitVerdict, budget: WorkflowBudget, stats: WorkflowStats | None
) -> LimitVerdict:
    """A limit on an operation no run called says so (not judged, ``no_data``)."""
    if verdict.reason != "no_data" or not verdict.target.startswith("operations."):
        return verdict
    operation = verdict.target.split(".", 2)[1]
    if operation not in budget.operations:
        return verdict
    if stats is None or operation not in stats.operations:
        why = f"no run of {shown(verdict.workflow)} has a call of {operation}"
    elif verdict.target.endswith("first_output"):
        why = f"no {operation} call of {shown(verdict.workflow)} has a first output (none streamed)"
    else:
        return verdict
    return replace(verdict, why=why)
