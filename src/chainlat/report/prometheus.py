"""``chainlat check --prometheus``: the verdicts read from metrics, in every format.

The same verdicts as a trace source's, so the same tables, documents and summary line;
what differs is the header (where the metrics were read, and over which window) and that
there are no per-run statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chainlat.report.common import printed_source
from chainlat.report.jsondoc import check_json
from chainlat.report.markdown import check_markdown
from chainlat.report.text import conclusion_lines, render_text, verdict_table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from chainlat.budgets import BudgetReport

__all__ = [
    "prometheus_check_json",
    "prometheus_check_markdown",
    "prometheus_check_text",
    "prometheus_source",
]


def prometheus_source(url: str, window: str) -> str:
    """Where the verdicts were read, credentials scrubbed from the URL."""
    return printed_source(f"Prometheus {url}, the last {window}")


def prometheus_check_text(report: BudgetReport, *, source: str, width: int | None = None) -> str:
    """The verdict table of each budgeted workflow and the summary line, as plain text."""
    out: list[RenderableType | str] = [
        f"chainlat check: {printed_source(source)}; "
        f"budgets from {printed_source(report.budgets_source)}",
        "",
    ]
    for name in dict.fromkeys(v.workflow for v in report.verdicts):
        out += [f"{name}:", verdict_table(report.verdicts_of(name)), ""]
    out.extend(conclusion_lines(report))
    return render_text(out, width=width)


def prometheus_check_json(report: BudgetReport, *, source: str) -> dict[str, Any]:
    """The check document (:func:`chainlat.report.check_json`) with its ``source``."""
    document = check_json(report)
    document["source"] = printed_source(source)
    return document


def prometheus_check_markdown(report: BudgetReport, *, source: str) -> str:
    """The check report in Markdown, sourced from Prometheus."""
    return check_markdown(report, sources=source)
