"""Budgets as Prometheus rules: a budget file in, recording and alerting rules (YAML) out.

One group per workflow; for each limit :func:`chainlat.prometheus.queries.limit_queries`
can express, a recording rule of the value, one of the runs it was measured on, and the
alert ``ChainlatBudgetBroken``. Names come from the budget file and may hold anything, so
each is escaped where it lands: in a YAML comment (no line break ends the comment), in a
PromQL string, and in an alert's labels and annotations, which Prometheus expands as Go
templates (``{{`` is text, never an action). Durations are checked against Prometheus's
own grammar (:func:`chainlat.prometheus.queries.parse_duration`).

Example::

    text = chainlat.prometheus.prometheus_rules(load_budgets("chainlat.toml"), window="1h")
    pathlib.Path("chainlat.rules.yml").write_text(text)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

import yaml

from chainlat._core.errors import InputError
from chainlat.budgets import Budgets
from chainlat.prometheus.queries import (
    DEFAULT_SPANMETRICS_BUCKETS_MS,
    TARGET_LABEL,
    WORKFLOW_LABEL,
    LimitQuery,
    bucket_boundaries,
    buckets_setting,
    limit_queries,
    matchers,
    parse_duration,
    parse_window,
    prom_number,
    unexpressed_limits,
)

__all__ = ["ALERT_NAME", "comment_text", "prometheus_rules", "template_text"]

ALERT_NAME: Final = "ChainlatBudgetBroken"

TIER_METRIC_EXPIRATION: Final = "2h"
"""How long the Collector tier's exporter keeps a series after its last update
(``metric_expiration`` in collector/otelcol.yaml, ``CHAINLAT_METRIC_EXPIRATION``)."""


_LINE_BREAKS: Final = frozenset("\n\r\x85\u2028\u2029")


class _NoAliases(yaml.SafeDumper):
    """Writes each mapping out in full: anchors and aliases puzzle readers of rule files."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    # PyYAML writes U+0085, U+2028 and U+2029 raw in a quoted scalar, where a reader folds
    # them into a space: any string with an unprintable character is double-quoted, the one
    # style that escapes them all.
    if any(not ch.isprintable() or ch in _LINE_BREAKS for ch in text):
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style='"')
    return dumper.represent_str(text)


_NoAliases.add_representer(str, _represent_text)


# --- the rules file ------------------------------------------------------------------------


def _labels(query: LimitQuery) -> dict[str, str]:
    return {WORKFLOW_LABEL: query.workflow, TARGET_LABEL: query.target}


def template_text(text: str) -> str:
    """``text`` as literal text of a Go template: Prometheus expands an alert's labels and
    annotations, so a name holding ``{{ query "up" }}`` would run as an action."""
    return text.replace("{{", '{{ "{{" }}')


def comment_text(text: str) -> str:
    """``text`` on one line of a YAML comment: line breaks (YAML's own, U+0085, U+2028 and
    U+2029 included) and other unprintable characters written as escapes."""
    return "".join(
        ch if ch.isprintable() and ch not in _LINE_BREAKS else _escape(ch) for ch in text
    )


def _escape(ch: str) -> str:
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def _check_encodable(budgets: Budgets) -> None:
    # Prometheus holds UTF-8: a lone surrogate (JSON's "\ud800") has no place in a label.
    for workflow, budget in budgets.workflows.items():
        for name in (workflow, *budget.steps):
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(
                    f"{budgets.source}: {name!r}: not valid UTF-8, which Prometheus labels must be"
                ) from None


