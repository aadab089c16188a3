"""Self-contained HTML pages with plotly charts (plotly.js inlined, so they open offline)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from chainlat._core.redact import visible
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import (
    Samples,
    Stats,
    WorkflowStats,
)
from chainlat.analysis.whatif import KINDS
from chainlat.report.common import (
    count,
    ms,
    printed_source,
    shown_name,
    stat_rows,
)
from chainlat.report.waterfall import waterfall

if TYPE_CHECKING:
    from chainlat.analysis.tradeoff import Comparison
    from chainlat.report._explorer import RunExplorer

# --- HTML ---------------------------------------------------------------------------------


def _plain_text(figure: Any) -> Any:
    """``figure`` with every name, label and text escaped for plotly, which reads its strings
    as markup (``<a href>`` a link, ``<br>`` a break; plotly shows ``&lt;`` as ``<``)."""
    for trace in figure.data:
        for key in ("name", "legendgroup", "text", "hovertext", "x", "y"):
            value = getattr(trace, key, None)
            if isinstance(value, str):
                trace[key] = html.escape(value, quote=False)
            elif isinstance(value, tuple | list) and any(isinstance(v, str) for v in value):
                trace[key] = [
                    html.escape(v, quote=False) if isinstance(v, str) else v for v in value
                ]
    return figure


_PLOTLY_CONFIG: Final = {"displaylogo": False, "responsive": True, "typesetMath": False}
"""``typesetMath`` off: a name between dollar signs is a name, not LaTeX for MathJax."""


def _h(text: str) -> str:
    """Text from a trace in HTML: escaped, controls made visible, lone surrogates replaced
    (which the page's UTF-8 and plotly's JSON encoder cannot hold)."""
    return html.escape(visible(text, newline=True))


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
    explorer: RunExplorer | None = None,
) -> str:
    """One self-contained HTML page with the charts; plotly.js is inlined, so it works offline.

    Charts: latency distribution per workflow, the inference/data/tool/overhead
    split per workflow, per-step percentiles, time to first token per model call;
    with ``tradeoff``, p95 latency against success rate per variant
    (:func:`tradeoff_figure`). With ``explorer`` (a
    :class:`~chainlat.report.RunExplorer` the runs went through), the page has the
    run explorer, and the charts draw one series per workflow and variant when the
    runs have more than one variant. Needs plotly (``pip install 'chainlat[html]'``).

    Example::

        explorer = RunExplorer()
        stats = aggregate(explorer.watch(read_runs(["traces.jsonl"])))
        Path("report.html").write_text(html_page(stats, explorer=explorer))
    """
    series = _series(stats, explorer)
    split_by_variant = any(variant is not None for _, variant, _ in series)
    note = (
        '<p class="note">One series per workflow and variant: runs of different variants '
        "are never pooled in a chart.</p>"
        if split_by_variant
        else ""
    )
    figures: list[tuple[str, str, Any]] = [
        ("distribution", "Latency distribution per workflow", _distribution_figure(series)),
        ("split", "Where the time goes (critical path, mean per run)", _split_figure(series)),
        ("steps", "Per-step percentiles", _steps_figure(series)),
        ("ttft", "Time to first token per model call", _ttft_figure(series)),
    ]
    if tradeoff is not None:
        heading = "Latency against success rate per variant (p95, Wilson 95 % interval)"
        figures.append(("tradeoff", heading, tradeoff_figure(tradeoff)))

    subtitle = count(stats.runs, "run") + (
        f" from {_h(printed_source(sources))}" if sources else ""
    )
    return (
        _head(title)
        + f"<h1>{_h(title)}</h1><p>{subtitle}; percentiles by nearest rank.</p>"
        + (explorer.html() if explorer is not None else "")
        + _chart_sections(figures, note)
        + '<section id="tables"><h2>Statistics</h2>'
        + _statistics_tables(stats, waterfalls, explorer)
        + "</section></body></html>\n"
    )


_Series = list[tuple[str, str | None, WorkflowStats]]
"""The charts' series: label, variant (``None`` when runs are not split by variant), stats."""


