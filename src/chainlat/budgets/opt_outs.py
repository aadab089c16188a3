"""Limits of names no run has (a workflow, a step: a typo, or one that runs only
sometimes), and the user's opt-outs: ``optional = true``, ``--allow-missing`` and
``--allow-unjudged``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from chainlat._core.errors import shown
from chainlat._core.stats import Stats
from chainlat.budgets.messages import key_path_of, step_target, suggest
from chainlat.budgets.verdict import (
    ABSENT_REASONS,
    UNJUDGED_REASONS,
    BudgetReport,
    LimitVerdict,
    NotJudgedReason,
)

if TYPE_CHECKING:
    from chainlat.budgets.model import Budgets, WorkflowBudget


def absent_verdicts(
    verdicts: list[LimitVerdict],
    name: str,
    budget: WorkflowBudget,
    stats: Stats,
    source: str,
) -> list[LimitVerdict]:
    """The verdicts of a workflow (or step) that no run has, as not judged: a misspelled key
    would otherwise pass as "no data"."""
    seen = stats.workflows
    workflow = seen.get(name)
    if workflow is None:
        why = f"no run of workflow {shown(name)}{suggest(name, list(seen))}"
        return [v.not_judged("unknown_workflow", why) for v in verdicts]
    prefixes = {step_target(step, ""): step for step in budget.steps}
    out: list[LimitVerdict] = []
    for verdict in verdicts:
        step = next((s for p, s in prefixes.items() if verdict.target.startswith(p)), None)
        if step is None or step in workflow.seen_steps:
            out.append(verdict)
            continue
        why = (
            f"no run of {shown(name)} has a step {shown(step)}"
            f"{suggest(step, sorted(workflow.seen_steps))}"
        )
        out.append(verdict.not_judged("unknown_step", why))
    return out


_OPT_OUT: Final = {
    **{reason: "--allow-missing" for reason in ABSENT_REASONS},
    **{reason: "--allow-unjudged" for reason in UNJUDGED_REASONS},
}


def apply_opt_outs(
    verdicts: Iterable[LimitVerdict], budgets: Budgets, allow: Iterable[NotJudgedReason] = ()
) -> list[LimitVerdict]:
    """Each not-judged verdict marked ``allowed`` when ``allow`` names its reason or the
    budget marks its workflow or step ``optional``; the others' ``why`` names the flag that
    would opt out (for sources other than :func:`evaluate`, such as Prometheus).

    Example::

        verdicts = apply_opt_outs(verdicts, budgets, allow=ABSENT_REASONS)
    """
    allowed = frozenset(allow)
    return [_opted_out(v, budgets, allowed) for v in verdicts]


def _opted_out(
    verdict: LimitVerdict, budgets: Budgets, allow: frozenset[NotJudgedReason]
) -> LimitVerdict:
    """A not-judged verdict marked allowed when the user opted out of its reason, else its
    ``why`` naming the way to opt out."""
    if verdict.status != "not_judged" or verdict.reason is None:
        return verdict
    if verdict.reason in allow or _optional(verdict, budgets):
        return replace(verdict, allowed=True)
    why = verdict.why or verdict.reason
    hint = (
        "set optional = true if it runs only sometimes, or "
        if verdict.reason in ABSENT_REASONS and "optional = true" not in why
        else ""
    )
    return replace(verdict, why=f"{why}; {hint}{_OPT_OUT[verdict.reason]} to pass without it")


def _optional(verdict: LimitVerdict, budgets: Budgets) -> bool:
    """``optional = true`` on the workflow, or on the step, of a limit that no run has."""
    if verdict.reason not in ABSENT_REASONS:
        return False
    budget = budgets.workflows.get(verdict.workflow)
    if budget is None:
        return False
    if budget.optional:
        return True
    return any(
        limits.optional and verdict.target.startswith(step_target(step, ""))
        for step, limits in budget.steps.items()
    )


def unknown_keys(
    report: BudgetReport, budgets: Budgets, *, workflows_not_run: bool = True
) -> list[str]:
    """Budget keys naming a workflow or a step that no run has, each as a one-line message
    with the closest names seen: a misspelled key would otherwise pass as "no data".

    The same facts are in the report's verdicts (reasons ``unknown_workflow`` and
    ``unknown_step``); this lists them by key. ``optional = true`` on a workflow or step
    says it runs only sometimes. Without ``workflows_not_run``, only the steps of workflows
    that ran are looked at (a test session that ran a subset of the tests).

    Example::

        problems = unknown_keys(evaluate(runs, budgets), budgets)
        assert not problems, "; ".join(problems)
    """
    found: list[str] = []
    seen = report.stats.workflows
    for name, budget in budgets.workflows.items():
        stats = seen.get(name)
        if stats is None:
            if not budget.optional and workflows_not_run:
                where = key_path_of(("workflows", name))
                found.append(
                    f"{budgets.source}: {where}: no run of workflow {shown(name)}"
                    f"{suggest(name, list(seen))}"
                )
            continue
        for step, limits in budget.steps.items():
            if step in stats.seen_steps or limits.optional:
                continue
            where = key_path_of(("workflows", name, "steps", step))
            found.append(
                f"{budgets.source}: {where}: no run of {shown(name)} has a step "
                f"{shown(step)}{suggest(step, sorted(stats.seen_steps))}"
            )
    return found