def _rules_of(query: LimitQuery, for_: str) -> list[dict[str, object]]:
    labels = _labels(query)
    selector = matchers(labels)
    record_value = {
        "percentile": "chainlat_budget:value_ms",
        "per_run": "chainlat_budget:runs_over",
        "ratio": "chainlat_budget:ratio",
    }[query.measure]
    at_least = max(query.min_runs, 1)
    expression = (
        f"{record_value}{selector} > {prom_number(query.threshold)} and on({WORKFLOW_LABEL}, "
        f"{TARGET_LABEL}) chainlat_budget:runs{selector} >= {at_least}"
    )
    if query.measure == "per_run":
        summary = (
            f"runs of {query.workflow} broke {query.target} <= {prom_number(query.limit)} "
            f"{query.unit} (chainlat_budget:runs_over)"
        )
    elif query.measure == "ratio":
        limit = prom_number(query.limit)
        summary = f"{query.workflow}: {query.target} over {limit}% (chainlat_budget:ratio)"
    else:
        summary = (
            f"{query.workflow}: {query.target} over {prom_number(query.limit)} ms "
            "(chainlat_budget:value_ms)"
        )
    templated = {k: template_text(v) for k, v in labels.items()}
    alert: dict[str, object] = {
        "alert": ALERT_NAME,
        "expr": expression,
        "labels": {**templated, "limit": prom_number(query.limit), "severity": "warning"},
        "annotations": {"summary": template_text(summary)},
    }
    if for_:
        alert["for"] = for_
    return [
        {"record": record_value, "expr": query.value, "labels": dict(labels)},
        {"record": "chainlat_budget:runs", "expr": query.runs, "labels": dict(labels)},
        alert,
    ]


def prometheus_rules(
    budgets: Budgets,
    *,
    window: str = "1h",
    evaluation_interval: str = "30s",
    for_: str = "",
    spanmetrics_buckets: Iterable[float] = DEFAULT_SPANMETRICS_BUCKETS_MS,
) -> str:
    """The Prometheus rules file (YAML) that enforces ``budgets`` over ``window``.

    One group per workflow; for each limit a recording rule of the measured value
    (``chainlat_budget:value_ms``, ``chainlat_budget:runs_over`` or
    ``chainlat_budget:ratio``), one of the runs it was measured on
    (``chainlat_budget:runs``), and the alert ``ChainlatBudgetBroken`` labelled
    ``workflow``, ``target`` and ``limit``. Limits metrics cannot express are
    listed in the header comment.

    Example::

        print(prometheus_rules(load_budgets("chainlat.toml"), window="1h"))
    """
    window = parse_window(window)
    if for_:
        for_ = parse_window(for_, what="--for")
    interval = parse_window(evaluation_interval, what="--evaluation-interval")
    _check_encodable(budgets)
    queries = limit_queries(budgets, window=window)
    groups: list[dict[str, object]] = []
    for workflow in budgets.workflows:
        rules: list[dict[str, object]] = []
        for query in queries:
            if query.workflow == workflow:
                rules.extend(_rules_of(query, for_))
        if rules:
            groups.append(
                {
                    "name": f"chainlat-budgets:{workflow}",
                    "interval": interval,
                    "rules": rules,
                }
            )
    needed = bucket_boundaries(budgets, spanmetrics_buckets)
    missing = sorted(set(needed) - {float(b) for b in spanmetrics_buckets})
    header = [
        f"Prometheus rules for the latency budgets in {comment_text(budgets.source)}",
        "generated by `chainlat budgets rules`; edit the budget file, not this one.",
        f"Window: {window}. Alert: {ALERT_NAME} (labels workflow, target, limit).",
        "",
        "A percentile read from buckets is only as exact as its buckets: with the limit",
        "a boundary the verdict is exact, the value shown between boundaries interpolated.",
    ]
    if missing:
        header += [
            "These limits are not span-metrics bucket boundaries yet; start the Collector",
            "tier with (collector/otelcol.yaml reads it):",
            f"  CHAINLAT_SPANMETRICS_BUCKETS='{buckets_setting(needed)}'",
        ]
    if parse_duration(window) > parse_duration(TIER_METRIC_EXPIRATION):
        # A series expired and exported again more than a window later would count whole.
        header += [
            f"The window is longer than the {TIER_METRIC_EXPIRATION} the Collector tier keeps a "
            "series without an update; start it with",
            f"  CHAINLAT_METRIC_EXPIRATION={window}",
        ]
    unexpressed = unexpressed_limits(budgets)
    if unexpressed:
        header += ["", "Limits metrics cannot express (judge them with `chainlat check`):"]
        header += [
            comment_text(f"  workflows.{u.workflow}.{u.target}: {u.reason}") for u in unexpressed
        ]
    text = "".join(f"# {line}".rstrip() + "\n" for line in header)
    body = yaml.dump(
        {"groups": groups},
        Dumper=_NoAliases,
        sort_keys=False,
        allow_unicode=True,
        width=1_000_000,
    )
    return text + body