def _distribution_figure(series: _Series) -> Any:
    import plotly.graph_objects as go

    distribution = go.Figure()
    for label, _, workflow in series:
        distribution.add_trace(
            go.Box(y=_spread(workflow.quantities["total"]), name=label, boxpoints=False)
        )
    distribution.update_layout(yaxis_title="total ms", showlegend=False)
    return distribution


def _split_figure(series: _Series) -> Any:
    import plotly.graph_objects as go

    split = go.Figure()
    for quantity in ("inference", "data", "tool", "overhead"):
        means = [w.quantities[quantity].summary().mean or 0.0 for _, _, w in series]
        split.add_trace(
            go.Bar(
                y=[label for label, _, _ in series],
                x=means,
                name=quantity,
                orientation="h",
                marker_color=_KIND_COLOURS[quantity],
            )
        )
    split.update_layout(barmode="stack", xaxis_title="mean critical-path ms")
    return split


def _steps_figure(series: _Series) -> Any:
    import plotly.graph_objects as go

    steps = go.Figure()
    for q in ("p50", "p95", "p99"):
        labels, values = [], []
        for label, _, workflow in series:
            for step in workflow.steps.values():
                labels.append(f"{label}: {shown_name(step.name)}")
                values.append(getattr(step.duration.summary(), q))
        steps.add_trace(go.Bar(x=labels, y=values, name=q))
    steps.update_layout(barmode="group", yaxis_title="step ms")
    return steps


def _ttft_figure(series: _Series) -> Any:
    import plotly.graph_objects as go

    ttft = go.Figure()
    by_call: dict[tuple[str, str | None], Samples] = {}
    for _, variant, workflow in series:
        for step in workflow.steps.values():
            if len(step.ttft):
                merged = by_call.setdefault((step.name, variant), Samples())
                for value in step.ttft.sorted():
                    merged.add(value)
    for (name, variant), samples in by_call.items():
        label = (
            shown_name(name) if variant is None else f"{shown_name(name)} · {shown_name(variant)}"
        )
        ttft.add_trace(go.Box(y=_spread(samples), name=label, boxpoints=False))
    ttft.update_layout(yaxis_title="time to first token ms", showlegend=False)
    return ttft


def _chart_sections(figures: list[tuple[str, str, Any]], note: str) -> str:
    """One section per chart; the first inlines plotly.js. ``note`` under the first four."""
    parts: list[str] = []
    for index, (key, heading, figure) in enumerate(figures):
        figure.update_layout(margin={"l": 60, "r": 20, "t": 30, "b": 60}, height=420)
        parts.append(f'<section id="{key}"><h2>{html.escape(heading)}</h2>')
        if index < 4:
            parts.append(note)
        if not figure.data:
            parts.append(f"<p>{_NO_DATA.get(key, 'No data.')}</p>")
        parts.append(
            _plain_text(figure).to_html(
                full_html=False,
                include_plotlyjs=index == 0,  # inline once: the page needs no network
                div_id=f"chart-{key}",
                config=_PLOTLY_CONFIG,
            )
        )
        parts.append("</section>")
    return "".join(parts)


def _statistics_tables(
    stats: Stats,
    waterfalls: Mapping[str, Sequence[tuple[str, WorkflowRun]]] | None,
    explorer: RunExplorer | None,
) -> str:
    """A table of statistics per workflow, each followed by its waterfalls."""
    tables = []
    for workflow in stats.workflows.values():
        pooled = (
            f" (all {len(explorer.variants)} variants together)"
            if explorer is not None and len(explorer.variants) > 1
            else ""
        )
        tables.append(
            f"<h3>{_h(shown_name(workflow.name))}: {count(workflow.runs, 'run')}{pooled}</h3>"
            "<table><thead><tr><th>quantity / step (ms)</th><th>kind</th><th>count</th>"
            "<th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>max</th></tr></thead>"
            f"<tbody>{_statistics_rows(workflow)}</tbody></table>"
        )
        for label, run in (waterfalls or {}).get(workflow.name, ()):
            tables.append(f"<h4>{_h(shown_name(label))}</h4><pre>{_h(waterfall(run))}</pre>")
    return "".join(tables)


