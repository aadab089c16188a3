"""Presenting statistics and budget verdicts: text tables, waterfalls, Markdown, JSON,
JUnit XML and a self-contained HTML page.

Text tables use rich (imported when first rendered); waterfalls are plain ASCII so
that they read the same in a terminal, a CI log and a pytest failure message. The
HTML page is drawn with plotly, whose JavaScript is embedded in the page, so it
opens without network access.

Example::

    report = chainlat.budgets.evaluate(chainlat.traces.read_runs(["t.jsonl"]), budgets)
    print(chainlat.report.check_markdown(report))
    print(chainlat.report.waterfall(report.stats.workflows["support-chat"].slowest))
"""

from __future__ import annotations

import html
import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from chainlat._core.runs import BudgetViolation, WorkflowRun
from chainlat._core.stats import (
    QUANTITIES,
    Samples,
    Stats,
    Summary,
    WorkflowStats,
    format_percentile,
)

if TYPE_CHECKING:
    from rich.console import RenderableType

    from chainlat.analysis.diff import DiffResult
    from chainlat.analysis.tradeoff import Comparison
    from chainlat.budgets import BudgetReport, LimitVerdict

__all__ = [
    "check_json",
    "check_markdown",
    "check_text",
    "diff_json",
    "diff_markdown",
    "diff_text",
    "html_page",
    "junit_xml",
    "stats_json",
    "stats_markdown",
    "stats_text",
    "waterfall",
]

_DASH: Final = "-"
_BAR_WIDTH: Final = 40


def _ms(value: float | None) -> str:
    return _DASH if value is None else f"{value:,.1f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _limit(value: float) -> str:
    return f"{value:g} ms"


# --- rows shared by every format ----------------------------------------------------------


@dataclass(frozen=True)
class _StatRow:
    label: str
    kind: str
    summary: Summary


def _stat_rows(workflow: WorkflowStats) -> list[_StatRow]:
    rows = [
        _StatRow(
            q if q == "total" else f"{q} (critical path)", "", workflow.quantities[q].summary()
        )
        for q in QUANTITIES
    ]
    for step in workflow.steps.values():
        rows.append(_StatRow(step.name, step.kind, step.duration.summary()))
    for step in workflow.steps.values():
        if len(step.ttft):
            rows.append(_StatRow(f"{step.name} (ttft)", "ttft", step.ttft.summary()))
    return rows


def _summary_json(summary: Summary) -> dict[str, Any]:
    return {
        "count": summary.count,
        "p50_ms": summary.p50,
        "p90_ms": summary.p90,
        "p95_ms": summary.p95,
        "p99_ms": summary.p99,
        "max_ms": summary.max,
        "mean_ms": summary.mean,
    }


def _verdict_label(verdict: LimitVerdict) -> str:
    if verdict.status == "broken":
        return "BROKEN"
    if verdict.status == "ok":
        return "ok"
    if verdict.status == "not_enough_runs":
        return f"not judged: {verdict.runs} < min_runs {verdict.min_runs}"
    return "no data"


def _verdict_runs(verdict: LimitVerdict) -> str:
    if verdict.percentile is None and verdict.runs:
        return f"{verdict.broken_runs}/{verdict.runs} over"
    return str(verdict.runs)


def _limit_label(verdict: LimitVerdict) -> str:
    return verdict.target if verdict.percentile is not None else f"{verdict.target} (each run)"


# --- waterfalls ---------------------------------------------------------------------------


