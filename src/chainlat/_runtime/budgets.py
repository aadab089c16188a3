"""Runtime budgets: each workflow run is checked against its per-run limits when it ends.

``configure(budgets=..., on_exceed=...)`` installs two workflow hooks. Before
the workflow span ends, the run is checked (:func:`chainlat.budgets.check_run`)
and the span gets ``chainlat.budget.ok``, ``chainlat.budget.total_ms`` and one
``chainlat.budget.exceeded`` event per broken limit (or, when a limit cannot be judged on
the run, ``chainlat.budget.ok = false`` and ``chainlat.budget.not_judged``, why); its
status is left alone. A voice turn ended ``interrupted`` (barge-in) is not checked unless
the budget file says ``include_interrupted = true``, as ``chainlat check`` leaves it out.
After the span has ended (and so was handed to the exporters), the policy runs:

- ``"record"``: nothing more;
- ``"warn"``: a :class:`~chainlat.LatencyBudgetWarning`;
- ``"raise"``: :class:`~chainlat.LatencyBudgetExceeded` out of the workflow block;
- a callable: called with that exception (not raised), its return value ignored.

"warn" and "raise" apply only when the block itself finished normally: an
exception already on its way out of the block wins.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from opentelemetry.trace import StatusCode

from chainlat._core import attributes as attr
from chainlat._core import voice
from chainlat._core.amounts import over
from chainlat._core.errors import (
    ConfigError,
    LatencyBudgetExceeded,
    LatencyBudgetWarning,
    internal_errors,
)
from chainlat._core.rollup import SpanRecord
from chainlat._core.runs import BudgetViolation, WorkflowRun, build_run
from chainlat._core.turn_start import said_unknown_start
from chainlat._runtime.interface import (
    WorkflowHandle,
    after_workflow_end,
    on_workflow_end,
    workflow_records,
)
from chainlat.budgets import Budgets, check_run, load_budgets, unjudged_in_run

OnExceed = Literal["record", "warn", "raise"] | Callable[[LatencyBudgetExceeded], object]
"""What to do when a run breaks a per-run limit."""

_POLICIES = ("record", "warn", "raise")
_PACKAGE_DIR = str(Path(__file__).resolve().parent)


@dataclass(frozen=True)
class _Active:
    budgets: Budgets
    on_exceed: OnExceed


_active: _Active | None = None
_removers: list[Callable[[], None]] = []
"""Remove the two workflow callbacks; empty while no budget is enforced."""
_lock = threading.Lock()
_pending: weakref.WeakKeyDictionary[WorkflowHandle, LatencyBudgetExceeded] = (
    weakref.WeakKeyDictionary()
)


def install(
    budgets: Budgets | str | os.PathLike[str] | None, on_exceed: OnExceed = "record"
) -> None:
    """Enforce ``budgets`` on every workflow from now on; None stops enforcing."""
    global _active
    if budgets is not None and not isinstance(budgets, Budgets):
        budgets = load_budgets(budgets)
    if not (on_exceed in _POLICIES or callable(on_exceed)):
        raise ConfigError(f"on_exceed={on_exceed!r}: expected record, warn, raise or a callable")
    with _lock:
        if budgets is None:
            _active = None
            while _removers:
                _removers.pop()()
            return
        _active = _Active(budgets, on_exceed)
        if not _removers:
            _removers.extend((on_workflow_end(_check), after_workflow_end(_apply)))


def workflow_name(handle: WorkflowHandle) -> str:
    """``gen_ai.workflow.name`` of a workflow handle."""
    attributes = getattr(handle.span, "attributes", None) or {}
    name = attributes.get(attr.GEN_AI_WORKFLOW_NAME)
    if isinstance(name, str):
        return name
    prefix = attr.workflow_span_name("")
    return handle.name[len(prefix) :] if handle.name.startswith(prefix) else handle.name


def run_from_handle(handle: WorkflowHandle, *, origin: str = "") -> WorkflowRun | None:
    """The run of a workflow that has its rollup (inside a workflow-end hook or after)."""
    rollup = handle.rollup
    if rollup is None:
        return None
    context = handle.span.get_span_context()
    end_ns = handle.end_ns if handle.end_ns is not None else handle.start_ns
    root = SpanRecord(context.span_id, None, handle.name, handle.start_ns, end_ns, "workflow")
    records = workflow_records(handle)
    status = getattr(handle.span, "status", None)
    attributes = getattr(handle.span, "attributes", None)
    return build_run(
        workflow_name(handle),
        root,
        records,
        rollup=rollup,
        trace_id=f"{context.trace_id:032x}",
        error=status is not None and status.status_code is StatusCode.ERROR,
        origin=origin,
        unknown_start=said_unknown_start(attributes) if attributes is not None else None,
    )


def describe(workflow: str, violations: list[BudgetViolation]) -> str:
    """One line naming every broken limit of a run."""
    broken = "; ".join(f"{v.target} {over(v.actual_ms, v.limit_ms, v.unit)}" for v in violations)
    return f"workflow {workflow!r} broke its latency budget: {broken}"


def _check(handle: WorkflowHandle) -> None:
    active = _active
    if active is None or handle.rollup is None:
        return
    with internal_errors("checking a latency budget"):
        name = workflow_name(handle)
        budget = active.budgets.workflows.get(name)
        if budget is None:
            return
        span = handle.span
        if voice.is_interrupted(
            getattr(span, "attributes", None) or {}
        ) and not active.budgets.includes_interrupted(name):
            # A voice turn the caller interrupted: its answer was cut, its latency is no
            # answer's; check leaves it out of the per-run limits too (include_interrupted).
            return
        run = run_from_handle(handle)
        assert run is not None
        violations = check_run(run, budget)
        # A limit that cannot be judged is not kept: the run is not marked ok.
        why = None if violations else unjudged_in_run(run, budget)
        span.set_attribute(attr.BUDGET_OK, not violations and why is None)
        if why is not None:
            span.set_attribute(attr.BUDGET_NOT_JUDGED, why)
        if budget.total is not None:
            span.set_attribute(attr.BUDGET_TOTAL_MS, budget.total)
        for violation in violations:
            span.add_event(
                attr.BUDGET_EXCEEDED_EVENT,
                {
                    attr.BUDGET_TARGET: violation.target,
                    attr.BUDGET_LIMIT_MS: violation.limit_ms,
                    attr.BUDGET_ACTUAL_MS: violation.actual_ms,
                },
                timestamp=handle.end_ns,
            )
        if violations and active.on_exceed != "record":
            _pending[handle] = LatencyBudgetExceeded(
                describe(name, violations), run.rollup, violations
            )


def _apply(handle: WorkflowHandle, exc: BaseException | None) -> None:
    error = _pending.pop(handle, None)
    active = _active
    if error is None or active is None:
        return
    policy = active.on_exceed
    if callable(policy):
        policy(error)
    elif exc is None and policy == "warn":
        warnings.warn(str(error), LatencyBudgetWarning, stacklevel=_user_stacklevel())
    elif exc is None and policy == "raise":
        raise error


def _user_stacklevel() -> int:
    """The stacklevel that points a warning at the first frame outside chainlat."""
    frame = sys._getframe(1)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
