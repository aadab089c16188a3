"""Latency budget files: the models, loading and discovery, and the verdict on a set of runs.

The package's rooms: :mod:`~chainlat.budgets.model` (the file's pydantic models),
:mod:`~chainlat.budgets.loading` (files, discovery, TOML/YAML/JSON),
:mod:`~chainlat.budgets.messages` (error messages, suggestions),
:mod:`~chainlat.budgets.verdict` (what a check found), :mod:`~chainlat.budgets.judge`
(:func:`check_run`, :func:`evaluate`) and :mod:`~chainlat.budgets.schema`. pydantic and
YAML are imported when a budget is loaded or built, not by ``import chainlat.budgets``.

A budget file declares, per workflow (by ``gen_ai.workflow.name``), limits on
each run and on percentiles over many runs::

    # chainlat.toml (or the same keys under [tool.chainlat] in pyproject.toml)
    min_runs = 20

    [workflows.support-chat]
    total = "800ms"                      # every run
    data = "250ms"
    p95 = { total = "700ms", data = "200ms" }
    p50 = "400ms"                        # a bare duration limits the total

    [workflows.support-chat.steps."chat gpt-4o"]
    max = "600ms"
    p95 = "500ms"
    ttft_p95 = "250ms"

Durations are ``"800ms"``, ``"1.2s"``, ``"250us"`` (also ``ns``, ``m``) or plain
numbers of milliseconds. Everything here is pure: :func:`evaluate` takes runs
(from :mod:`chainlat.traces`, the pytest plugin or a live workflow) and returns
a :class:`BudgetReport`; nothing is read from OpenTelemetry.

Example::

    budgets = chainlat.budgets.load_budgets("chainlat.toml")
    report = chainlat.budgets.evaluate(chainlat.traces.read_runs(["traces.jsonl"]), budgets)
    print(report.ok, [str(v) for v in report.broken])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from chainlat._core.lazy import lazy_names as _lazy_names
from chainlat.budgets._values import percentile_of_key
from chainlat.budgets.judge import check_run, evaluate, unjudged_in_run
from chainlat.budgets.opt_outs import apply_opt_outs, unknown_keys
from chainlat.budgets.verdict import (
    ABSENT_REASONS,
    UNJUDGED_REASONS,
    BudgetReport,
    LimitVerdict,
    NotJudgedReason,
    VerdictStatus,
)

if TYPE_CHECKING:
    from chainlat.budgets._values import parse_duration
    from chainlat.budgets.loading import (
        BUDGET_FILE_NAMES as BUDGET_FILE_NAMES,
    )
    from chainlat.budgets.loading import (
        discover_budgets,
        load_budgets,
        parse_budgets,
        parse_workflow_budget,
    )
    from chainlat.budgets.model import Budgets, QuantityLimits, StepBudget, WorkflowBudget
    from chainlat.budgets.schema import json_schema

__all__ = [
    "ABSENT_REASONS",
    "UNJUDGED_REASONS",
    "BudgetReport",
    "Budgets",
    "LimitVerdict",
    "NotJudgedReason",
    "QuantityLimits",
    "StepBudget",
    "VerdictStatus",
    "WorkflowBudget",
    "apply_opt_outs",
    "check_run",
    "discover_budgets",
    "evaluate",
    "json_schema",
    "load_budgets",
    "parse_budgets",
    "parse_duration",
    "parse_workflow_budget",
    "percentile_of_key",
    "unjudged_in_run",
    "unknown_keys",
]

# Names whose module imports pydantic or YAML: imported on first use.
_LAZY: Final = {
    "BUDGET_FILE_NAMES": ".loading",
    "Budgets": ".model",
    "QuantityLimits": ".model",
    "StepBudget": ".model",
    "WorkflowBudget": ".model",
    "discover_budgets": ".loading",
    "json_schema": ".schema",
    "load_budgets": ".loading",
    "parse_budgets": ".loading",
    "parse_duration": "._values",
    "parse_workflow_budget": ".loading",
}
_lazy_getattr, __dir__ = _lazy_names(__name__, _LAZY, globals())


def __getattr__(name: str) -> Any:
    return _lazy_getattr(name)