def waterfall(
    run: WorkflowRun,
    violations: Sequence[BudgetViolation] = (),
    *,
    width: int = _BAR_WIDTH,
    title: str | None = None,
) -> str:
    """A plain-text waterfall of one run, with the limits it broke marked on their rows.

    Example::

        print(waterfall(run, check_run(run, budget)))
    """
    total_ns = max(run.end_ns - run.start_ns, 1)
    notes: dict[int, list[str]] = {}  # row 0 is the workflow, row i the step i - 1
    for violation in violations:
        row = _row_of(run, violation)
        limit = violation.target.rsplit(".", 1)[-1] if row else violation.target
        notes.setdefault(row, []).append(
            f"<-- {limit} {violation.actual_ms:.1f} ms > {_limit(violation.limit_ms)}"
        )
    rows: list[tuple[str, str, float, float, str, str]] = [
        (
            f"invoke_workflow {run.workflow}",
            "workflow",
            0.0,
            run.total_ms,
            _bar(0, total_ns, total_ns, width),
            "",
        )
    ]
    for step in run.steps:
        start = step.start_ns - run.start_ns
        extra = f"ttft {step.ttft_ms:.1f} ms" if step.ttft_ms is not None else ""
        if step.cache_hit:
            extra = (extra + " cached").strip()
        rows.append(
            (
                "  " * (step.depth + 1) + step.name,
                step.kind,
                start / 1e6,
                step.duration_ms,
                _bar(start, step.end_ns - step.start_ns, total_ns, width),
                extra,
            )
        )
    name_width = max(len(r[0]) for r in rows)
    head = title or (
        f"{run.workflow} run"
        + (f" {run.trace_id[:16]}" if run.trace_id else "")
        + (f" ({run.origin})" if run.origin else "")
        + f": total {run.total_ms:.1f} ms"
        + (", status ERROR" if run.error else "")
    )
    scale = _limit(round(run.total_ms, 1))
    lines = [
        head,
        f"  {'step':<{name_width}}  {'kind':<9} {'start ms':>9} {'took ms':>9}  "
        f"|0{scale:>{width - 1}}|",
    ]
    for index, (label, kind, start_ms, took_ms, bar, extra) in enumerate(rows):
        found = ([extra] if extra else []) + notes.get(index, [])
        lines.append(
            f"  {label:<{name_width}}  {kind:<9} {start_ms:>9.1f} {took_ms:>9.1f}  |{bar}|"
            + ("  " + "  ".join(found) if found else "")
        )
    c = run.rollup
    lines.append(
        f"  critical path: inference {c.inference_ms:.1f} ms, data {c.data_ms:.1f} ms, "
        f"tool {c.tool_ms:.1f} ms, overhead {c.overhead_ms:.1f} ms"
    )
    return "\n".join(lines)


def _row_of(run: WorkflowRun, violation: BudgetViolation) -> int:
    """The waterfall row a violation belongs on: its step's worst occurrence, else the workflow."""
    if not violation.target.startswith("steps."):
        return 0
    name = _step_of(violation.target)
    ttft = violation.target.split(".")[-1].startswith("ttft")
    best, best_gap = 0, math.inf
    for index, step in enumerate(run.steps, 1):
        if step.name != name:
            continue
        value = step.ttft_ms if ttft else step.duration_ms
        gap = abs(value - violation.actual_ms) if value is not None else math.inf / 2
        if best == 0 or gap < best_gap:
            best, best_gap = index, gap
    return best


def _step_of(target: str) -> str:
    """The step name in ``steps."chat gpt-4o".max``."""
    inner = target[len("steps.") :].rsplit(".", 1)[0]
    if inner.startswith('"') and inner.endswith('"'):
        return str(json.loads(inner))
    return inner


def _bar(start_ns: int, length_ns: int, total_ns: int, width: int) -> str:
    begin = min(int(start_ns * width / total_ns), width - 1)
    cells = max(1, math.ceil(length_ns * width / total_ns)) if length_ns > 0 else 1
    cells = min(cells, width - begin)
    return " " * begin + "#" * cells + " " * (width - begin - cells)


# --- text (rich) --------------------------------------------------------------------------


def _stats_table(workflow: WorkflowStats) -> RenderableType:
    from rich.table import Table

    table = Table(
        title=f"{workflow.name}: {workflow.runs} runs"
        + (f", {workflow.errors} with errors" if workflow.errors else ""),
        title_justify="left",
        show_edge=False,
    )
    table.add_column("quantity / step (ms)")
    table.add_column("kind")
    for name in ("count", "p50", "p90", "p95", "p99", "max"):
        table.add_column(name, justify="right")
    for row in _stat_rows(workflow):
        s = row.summary
        table.add_row(
            row.label, row.kind, str(s.count), _ms(s.p50), _ms(s.p90), _ms(s.p95), _ms(s.p99),
            _ms(s.max),
        )  # fmt: skip
    return table


