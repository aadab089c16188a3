"""Compare variants: latency against success rate and cost, per workflow, with the Pareto front.

Runs are grouped by workflow and ``chainlat.variant``. For each group: nearest-rank
p50/p95/p99 of the total, the critical-path split (inference, data, tool,
overhead: summed over runs, as shares of the summed totals, and their p50), and
the success rate over the runs that recorded ``chainlat.outcome.success``, with
a Wilson score 95 % interval (it stays inside 0..1 and behaves with few runs or
rates near 0 and 1, where the normal approximation does not), and the mean
``chainlat.outcome.score``.

The time to first output (p50, p95) and, with model prices, the mean cost per run
are summarised too, and for voice runs the wait for the first output by stage (speech
to text, model, text to speech, end of turn, data, tool, overhead: each run's parts as
:func:`chainlat._core.stats.first_output_parts` defines them, never recomputed here),
with each variant's change against the workflow's first variant
(:meth:`Comparison.split_changes`). A variant is on the **Pareto front** of its workflow when no
other variant of it with outcomes is at least as fast at p95, at least as
successful and, when every variant of the workflow has a cost, at most as
costly, and strictly better in one of them. Variants without outcomes are not
judged.

Outcomes come from the traces (on the workflow span, or ``record_outcome`` spans
merged by trace id) and from an outcomes file (:func:`load_outcomes`), one JSON
object per line, which overrides them::

    {"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "success": true, "score": 0.9}

Example::

    comparison = chainlat.compare(["traces.jsonl"])
    for v in comparison.variants:
        print(v.variant, v.total.p95, v.success.rate if v.success else None)
"""

from __future__ import annotations

import array
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final

from chainlat._core.errors import InputError, shorten, shown, undecodable
from chainlat._core.stats import FIRST_OUTPUT_PARTS, first_output_parts, percentile
from chainlat.analysis.whatif import KINDS, Percentiles

if TYPE_CHECKING:
    from chainlat._core.prices import Prices
    from chainlat._core.rollup import Rollup
    from chainlat._core.runs import WorkflowRun
    from chainlat.traces import TraceSource

__all__ = [
    "Comparison",
    "Outcome",
    "PartChange",
    "Proportion",
    "SplitPart",
    "VariantSummary",
    "compare",
    "load_outcomes",
    "wilson_interval",
]

_Z95: Final = 1.959963984540054
"""The standard normal quantile for a two-sided 95 % interval."""


def wilson_interval(successes: int, trials: int, z: float = _Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default).

    Example::

        wilson_interval(8, 10)   # (0.490..., 0.943...)
    """
    if trials <= 0:
        raise ValueError("a proportion needs at least one trial")
    if not 0 <= successes <= trials:
        raise ValueError(f"successes {successes} out of 0..{trials}")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True, slots=True)
class Proportion:
    """A success rate with its Wilson 95 % interval."""

    successes: int
    trials: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        """successes / trials."""
        return self.successes / self.trials

    @classmethod
    def of(cls, successes: int, trials: int) -> Proportion:
        """The rate and interval of ``successes`` out of ``trials`` (at least 1)."""
        low, high = wilson_interval(successes, trials)
        return cls(successes, trials, low, high)


@dataclass(frozen=True, slots=True)
class SplitPart:
    """One stage of the wait for the first output over a variant's voice runs (ms)."""

    runs: int
    """The runs that have the part (``end_of_turn``: those whose trace says when the turn
    was decided)."""
    p50: float
    p95: float
    p99: float


@dataclass(frozen=True, slots=True)
class PartChange:
    """One stage of the first output's wait in a variant (after) against the workflow's
    first variant (before); either side None when it has no such part."""

    part: str
    before: SplitPart | None
    after: SplitPart | None

    @property
    def p50_delta(self) -> float | None:
        """after's p50 less before's, in ms; None without both."""
        return (
            None if self.before is None or self.after is None else self.after.p50 - self.before.p50
        )

    @property
    def p95_delta(self) -> float | None:
        """after's p95 less before's, in ms; None without both."""
        return (
            None if self.before is None or self.after is None else self.after.p95 - self.before.p95
        )


