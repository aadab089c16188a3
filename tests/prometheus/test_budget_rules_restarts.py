"""The budget rules hold their window through what happens to a tier: a sampling replica
restarted or killed (its series go stale), an application's series exported once and
expired by the Collector's exporter (a quiet hour), a counter that resets. Proved by
promtool on the series the scaled tier makes of collector/README.md's demo, run twice.

Each span-metrics series is one Collector process's (``collector_instance_id``, a random
id per start); each application series one application process's (``instance``, its
``service.instance.id``). The old rules (``X unless X offset W`` for a series born in the
window) lost a restarted replica's runs at its next scrape: 48 became 27, as reported.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from chainlat._runtime.metrics import BASE_BUCKETS_MS
from chainlat.prometheus import ALERT_NAME, bucket_boundaries, prometheus_rules
from support.budget_rules import budgets_of
from support.promtool import find_promtool

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_BUDGETS = REPO_ROOT / "collector" / "demo.chainlat.toml"
INTERVAL = "15s"
"""Scrape and evaluation interval: sample i of a series is at 15 s x i."""

WORKFLOW = {
    "span_name": "invoke_workflow support-agent",
    "chainlat_step_kind": "workflow",
    "status_code": "STATUS_CODE_UNSET",
}


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool from collector/build.sh; skips without it (fails under CI)."""
    return find_promtool()


def _histogram(
    name: str, labels: dict[str, str], boundaries: list[float], above: float, values: str
) -> list[dict[str, str]]:
    """Bucket and count series of a histogram whose observations all lie above ``above``
    and at or below the next boundary: the buckets below hold 0 wherever ``values`` has a
    number (blanks and ``stale`` kept)."""
    label_text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    zero = " ".join(
        word if word.startswith(("_", "stale")) else _zeroed(word) for word in values.split()
    )
    series = []
    for le in [*boundaries, float("inf")]:
        le_text = "+Inf" if le == float("inf") else f"{le:g}"
        series.append(
            {
                "series": f'{name}_bucket{{{label_text}, le="{le_text}"}}',
                "values": values if le > above else zero,
            }
        )
    series.append({"series": f"{name}_count{{{label_text}}}", "values": values})
    return series


def _zeroed(word: str) -> str:
    """A promtool value word (``27``, ``27x16``) with its value 0 and its count kept."""
    return "0x" + word.split("x", 1)[1] if "x" in word else "0"


def _span_metrics(collector: str, values: str) -> list[dict[str, str]]:
    """The demo's workflow spans as one Collector process counted them (every run in
    1280-2560 ms, over the 100 ms p95 limit)."""
    labels = {
        **WORKFLOW,
        "collector_instance_id": collector,
        "instance": "app",
        "job": "chainlat-demo",
    }
    boundaries = bucket_boundaries(budgets_of(DEMO_BUDGETS.read_text()))
    return _histogram(
        "traces_span_metrics_duration_milliseconds", labels, boundaries, 1280.0, values
    )


def _application(instance: str, values: str, over: str) -> list[dict[str, str]]:
    """One demo process's own series, as the replica its metrics went to exported them:
    the runs (``chainlat_chain_duration_milliseconds``, data and total, every data part at
    or below 10 ms) and the runs over the per-run ``total`` (``over``)."""
    series: list[dict[str, str]] = []
    for kind in ("data", "total"):
        labels = {
            "gen_ai_workflow_name": "support-agent",
            "chainlat_chain_kind": kind,
            "instance": instance,
            "job": "chainlat-demo",
        }
        series += _histogram(
            "chainlat_chain_duration_milliseconds", labels, list(BASE_BUCKETS_MS), 0.0, values
        )
    series.append(
        {
            "series": 'chainlat_budget_exceeded_total{gen_ai_workflow_name="support-agent", '
            f'chainlat_budget_target="total", instance="{instance}", job="chainlat-demo"}}',
            "values": over,
        }
    )
    return series


def _two_demos() -> list[dict[str, str]]:
    """Two demos of 48 runs each, an hour's window apart from nothing.

    - 0-1 min, demo 1: replica A (process a1) counts 21 runs, replica B (b1) 27; the
      demo's own series reach replica A once, as it exits at 1 min (23 runs over
      ``total``).
    - 2 min: replica A restarted (``run.sh stop/start replica-1``): a1's series go stale,
      and with them the demo's (a2 has no series until it gets traffic).
    - 5 min: replica B killed (``kill -9``): b1's series stale; b2 starts.
    - 6-7 min, demo 2: a2 counts 20 runs, b2 28; its own series reach replica B once, at
      7 min (25 runs over), and the exporter expires them 5 min later (its old default).
    - Then nothing for an hour: the processes a2 and b2 repeat their counts.
    """
    return [
        *_span_metrics("a1", "0 7 14 21x4 stale"),
        *_span_metrics("b1", "0 9 18 27x16 stale"),
        *_span_metrics("a2", "_x25 5 10 15 20x300"),
        *_span_metrics("b2", "_x25 7 14 21 28x300"),
        *_application("demo-1", "_x4 48x3 stale", "_x4 23x3 stale"),
        *_application("demo-2", "_x28 48x19 stale", "_x28 25x19 stale"),
    ]


