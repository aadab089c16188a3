"""JSON documents of statistics, verdicts and diffs (finite numbers only)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlat._core.stats import (
    QUANTITIES,
    Stats,
    WorkflowStats,
)
from chainlat.report._common import (
    summary_json,
)

if TYPE_CHECKING:
    from chainlat.analysis.diff import DiffResult
    from chainlat.budgets import BudgetReport

# --- json ---------------------------------------------------------------------------------


def _workflow_json(workflow: WorkflowStats) -> dict[str, Any]:
    return {
        "runs": workflow.runs,
        "errors": workflow.errors,
        "quantities": {q: summary_json(workflow.quantities[q].summary()) for q in QUANTITIES},
        "steps": {
            step.name: {
                "kind": step.kind,
                "duration": summary_json(step.duration.summary()),
                "ttft": summary_json(step.ttft.summary()) if len(step.ttft) else None,
            }
            for step in workflow.steps.values()
        },
        "slowest_trace_id": workflow.slowest.trace_id if workflow.slowest else None,
    }


def stats_json(stats: Stats) -> dict[str, Any]:
    """The statistics as a JSON-ready dict (milliseconds)."""
    return {
        "runs": stats.runs,
        "percentile_method": "nearest-rank",
        "workflows": {name: _workflow_json(w) for name, w in stats.workflows.items()},
    }


def check_json(report: BudgetReport) -> dict[str, Any]:
    """The check report as a JSON-ready dict."""
    return {
        "ok": report.ok,
        "judged": report.judged,
        "budgets": report.budgets_source,
        **stats_json(report.stats),
        "verdicts": [
            {
                "workflow": v.workflow,
                "target": v.target,
                "key_path": v.key_path,
                "kind": "percentile" if v.percentile is not None else "run",
                "percentile": v.percentile,
                "limit_ms": v.limit_ms,
                "actual_ms": v.actual_ms,
                "status": v.status,
                "runs": v.runs,
                "broken_runs": v.broken_runs,
                "min_runs": v.min_runs,
                "worst_trace_id": v.worst_run.trace_id if v.worst_run else None,
            }
            for v in report.verdicts
        ],
    }


def diff_json(result: DiffResult) -> dict[str, Any]:
    """A diff as a JSON-ready dict."""
    return {
        "regression": bool(result.regressions),
        "threshold": result.threshold,
        "alpha": result.alpha,
        "baseline_runs": result.baseline_runs,
        "current_runs": result.current_runs,
        "comparisons": [
            {
                "workflow": c.workflow,
                "item": c.item,
                "kind": c.kind,
                "n_before": c.n_before,
                "n_after": c.n_after,
                "p50_before_ms": c.p50_before,
                "p50_after_ms": c.p50_after,
                "p50_change": c.p50_change,
                "p95_before_ms": c.p95_before,
                "p95_after_ms": c.p95_after,
                "p95_change": c.p95_change,
                "p_value": c.p_value,
                "verdict": c.verdict,
                "regression": c.regression,
            }
            for c in result.comparisons
        ],
    }
