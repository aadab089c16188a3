"""The scaled tier's metrics in Prometheus: span metrics summed over the replicas count
every span once, the budget rules' alert fires for the over-budget workflow only, and
``chainlat check --prometheus`` agrees with ``chainlat check`` on the traces of the same runs.

The ``scaled`` fixture (conftest.py) runs the tier and sends its workload once for the
module; each test checks one claim of collector/README.md about it.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from typing import Any

import httpx
import pytest

from chainlat._runtime.processor import STEP_TWIN
from chainlat.budgets import load_budgets
from chainlat.prometheus import bucket_boundaries
from support.scaled_tier import SERVICE, Scaled, poll, prometheus

from .stack import ScaledTier

pytestmark = pytest.mark.integration


def _spanmetric_counts(tier: ScaledTier) -> tuple[Counter[tuple[str, str]], list[int]]:
    """Spans counted (histogram count) summed over the replicas by (span name, step kind);
    and per replica."""
    total: Counter[tuple[str, str]] = Counter()
    per_replica = []
    pattern = re.compile(r"^traces_span_metrics_duration_milliseconds_count\{(.*)\} (\S+)$")
    for url in tier.replica_metrics_urls:
        text = httpx.get(url, timeout=10).text
        mine = 0
        for line in text.splitlines():
            match = pattern.match(line)
            if not match:
                continue
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', match.group(1)))
            if not labels.get("service_name", "").startswith(SERVICE):
                continue
            count = int(float(match.group(2)))
            total[(labels["span_name"], labels.get("chainlat_step_kind", ""))] += count
            mine += count
        per_replica.append(mine)
    return total, per_replica


def test_span_metrics_summed_over_replicas_count_every_span_once(scaled: Scaled) -> None:
    """Each replica counted its share; together, every span the applications sent, a
    model call seen twice (framework span + chainlat's twin) counted once."""
    expected: Counter[tuple[str, str]] = Counter()
    twins = 0
    for span in scaled.workload.spans:
        attrs = span.attributes or {}
        if attrs.get(STEP_TWIN) is True:
            twins += 1
            continue
        expected[(span.name, str(attrs.get("chainlat.step.kind", "")))] += 1
    expected[("user_feedback", "")] += sum(scaled.workload.late_spans.values())
    assert twins == 11  # 10 within + 1 over-budget run had a framework span beside the call

    def settled() -> tuple[Counter[tuple[str, str]], list[int]] | None:
        found = _spanmetric_counts(scaled.tier)
        return found if found[0] == expected else None

    found, per_replica = poll("span metrics equal to the spans sent", settled)
    assert all(n > 0 for n in per_replica), per_replica  # both replicas had a share
    calls = sum(n for (_, kind), n in found.items() if kind == "inference")
    assert calls == 60  # one model call per run, whether seen once or twice


def test_the_over_budget_alert_fires_and_the_within_budget_workflow_fires_nothing(
    scaled: Scaled,
) -> None:
    def firing() -> list[dict[str, str]] | None:
        alerts = prometheus(scaled, "/api/v1/alerts")["alerts"]
        labels = [a["labels"] for a in alerts if a["state"] == "firing"]
        wanted = {"total", "p95.total"}
        fired = {a["target"] for a in labels if a["workflow"] == "checkout"}
        return labels if wanted <= fired else None

    def rules() -> object:
        groups = prometheus(scaled, "/api/v1/rules")["groups"]
        found: list[object] = [
            (r.get("name"), r.get("health"), r.get("lastError"), r.get("state"))
            for g in groups
            for r in g["rules"]
            if r.get("health") != "ok"
        ]
        for series in (
            "chainlat_budget:runs_over",
            "chainlat_budget:value_ms",
            "chainlat_budget:runs",
            "chainlat_budget_exceeded_total",
        ):
            result = prometheus(scaled, "/api/v1/query", query=series)["result"]
            found.append((series, [(r["metric"], r["value"][1]) for r in result]))
        return found

    labels = poll("ChainlatBudgetBroken firing for checkout", firing, state=rules)
    assert {a["alertname"] for a in labels} == {"ChainlatBudgetBroken"}
    assert not [a for a in labels if a["workflow"] == "browse"], labels
    assert {a["target"] for a in labels if a["workflow"] == "checkout"} == {"total", "p95.total"}


def _check(*args: str) -> tuple[int, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", *args, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def test_check_prometheus_agrees_with_check_on_the_same_runs(scaled: Scaled) -> None:
    """Same verdicts; percentiles within the bucket that holds the trace-based value;
    per-run counts equal (the counter counts what the application judged)."""
    runs = len(scaled.workload.over_budget | scaled.workload.failed | scaled.workload.within)

    def scraped() -> bool | None:
        result = prometheus(
            scaled,
            "/api/v1/query",
            query='sum(chainlat_chain_duration_milliseconds_count{chainlat_chain_kind="total"})',
        )["result"]
        return True if result and float(result[0]["value"][1]) == runs else None

    poll("every run's metrics in Prometheus", scraped)
    code_traces, traces = _check(
        str(scaled.workload.traces_file), "--budgets", str(scaled.budgets_file)
    )
    code_prom, prom = _check(
        "--prometheus",
        scaled.tier.prometheus_url,
        "--window",
        "10m",
        "--budgets",
        str(scaled.budgets_file),
    )
    assert code_traces == code_prom == 1
    by_target = {(v["workflow"], v["target"]): v for v in traces["verdicts"]}
    boundaries = bucket_boundaries(load_budgets(scaled.budgets_file))
    for verdict in prom["verdicts"]:
        other = by_target[(verdict["workflow"], verdict["target"])]
        assert verdict["status"] == other["status"], (verdict, other)
        if verdict["kind"] == "run":
            assert verdict["broken_runs"] == other["broken_runs"], (verdict, other)
        else:
            actual = other["actual_ms"]
            upper = next(b for b in [*boundaries, math.inf] if b >= actual)
            lower = max([0.0, *(b for b in boundaries if b < actual)])
            assert lower <= verdict["actual_ms"] <= upper, (verdict, other, lower, upper)
