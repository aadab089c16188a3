"""A scaled tier of its own for one test, and its accounting as an operator reads it: the
recording rules of collector/rules/tier-losses.yml from Prometheus's HTTP API, and a
Collector's own metrics from its ``/metrics``. Used by
tests/integration/test_scaled_tier_accounting.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

import httpx

from chainlat.budgets import load_budgets
from chainlat.prometheus import bucket_boundaries, buckets_setting, prometheus_rules
from integration.stack import (
    Jaeger,
    Sampling,
    ScaledTier,
    start_jaeger,
    start_scaled_tier,
    stop,
    stop_in_tier,
)
from support.scaled_tier import BUDGET_TOML


@dataclass(frozen=True)
class OwnTier:
    """A tier started for one test: Jaeger on Badger, the load balancer, 2 replicas and
    Prometheus evaluating the budget rules over ``window`` and the tier's own rules."""

    jaeger: Jaeger
    tier: ScaledTier
    budgets_file: Path
    spanmetrics_buckets: str
    client: httpx.Client


@contextmanager
def own_tier(base: Path, sampling: Sampling, *, window: str) -> Iterator[OwnTier]:
    """Start the tier in ``base``; every process stops on the way out, also on failure."""
    budgets_file = base / "chainlat.toml"
    budgets_file.write_text(BUDGET_TOML)
    budgets = load_budgets(budgets_file)
    rules = base / "chainlat.rules.yml"
    rules.write_text(prometheus_rules(budgets, window=window, evaluation_interval="1s"))
    buckets = buckets_setting(bucket_boundaries(budgets))
    jaeger_dir, tier_dir = base / "jaeger", base / "tier"
    tier: ScaledTier | None = None
    try:
        jaeger = start_jaeger(jaeger_dir, storage="badger")
        tier = start_scaled_tier(
            tier_dir, jaeger, sampling, rules=rules, spanmetrics_buckets=buckets
        )
        with httpx.Client(timeout=10) as client:
            yield OwnTier(jaeger, tier, budgets_file, buckets, client)
    finally:
        if tier is not None:
            stop_in_tier(tier, "tier")
        stop(jaeger_dir, "jaeger")


def query(own: OwnTier, expr: str) -> list[tuple[dict[str, str], float]]:
    """An instant query: each series' labels and value."""
    response = own.client.get(f"{own.tier.prometheus_url}/api/v1/query", params={"query": expr})
    response.raise_for_status()
    return [(r["metric"], float(r["value"][1])) for r in response.json()["data"]["result"]]


def total(own: OwnTier, expr: str) -> float | None:
    """The sum of an instant query's values; None when it returns no series."""
    found = query(own, expr)
    return sum(v for _, v in found) if found else None


def own_metric(url: str, name: str, *labels: str) -> float:
    """A Collector's own metric ``name`` summed over the series of its ``/metrics`` whose
    line holds every one of ``labels``."""
    found = 0.0
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line.startswith(name) and all(label in line for label in labels):
            found += float(line.rsplit(" ", 1)[1])
    return found


@dataclass(frozen=True)
class Accounting:
    """The tier's accounting table, each figure the sum of one recording rule of
    collector/rules/tier-losses.yml over every process."""

    received: float
    not_accepted_by_a_replica: float
    accepted: float
    exported: float
    export_failed: float
    queued_for_jaeger: float
    lost_in_jaeger_queue: float
    decided_against: float
    undecided: float
    late: float
    lost_with_process: float
    kept: float
    twins: float
    in_span_metrics: float
    missing_from_span_metrics: float

    RULES: ClassVar[dict[str, str]] = {
        "received": "spans_received",
        "not_accepted_by_a_replica": "spans_not_accepted_by_a_replica",
        "accepted": "spans_accepted",
        "exported": "spans_exported",
        "export_failed": "spans_export_failed",
        "queued_for_jaeger": "spans_queued_for_jaeger",
        "lost_in_jaeger_queue": "spans_lost_in_jaeger_queue",
        "decided_against": "spans_decided_against",
        "undecided": "undecided_spans",
        "late": "late_spans",
        "lost_with_process": "spans_lost_with_process",
        "kept": "spans_kept",
        "twins": "twin_spans",
        "in_span_metrics": "spans_in_span_metrics",
        "missing_from_span_metrics": "spans_missing_from_span_metrics",
    }
    """Field -> the rule (``chainlat_tier:NAME``) it sums."""

    @staticmethod
    def read(own: OwnTier) -> Accounting | None:
        """The table as Prometheus's rules hold it now (a rule with no series, such as a
        loss with no process gone, reads 0); None before the tier's first rule evaluation."""
        if total(own, "chainlat_tier:spans_received") is None:
            return None
        values: dict[str, float] = {}
        for field in fields(Accounting):
            rule = Accounting.RULES[field.name]
            values[field.name] = total(own, f"sum(chainlat_tier:{rule}) or vector(0)") or 0.0
        return Accounting(**values)

    def closes(self) -> float:
        """What the load balancer received less every figure it is split into: 0 when the
        table adds up."""
        return self.received - (
            self.not_accepted_by_a_replica
            + self.exported
            + self.export_failed
            + self.queued_for_jaeger
            + self.decided_against
            + self.undecided
        )

    def rows(self) -> list[tuple[str, float]]:
        return [
            (f"chainlat_tier:{self.RULES[f.name]}", getattr(self, f.name)) for f in fields(self)
        ]