def _verdict_table(verdicts: Sequence[LimitVerdict]) -> RenderableType:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False)
    table.add_column("limit")
    table.add_column("budget", justify="right")
    table.add_column("actual", justify="right")
    table.add_column("runs", justify="right")
    table.add_column("verdict")
    for v in verdicts:
        style = {"broken": "bold red", "ok": "green"}.get(v.status, "yellow")
        actual = _ms(v.actual_ms) + (" ms" if v.actual_ms is not None else "")
        table.add_row(
            _limit_label(v),
            _limit(v.limit_ms),
            actual,
            _verdict_runs(v),
            Text(_verdict_label(v), style=style),
        )
    return table


def render_text(
    renderables: Iterable[RenderableType | str], *, width: int | None = None, color: bool = False
) -> str:
    """Render rich objects (and strings) to text, for logs and captured output."""
    import io

    from rich.console import Console

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
            console.print(item, markup=False, soft_wrap=True)
        else:
            console.print(item)
    return buffer.getvalue()


def check_renderables(report: BudgetReport, *, sources: str = "") -> list[RenderableType | str]:
    """The check report as rich renderables: per workflow, statistics then verdicts."""
    stats = report.stats
    budgeted = list(dict.fromkeys(v.workflow for v in report.verdicts))
    out: list[RenderableType | str] = [
        f"chainlat check: {_count(stats.runs, 'run')} of "
        f"{_count(len(stats.workflows), 'workflow')}"
        + (f" from {sources}" if sources else "")
        + f"; budgets from {report.budgets_source}",
        "",
    ]
    for name in budgeted:
        workflow = stats.workflows.get(name)
        if workflow is None:
            out.append(f"{name}: no runs in the traces")
        else:
            out.append(_stats_table(workflow))
        out.append(_verdict_table(report.verdicts_of(name)))
        out.append("")
    others = [w for w in stats.workflows if w not in budgeted]
    if others:
        out.append(
            "not budgeted: " + ", ".join(f"{w} ({stats.workflows[w].runs} runs)" for w in others)
        )
        out.append("")
    for verdict in report.broken:
        if verdict.worst_run is not None and verdict.actual_ms is not None:
            violation = BudgetViolation(
                verdict.workflow, verdict.target, verdict.limit_ms, verdict.actual_ms
            )
            out.append(f"worst run for {verdict.key_path}:")
            out.append(waterfall(verdict.worst_run, [violation]))
            out.append("")
    out.append(_conclusion(report))
    return out


def _conclusion(report: BudgetReport) -> str:
    broken = report.broken
    judged = sum(1 for v in report.verdicts if v.status in ("ok", "broken"))
    if broken:
        names = ", ".join(v.key_path for v in broken)
        return f"BROKEN: {len(broken)} of {judged} judged limits ({names})"
    return f"OK: all {judged} judged limits kept"


def check_text(report: BudgetReport, *, sources: str = "", width: int | None = None) -> str:
    """The check report as plain text."""
    return render_text(check_renderables(report, sources=sources), width=width)


