"""Prometheus: budgets as PromQL, as a rules file, and judged through Prometheus's HTTP API.

One concern in three modules: :mod:`~chainlat.prometheus.queries` (every limit metrics can
express as one PromQL query, and Prometheus's duration grammar),
:mod:`~chainlat.prometheus.rules` (the recording and alerting rules, escaped for YAML and
for Prometheus's templates) and :mod:`~chainlat.prometheus.reader` (the instant queries
behind ``chainlat check --prometheus``, turned into verdicts). Rendering is in
:mod:`chainlat.report`.

Example::

    budgets = chainlat.budgets.load_budgets("chainlat.toml")
    print(chainlat.prometheus.prometheus_rules(budgets, window="1h"))
"""

from __future__ import annotations

from chainlat.prometheus.queries import (
    DEFAULT_SPANMETRICS_BUCKETS_MS,
    LimitQuery,
    Unexpressed,
    bucket_boundaries,
    buckets_setting,
    limit_queries,
    parse_duration,
    parse_window,
    unexpressed_limits,
)
from chainlat.prometheus.reader import PrometheusReader, judge_prometheus
from chainlat.prometheus.rules import ALERT_NAME, prometheus_rules

__all__ = [
    "ALERT_NAME",
    "DEFAULT_SPANMETRICS_BUCKETS_MS",
    "LimitQuery",
    "PrometheusReader",
    "Unexpressed",
    "bucket_boundaries",
    "buckets_setting",
    "judge_prometheus",
    "limit_queries",
    "parse_duration",
    "parse_window",
    "prometheus_rules",
    "unexpressed_limits",
]
