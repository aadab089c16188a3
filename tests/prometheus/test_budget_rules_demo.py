"""collector/README.md's demo against collector/demo.chainlat.toml, as Prometheus saw it,
through promtool: both limits have data and ``p95.total`` fires."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from chainlat.prometheus import ALERT_NAME, bucket_boundaries, prometheus_rules
from support.budget_rules import budgets_of
from support.promtool import find_promtool

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_BUDGETS = REPO_ROOT / "collector" / "demo.chainlat.toml"


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool from collector/build.sh; skips without it (fails under CI)."""
    return find_promtool()


def _demo_histogram(
    name: str, labels: dict[str, str], boundaries: list[float], above: float, values: str
) -> list[dict[str, str]]:
    """Bucket series of a histogram whose observations all lie above ``above`` and at or
    below the next boundary; each series takes ``values`` (promtool notation) scaled to
    0 below that boundary."""
    label_text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    series = []
    for le in [*boundaries, float("inf")]:
        le_text = "+Inf" if le == float("inf") else f"{le:g}"
        series.append(
            {
                "series": f'{name}_bucket{{{label_text}, le="{le_text}"}}',
                "values": values if le > above else values.replace("48", "0"),
            }
        )
    series.append({"series": f"{name}_count{{{label_text}}}", "values": values})
    return series


@pytest.mark.integration
def test_promtool_the_readme_demo_has_both_limits_with_data(promtool: Path, tmp_path: Path) -> None:
    """collector/README.md's demo against collector/demo.chainlat.toml, as Prometheus saw
    it: the span metrics scraped while the 48 runs went on; the demo's own histograms
    (``chainlat.chain.duration``) exported once, as it exits (its metrics reader exports
    every 60 s and the demo is shorter), so those series are first scraped after the
    runs, already holding all 48. ``p95.data`` is read from them: it must be 9.5 ms over
    48 runs, not "no data", and ``p95.total`` (every run in 1280-2560 ms) fires.
    """
    budgets = budgets_of(DEMO_BUDGETS.read_text())
    workflow = {
        "span_name": "invoke_workflow support-agent",
        "chainlat_step_kind": "workflow",
        "status_code": "STATUS_CODE_UNSET",
    }
    data = {
        "gen_ai_workflow_name": "support-agent",
        "chainlat_chain_kind": "data",
        "job": "chainlat-demo",
        "otel_scope_name": "chainlat",
    }
    from chainlat._runtime.metrics import BASE_BUCKETS_MS

    series = [
        # Scraped every 30 s: 12 runs by each of the first 4 scrapes, then steady.
        *_demo_histogram(
            "traces_span_metrics_duration_milliseconds",
            workflow,
            bucket_boundaries(budgets),
            1280.0,
            "0 12 24 36 48x16",
        ),
        # First scraped at 2.5 min, after the runs, with all 48 (all at or below 10 ms).
        *_demo_histogram(
            "chainlat_chain_duration_milliseconds", data, list(BASE_BUCKETS_MS), 0.0, "_x5 48x15"
        ),
    ]
    rules = tmp_path / "rules.yml"
    rules.write_text(prometheus_rules(budgets, window="1h"))
    case = {
        "interval": "30s",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": 'chainlat_budget:runs{target="p95.data"}',
                "eval_time": "5m",
                "exp_samples": [
                    {
                        "labels": "chainlat_budget:runs"
                        '{target="p95.data", workflow="support-agent"}',
                        "value": 48,
                    },
                ],
            },
            {
                "expr": 'round(chainlat_budget:value_ms{target="p95.data"} * 10)',
                "eval_time": "5m",
                "exp_samples": [
                    {"labels": '{target="p95.data", workflow="support-agent"}', "value": 95},
                ],
            },
        ],
        "alert_rule_test": [
            {
                "eval_time": "5m",
                "alertname": ALERT_NAME,
                "exp_alerts": [
                    {
                        "exp_labels": {
                            "workflow": "support-agent",
                            "target": "p95.total",
                            "limit": "100",
                            "severity": "warning",
                        },
                        "exp_annotations": {
                            "summary": "support-agent: p95.total over 100 ms "
                            "(chainlat_budget:value_ms)"
                        },
                    }
                ],
            }
        ],
    }
    tests = tmp_path / "tests.yml"
    tests.write_text(
        yaml.safe_dump(
            {"rule_files": [rules.name], "evaluation_interval": "30s", "tests": [case]},
            sort_keys=False,
        )
    )
    done = subprocess.run(
        [str(promtool), "test", "rules", str(tests)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