def _statistics_rows(workflow: WorkflowStats) -> str:
    return "".join(
        "<tr><td>{}</td><td>{}</td>{}</tr>".format(
            _h(shown_name(r.label)),
            _h(r.kind),
            "".join(
                f'<td class="n">{html.escape(v)}</td>'
                for v in (
                    str(r.summary.count),
                    ms(r.summary.p50),
                    ms(r.summary.p90),
                    ms(r.summary.p95),
                    ms(r.summary.p99),
                    ms(r.summary.max),
                )
            ),
        )
        for r in stat_rows(workflow)
    )


_STYLE: Final = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
    "table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #8884}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}pre{font-size:12px}"
    ".note{color:#888;font-size:.9em}"
    "@media (prefers-color-scheme:dark){body{background:#16191d;color:#e6e6e6}}"
)


def _head(title: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f"<title>{_h(title)}</title><style>{_STYLE}</style></head><body>"
    )


def _series(
    stats: Stats, explorer: RunExplorer | None
) -> list[tuple[str, str | None, WorkflowStats]]:
    """The charts' series: one per workflow, or per workflow and variant when the runs
    have more than one variant (so that a chart never pools them silently)."""
    if explorer is None or len(explorer.by_variant) < 2:
        return [(shown_name(name), None, w) for name, w in stats.workflows.items()]
    found: list[tuple[str, str | None, WorkflowStats]] = []
    for name in stats.workflows:
        for variant, by_variant in explorer.by_variant.items():
            workflow = by_variant.workflows.get(name)
            if workflow is not None:
                found.append((f"{shown_name(name)} · {shown_name(variant)}", variant, workflow))
    return found


def tradeoff_figure(comparison: Comparison) -> Any:
    """A plotly figure: p95 latency against success rate per variant, Pareto front marked.

    One colour per workflow; error bars are the Wilson 95 % intervals; the front
    is joined by a dashed line and its points are stars. Variants without
    outcomes are left out. Needs plotly (``pip install 'chainlat[html]'``).

    Example::

        tradeoff_figure(chainlat.compare("traces.jsonl")).write_html("tradeoff.html")
    """
    import plotly.graph_objects as go

    figure = go.Figure()
    for workflow in comparison.workflows():
        judged = [(v, v.success) for v in comparison.of(workflow) if v.success is not None]
        if not judged:
            continue
        rates = [p.rate * 100 for _, p in judged]
        figure.add_trace(
            go.Scatter(
                x=[v.total.p95 for v, _ in judged],
                y=rates,
                mode="markers+text",
                name=shown_name(workflow),
                legendgroup=shown_name(workflow),
                text=[shown_name(v.variant) for v, _ in judged],
                textposition="top center",
                marker={
                    "size": 12,
                    "symbol": ["star" if v.pareto else "circle" for v, _ in judged],
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [p.high * 100 - p.rate * 100 for _, p in judged],
                    "arrayminus": [p.rate * 100 - p.low * 100 for _, p in judged],
                },
                customdata=[[v.runs, p.trials] for v, p in judged],
                hovertemplate=(
                    "%{text}<br>p95 %{x:.0f} ms<br>success %{y:.1f} %"
                    "<br>%{customdata[0]} runs, %{customdata[1]} with outcomes<extra></extra>"
                ),
            )
        )
        front = sorted(((v, p) for v, p in judged if v.pareto), key=lambda vp: vp[0].total.p95)
        if len(front) > 1:
            figure.add_trace(
                go.Scatter(
                    x=[v.total.p95 for v, _ in front],
                    y=[p.rate * 100 for _, p in front],
                    mode="lines",
                    line={"dash": "dash"},
                    name=shown_name(f"{workflow}: Pareto front"),
                    legendgroup=shown_name(workflow),
                    hoverinfo="skip",
                )
            )
    figure.update_layout(
        xaxis_title="p95 latency (ms), lower is better",
        yaxis_title="success rate (%), higher is better (Wilson 95 % interval)",
        yaxis_range=[0, 105],
    )
    return figure


def pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def tradeoff_page(
    comparison: Comparison, *, sources: str = "", explorer: RunExplorer | None = None
) -> str:
    """A self-contained HTML page with the trade-off chart and the table; works offline.

    With ``explorer``, the page also has the run explorer, so that a user can look at
    the runs behind each variant's point.
    """
    figure = tradeoff_figure(comparison)
    figure.update_layout(margin={"l": 60, "r": 20, "t": 30, "b": 60}, height=480)
    chart = (
        _plain_text(figure).to_html(
            full_html=False,
            include_plotlyjs=True,
            div_id="chart-tradeoff",
            config=_PLOTLY_CONFIG,
        )
        if figure.data
        else "<p>No variant recorded outcomes: nothing to plot.</p>"
    )
    rows = []
    for v in comparison.variants:
        success = v.success
        cells = [
            _h(v.workflow),
            _h(v.variant) + (" &#9733;" if v.pareto else ""),
            str(v.runs),
            f"{v.total.p50:,.1f}",
            f"{v.total.p95:,.1f}",
            f"{v.total.p99:,.1f}",
            *(f"{v.share[k] * 100:.0f} %" for k in KINDS),
            "-" if success is None else f"{success.successes}/{success.trials}",
            pct(success.rate if success else None),
            "-" if success is None else f"{pct(success.low)} - {pct(success.high)}",
            "-" if v.score_mean is None else f"{v.score_mean:.3f}",
        ]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    heads = [
        "workflow", "variant", "runs", "p50 ms", "p95 ms", "p99 ms",
        *(f"{k} share" for k in KINDS), "successes", "success rate", "95 % interval",
        "mean score",
    ]  # fmt: skip
    subtitle = f" from {_h(printed_source(sources))}" if sources else ""
    return (
        _head("chainlat: latency against success rate")
        + "<style>#variants td{text-align:right;font-variant-numeric:tabular-nums}</style>"
        f"<h1>Latency against success rate{subtitle}</h1>"
        "<p>Percentiles by nearest rank; shares are critical-path time over total time; "
        "&#9733; marks the Pareto front of each workflow (no other variant is both at least "
        "as fast at p95 and at least as successful).</p>"
        f'<section id="tradeoff">{chart}</section>'
        '<table id="variants"><thead><tr>'
        + "".join(f"<th>{h}</th>" for h in heads)
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
        + _split_section(comparison)
        + (explorer.html() if explorer is not None else "")
        + "</body></html>\n"
    )


def _split_section(comparison: Comparison) -> str:
    """The first output of the voice runs by stage: per later variant of a workflow, each
    stage before (the workflow's first variant), after and the change, as ``compare``
    prints them; empty without a voice run."""
    tables: list[str] = []
    for workflow in comparison.workflows():
        variants = comparison.of(workflow)
        baseline = variants[0]
        for variant in variants[1:]:
            changes = comparison.split_changes(variant)
            if not changes:
                continue
            rows = "".join(
                "<tr><td>{}</td>{}</tr>".format(
                    html.escape(c.part.replace("_", " ")),
                    "".join(
                        f'<td class="n">{html.escape(v)}</td>'
                        for v in (
                            ms(None if c.before is None else c.before.p50),
                            ms(None if c.after is None else c.after.p50),
                            _signed(c.p50_delta),
                            ms(None if c.before is None else c.before.p95),
                            ms(None if c.after is None else c.after.p95),
                            _signed(c.p95_delta),
                        )
                    ),
                )
                for c in changes
            )
            tables.append(
                f'<table class="first-output-split" data-variant="{_h(variant.variant)}">'
                f"<caption>{_h(shown_name(workflow))}: {_h(shown_name(variant.variant))} "
                f"against {_h(shown_name(baseline.variant))} (ms)</caption><thead><tr>"
                "<th>stage</th><th>p50 before</th><th>p50 after</th><th>p50 change</th>"
                "<th>p95 before</th><th>p95 after</th><th>p95 change</th></tr></thead>"
                f"<tbody>{rows}</tbody></table>"
            )
    if not tables:
        return ""
    return (
        '<section id="first-output-split"><h2>First output by stage</h2><p>The wait for the '
        "first audio of the voice runs, each run split by stage as <code>report</code> and "
        "<code>check</code> split it; change: the variant's value less the workflow's first "
        "variant's.</p>" + "".join(tables) + "</section>"
    )


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+,.1f}"
