"""What every command that judges budgets shares: its opt-outs (``--allow-missing``,
``--allow-unjudged``), the budgets of the workflows ``--workflow`` chose, and the one line
on stderr per limit not judged. ``check`` (from traces or Prometheus) and ``whatif`` use
it, so the same budget file fails or passes them alike."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from chainlat._core.errors import InputError

if TYPE_CHECKING:
    from chainlat.budgets import BudgetReport, Budgets, NotJudgedReason
    from chainlat.cli.options import RunFilter


def add_allow(parser: argparse.ArgumentParser) -> None:
    """``--allow-missing`` and ``--allow-unjudged``."""
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="a budgeted workflow or step that no run has is not an error (default: it is, "
        "exit 2, as a misspelled name would otherwise pass)",
    )
    parser.add_argument(
        "--allow-unjudged",
        action="store_true",
        help="a limit that cannot be judged for any other reason (too few runs, no price, "
        "an incomplete run, ...) is shown but not an error (default: exit 2)",
    )


def allowed_reasons(args: argparse.Namespace) -> frozenset[NotJudgedReason]:
    """The reasons for not judging a limit that ``--allow-missing`` and ``--allow-unjudged``
    opt out of."""
    from chainlat.budgets import ABSENT_REASONS, UNJUDGED_REASONS

    allowed: frozenset[NotJudgedReason] = frozenset()
    if getattr(args, "allow_missing", False):
        allowed |= ABSENT_REASONS
    if getattr(args, "allow_unjudged", False):
        allowed |= UNJUDGED_REASONS
    return allowed


def chosen_budgets(budgets: Budgets, chosen: RunFilter) -> Budgets:
    """Only the budgets of the workflows ``--workflow`` asked for (all without it): the
    runs of the others were not read, so their names would read as missing."""
    if not chosen.workflows:
        return budgets
    kept = {k: v for k, v in budgets.workflows.items() if k in chosen.workflows}
    return budgets.model_copy(update={"workflows": kept})


def require_budgets(budgets: Budgets, chosen: RunFilter, budgeted: list[str]) -> None:
    """An error when ``--workflow`` chose no budgeted workflow (``budgeted``: all of them)."""
    if not budgets.workflows:
        raise InputError(
            f"--workflow {', '.join(chosen.workflows)}: no budget for it in {budgets.source} "
            f"(budgeted: {', '.join(budgeted)})"
        )


def warn_unjudged(result: BudgetReport) -> None:
    """One line on stderr per limit that could not be judged and fails the gate (one per
    workflow or step for a name no run has), or one saying nothing was judged."""
    from chainlat._core.redact import visible
    from chainlat.report.common import unjudged_key

    # Each line is cleaned once, whole, where it is written.
    source = result.budgets_source
    lines = dict.fromkeys(
        f"chainlat: {source}: {unjudged_key(v)}: {v.why or ''}" for v in result.unjudged
    )
    if not lines and not result.broken and not result.judged:
        budgeted = ", ".join(dict.fromkeys(v.workflow for v in result.verdicts)) or "none"
        ran = ", ".join(result.stats.workflows) or "none"
        lines[
            f"chainlat: nothing to judge: no limit could be judged (budgeted: {budgeted}; "
            f"in the traces: {ran})"
        ] = None
    for line in lines:
        sys.stderr.write(visible(line) + "\n")
