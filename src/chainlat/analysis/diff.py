"""Comparing two sets of runs: which workflows and steps got slower, beyond run-to-run noise.

For every workflow present in both, each quantity (``total`` and the
critical-path ``inference``, ``data``, ``tool``, ``overhead``) and each step
present in both is one comparison, with p50 and p95 before and after.

**Beyond noise** is decided by two tests on the samples of each comparison:

- location: a two-sided **Mann-Whitney U** test (normal approximation with
  tie and continuity corrections), which sees a shift of the bulk of the
  distribution whatever its shape;
- tail: a two-proportion z-test on the share of samples above the pooled
  p90, which sees a slower tail when the median did not move.

The comparison's p-value is the smaller of the two, doubled (Bonferroni over
the two tests); the p-values of all comparisons in the diff are then adjusted
with **Holm's** step-down method, so that running twenty comparisons does not
turn one in twenty into a false alarm. A change is beyond noise when its
adjusted p-value is below ``alpha`` (default 0.01).

A **regression** is a change beyond noise whose p50 or p95 grew by more than
``threshold`` (default 10 %): significance says the change is real, the
threshold says it matters. Comparisons with fewer than ``min_samples`` (8)
samples on either side are reported but never judged.

Example::

    result = diff_runs(load_runs(["before.jsonl"]), load_runs(["after.jsonl"]))
    for row in result.regressions:
        print(row.workflow, row.item, f"{row.p95_change:+.0%}")
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import (
    FIRST_OUTPUT,
    QUANTITIES,
    Samples,
    Stats,
    aggregate,
    percentile,
)

__all__ = ["DiffResult", "DiffRow", "diff_runs", "holm", "mann_whitney_u", "tail_test"]

DEFAULT_THRESHOLD: Final = 0.10
DEFAULT_ALPHA: Final = 0.01
DEFAULT_MIN_SAMPLES: Final = 8

Verdict = Literal[
    "slower", "faster", "unchanged", "too few samples", "only in baseline", "only in current"
]


def mann_whitney_u(before: Sequence[float], after: Sequence[float]) -> tuple[float, float]:
    """U of ``after`` against ``before`` and the two-sided p-value (normal approximation).

    Ties get their average rank and the variance the usual tie correction; a
    continuity correction of 0.5 keeps small samples honest.
    """
    n1, n2 = len(before), len(after)
    if n1 == 0 or n2 == 0:
        raise ValueError("Mann-Whitney U needs samples on both sides")
    pooled = sorted([(v, 0) for v in before] + [(v, 1) for v in after])
    n = n1 + n2
    rank_sum_after = 0.0
    tie_term = 0.0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        average_rank = (i + j) / 2 + 1
        ties = j - i + 1
        tie_term += ties**3 - ties
        rank_sum_after += average_rank * sum(1 for k in range(i, j + 1) if pooled[k][1] == 1)
        i = j + 1
    u_after = rank_sum_after - n2 * (n2 + 1) / 2
    mean = n1 * n2 / 2
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))) if n > 1 else 0.0
    if variance <= 0:
        return u_after, 1.0
    z = max(abs(u_after - mean) - 0.5, 0.0) / math.sqrt(variance)
    return u_after, math.erfc(z / math.sqrt(2))


def tail_test(before: Sequence[float], after: Sequence[float], q: float = 90.0) -> float:
    """Two-sided p-value that the share of samples above the pooled ``q``-th percentile differs."""
    pooled = sorted([*before, *after])
    threshold = percentile(pooled, q)
    k1 = sum(1 for v in before if v > threshold)
    k2 = sum(1 for v in after if v > threshold)
    n1, n2 = len(before), len(after)
    share = (k1 + k2) / (n1 + n2)
    se = math.sqrt(share * (1 - share) * (1 / n1 + 1 / n2))
    if se == 0:
        return 1.0
    z = (k2 / n2 - k1 / n1) / se
    return math.erfc(abs(z) / math.sqrt(2))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment: p-values that control the family-wise error rate."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    m = len(p_values)
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True, slots=True)
class DiffRow:
    """One workflow quantity or step, before and after."""

    workflow: str
    item: str
    """``total``, ``inference`` ... (critical path) or a step name."""
    kind: str
    """``quantity`` for the workflow's own quantities, else the step kind."""
    n_before: int
    n_after: int
    p50_before: float | None
    p50_after: float | None
    p95_before: float | None
    p95_after: float | None
    p_value: float | None
    """Holm-adjusted; None when not judged."""
    verdict: Verdict
    regression: bool
    """Beyond noise and slower than the threshold allows."""

    @property
    def p50_change(self) -> float | None:
        """Relative change of the p50 (0.3 is 30 % slower)."""
        return _change(self.p50_before, self.p50_after)

    @property
    def p95_change(self) -> float | None:
        """Relative change of the p95."""
        return _change(self.p95_before, self.p95_after)

    @property
    def beyond_noise(self) -> bool:
        """The change is statistically significant."""
        return self.verdict in ("slower", "faster")


