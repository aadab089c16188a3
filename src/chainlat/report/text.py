"""Text for a terminal: rich tables of statistics, verdicts and diffs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from chainlat._core.redact import visible
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import (
    Stats,
    WorkflowStats,
)
from chainlat.report.common import (
    actual_text,
    count,
    diff_conclusion,
    diff_header,
    diff_rows,
    limit_label,
    limit_text,
    ms,
    runs_heading,
    stat_rows,
    unjudged_lines,
    verdict_label,
    verdict_runs,
    verdict_style,
)

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.text import Text

    from chainlat.analysis.diff import DiffResult
    from chainlat.budgets import BudgetReport, LimitVerdict

from chainlat.report.waterfall import waterfall

# --- text (rich) --------------------------------------------------------------------------


def _cell(text: str, style: str = "") -> Text:
    """Text from a trace as a rich cell: never read as markup, controls made visible."""
    from rich.text import Text

    return Text(visible(text, newline=True), style=style)


def _stats_table(workflow: WorkflowStats) -> RenderableType:
    from rich.table import Table

    table = Table(
        title=_cell(f"{workflow.name}: {runs_heading(workflow)}"),
        title_justify="left",
        show_edge=False,
    )
    table.add_column("quantity / step (ms)")
    table.add_column("kind")
    for name in ("count", "p50", "p90", "p95", "p99", "max"):
        table.add_column(name, justify="right")
    for row in stat_rows(workflow):
        s = row.summary
        table.add_row(
            _cell(row.label), _cell(row.kind), str(s.count), ms(s.p50), ms(s.p90), ms(s.p95),
            ms(s.p99), ms(s.max),
        )  # fmt: skip
    return table


def verdict_table(verdicts: Sequence[LimitVerdict]) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False)
    table.add_column("limit")
    table.add_column("budget", justify="right")
    table.add_column("actual", justify="right")
    table.add_column("runs", justify="right")
    table.add_column("verdict")
    for v in verdicts:
        style = verdict_style(v)
        actual = actual_text(v.actual_ms, v.unit, against=v.limit_ms)
        table.add_row(
            _cell(limit_label(v)),
            limit_text(v.limit_ms, v.unit),
            actual,
            verdict_runs(v),
            Text(verdict_label(v), style=style),
        )
    return table


def render_text(
    renderables: Iterable[RenderableType | str], *, width: int | None = None, color: bool = False
) -> str:
    """Render rich objects (and strings) to text, for logs and captured output; tables
    fitted to the width without cutting a value (:func:`~chainlat.report.tables.fit_table`)."""
    import io

    from rich.console import Console
    from rich.table import Table

    from chainlat.report.tables import fit_table

    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=width or 120,
        force_terminal=color,
        color_system="standard" if color else None,
        highlight=False,
        soft_wrap=False,
    )
    for item in renderables:
        if isinstance(item, str):
            console.print(visible(item, newline=True), markup=False, soft_wrap=True)
        elif isinstance(item, Table):
            for part in fit_table(item, console.width):
                console.print(part)
        else:
            console.print(item)
    return buffer.getvalue()


def check_renderables(report: BudgetReport, *, sources: str = "") -> list[RenderableType | str]:
    """The check report as rich renderables: per workflow, statistics then verdicts."""
    stats = report.stats
    budgeted = list(dict.fromkeys(v.workflow for v in report.verdicts))
    # The heading cleaned whole, once (render_text hands a cleaned line on as it is).
    out: list[RenderableType | str] = [
        visible(
            f"chainlat check: {count(stats.runs, 'run')} of "
            f"{count(len(stats.workflows), 'workflow')}"
            + (f" from {sources}" if sources else "")
            + f"; budgets from {report.budgets_source}"
        ),
        "",
    ]
    for name in budgeted:
        workflow = stats.workflows.get(name)
        if workflow is None:
            out.append(f"{name}: no runs in the traces")
        else:
            out.append(_stats_table(workflow))
        out.append(verdict_table(report.verdicts_of(name)))
        out.append("")
    others = [w for w in stats.workflows if w not in budgeted]
    if others:
        out.append(
            "not budgeted: "
            + ", ".join(f"{w} ({count(stats.workflows[w].runs, 'run')})" for w in others)
        )
        out.append("")
    for verdict in report.broken:
        violation = verdict.violation()
        if verdict.worst_run is not None and violation is not None:
            out.append(f"worst run for {verdict.key_path}:")
            out.append(waterfall(verdict.worst_run, [violation]))
            out.append("")
    out.extend(conclusion_lines(report))
    return out


def conclusion_lines(report: BudgetReport) -> list[str]:
    """The end of every check report: the limits broken and not judged, then the summary."""
    lines = [f"BROKEN: {v.key_path}" for v in report.broken]
    lines.extend(unjudged_lines(report.verdicts))
    return [*lines, report.summary]


def conclusion(report: BudgetReport) -> str:
    """The summary line, with the limits broken and not judged above it."""
    return "\n".join(conclusion_lines(report))


def check_text(report: BudgetReport, *, sources: str = "", width: int | None = None) -> str:
    """The check report as plain text."""
    return render_text(check_renderables(report, sources=sources), width=width)


def stats_renderables(
    stats: Stats, *, sources: str = "", waterfalls: Mapping[str, Sequence[tuple[str, WorkflowRun]]]
) -> list[RenderableType | str]:
    """The statistics report: a table per workflow and the waterfalls given for it."""
    out: list[RenderableType | str] = [
        visible(
            f"chainlat report: {count(stats.runs, 'run')} of "
            f"{count(len(stats.workflows), 'workflow')}" + (f" from {sources}" if sources else "")
        ),
        "",
    ]
    for name, workflow in stats.workflows.items():
        out.append(_stats_table(workflow))
        out.append("")
        for label, run in waterfalls.get(name, ()):
            out.append(f"{label}:")
            out.append(waterfall(run))
            out.append("")
    return out


def stats_text(
    stats: Stats,
    *,
    sources: str = "",
    waterfalls: Mapping[str, Sequence[tuple[str, WorkflowRun]]] | None = None,
    width: int | None = None,
) -> str:
    """The statistics report as plain text."""
    return render_text(
        stats_renderables(stats, sources=sources, waterfalls=waterfalls or {}), width=width
    )


def diff_text(result: DiffResult, *, width: int | None = None) -> str:
    """A diff as a text table."""
    return render_text(diff_renderables(result), width=width or 140)


def diff_renderables(result: DiffResult) -> list[RenderableType | str]:
    """A diff as rich renderables: a heading, the table of comparisons, the conclusion."""
    from rich.table import Table

    table = Table(show_edge=False)
    for index, name in enumerate(diff_header):
        table.add_column(name, justify="right" if 2 <= index <= 7 else "left")
    for row, c in zip(diff_rows(result), result.comparisons, strict=True):
        style = "bold red" if c.regression else "green" if c.verdict == "faster" else ""
        table.add_row(*(_cell(cell) for cell in row[:-1]), _cell(row[-1], style))
    head = (
        f"chainlat diff: {count(result.baseline_runs, 'baseline run')}, "
        f"{count(result.current_runs, 'current run')}"
    )
    return [head, "", table, "", diff_conclusion(result)]
