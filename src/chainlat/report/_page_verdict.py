"""The budget verdict of an HTML page: what ``chainlat check`` prints for the same runs and
budget file, above the run explorer's table.

The explorer's budget column judges one run at a time, so it can show only the per-run
limits (``total``, ``first_output``, a step's ``max``...). A percentile, a share of failed
runs (``error_rate``) or a cost percentile is about the set of runs, not one of them: this
section shows every limit with the verdict, the summary line and the exit code ``check``
gives (the same :func:`chainlat.budgets.evaluate`, run by the command that wrote the
page), so a page never reads "kept" on every run while ``check`` fails.
"""

from __future__ import annotations

import html
from typing import TYPE_CHECKING, Final

from chainlat._core.redact import visible
from chainlat.report.common import (
    actual_text,
    limit_label,
    limit_text,
    printed_source,
    shown_name,
    unjudged_lines,
    verdict_label,
    verdict_runs,
)

if TYPE_CHECKING:
    from chainlat.budgets import BudgetReport, LimitVerdict


def _h(text: str) -> str:
    return html.escape(visible(shown_name(text), newline=True))


_KINDS: Final = {
    "run": "each run (the budget column below)",
    "percentile": "the set of runs (not shown per run)",
    "share": "the set of runs (not shown per run)",
}


def _row(verdict: LimitVerdict) -> str:
    bad = verdict.status == "broken" or (verdict.status == "not_judged" and not verdict.allowed)
    cells = (
        f"<td>{_h(limit_label(verdict))}</td>",
        f"<td>{html.escape(_KINDS[verdict.kind])}</td>",
        f'<td class="n">{html.escape(limit_text(verdict.limit_ms, verdict.unit))}</td>',
        '<td class="n">'
        + html.escape(actual_text(verdict.actual_ms, verdict.unit, against=verdict.limit_ms))
        + "</td>",
        f'<td class="n">{html.escape(verdict_runs(verdict))}</td>',
        f'<td class="{"bad" if bad else ""}">{_h(verdict_label(verdict))}</td>',
    )
    return f'<tr data-key="{_h(verdict.key_path)}" data-status="{verdict.status}">' + (
        "".join(cells) + "</tr>"
    )


def verdict_section(report: BudgetReport) -> str:
    """The page's budget summary: per budgeted workflow, each limit with ``check``'s verdict
    (per-run limits and limits over the set of runs, told apart), then the limits broken
    and not judged, the summary line and the exit code, as ``check`` ends."""
    parts = [
        '<div id="cl-budget" aria-labelledby="cl-budget-title">',
        '<h3 id="cl-budget-title">Budget, as <code>chainlat check</code> judges these runs: '
        f'<span class="{"" if report.ok else "bad"}" id="cl-budget-summary">'
        f"{_h(report.summary)}</span></h3>",
        f"<p>Budgets from {_h(printed_source(report.budgets_source))}; <code>chainlat check"
        f"</code> with this file exits {report.exit_code}. The budget column of the table "
        "judges each run against the per-run limits only; a percentile or a share of failed "
        "runs is about the set of runs, not one run, and is judged here.</p>",
    ]
    for workflow in dict.fromkeys(v.workflow for v in report.verdicts):
        parts.append(
            f'<table class="cl-limits" data-workflow="{_h(workflow)}">'
            f"<caption>{_h(workflow)}</caption><thead><tr><th>limit</th><th>judged over</th>"
            '<th class="n">budget</th><th class="n">actual</th><th class="n">runs</th>'
            "<th>verdict</th></tr></thead><tbody>"
            + "".join(_row(v) for v in report.verdicts_of(workflow))
            + "</tbody></table>"
        )
    lines = [f"BROKEN: {v.key_path}" for v in report.broken]
    lines.extend(unjudged_lines(report.verdicts))
    if lines:
        parts.append(
            '<ul class="cl-broke">'
            + "".join(f"<li>{html.escape(visible(line, newline=True))}</li>" for line in lines)
            + "</ul>"
        )
    parts.append("</div>")
    return "".join(parts)


def set_limits(report: BudgetReport) -> dict[str, list[int]]:
    """Per workflow, how many of its limits over the set of runs ``check`` found broken and
    not judged (failing the gate), for the workflows with any: the budget column says so
    beside each run's own verdict."""
    found: dict[str, list[int]] = {}
    for verdict in report.verdicts:
        if verdict.kind == "run":
            continue
        counts = found.setdefault(verdict.workflow, [0, 0])
        if verdict.status == "broken":
            counts[0] += 1
        elif verdict.status == "not_judged" and not verdict.allowed:
            counts[1] += 1
    return {workflow: counts for workflow, counts in found.items() if any(counts)}