@dataclass(frozen=True, slots=True)
class VariantSummary:
    """The runs of one variant of one workflow."""

    workflow: str
    variant: str
    """The ``chainlat.variant`` label, ``(none)`` for runs without one."""
    runs: int
    total: Percentiles
    split_p50: dict[str, float]
    """p50 of each kind's critical-path time (the p50s do not add up to the total's)."""
    share: dict[str, float]
    """Each kind's summed critical-path time over the summed totals."""
    success: Proportion | None
    """Over the runs with a recorded success; None when none recorded one."""
    score_mean: float | None
    scored: int
    """Runs with a recorded score."""
    pareto: bool = False
    """On the Pareto front of its workflow (p95 total, success rate and mean cost)."""
    first_output: Percentiles | None = None
    """Of the runs' time to first output, where measured; None when no run measured one."""
    first_output_bounds: int = 0
    """Runs whose first output is a bound, not a measurement (docs/attributes.md, rules 13,
    15, 16 and 17): left out of ``first_output`` and its split."""
    cost_mean: float | None = None
    """Mean US dollars per run, over the runs whose cost is known (needs prices)."""
    costed: int = 0
    """Runs whose cost is known."""
    first_output_split: Mapping[str, SplitPart] = field(default_factory=dict)
    """The wait for the first output of its voice runs by stage (`FIRST_OUTPUT_PARTS`
    order, each run's parts from `first_output_parts`); a part no run has is left out;
    empty without a voice run."""


@dataclass(frozen=True)
class Comparison:
    """Every variant of every workflow, in order of first appearance."""

    variants: tuple[VariantSummary, ...]

    def workflows(self) -> list[str]:
        """The workflow names, in order of first appearance."""
        return list(dict.fromkeys(v.workflow for v in self.variants))

    def of(self, workflow: str) -> list[VariantSummary]:
        """The variants of one workflow."""
        return [v for v in self.variants if v.workflow == workflow]

    def split_changes(self, variant: VariantSummary) -> list[PartChange]:
        """Each stage of ``variant``'s first output against the first variant of its
        workflow (the baseline, before), in `FIRST_OUTPUT_PARTS` order; empty for the
        baseline itself, or when neither has a voice run.

        Example::

            fast, hd = comparison.of("voice-agent")
            for change in comparison.split_changes(hd):
                print(change.part, change.p95_delta)
        """
        baseline = self.of(variant.workflow)[0]
        if baseline is variant or not (baseline.first_output_split or variant.first_output_split):
            return []
        return [
            PartChange(
                part,
                baseline.first_output_split.get(part),
                variant.first_output_split.get(part),
            )
            for part in FIRST_OUTPUT_PARTS
        ]


@dataclass(frozen=True, slots=True)
class Outcome:
    """An outcome from an outcomes file."""

    success: bool | None = None
    score: float | None = None