def _runs(target: str, at: str, value: float) -> dict[str, Any]:
    return {
        "expr": f'chainlat_budget:runs{{target="{target}"}}',
        "eval_time": at,
        "exp_samples": [
            {
                "labels": f'chainlat_budget:runs{{target="{target}", workflow="support-agent"}}',
                "value": value,
            }
        ],
    }


def _over(at: str, value: float) -> dict[str, Any]:
    return {
        "expr": 'chainlat_budget:runs_over{target="total"}',
        "eval_time": at,
        "exp_samples": [
            {
                "labels": 'chainlat_budget:runs_over{target="total", workflow="support-agent"}',
                "value": value,
            }
        ],
    }


def _firing(at: str, *targets: str) -> dict[str, Any]:
    limits = {"p95.total": "100", "total": "1000"}
    summaries = {
        "p95.total": "support-agent: p95.total over 100 ms (chainlat_budget:value_ms)",
        "total": "runs of support-agent broke total <= 1000 ms (chainlat_budget:runs_over)",
    }
    return {
        "eval_time": at,
        "alertname": ALERT_NAME,
        "exp_alerts": [
            {
                "exp_labels": {
                    "workflow": "support-agent",
                    "target": t,
                    "limit": limits[t],
                    "severity": "warning",
                },
                "exp_annotations": {"summary": summaries[t]},
            }
            for t in targets
        ],
    }


def _promtool_test(
    promtool: Path, tmp_path: Path, series: list[dict[str, str]], case: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    budgets = budgets_of(DEMO_BUDGETS.read_text())
    rules = tmp_path / "rules.yml"
    rules.write_text(prometheus_rules(budgets, window="1h", evaluation_interval=INTERVAL))
    tests = tmp_path / "tests.yml"
    tests.write_text(
        yaml.safe_dump(
            {
                "rule_files": [rules.name],
                "evaluation_interval": INTERVAL,
                "tests": [{"interval": INTERVAL, "input_series": series, **case}],
            },
            sort_keys=False,
        )
    )
    return subprocess.run(
        [str(promtool), "test", "rules", str(tests)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )


@pytest.mark.integration
def test_promtool_a_restart_a_kill_and_a_quiet_hour_keep_every_run_in_the_window(
    promtool: Path, tmp_path: Path
) -> None:
    """23 minutes after the second demo, with replica A restarted, replica B killed and
    both demos' own series expired, the window holds all 96 runs and the 48 over
    ``total``, and both alerts fire; once demo 1 has left the window, demo 2's 48 runs and
    25 over; once both have, no run and no alert."""
    case = {
        "promql_expr_test": [
            _runs("p95.total", "3m", 48),
            _runs("p95.data", "3m", 48),
            _over("3m", 23),
            _runs("p95.total", "30m", 96),
            _runs("p95.data", "30m", 96),
            _runs("total", "30m", 96),
            _over("30m", 48),
            _runs("p95.total", "65m", 48),
            _runs("p95.data", "65m", 48),
            _over("65m", 25),
            _runs("p95.total", "70m", 0),
            _over("70m", 0),
        ],
        "alert_rule_test": [
            _firing("3m", "p95.total", "total"),
            _firing("30m", "p95.total", "total"),
            _firing("65m", "p95.total", "total"),
            _firing("70m"),
        ],
    }
    done = _promtool_test(promtool, tmp_path, _two_demos(), case)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_the_restart_case_fails_when_it_expects_runs_lost(
    promtool: Path, tmp_path: Path
) -> None:
    """The same series, expecting what the old rules read after replica A's restart (27
    runs, the demo's own series gone): promtool fails, so the case above is not vacuous."""
    case = {"promql_expr_test": [_runs("p95.total", "3m", 27)]}
    done = _promtool_test(promtool, tmp_path, _two_demos(), case)
    assert done.returncode != 0
    assert "4.8E+01" in done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_a_counter_that_resets_still_breaks_its_limit(
    promtool: Path, tmp_path: Path
) -> None:
    """An application without ``service.instance.id`` restarted: its counter of runs over
    ``total`` resets on the same series; the rules fall back to ``increase()`` for it, and
    the limit is broken."""
    series = [
        *_span_metrics("a1", "0 7 14 21x40"),
        *_application("app", "0 10 20 0 5 10x40", "0 3 6 0 2 4x40"),
    ]
    case = {"alert_rule_test": [_firing("5m", "p95.total", "total")]}
    done = _promtool_test(promtool, tmp_path, series, case)
    assert done.returncode == 0, done.stdout + done.stderr