def stats_renderables(
    stats: Stats, *, sources: str = "", waterfalls: Mapping[str, Sequence[tuple[str, WorkflowRun]]]
) -> list[RenderableType | str]:
    """The statistics report: a table per workflow and the waterfalls given for it."""
    out: list[RenderableType | str] = [
        f"chainlat report: {_count(stats.runs, 'run')} of "
        f"{_count(len(stats.workflows), 'workflow')}" + (f" from {sources}" if sources else ""),
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


# --- markdown -----------------------------------------------------------------------------


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def _stats_markdown(workflow: WorkflowStats) -> list[str]:
    lines = [
        f"### {_md(workflow.name)}: {workflow.runs} runs"
        + (f", {workflow.errors} with errors" if workflow.errors else ""),
        "",
        "| quantity / step (ms) | kind | count | p50 | p90 | p95 | p99 | max |",
        "|---|---|--:|--:|--:|--:|--:|--:|",
    ]
    for row in _stat_rows(workflow):
        s = row.summary
        lines.append(
            f"| {_md(row.label)} | {row.kind} | {s.count} | {_ms(s.p50)} | {_ms(s.p90)} | "
            f"{_ms(s.p95)} | {_ms(s.p99)} | {_ms(s.max)} |"
        )
    lines.append("")
    return lines


def check_markdown(report: BudgetReport, *, sources: str = "") -> str:
    """The check report as GitHub-flavoured Markdown (for a pull-request comment)."""
    verdict = "budgets broken" if report.broken else "within budget"
    lines = [
        f"## chainlat latency budgets: {verdict}",
        "",
        f"{report.stats.runs} runs"
        + (f" from `{sources}`" if sources else "")
        + f"; budgets from `{report.budgets_source}`.",
        "",
    ]
    for name in dict.fromkeys(v.workflow for v in report.verdicts):
        workflow = report.stats.workflows.get(name)
        if workflow is not None:
            lines.extend(_stats_markdown(workflow))
        else:
            lines.extend([f"### {_md(name)}: no runs", ""])
        lines.extend(["| limit | budget | actual | runs | verdict |", "|---|--:|--:|--:|---|"])
        for v in report.verdicts_of(name):
            label = f"**{_verdict_label(v)}**" if v.status == "broken" else _verdict_label(v)
            actual = _ms(v.actual_ms) + (" ms" if v.actual_ms is not None else "")
            lines.append(
                f"| `{_md(_limit_label(v))}` | {_limit(v.limit_ms)} | {actual} | "
                f"{_verdict_runs(v)} | {label} |"
            )
        lines.append("")
    for v in report.broken:
        if v.worst_run is not None and v.actual_ms is not None:
            violation = BudgetViolation(v.workflow, v.target, v.limit_ms, v.actual_ms)
            drawn = waterfall(v.worst_run, [violation])
            lines.extend([f"Worst run for `{_md(v.key_path)}`:", "", "```", drawn, "```", ""])
    lines.append(_conclusion(report))
    return "\n".join(lines) + "\n"


def stats_markdown(
    stats: Stats,
    *,
    sources: str = "",
    waterfalls: Mapping[str, Sequence[tuple[str, WorkflowRun]]] | None = None,
) -> str:
    """The statistics report as Markdown."""
    lines = [
        f"## chainlat report: {stats.runs} runs" + (f" from `{sources}`" if sources else ""),
        "",
    ]
    for name, workflow in stats.workflows.items():
        lines.extend(_stats_markdown(workflow))
        for label, run in (waterfalls or {}).get(name, ()):
            lines.extend([f"{label}:", "", "```", waterfall(run), "```", ""])
    return "\n".join(lines) + "\n"


# --- json ---------------------------------------------------------------------------------


def _workflow_json(workflow: WorkflowStats) -> dict[str, Any]:
    return {
        "runs": workflow.runs,
        "errors": workflow.errors,
        "quantities": {q: _summary_json(workflow.quantities[q].summary()) for q in QUANTITIES},
        "steps": {
            step.name: {
                "kind": step.kind,
                "duration": _summary_json(step.duration.summary()),
                "ttft": _summary_json(step.ttft.summary()) if len(step.ttft) else None,
            }
            for step in workflow.steps.values()
        },
        "slowest_trace_id": workflow.slowest.trace_id if workflow.slowest else None,
    }


def stats_json(stats: Stats) -> dict[str, Any]:
    """The statistics as a JSON-ready dict (milliseconds)."""
    return {
        "runs": stats.runs,
        "percentile_method": "nearest-rank",
        "workflows": {name: _workflow_json(w) for name, w in stats.workflows.items()},
    }


def check_json(report: BudgetReport) -> dict[str, Any]:
    """The check report as a JSON-ready dict."""
    return {
        "ok": report.ok,
        "judged": report.judged,
        "budgets": report.budgets_source,
        **stats_json(report.stats),
        "verdicts": [
            {
                "workflow": v.workflow,
                "target": v.target,
                "key_path": v.key_path,
                "kind": "percentile" if v.percentile is not None else "run",
                "percentile": v.percentile,
                "limit_ms": v.limit_ms,
                "actual_ms": v.actual_ms,
                "status": v.status,
                "runs": v.runs,
                "broken_runs": v.broken_runs,
                "min_runs": v.min_runs,
                "worst_trace_id": v.worst_run.trace_id if v.worst_run else None,
            }
            for v in report.verdicts
        ],
    }


# --- JUnit XML ----------------------------------------------------------------------------


def junit_xml(report: BudgetReport) -> str:
    """The verdicts as a JUnit XML report: one test case per limit, for CI test tabs.

    A broken limit is a failure (its message names the limit and the values,
    its text holds the worst run's waterfall); a limit without enough runs or
    without data is skipped.
    """
    failures = len(report.broken)
    skipped = sum(1 for v in report.verdicts if v.status in ("not_enough_runs", "no_data"))
    suites = ET.Element(
        "testsuites",
        name="chainlat",
        tests=str(len(report.verdicts)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="chainlat latency budgets",
        tests=str(len(report.verdicts)),
        failures=str(failures),
        errors="0",
        skipped=str(skipped),
    )
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="budgets", value=report.budgets_source)
    for v in report.verdicts:
        case = ET.SubElement(
            suite, "testcase", classname=f"chainlat.{v.workflow}", name=v.target, time="0"
        )
        over = (
            f"{v.broken_runs} of {v.runs} runs over"
            if v.percentile is None
            else f"{format_percentile(v.percentile)} of {v.runs} runs"
        )
        detail = f"{v.key_path}: {_ms(v.actual_ms)} ms > {_limit(v.limit_ms)} ({over})"
        if v.status == "broken":
            failure = ET.SubElement(case, "failure", message=detail, type="LatencyBudgetExceeded")
            if v.worst_run is not None and v.actual_ms is not None:
                violation = BudgetViolation(v.workflow, v.target, v.limit_ms, v.actual_ms)
                failure.text = waterfall(v.worst_run, [violation])
        elif v.status in ("not_enough_runs", "no_data"):
            ET.SubElement(case, "skipped", message=f"{v.key_path}: {_verdict_label(v)}")
        else:
            ET.SubElement(
                case, "system-out"
            ).text = f"{v.key_path}: {_ms(v.actual_ms)} ms <= {_limit(v.limit_ms)}"
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")


# --- HTML ---------------------------------------------------------------------------------

_MAX_POINTS: Final = 2000
_KIND_COLOURS: Final = {
    "inference": "#4c78a8",
    "data": "#f58518",
    "tool": "#54a24b",
    "overhead": "#9d9d9d",
}


def _spread(samples: Samples, *, limit: int = _MAX_POINTS) -> list[float]:
    """At most ``limit`` evenly spaced order statistics: the shape of the distribution, small."""
    values = samples.sorted()
    if len(values) <= limit:
        return values
    step = (len(values) - 1) / (limit - 1)
    return [values[round(i * step)] for i in range(limit)]


_NO_DATA: Final = {"tradeoff": "No run recorded chainlat.outcome.success: nothing to plot."}


def html_page(
    stats: Stats,
    *,
    title: str = "chainlat latency report",
    sources: str = "",
    waterfalls: Mapping[str, Sequence[tuple[str, WorkflowRun]]] | None = None,
    tradeoff: Comparison | None = None,
) -> str:
    """One self-contained HTML page with the charts; plotly.js is inlined, so it works offline.

    Charts: latency distribution per workflow, the inference/data/tool/overhead
    split per workflow, per-step percentiles, time to first token per model call;
    with ``tradeoff``, p95 latency against success rate per variant
    (:func:`chainlat.analysis.tradeoff.tradeoff_figure`). Needs plotly
    (``pip install 'chainlat[html]'``).
    """
    import plotly.graph_objects as go

    figures: list[tuple[str, str, Any]] = []

    distribution = go.Figure()
    for name, workflow in stats.workflows.items():
        distribution.add_trace(
            go.Box(y=_spread(workflow.quantities["total"]), name=name, boxpoints=False)
        )
    distribution.update_layout(yaxis_title="total ms", showlegend=False)
    figures.append(("distribution", "Latency distribution per workflow", distribution))

    split = go.Figure()
    names = list(stats.workflows)
    for quantity in ("inference", "data", "tool", "overhead"):
        means = [stats.workflows[n].quantities[quantity].summary().mean or 0.0 for n in names]
        split.add_trace(
            go.Bar(
                y=names,
                x=means,
                name=quantity,
                orientation="h",
                marker_color=_KIND_COLOURS[quantity],
            )
        )
    split.update_layout(barmode="stack", xaxis_title="mean critical-path ms")
    figures.append(("split", "Where the time goes (critical path, mean per run)", split))

    steps = go.Figure()
    for q in ("p50", "p95", "p99"):
        labels, values = [], []
        for name, workflow in stats.workflows.items():
            for step in workflow.steps.values():
                labels.append(f"{name}: {step.name}")
                values.append(getattr(step.duration.summary(), q))
        steps.add_trace(go.Bar(x=labels, y=values, name=q))
    steps.update_layout(barmode="group", yaxis_title="step ms")
    figures.append(("steps", "Per-step percentiles", steps))

    ttft = go.Figure()
    by_call: dict[str, Samples] = {}
    for workflow in stats.workflows.values():
        for step in workflow.steps.values():
            if len(step.ttft):
                merged = by_call.setdefault(step.name, Samples())
                for value in step.ttft.sorted():
                    merged.add(value)
    for name, samples in by_call.items():
        ttft.add_trace(go.Box(y=_spread(samples), name=name, boxpoints=False))
    ttft.update_layout(yaxis_title="time to first token ms", showlegend=False)
    figures.append(("ttft", "Time to first token per model call", ttft))

    if tradeoff is not None:
        from chainlat.analysis.tradeoff import tradeoff_figure

        heading = "Latency against success rate per variant (p95, Wilson 95 % interval)"
        figures.append(("tradeoff", heading, tradeoff_figure(tradeoff)))

    parts: list[str] = []
    for index, (key, heading, figure) in enumerate(figures):
        figure.update_layout(margin={"l": 60, "r": 20, "t": 30, "b": 60}, height=420)
        parts.append(f'<section id="{key}"><h2>{html.escape(heading)}</h2>')
        if not figure.data:
            parts.append(f"<p>{_NO_DATA.get(key, 'No data.')}</p>")
        parts.append(
            figure.to_html(
                full_html=False,
                include_plotlyjs=index == 0,  # inline once: the page needs no network
                div_id=f"chart-{key}",
                config={"displaylogo": False, "responsive": True},
            )
        )
        parts.append("</section>")

    tables = []
    for workflow in stats.workflows.values():
        rows = "".join(
            "<tr><td>{}</td><td>{}</td>{}</tr>".format(
                html.escape(r.label),
                html.escape(r.kind),
                "".join(
                    f'<td class="n">{html.escape(v)}</td>'
                    for v in (
                        str(r.summary.count),
                        _ms(r.summary.p50),
                        _ms(r.summary.p90),
                        _ms(r.summary.p95),
                        _ms(r.summary.p99),
                        _ms(r.summary.max),
                    )
                ),
            )
            for r in _stat_rows(workflow)
        )
        tables.append(
            f"<h3>{html.escape(workflow.name)}: {workflow.runs} runs</h3>"
            "<table><thead><tr><th>quantity / step (ms)</th><th>kind</th><th>count</th>"
            "<th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>max</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
        for label, run in (waterfalls or {}).get(workflow.name, ()):
            tables.append(f"<h4>{html.escape(label)}</h4><pre>{html.escape(waterfall(run))}</pre>")
    subtitle = f"{stats.runs} runs" + (f" from {html.escape(sources)}" if sources else "")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
        "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd}"
        "td.n{text-align:right;font-variant-numeric:tabular-nums}pre{font-size:12px}</style>"
        f"</head><body><h1>{html.escape(title)}</h1><p>{subtitle}; percentiles by nearest "
        "rank.</p>"
        + "".join(parts)
        + '<section id="tables"><h2>Statistics</h2>'
        + "".join(tables)
        + "</section></body></html>\n"
    )


# --- diffs -----------------------------------------------------------------------------------


def _pct(change: float | None) -> str:
    if change is None:
        return _DASH
    if math.isinf(change):
        return "new"
    return f"{change:+.1%}"


def _diff_rows(result: DiffResult) -> list[list[str]]:
    rows = []
    for c in result.comparisons:
        item = c.item if c.kind != "quantity" or c.item == "total" else f"{c.item} (critical path)"
        verdict = c.verdict.upper() + " (REGRESSION)" if c.regression else c.verdict
        rows.append(
            [
                c.workflow,
                item,
                f"{c.n_before}/{c.n_after}",
                f"{_ms(c.p50_before)} -> {_ms(c.p50_after)}",
                _pct(c.p50_change),
                f"{_ms(c.p95_before)} -> {_ms(c.p95_after)}",
                _pct(c.p95_change),
                _DASH if c.p_value is None else f"{c.p_value:.2g}",
                verdict,
            ]
        )
    return rows


_DIFF_HEADER: Final = [
    "workflow",
    "quantity / step",
    "runs",
    "p50 ms",
    "p50",
    "p95 ms",
    "p95",
    "p (Holm)",
    "verdict",
]


def _diff_conclusion(result: DiffResult) -> str:
    rule = (
        f"beyond noise: Mann-Whitney U and tail test, Holm-adjusted p < {result.alpha:g}; "
        f"regression: beyond noise and p50 or p95 slower by more than {result.threshold:.0%}"
    )
    found = result.regressions
    if found:
        names = ", ".join(f"{c.workflow}: {c.item}" for c in found)
        return f"REGRESSION: {len(found)} ({names})\n{rule}"
    return f"OK: no regression in {result.judged} comparisons\n{rule}"


def diff_text(result: DiffResult, *, width: int | None = None) -> str:
    """A diff as a text table."""
    from rich.table import Table
    from rich.text import Text

    table = Table(show_edge=False)
    for index, name in enumerate(_DIFF_HEADER):
        table.add_column(name, justify="right" if 2 <= index <= 7 else "left")
    for row, c in zip(_diff_rows(result), result.comparisons, strict=True):
        style = "bold red" if c.regression else "green" if c.verdict == "faster" else ""
        table.add_row(*row[:-1], Text(row[-1], style=style))
    head = (
        f"chainlat diff: {result.baseline_runs} baseline runs, {result.current_runs} current runs"
    )
    return render_text([head, "", table, "", _diff_conclusion(result)], width=width or 140)


def diff_markdown(result: DiffResult) -> str:
    """A diff as Markdown."""
    lines = [
        f"## chainlat diff: {'regression' if result.regressions else 'no regression'}",
        "",
        f"{result.baseline_runs} baseline runs, {result.current_runs} current runs.",
        "",
        "| " + " | ".join(_DIFF_HEADER) + " |",
        "|---|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    for row, c in zip(_diff_rows(result), result.comparisons, strict=True):
        cells = [_md(cell) for cell in row]
        if c.regression:
            cells[-1] = f"**{cells[-1]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines.extend(["", *_diff_conclusion(result).splitlines()])
    return "\n".join(lines) + "\n"


def diff_json(result: DiffResult) -> dict[str, Any]:
    """A diff as a JSON-ready dict."""
    return {
        "regression": bool(result.regressions),
        "threshold": result.threshold,
        "alpha": result.alpha,
        "baseline_runs": result.baseline_runs,
        "current_runs": result.current_runs,
        "comparisons": [
            {
                "workflow": c.workflow,
                "item": c.item,
                "kind": c.kind,
                "n_before": c.n_before,
                "n_after": c.n_after,
                "p50_before_ms": c.p50_before,
                "p50_after_ms": c.p50_after,
                "p50_change": c.p50_change,
                "p95_before_ms": c.p95_before,
                "p95_after_ms": c.p95_after,
                "p95_change": c.p95_change,
                "p_value": c.p_value,
                "verdict": c.verdict,
                "regression": c.regression,
            }
            for c in result.comparisons
        ],
    }