def load_outcomes(path: str | os.PathLike[str]) -> dict[str, Outcome]:
    """Outcomes by trace id (lower-case hex) from a JSON lines file.

    Each line: ``{"trace_id": "<32 hex digits>", "success": true|false, "score": 0.8}``;
    ``success`` or ``score`` may be left out (not both). Blank lines are skipped.

    Raises:
        InputError: the file is missing or a line is malformed (``outcomes.jsonl:3: ...``).
    """
    file = Path(path)
    try:
        text = file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputError(f"{file}: no such outcomes file") from None
    except OSError as exc:
        raise InputError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        at, why = undecodable(exc)
        raise InputError(f"{file}:{at}: {why}") from None
    found: dict[str, Outcome] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{file}:{number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not valid JSON ({exc.msg})") from None
        except RecursionError:
            raise InputError(f"{where}: nested too deeply to be an outcome") from None
        if not isinstance(item, dict):
            raise InputError(f"{where}: expected an object with trace_id, success and/or score")
        unknown = sorted(set(item) - {"trace_id", "success", "score"})
        if unknown:
            raise InputError(
                f"{where}: {shorten(unknown[0])}: unknown key (expected trace_id, success, score)"
            )
        trace_id = item.get("trace_id")
        if not isinstance(trace_id, str) or not _is_trace_id(trace_id):
            raise InputError(f"{where}: trace_id: expected 32 hex digits, got {shown(trace_id)}")
        success, score = item.get("success"), item.get("score")
        if success is not None and not isinstance(success, bool):
            raise InputError(f"{where}: success: expected true or false, got {shown(success)}")
        if score is not None and (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or not math.isfinite(score)
        ):
            raise InputError(f"{where}: score: expected a number, got {shown(score)}")
        if success is None and score is None:
            raise InputError(f"{where}: expected success, score or both")
        found[trace_id.lower()] = Outcome(success, float(score) if score is not None else None)
    return found


def _is_trace_id(text: str) -> bool:
    return len(text) == 32 and all(c in "0123456789abcdefABCDEF" for c in text)


def _apply(runs: Iterable[WorkflowRun], outcomes: Mapping[str, Outcome]) -> list[WorkflowRun]:
    merged = []
    for run in runs:
        outcome = outcomes.get(run.trace_id.lower())
        if outcome is not None:
            run = replace(
                run,
                success=outcome.success if outcome.success is not None else run.success,
                score=outcome.score if outcome.score is not None else run.score,
            )
        merged.append(run)
    return merged


def compare(
    runs: Iterable[WorkflowRun]
    | str
    | os.PathLike[str]
    | Sequence[str | os.PathLike[str] | TraceSource | WorkflowRun],
    *,
    workflow: str | None = None,
    outcomes: Mapping[str, Outcome] | str | os.PathLike[str] | None = None,
    roots: bool = False,
    prices: Prices | None = None,
) -> Comparison:
    """Group runs by workflow and variant: latency, split, success rate and the Pareto front.

    Example::

        comparison = chainlat.compare("traces.jsonl", outcomes="graded.jsonl")
        print([v.variant for v in comparison.variants if v.pareto])

    Args:
        runs: Trace files, trace sources (a :class:`chainlat.traces.JaegerSource`),
            or runs already read.
        workflow: Only this workflow.
        outcomes: Outcomes by trace id, or an outcomes file; they override the traces'.
        roots: Also make a run of every trace's root span that is not a workflow
            (:func:`chainlat.traces.read_runs`).
        prices: Model prices (``chainlat._core.prices.Price`` by model): the cost per run
            of each variant, for runs that did not record one.

    Raises:
        InputError: a file cannot be read, or there is no run.
    """
    from chainlat._core.runs import WorkflowRun
    from chainlat.traces import load_runs, source_name

    if isinstance(runs, (str, os.PathLike)):
        runs = [runs]
    items = list(runs)
    sources = [r for r in items if not isinstance(r, WorkflowRun)]
    trees = [r for r in items if isinstance(r, WorkflowRun)]
    if sources:
        trees.extend([r for r in load_runs(sources, roots=roots) if not r.nested])
    where = ", ".join(source_name(s) for s in sources) or "the runs given"
    if outcomes is not None:
        table = load_outcomes(outcomes) if isinstance(outcomes, (str, os.PathLike)) else outcomes
        trees = _apply(trees, {k.lower(): v for k, v in table.items()})
    trees = [t for t in trees if not t.nested]  # a nested run is a step of the run around it
    if workflow is not None:
        trees = [t for t in trees if t.workflow == workflow]
    if not trees:
        what = f" of workflow {workflow!r}" if workflow is not None else ""
        raise InputError(f"{where}: no workflow run{what} to compare")
    tally = ComparisonTally(prices)
    for tree in trees:
        tally.add(tree)
    return tally.comparison()


class _Variant:
    """The numbers of one variant's runs that a summary needs (not the runs)."""

    __slots__ = (
        "bounds", "by_kind", "costs", "decided", "first_outputs", "scores", "split", "successes",
    )  # fmt: skip

    def __init__(self) -> None:
        self.by_kind = {k: array.array("d") for k in ("total", *KINDS)}
        self.decided = self.successes = self.bounds = 0
        self.scores = array.array("d")
        self.first_outputs = array.array("d")
        self.costs = array.array("d")
        self.split = {part: array.array("d") for part in FIRST_OUTPUT_PARTS}

    def add(self, rollup: Rollup, success: bool | None, score: float | None, bound: bool) -> None:
        """Count one run; ``bound``: its first output is a bound, not a measurement."""
        for kind, values in self.by_kind.items():
            values.append(rollup.kind_ms(kind))
        if rollup.first_output_ms is not None and bound:
            self.bounds += 1
        elif rollup.first_output_ms is not None:
            self.first_outputs.append(rollup.first_output_ms)
            parts = first_output_parts(rollup)
            if parts is not None:
                for part, value in parts.items():
                    self.split[part].append(value)
        if rollup.cost_usd is not None:
            self.costs.append(rollup.cost_usd)
        if success is not None:
            self.decided += 1
            self.successes += success
        if score is not None:
            self.scores.append(score)

    def summary(self, workflow: str, variant: str) -> VariantSummary:
        totals = self.by_kind["total"]
        grand = math.fsum(totals)
        scores = self.scores
        return VariantSummary(
            workflow=workflow,
            variant=variant,
            runs=len(totals),
            total=Percentiles.of(totals),
            split_p50={k: percentile(sorted(self.by_kind[k]), 50) for k in KINDS},
            share={k: (math.fsum(self.by_kind[k]) / grand if grand else 0.0) for k in KINDS},
            success=Proportion.of(self.successes, self.decided) if self.decided else None,
            score_mean=math.fsum(scores) / len(scores) if scores else None,
            scored=len(scores),
            first_output=Percentiles.of(self.first_outputs) if self.first_outputs else None,
            first_output_bounds=self.bounds,
            cost_mean=math.fsum(self.costs) / len(self.costs) if self.costs else None,
            costed=len(self.costs),
            first_output_split={
                part: _split_part(values) for part, values in self.split.items() if values
            },
        )


def _split_part(values: array.array[float]) -> SplitPart:
    p = Percentiles.of(values)
    return SplitPart(len(values), p.p50, p.p95, p.p99)


class ComparisonTally:
    """Runs counted into a :class:`Comparison` one at a time, keeping a few numbers per run.

    For a reader that streams runs by (``chainlat report --html``); :func:`compare`
    uses it too.
    """

    def __init__(self, prices: Prices | None = None) -> None:
        self._prices = prices
        self._variants: dict[tuple[str, str], _Variant] = {}
        self.labelled = False
        """A run carried a variant or an outcome: a comparison has something to show."""

    def __len__(self) -> int:
        return sum(len(v.by_kind["total"]) for v in self._variants.values())

    def add(self, run: WorkflowRun) -> None:
        """Count one run, by workflow and variant."""
        key = (run.workflow, run.variant_label)
        variant = self._variants.get(key)
        if variant is None:
            variant = self._variants[key] = _Variant()
        # One rollup per run: the recorded cost wins (cost_of's rule), else the prices'.
        recorded = run.rollup.cost_usd
        rollup = run.recomputed_rollup(self._prices if recorded is None else None)
        if recorded is not None:
            rollup = replace(rollup, cost_usd=recorded)
        variant.add(rollup, run.success, run.score, run.first_output_bound)
        if run.variant is not None or run.success is not None or run.score is not None:
            self.labelled = True

    def comparison(self) -> Comparison:
        """The variants counted so far, in order of first appearance."""
        summaries = [v.summary(name, label) for (name, label), v in self._variants.items()]
        return Comparison(tuple(_mark_pareto(summaries)))


def _mark_pareto(summaries: Sequence[VariantSummary]) -> list[VariantSummary]:
    # Cost counts only where every variant of the workflow has one: a variant without
    # prices would otherwise look free.
    costed = {
        name: all(o.cost_mean is not None for o in summaries if o.workflow == name)
        for name in {v.workflow for v in summaries}
    }
    marked = []
    for v in summaries:
        on_front = False
        if v.success is not None:
            on_front = not any(
                o is not v
                and o.workflow == v.workflow
                and o.success is not None
                and _dominates(o, v, with_cost=costed[v.workflow])
                for o in summaries
            )
        marked.append(replace(v, pareto=on_front))
    return marked


def _dominates(o: VariantSummary, v: VariantSummary, *, with_cost: bool) -> bool:
    """``o`` is at least as good as ``v`` on every axis and better on one."""
    assert o.success is not None and v.success is not None
    axes = [(o.total.p95, v.total.p95), (-o.success.rate, -v.success.rate)]
    if with_cost and o.cost_mean is not None and v.cost_mean is not None:
        axes.append((o.cost_mean, v.cost_mean))
    return all(a <= b for a, b in axes) and any(a < b for a, b in axes)


# -- the chart ---------------------------------------------------------------------------
