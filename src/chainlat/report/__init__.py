"""Every renderer: text tables, waterfalls, Markdown, JSON, JUnit XML, HTML pages, and the
trade-off commands' output. One module per format; this package re-exports them.

Text tables use rich (imported when first rendered); waterfalls are plain ASCII so
that they read the same in a terminal, a CI log and a pytest failure message. The
HTML page is drawn with plotly, whose JavaScript is embedded in the page, so it
opens without network access; its run explorer (:class:`RunExplorer`, docs/report.md)
is a small script and the runs' data, embedded too.

Example::

    report = chainlat.budgets.evaluate(chainlat.traces.read_runs(["t.jsonl"]), budgets)
    print(chainlat.report.check_markdown(report))
    print(chainlat.report.waterfall(report.stats.workflows["support-chat"].slowest))
"""

from __future__ import annotations

from chainlat.report._explorer import RunExplorer, jaeger_ui_url
from chainlat.report.html import html_page, tradeoff_figure, tradeoff_page
from chainlat.report.jsondoc import check_json, check_schema, diff_json, stats_json
from chainlat.report.junit import junit_xml
from chainlat.report.markdown import check_markdown, diff_markdown, stats_markdown
from chainlat.report.prometheus import (
    prometheus_check_json,
    prometheus_check_markdown,
    prometheus_check_text,
    prometheus_source,
)
from chainlat.report.text import (
    check_renderables,
    check_text,
    diff_text,
    render_text,
    stats_renderables,
    stats_text,
)
from chainlat.report.waterfall import waterfall

__all__ = [
    "RunExplorer",
    "check_json",
    "check_markdown",
    "check_renderables",
    "check_schema",
    "check_text",
    "diff_json",
    "diff_markdown",
    "diff_text",
    "html_page",
    "jaeger_ui_url",
    "junit_xml",
    "prometheus_check_json",
    "prometheus_check_markdown",
    "prometheus_check_text",
    "prometheus_source",
    "render_text",
    "stats_json",
    "stats_markdown",
    "stats_renderables",
    "stats_text",
    "tradeoff_figure",
    "tradeoff_page",
    "waterfall",
]