def _change(before: float | None, after: float | None) -> float | None:
    if before is None or after is None:
        return None
    if before == 0:
        return 0.0 if after == 0 else math.inf
    return after / before - 1


@dataclass(frozen=True)
class DiffResult:
    """Every comparison, and the rule's parameters."""

    comparisons: list[DiffRow]
    threshold: float
    alpha: float
    baseline_runs: int
    current_runs: int

    @property
    def regressions(self) -> list[DiffRow]:
        """Comparisons that got slower beyond noise and beyond the threshold."""
        return [c for c in self.comparisons if c.regression]

    @property
    def judged(self) -> int:
        """How many comparisons had enough samples on both sides."""
        return sum(1 for c in self.comparisons if c.p_value is not None)


@dataclass
class _Pending:
    workflow: str
    item: str
    kind: str
    before: Samples | None
    after: Samples | None


def _pairs(baseline: Stats, current: Stats) -> list[_Pending]:
    pairs: list[_Pending] = []
    names = list(dict.fromkeys([*baseline.workflows, *current.workflows]))
    for name in names:
        b = baseline.workflows.get(name)
        a = current.workflows.get(name)
        for quantity in (*QUANTITIES, FIRST_OUTPUT):
            if quantity == FIRST_OUTPUT and not (
                (b and len(b.quantities[quantity])) or (a and len(a.quantities[quantity]))
            ):
                continue  # traces from before the first output was measured
            pairs.append(
                _Pending(
                    name,
                    quantity,
                    "quantity",
                    b.quantities[quantity] if b else None,
                    a.quantities[quantity] if a else None,
                )
            )
        steps = list(dict.fromkeys([*(b.steps if b else {}), *(a.steps if a else {})]))
        for step in steps:
            bs = b.steps.get(step) if b else None
            as_ = a.steps.get(step) if a else None
            ref = bs or as_
            kind = ref.kind if ref is not None else "step"
            pairs.append(
                _Pending(
                    name,
                    step,
                    kind,
                    bs.duration if bs else None,
                    as_.duration if as_ else None,
                )
            )
    return pairs


def _adjusted_p_values(pairs: Sequence[_Pending], min_samples: int) -> dict[int, float]:
    """Holm-adjusted p-values by pair index, for the pairs with enough samples on each side."""
    raw: list[float] = []
    judged: list[int] = []
    for index, pair in enumerate(pairs):
        if pair.before is None or pair.after is None:
            continue
        xs, ys = pair.before.sorted(), pair.after.sorted()
        if min(len(xs), len(ys)) < max(min_samples, 2):
            continue
        _, p_location = mann_whitney_u(xs, ys)
        p_tail = tail_test(xs, ys)
        raw.append(min(1.0, 2 * min(p_location, p_tail)))
        judged.append(index)
    return dict(zip(judged, holm(raw), strict=True))


def diff_runs(
    baseline: Iterable[WorkflowRun],
    current: Iterable[WorkflowRun],
    *,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> DiffResult:
    """Compare two sets of runs per workflow quantity and per step (see the module docstring).

    Args:
        baseline: The runs before (for example of the main branch).
        current: The runs after.
        threshold: Relative growth of p50 or p95 that counts as a regression (0.10: 10 %).
        alpha: Family-wise significance level for "beyond noise".
        min_samples: Samples needed on each side for a verdict.
    """
    before_stats = aggregate(baseline)
    after_stats = aggregate(current)
    pairs = _pairs(before_stats, after_stats)
    adjusted = _adjusted_p_values(pairs, min_samples)
    comparisons: list[DiffRow] = []
    for index, pair in enumerate(pairs):
        b = pair.before.summary() if pair.before is not None else None
        a = pair.after.summary() if pair.after is not None else None
        p = adjusted.get(index)
        p50_change = _change(b.p50 if b else None, a.p50 if a else None)
        p95_change = _change(b.p95 if b else None, a.p95 if a else None)
        verdict: Verdict
        regression = False
        if pair.before is None or not b or b.count == 0:
            if a is None or a.count == 0:
                continue
            verdict = "only in current"
        elif pair.after is None or not a or a.count == 0:
            verdict = "only in baseline"
        elif p is None:
            verdict = "too few samples"
        elif p < alpha:
            changes = [c for c in (p50_change, p95_change) if c is not None]
            biggest = max(changes, key=abs) if changes else 0.0
            verdict = "slower" if biggest > 0 else "faster"
            regression = any(c > threshold for c in changes)
        else:
            verdict = "unchanged"
        comparisons.append(
            DiffRow(
                workflow=pair.workflow,
                item=pair.item,
                kind=pair.kind,
                n_before=b.count if b else 0,
                n_after=a.count if a else 0,
                p50_before=b.p50 if b else None,
                p50_after=a.p50 if a else None,
                p95_before=b.p95 if b else None,
                p95_after=a.p95 if a else None,
                p_value=p,
                verdict=verdict,
                regression=regression,
            )
        )
    return DiffResult(
        comparisons,
        threshold,
        alpha,
        before_stats.runs,
        after_stats.runs,
    )
