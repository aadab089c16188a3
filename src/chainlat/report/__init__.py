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

from typing import TYPE_CHECKING

from chainlat._core.lazy import lazy_names as _lazy_names
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
    diff_renderables,
    diff_text,
    render_text,
    stats_renderables,
    stats_text,
)
from chainlat.report.waterfall import waterfall

if TYPE_CHECKING:
    from chainlat.report._explorer import RunExplorer, jaeger_ui_url
    from chainlat.report.html import html_page, tradeoff_figure, tradeoff_page

# The page and its run explorer import the what-if analysis and their assets: imported on
# first use, so that a check printed as text, JSON or JUnit does not load them.
_LAZY: dict[str, str] = {
    "RunExplorer": "._explorer",
    "html_page": ".html",
    "jaeger_ui_url": "._explorer",
    "tradeoff_figure": ".html",
    "tradeoff_page": ".html",
}

__all__ = [
    "RunExplorer",
    "check_json",
    "check_markdown",
    "check_renderables",
    "check_schema",
    "check_text",
    "diff_json",
    "diff_markdown",
    "diff_renderables",
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

_lazy_getattr, __dir__ = _lazy_names(__name__, _LAZY, globals())


def __getattr__(name: str) -> object:
    return _lazy_getattr(name)
