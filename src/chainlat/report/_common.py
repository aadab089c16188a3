"""What every format of the report shares: number formats, table rows, verdict labels."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chainlat._core.stats import (
    QUANTITIES,
    Summary,
    WorkflowStats,
)

if TYPE_CHECKING:
    from chainlat.analysis.diff import DiffResult
    from chainlat.budgets import LimitVerdict

DASH: Final = "-"


def ms(value: float | None) -> str:
    return DASH if value is None else f"{value:,.1f}"


def count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def limit_text(value: float) -> str:
    return f"{value:g} ms"


# --- rows shared by every format ----------------------------------------------------------


@dataclass(frozen=True)
class StatRow:
    label: str
    kind: str
    summary: Summary


def stat_rows(workflow: WorkflowStats) -> list[StatRow]:
    rows = [
        StatRow(q if q == "total" else f"{q} (critical path)", "", workflow.quantities[q].summary())
        for q in QUANTITIES
    ]
    for step in workflow.steps.values():
        rows.append(StatRow(step.name, step.kind, step.duration.summary()))
    for step in workflow.steps.values():
        if len(step.ttft):
            rows.append(StatRow(f"{step.name} (ttft)", "ttft", step.ttft.summary()))
    return rows


def summary_json(summary: Summary) -> dict[str, Any]:
    return {
        "count": summary.count,
        "p50_ms": summary.p50,
        "p90_ms": summary.p90,
        "p95_ms": summary.p95,
        "p99_ms": summary.p99,
        "max_ms": summary.max,
        "mean_ms": summary.mean,
    }


def verdict_label(verdict: LimitVerdict) -> str:
    if verdict.status == "broken":
        return "BROKEN"
    if verdict.status == "ok":
        return "ok"
    if verdict.status == "not_enough_runs":
        return f"not judged: {verdict.runs} < min_runs {verdict.min_runs}"
    return "no data"


def verdict_runs(verdict: LimitVerdict) -> str:
    if verdict.percentile is None and verdict.runs:
        return f"{verdict.broken_runs}/{verdict.runs} over"
    return str(verdict.runs)


def limit_label(verdict: LimitVerdict) -> str:
    return verdict.target if verdict.percentile is not None else f"{verdict.target} (each run)"


def pct(change: float | None) -> str:
    if change is None:
        return DASH
    if math.isinf(change):
        return "new"
    return f"{change:+.1%}"


def diff_rows(result: DiffResult) -> list[list[str]]:
    rows = []
    for c in result.comparisons:
        item = c.item if c.kind != "quantity" or c.item == "total" else f"{c.item} (critical path)"
        verdict = c.verdict.upper() + " (REGRESSION)" if c.regression else c.verdict
        rows.append(
            [
                c.workflow,
                item,
                f"{c.n_before}/{c.n_after}",
                f"{ms(c.p50_before)} -> {ms(c.p50_after)}",
                pct(c.p50_change),
                f"{ms(c.p95_before)} -> {ms(c.p95_after)}",
                pct(c.p95_change),
                DASH if c.p_value is None else f"{c.p_value:.2g}",
                verdict,
            ]
        )
    return rows


diff_header: Final = [
    "workflow",
    "quantity / step",
    "runs",
    "p50 ms",
    "p50",
    "p95 ms",
    "p95",
    "p (Holm)",
    "verdict",
]


def diff_conclusion(result: DiffResult) -> str:
    rule = (
        f"beyond noise: Mann-Whitney U and tail test, Holm-adjusted p < {result.alpha:g}; "
        f"regression: beyond noise and p50 or p95 slower by more than {result.threshold:.0%}"
    )
    found = result.regressions
    if found:
        names = ", ".join(f"{c.workflow}: {c.item}" for c in found)
        return f"REGRESSION: {len(found)} ({names})\n{rule}"
    return f"OK: no regression in {result.judged} comparisons\n{rule}"
