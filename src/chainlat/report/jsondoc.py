"""JSON documents of statistics, verdicts and diffs (finite numbers only).

A value that is not a finite number (a recorded rollup of ``"NaN"``) is written as
``null``; a verdict on such a value is ``broken`` and its ``note`` says why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlat._core.stats import (
    FIRST_OUTPUT,
    QUANTITIES,
    Stats,
    WorkflowStats,
)
from chainlat.report.common import (
    dumps,
    finite,
    json_ready,
    summary_json,
)

if TYPE_CHECKING:
    from chainlat.analysis.diff import DiffResult
    from chainlat.budgets import BudgetReport, LimitVerdict

# --- json ---------------------------------------------------------------------------------


def _workflow_json(workflow: WorkflowStats) -> dict[str, Any]:
    return {
        "runs": workflow.runs,
        "errors": workflow.errors,
        "errors_in_percentiles": workflow.include_errors,
        "interrupted": workflow.interrupted,
        "interrupted_in_percentiles": workflow.include_interrupted,
        "quantities": {
            q: summary_json(workflow.quantities[q].summary()) for q in (*QUANTITIES, FIRST_OUTPUT)
        },
        "first_output_split": (
            {
                part: summary_json(samples.summary())
                for part, samples in workflow.first_output_split.items()
            }
            or None
        ),
        "cost_usd": (
            {
                key.removesuffix("_ms"): value
                for key, value in summary_json(workflow.cost.summary()).items()
            }
            if len(workflow.cost)
            else None
        ),
        "steps": {
            step.name: {
                "kind": step.kind,
                "duration": summary_json(step.duration.summary()),
                "ttft": summary_json(step.ttft.summary()) if len(step.ttft) else None,
            }
            for step in workflow.steps.values()
        },
        "slowest_trace_id": workflow.slowest.trace_id if workflow.slowest else None,
        # Per quantity and step, the runs whose value is a bound, not a measurement (rules
        # 13, 15, 16 and 17 of docs/attributes.md): the text says "[a bound in N/M runs]".
        "bound_runs": dict(workflow.unrecorded),
    }


def stats_json(stats: Stats) -> dict[str, Any]:
    """The statistics as a JSON-ready dict (milliseconds)."""
    document: dict[str, Any] = json_ready(
        {
            "runs": stats.runs,
            "percentile_method": "nearest-rank",
            "workflows": {name: _workflow_json(w) for name, w in stats.workflows.items()},
        }
    )
    return document


def _note(v: LimitVerdict) -> str | None:
    if v.actual_ms is not None and not finite(v.actual_ms):
        return (
            f"the measured value is not a finite number ({v.actual_ms}): "
            "counted as broken, written as null"
        )
    return None


def check_json(report: BudgetReport) -> dict[str, Any]:
    """The check report as a JSON-ready dict."""
    document: dict[str, Any] = json_ready(
        {
            "ok": report.ok,
            "exit_code": report.exit_code,
            "summary": report.summary,
            "judged": report.judged,
            "budgets": report.budgets_source,
            **stats_json(report.stats),
            "verdicts": [
                {
                    "workflow": v.workflow,
                    "target": v.target,
                    "key_path": v.key_path,
                    "kind": v.kind,
                    "percentile": v.percentile,
                    "limit_ms": v.limit_ms,
                    "actual_ms": v.actual_ms,
                    "status": v.status,
                    "reason": v.reason,
                    "why": v.why,
                    "allowed": v.allowed,
                    "runs": v.runs,
                    "broken_runs": v.broken_runs,
                    "min_runs": v.min_runs,
                    "worst_trace_id": v.worst_run.trace_id if v.worst_run else None,
                    "note": _note(v),
                }
                for v in report.verdicts
            ],
        }
    )
    return document


_NUMBER_OR_NULL: dict[str, Any] = {"type": ["number", "null"]}


def _verdict_schema() -> dict[str, Any]:
    from typing import get_args

    from chainlat.budgets import NotJudgedReason, VerdictStatus

    return {
        "type": "object",
        "description": "The verdict on one limit, as the judge gave it (never re-derived).",
        "required": ["workflow", "target", "key_path", "status", "reason", "why", "allowed"],
        "properties": {
            "workflow": {"type": "string"},
            "target": {"type": "string", "description": "The limit's key inside the workflow."},
            "key_path": {"type": "string", "description": "The limit's key in the file."},
            "kind": {"enum": ["run", "percentile", "share"]},
            "percentile": _NUMBER_OR_NULL,
            "limit_ms": {"type": "number", "description": "In ms, % or USD (see the limit)."},
            "actual_ms": _NUMBER_OR_NULL,
            "status": {
                "enum": list(get_args(VerdictStatus)),
                "description": "ok (kept), broken, or not_judged (see reason and why).",
            },
            "reason": {
                "enum": [*get_args(NotJudgedReason), None],
                "description": "Why the limit was not judged; null when it was.",
            },
            "why": {
                "type": ["string", "null"],
                "description": "One line: why it was not judged, and how to opt out.",
            },
            "allowed": {
                "type": "boolean",
                "description": "Not judged, but opted out of (optional = true, "
                "--allow-missing, --allow-unjudged): it does not fail the check.",
            },
            "runs": {"type": "integer", "minimum": 0},
            "broken_runs": {"type": "integer", "minimum": 0},
            "min_runs": {"type": "integer", "minimum": 1},
            "worst_trace_id": {"type": ["string", "null"]},
            "note": {"type": ["string", "null"]},
        },
    }


def check_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :func:`check_json`'s document: its exit code, its
    summary line, and per limit the status, reason, why and whether it was allowed.

    Example::

        import jsonschema
        jsonschema.validate(check_json(report), check_schema())
    """
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "chainlat check",
        "type": "object",
        "required": ["ok", "exit_code", "summary", "judged", "budgets", "verdicts"],
        "properties": {
            "ok": {"type": "boolean", "description": "exit_code is 0."},
            "exit_code": {
                "enum": [0, 1, 2],
                "description": "1: a limit broken; 2: a limit not judged (and not allowed), "
                "or none judged; 0: every limit judged and kept, or allowed.",
            },
            "summary": {"type": "string", "description": "The line every format ends with."},
            "judged": {"type": "boolean", "description": "At least one limit was judged."},
            "budgets": {"type": "string"},
            "source": {"type": "string"},
            "runs": {"type": "integer", "minimum": 0},
            "percentile_method": {"const": "nearest-rank"},
            "workflows": {"type": "object"},
            "verdicts": {"type": "array", "items": _verdict_schema()},
        },
    }


def diff_json(result: DiffResult) -> dict[str, Any]:
    """A diff as a JSON-ready dict."""
    document: dict[str, Any] = json_ready(
        {
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
    )
    return document


def to_json(document: dict[str, Any]) -> str:
    """A document of this module (or any dict) as JSON text: never a bare NaN or Infinity."""
    return dumps(document)
