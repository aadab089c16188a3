"""Percentiles and per-workflow aggregation of runs. Pure, stdlib only.

Percentile method: **nearest rank**. The p-th percentile of n values is the
value at rank ``ceil(p/100 * n)`` in ascending order: the smallest observed
value with at least p % of the values at or below it. It is always a value
that was observed, never an interpolation, so "p95 <= 800 ms" reads exactly
as "at least 95 % of runs took 800 ms or less". With few values the high
percentiles are the maximum (p99 of 50 runs is the slowest run).

Memory: one float (and one byte for the cache-hit flag) per sample, per
quantity; runs and spans are not kept.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from chainlat._core.runs import StepKindName, WorkflowRun

PERCENTILES: Final = (50.0, 90.0, 95.0, 99.0)
"""The percentiles every statistics table shows."""
QUANTITIES: Final = ("total", "inference", "data", "tool", "overhead")
"""The per-run quantities of a workflow: wall time and its critical-path split."""
FIRST_OUTPUT: Final = "first_output"
"""The quantity of the wait for the first output, sampled for the runs that have one."""


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0 < q <= 100) of values sorted ascending."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} out of (0, 100]")
    # Exact arithmetic: 0.95 * 20 must be rank 19, not 19.000000000000004 -> 20.
    rank = math.ceil(Fraction(str(q)) * n / 100)
    return sorted_values[max(rank, 1) - 1]


def format_percentile(q: float) -> str:
    """``p95``, ``p99.9``."""
    return f"p{q:g}"


@dataclass(frozen=True, slots=True)
class Summary:
    """Count, the standard percentiles and the maximum of one set of samples (ms)."""

    count: int
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    mean: float | None

    def get(self, q: float) -> float | None:
        """The value of a standard percentile (50, 90, 95, 99) or of 100 (the maximum)."""
        return {50.0: self.p50, 90.0: self.p90, 95.0: self.p95, 99.0: self.p99, 100.0: self.max}[q]


class Samples:
    """Durations in milliseconds, each flagged as a cache hit or not, and weighted.

    A sample's weight is how many runs it stands for: 1, or 1/p for a run a sampler kept
    with probability p. Percentiles are then weighted nearest rank: the smallest value
    with at least q % of the total weight at or below it (with all weights 1, the plain
    nearest rank).
    """

    __slots__ = ("_cached", "_sorted", "_values", "_weights")

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._values = array("d", values)
        self._cached = bytearray(len(self._values))
        self._sorted: dict[bool, list[float]] = {}
        self._weights: array[float] | None = None  # None while every weight is 1

    def add(self, value_ms: float, *, cached: bool = False, weight: float = 1.0) -> None:
        """Add one sample."""
        if weight != 1.0 and self._weights is None:
            self._weights = array("d", [1.0] * len(self._values))
        if self._weights is not None:
            self._weights.append(weight)
        self._values.append(value_ms)
        self._cached.append(1 if cached else 0)
        self._sorted.clear()

    @property
    def weighted(self) -> bool:
        """Some sample stands for more than one run."""
        return self._weights is not None

    def _weighted_mean(self) -> float:
        assert self._weights is not None
        total = math.fsum(self._weights)
        return math.fsum(v * w for v, w in zip(self._values, self._weights, strict=True)) / total

    def _weighted_percentile(self, q: float, exclude_cached: bool) -> float | None:
        assert self._weights is not None
        pairs = sorted(
            (v, w)
            for v, w, c in zip(self._values, self._weights, self._cached, strict=True)
            if not (exclude_cached and c)
        )
        if not pairs:
            return None
        if not 0 < q <= 100:
            raise ValueError(f"percentile {q} out of (0, 100]")
        target = Fraction(str(q)) / 100 * sum(Fraction(w) for _, w in pairs)
        reached = Fraction(0)
        for value, weight in pairs:
            reached += Fraction(weight)
            if reached >= target:
                return value
        return pairs[-1][0]

    def __len__(self) -> int:
        return len(self._values)

    def sorted(self, *, exclude_cached: bool = False) -> list[float]:
        """The samples in ascending order, without the cache hits when asked."""
        found = self._sorted.get(exclude_cached)
        if found is None:
            if exclude_cached:
                found = sorted(v for v, c in zip(self._values, self._cached, strict=True) if not c)
            else:
                found = sorted(self._values)
            self._sorted[exclude_cached] = found
        return found

    def count(self, *, exclude_cached: bool = False) -> int:
        """How many samples (without the cache hits when asked)."""
        return len(self.sorted(exclude_cached=exclude_cached)) if exclude_cached else len(self)

    def percentile(self, q: float, *, exclude_cached: bool = False) -> float | None:
        """Nearest-rank percentile (weighted, when samples are), None without samples."""
        if self._weights is not None:
            return self._weighted_percentile(q, exclude_cached)
        values = self.sorted(exclude_cached=exclude_cached)
        return percentile(values, q) if values else None

    def max(self, *, exclude_cached: bool = False) -> float | None:
        """The largest sample, None without samples."""
        values = self.sorted(exclude_cached=exclude_cached)
        return values[-1] if values else None

    def summary(self, *, exclude_cached: bool = False) -> Summary:
        """Count, p50/p90/p95/p99, maximum and mean."""
        values = self.sorted(exclude_cached=exclude_cached)
        if not values:
            return Summary(0, None, None, None, None, None, None)
        if self._weights is not None:
            p50, p90, p95, p99 = (
                self._weighted_percentile(q, exclude_cached) or 0.0 for q in PERCENTILES
            )
            return Summary(len(values), p50, p90, p95, p99, values[-1], self._weighted_mean())
        p50, p90, p95, p99 = (percentile(values, q) for q in PERCENTILES)
        return Summary(len(values), p50, p90, p95, p99, values[-1], math.fsum(values) / len(values))


@dataclass(slots=True)
class StepStats:
    """Every occurrence of one step (by span name) across the runs of a workflow."""

    name: str
    kind: StepKindName
    duration: Samples = field(default_factory=Samples)
    ttft: Samples = field(default_factory=Samples)
    """Time to first token, for the occurrences that streamed."""


@dataclass(slots=True)
class WorkflowStats:
    """The runs of one workflow, as samples per quantity and per step.

    A failed run (status ERROR) is counted in ``runs`` and ``errors`` and, unless
    ``include_errors``, left out of every sample: a run that failed fast would
    otherwise make the percentiles look better.
    """

    name: str
    runs: int = 0
    errors: int = 0
    quantities: dict[str, Samples] = field(
        default_factory=lambda: {q: Samples() for q in (*QUANTITIES, FIRST_OUTPUT)}
    )
    """``total``, ``inference``, ``data``, ``tool``, ``overhead`` and ``first_output``; a
    run with a cache hit is flagged cached in each."""
    steps: dict[str, StepStats] = field(default_factory=dict)
    """By step name, in order of first appearance."""
    slowest: WorkflowRun | None = None
    """The run with the largest total."""
    include_errors: bool = False
    cost: Samples = field(default_factory=Samples)
    """US dollars per run, for the runs whose cost is known."""
    seen_steps: set[str] = field(default_factory=set)
    """Every step name seen, failed runs included."""
    biased: int = 0
    """Runs a sampler kept without recording its probability: they cannot be weighted."""

    @property
    def sampled(self) -> int:
        """Runs in the latency samples."""
        return len(self.quantities["total"])

    def add(self, run: WorkflowRun, cost_usd: float | None = None) -> None:
        """Count one run (``cost_usd``: its cost, when known otherwise than from the run)."""
        self.runs += 1
        self.errors += run.error
        for step in run.steps:
            self.seen_steps.add(step.name)
        weight, biased = run.sampling
        self.biased += biased
        if run.error and not self.include_errors:
            return
        cached = run.rollup.cache_hits > 0
        for quantity in QUANTITIES:
            self.quantities[quantity].add(
                run.rollup.kind_ms(quantity), cached=cached, weight=weight
            )
        if run.rollup.first_output_ms is not None:
            self.quantities[FIRST_OUTPUT].add(
                run.rollup.first_output_ms, cached=cached, weight=weight
            )
        cost = cost_usd if cost_usd is not None else run.rollup.cost_usd
        if cost is not None:
            self.cost.add(cost, cached=cached, weight=weight)
        for step in run.steps:
            stats = self.steps.get(step.name)
            if stats is None:
                stats = self.steps[step.name] = StepStats(step.name, step.kind)
            stats.duration.add(step.duration_ms, cached=step.cache_hit, weight=weight)
            if step.ttft_ms is not None:
                stats.ttft.add(step.ttft_ms, cached=step.cache_hit, weight=weight)
        if self.slowest is None or run.total_ms > self.slowest.total_ms:
            self.slowest = run


@dataclass(slots=True)
class Stats:
    """Samples of every workflow seen, in order of first appearance."""

    workflows: dict[str, WorkflowStats] = field(default_factory=dict)
    include_errors: Callable[[str], bool] | None = None
    """Whether a workflow's failed runs count in its samples (default: they do not)."""

    def add(self, run: WorkflowRun, cost_usd: float | None = None) -> None:
        """Count one run."""
        stats = self.workflows.get(run.workflow)
        if stats is None:
            errors = self.include_errors is not None and self.include_errors(run.workflow)
            stats = self.workflows[run.workflow] = WorkflowStats(
                run.workflow, include_errors=errors
            )
        stats.add(run, cost_usd)

    @property
    def runs(self) -> int:
        """Runs of all workflows."""
        return sum(w.runs for w in self.workflows.values())


def aggregate(runs: Iterable[WorkflowRun]) -> Stats:
    """Samples of every run, grouped by workflow and step."""
    stats = Stats()
    for run in runs:
        stats.add(run)
    return stats
