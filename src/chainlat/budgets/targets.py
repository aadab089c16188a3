"""What a budget asks of the application's metrics: its per-run limits as counter targets,
and the histogram boundaries that make every millisecond limit exact.

Shared by the runtime, which counts runs over each per-run limit
(:mod:`chainlat._runtime.metrics`), and by the Prometheus rules that read those counts
(:mod:`chainlat.prometheus`), so that both name the same targets.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from chainlat._core.runs import step_key

if TYPE_CHECKING:
    from chainlat.budgets import Budgets, WorkflowBudget

__all__ = ["PER_RUN_KEYS", "chain_boundaries", "per_run_targets"]

PER_RUN_KEYS: Final[dict[str, str]] = {"first_output": "ms", "cost": "USD"}
"""Per-run keys of a workflow's budget beyond ``run_limits()`` (total and its split), with
their unit; the application counts runs over each in ``chainlat.budget.exceeded``."""


def per_run_targets(budget: WorkflowBudget) -> list[tuple[str, float]]:
    """Every per-run limit as (target, limit), in the order check_run judges them."""
    found: list[tuple[str, float]] = list(budget.run_limits().items())
    for extra in PER_RUN_KEYS:
        if extra not in dict(found):
            value = getattr(budget, extra, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                found.append((extra, float(value)))
    for step, limits in budget.steps.items():
        if limits.max is not None:
            found.append((f"steps.{step_key(step)}.max", limits.max))
        if limits.ttft is not None:
            found.append((f"steps.{step_key(step)}.ttft", limits.ttft))
    for operation, op_limits in budget.operations.items():
        if op_limits.latency is not None:
            found.append((f"operations.{operation}.latency", op_limits.latency))
        if op_limits.first_output is not None:
            found.append((f"operations.{operation}.first_output", op_limits.first_output))
    return found


def chain_boundaries(budgets: Budgets | None, base: Iterable[float]) -> list[float]:
    """Boundaries (ms) for ``chainlat.chain.duration``: ``base`` plus every millisecond limit,
    per-run or percentile, of every workflow."""
    found = {float(b) for b in base}
    if budgets is not None:
        for budget in budgets.workflows.values():
            for target, limit in per_run_targets(budget):
                if PER_RUN_KEYS.get(target, "ms") == "ms":
                    found.add(limit)
            for limits in budget.percentiles.values():
                found.update(limit for _, limit in limits.items())
    return sorted(b for b in found if math.isfinite(b) and b > 0)
