"""What a per-run limit measures on a run: a workflow quantity (``total``, ``first_output``),
a step's duration or time to first token, or every call of one operation; and whether a
measured value breaks a limit.

Pure: runs in, numbers out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chainlat._core.stats import FIRST_OUTPUT
from chainlat._core.voice import SPEECH_QUANTITIES, UNKNOWN_START_QUANTITIES, speech_ms
from chainlat.budgets.messages import operation_target, step_target

if TYPE_CHECKING:
    from chainlat._core.runs import StepTiming, WorkflowRun
    from chainlat.budgets.model import WorkflowBudget


def occurrences(run: WorkflowRun, step: str) -> list[StepTiming]:
    return [s for s in run.steps if s.name == step]


def run_checks(budget: WorkflowBudget) -> list[tuple[str, float, Measure]]:
    checks: list[tuple[str, float, Measure]] = []
    for quantity, limit in budget.run_limits().items():
        checks.append((quantity, limit, QuantityMeasure(quantity)))
    for step, limits in budget.steps.items():
        if limits.max is not None:
            checks.append((step_target(step, "max"), limits.max, StepMeasure(step, False)))
        if limits.ttft is not None:
            checks.append((step_target(step, "ttft"), limits.ttft, StepMeasure(step, True)))
    for operation, op_limits in budget.operations.items():
        if op_limits.latency is not None:
            target = operation_target(operation, "latency")
            checks.append((target, op_limits.latency, OperationMeasure(operation, False)))
        if op_limits.first_output is not None:
            target = operation_target(operation, "first_output")
            checks.append((target, op_limits.first_output, OperationMeasure(operation, True)))
    return checks


class Measure:
    """One per-run limit's measure."""

    def of(self, run: WorkflowRun) -> float | None:
        """The run's worst value of this measure, None when the run does not have it."""
        raise NotImplementedError

    def unrecorded(self, run: WorkflowRun) -> bool:
        """Whether the run's value depends on a model call's end its trace does not hold."""
        raise NotImplementedError

    def unusable(self, run: WorkflowRun) -> bool:
        """Whether the run's value depends on a first token the trace gives by a value that
        is no time (rule 15): a bound, or no value at all where there should be one."""
        raise NotImplementedError

    def unknown_start(self, run: WorkflowRun) -> bool:
        """Whether the run's value counts from its start where that is no end of the
        caller's words (rule 16): a bound, not a measurement. A step's own time does not."""
        return False


@dataclass(frozen=True)
class QuantityMeasure(Measure):
    quantity: str

    def of(self, run: WorkflowRun) -> float | None:
        if self.quantity == FIRST_OUTPUT:
            return run.rollup.first_output_ms
        if self.quantity in SPEECH_QUANTITIES:
            return speech_ms(run.rollup, self.quantity)
        return run.rollup.kind_ms(self.quantity)

    def unrecorded(self, run: WorkflowRun) -> bool:
        return run.rollup.unrecorded_in(self.quantity)

    def unusable(self, run: WorkflowRun) -> bool:
        return run.rollup.unusable_in(self.quantity)

    def unknown_start(self, run: WorkflowRun) -> bool:
        return run.unknown_start is not None and self.quantity in UNKNOWN_START_QUANTITIES


@dataclass(frozen=True)
class StepMeasure(Measure):
    step: str
    ttft: bool

    def of(self, run: WorkflowRun) -> float | None:
        values = [s.ttft_ms if self.ttft else s.duration_ms for s in occurrences(run, self.step)]
        found = [v for v in values if v is not None]
        return max(found) if found else None

    def unrecorded(self, run: WorkflowRun) -> bool:
        return not self.ttft and self.step in run.rollup.unrecorded

    def unusable(self, run: WorkflowRun) -> bool:
        return self.ttft and self.step in run.rollup.unusable


@dataclass(frozen=True)
class OperationMeasure(Measure):
    """The worst call of one operation in a run: its duration, or its first output."""

    operation: str
    first_output: bool

    def of(self, run: WorkflowRun) -> float | None:
        calls = [s for s in run.steps if s.operation == self.operation and s.kind == "inference"]
        values = [s.ttft_ms if self.first_output else s.duration_ms for s in calls]
        found = [v for v in values if v is not None]
        return max(found) if found else None

    def unrecorded(self, run: WorkflowRun) -> bool:
        # A call's first output is measured; its duration is a bound when its end is not
        # recorded, and the operation of such a call is not kept: fail closed.
        return not self.first_output and bool(run.rollup.unrecorded)

    def unusable(self, run: WorkflowRun) -> bool:
        # A call's first output is not known when its first token is no time; which
        # operation such a call had is not kept: fail closed, as above.
        return self.first_output and bool(run.rollup.unusable)


def over(actual: float, limit: float) -> bool:
    """Whether a measured value breaks a limit. A value that is not a finite number (a
    recorded rollup of ``"NaN"``) breaks every limit: it cannot be shown to keep one, and a
    gate that passed it would pass a run it never measured."""
    return not (math.isfinite(actual) and actual <= limit)


def worse(actual: float, than: float | None) -> bool:
    if than is None:
        return True
    if not math.isfinite(actual):
        return math.isfinite(than)
    return math.isfinite(than) and actual > than
