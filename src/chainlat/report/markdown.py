"""Markdown, for pull-request comments and job summaries."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

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
    printed_source,
    runs_heading,
    stat_rows,
    unjudged_lines,
    verdict_label,
    verdict_runs,
)

if TYPE_CHECKING:
    from chainlat.analysis.diff import DiffResult
    from chainlat.budgets import BudgetReport

from chainlat.report.waterfall import waterfall

# --- markdown -----------------------------------------------------------------------------


_MD_SPECIAL: Final = re.compile(r"([\\`*\[\]<>|])")


def md_escape(text: str) -> str:
    """Text from a trace as Markdown shows it literally, one line, safe in a table cell."""
    return _MD_SPECIAL.sub(r"\\\1", visible(text))


def _code(text: str) -> str:
    """Text from a trace as an inline code span: its delimiter is longer than any run of
    backticks inside, and ``|`` is escaped (GFM tables split cells even in code spans)."""
    shown = visible(text).replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", shown)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if shown[:1] in ("`", " ") or shown[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{shown}{pad}{fence}"


def _fenced(block: str) -> list[str]:
    """A code block whose fence no run of backticks in ``block`` can close."""
    longest = max((len(run) for run in re.findall(r"`+", block)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, block, fence]


def _stats_markdown(workflow: WorkflowStats) -> list[str]:
    lines = [
        f"### {md_escape(workflow.name)}: {runs_heading(workflow)}"
        + (f", {workflow.errors} with errors" if workflow.errors else ""),
        "",
        "| quantity / step (ms) | kind | count | p50 | p90 | p95 | p99 | max |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for row in stat_rows(workflow):
        s = row.summary
        lines.append(
            f"| {md_escape(row.label)} | {md_escape(row.kind)} | {s.count} | {ms(s.p50)} | "
            f"{ms(s.p90)} | {ms(s.p95)} | {ms(s.p99)} | {ms(s.max)} |"
        )
    lines.append("")
    return lines


def check_markdown(report: BudgetReport, *, sources: str = "") -> str:
    """The check report as GitHub-flavoured Markdown (for a pull-request comment)."""
    verdict = (
        "budgets broken"
        if report.broken
        else "limits not judged"
        if report.unjudged
        else "within budget"
    )
    lines = [
        f"## chainlat latency budgets: {verdict}",
        "",
        count(report.stats.runs, "run")
        + (f" from {_code(printed_source(sources))}" if sources else "")
        + f"; budgets from {_code(printed_source(report.budgets_source))}.",
        "",
    ]
    for name in dict.fromkeys(v.workflow for v in report.verdicts):
        workflow = report.stats.workflows.get(name)
        if workflow is not None:
            lines.extend(_stats_markdown(workflow))
        else:
            lines.extend([f"### {md_escape(name)}: no runs", ""])
        lines.extend(["| limit | budget | actual | runs | verdict |", "|---|--:|--:|--:|---|"])
        for v in report.verdicts_of(name):
            failed = v.status == "broken" or (v.status == "not_judged" and not v.allowed)
            label = f"**{verdict_label(v)}**" if failed else verdict_label(v)
            actual = actual_text(v.actual_ms, v.unit, against=v.limit_ms)
            lines.append(
                f"| {_code(limit_label(v))} | {limit_text(v.limit_ms, v.unit)} | {actual} | "
                f"{verdict_runs(v)} | {label} |"
            )
        lines.append("")
    for v in report.broken:
        violation = v.violation()
        if v.worst_run is not None and violation is not None:
            drawn = waterfall(v.worst_run, [violation])
            lines.extend([f"Worst run for {_code(v.key_path)}:", "", *_fenced(drawn), ""])
    unjudged = unjudged_lines(report.verdicts)
    if unjudged:
        lines.extend([*(f"- {md_escape(line)}" for line in unjudged), ""])
    lines.append(md_escape(report.summary))
    return "\n".join(lines) + "\n"


def stats_markdown(
    stats: Stats,
    *,
    sources: str = "",
    waterfalls: Mapping[str, Sequence[tuple[str, WorkflowRun]]] | None = None,
) -> str:
    """The statistics report as Markdown."""
    lines = [
        f"## chainlat report: {count(stats.runs, 'run')}"
        + (f" from {_code(printed_source(sources))}" if sources else ""),
        "",
    ]
    for name, workflow in stats.workflows.items():
        lines.extend(_stats_markdown(workflow))
        for label, run in (waterfalls or {}).get(name, ()):
            lines.extend([f"{md_escape(label)}:", "", *_fenced(waterfall(run)), ""])
    return "\n".join(lines) + "\n"


def diff_markdown(result: DiffResult) -> str:
    """A diff as Markdown."""
    lines = [
        f"## chainlat diff: {'regression' if result.regressions else 'no regression'}",
        "",
        f"{count(result.baseline_runs, 'baseline run')}, "
        f"{count(result.current_runs, 'current run')}.",
        "",
        "| " + " | ".join(diff_header) + " |",
        "|---|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for row, c in zip(diff_rows(result), result.comparisons, strict=True):
        cells = [md_escape(cell) for cell in row]
        if c.regression:
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines.extend(["", *(md_escape(line) for line in diff_conclusion(result).splitlines())])
    return "\n".join(lines) + "\n"
