"""Budgets as Prometheus rules: what is generated, and promtool proving each kind of limit
breaks and keeps on synthetic series (``promtool check rules`` and ``promtool test rules``)."""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from chainlat.budgets import Budgets, parse_budgets
from chainlat.budgets.targets import chain_boundaries
from chainlat.cli import main
from chainlat.prometheus import (
    ALERT_NAME,
    bucket_boundaries,
    buckets_setting,
    limit_queries,
    prometheus_rules,
    unexpressed_limits,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SH = REPO_ROOT / "collector" / "build.sh"

BUDGET_TOML = """
min_runs = 20

[workflows.chat]
total = "800ms"
data = "250ms"
p95 = { total = "700ms", data = "200ms" }

[workflows.chat.steps."chat gpt-4o"]
max = "600ms"
p95 = "500ms"
ttft_p95 = "250ms"
"""

STEP = 100
"""Observations per 30 s step in the synthetic series."""
STEPS = 120
"""An hour of 30 s steps."""
BUCKETS = (100.0, 200.0, 250.0, 500.0, 600.0, 700.0, 800.0, 1280.0)


def _budgets(text: str = BUDGET_TOML) -> Budgets:
    return parse_budgets(tomllib.loads(text), source="chainlat.toml")


def test_every_limit_metrics_can_express_is_one_query() -> None:
    """Per-run limits (split and step max), workflow and step percentiles: one query each."""
    queries = {(q.workflow, q.target): q for q in limit_queries(_budgets(), window="1h")}
    assert sorted(queries) == sorted(
        [
            ("chat", "total"),
            ("chat", "data"),
            ("chat", 'steps."chat gpt-4o".max'),
            ("chat", "p95.total"),
            ("chat", "p95.data"),
            ("chat", 'steps."chat gpt-4o".p95'),
        ]
    )
    assert queries[("chat", "total")].measure == "per_run"
    assert queries[("chat", "total")].threshold == 0
    p95 = queries[("chat", "p95.total")]
    assert (p95.measure, p95.percentile, p95.limit, p95.min_runs) == ("percentile", 95, 700, 20)
    assert "histogram_quantile(0.95" in p95.value
    assert 'span_name="invoke_workflow chat"' in p95.value
    assert 'status_code!="STATUS_CODE_ERROR"' in p95.value  # failed runs left out
    assert 'chainlat_chain_kind="data"' in queries[("chat", "p95.data")].value


def test_limits_metrics_cannot_express_are_listed_not_dropped() -> None:
    """A ttft percentile has no histogram: it is named in the output's header comment."""
    missing = unexpressed_limits(_budgets())
    assert [(u.workflow, u.target) for u in missing] == [("chat", 'steps."chat gpt-4o".ttft_p95')]
    text = prometheus_rules(_budgets())
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any('workflows.chat.steps."chat gpt-4o".ttft_p95' in line for line in header)


def test_rules_file_is_one_group_per_workflow_with_a_record_pair_and_alert_per_limit() -> None:
    document = yaml.safe_load(prometheus_rules(_budgets(), window="30m"))
    (group,) = document["groups"]
    assert group["name"] == "chainlat-budgets:chat"
    alerts = [r for r in group["rules"] if "alert" in r]
    records = [r for r in group["rules"] if "record" in r]
    assert len(alerts) == 6 and len(records) == 12
    assert {a["alert"] for a in alerts} == {ALERT_NAME}
    assert all("[30m]" in r["expr"] for r in records)
    assert {a["labels"]["limit"] for a in alerts} == {"800", "250", "600", "700", "200", "500"}


def test_bucket_boundaries_include_every_limit_judged_from_buckets() -> None:
    """Span metrics need the total and step limits; chain histograms every ms limit."""
    spans = bucket_boundaries(_budgets())
    assert {700.0, 500.0, 600.0} <= set(spans) and 10.0 in spans
    chain = chain_boundaries(_budgets(), [10.0, 20.0])
    assert chain == [10.0, 20.0, 200.0, 250.0, 600.0, 700.0, 800.0]
    assert buckets_setting([10.0, 0.5]) == "[10ms, 0.5ms]"


def test_cli_writes_the_rules_and_the_bucket_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budget_file = tmp_path / "chainlat.toml"
    budget_file.write_text(BUDGET_TOML)
    out = tmp_path / "rules.yml"
    assert main(["budgets", "rules", str(budget_file), "--window", "2h", "-o", str(out)]) == 0
    assert "[2h]" in out.read_text()
    assert main(["budgets", "rules", str(budget_file), "--spanmetrics-buckets"]) == 0
    assert capsys.readouterr().out.strip() == buckets_setting(bucket_boundaries(_budgets()))


def test_cli_rejects_a_bad_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    budget_file = tmp_path / "chainlat.toml"
    budget_file.write_text(BUDGET_TOML)
    assert main(["budgets", "rules", str(budget_file), "--window", "an hour"]) == 2
    err = capsys.readouterr().err
    assert "an hour" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


# --- promtool ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool from collector/build.sh; skips without it (fails under CI)."""
    required = os.environ.get("CHAINLAT_REQUIRE_INTEGRATION") == "1"
    mode = "--print" if required else "--check"
    done = subprocess.run(
        [str(BUILD_SH), mode, "prometheus"],
        capture_output=True,
        text=True,
        timeout=60 * 60,
        check=False,
    )
    if done.returncode != 0:
        reason = f"promtool is not built (collector/build.sh prometheus): {done.stderr.strip()}"
        if required:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return Path(done.stdout.splitlines()[-1])


def _histogram(
    name: str, labels: dict[str, str], within: dict[float, float], per_step: int = STEP
) -> list[dict[str, str]]:
    """Cumulative bucket series: ``within[le]`` is the share of observations at or below le."""
    series = []
    for le in [*BUCKETS, float("inf")]:
        share = (
            1.0 if le == float("inf") else max(v for k, v in within.items() if k <= le or k == 0)
        )
        step = round(per_step * share)
        label_text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
        le_text = "+Inf" if le == float("inf") else f"{le:g}"
        series.append(
            {
                "series": f'{name}_bucket{{{label_text}, le="{le_text}"}}',
                "values": f"0+{step}x{STEPS}",
            }
        )
    label_text = ", ".join(f'{k}="{v}"' for k, v in labels.items())
    series.append({"series": f"{name}_count{{{label_text}}}", "values": f"0+{per_step}x{STEPS}"})
    return series


WORKFLOW_SPAN = {
    "span_name": "invoke_workflow chat",
    "chainlat_step_kind": "workflow",
    "status_code": "STATUS_CODE_UNSET",
}
FAILED_WORKFLOW_SPAN = {**WORKFLOW_SPAN, "status_code": "STATUS_CODE_ERROR"}
DATA = {"gen_ai_workflow_name": "chat", "chainlat_chain_kind": "data"}
STEP_SPANS = {
    "span_name": "chat gpt-4o",
    "chainlat_step_kind": "inference",
    "chainlat_workflow_name": "chat",
    "status_code": "STATUS_CODE_UNSET",
}
RUNS = {
    "series": 'chainlat_chain_duration_milliseconds_count{gen_ai_workflow_name="chat", '
    'chainlat_chain_kind="total"}',
    "values": f"0+{STEP}x{STEPS}",
}


def _exceeded(target: str, values: str) -> dict[str, str]:
    target_text = target.replace('"', '\\"')
    return {
        "series": 'chainlat_budget_exceeded_total{gen_ai_workflow_name="chat", '
        f'chainlat_budget_target="{target_text}"}}',
        "values": values,
    }


def _alert(target: str, limit: str, summary: str) -> dict[str, Any]:
    return {
        "exp_labels": {"workflow": "chat", "target": target, "limit": limit, "severity": "warning"},
        "exp_annotations": {"summary": summary},
    }


def _all_within() -> list[dict[str, str]]:
    """Every limit kept: 97 % within each percentile limit, no run over a per-run one; the
    failed runs, all slow, are left out of the percentiles."""
    return [
        *_histogram(
            "traces_span_metrics_duration_milliseconds", WORKFLOW_SPAN, {0: 0.5, 700: 0.97}
        ),
        *_histogram(
            "traces_span_metrics_duration_milliseconds", FAILED_WORKFLOW_SPAN, {0: 0.0}, 20
        ),
        *_histogram("chainlat_chain_duration_milliseconds", DATA, {0: 0.5, 200: 0.97}),
        *_histogram("traces_span_metrics_duration_milliseconds", STEP_SPANS, {0: 0.5, 500: 0.97}),
        RUNS,
        _exceeded("total", f"0x{STEPS}"),
        _exceeded("data", f"0x{STEPS}"),
        _exceeded('steps."chat gpt-4o".max', f"0x{STEPS}"),
    ]


def _all_broken() -> list[dict[str, str]]:
    """Every limit broken: 90 % within each percentile limit, a run over each per-run one."""
    return [
        *_histogram(
            "traces_span_metrics_duration_milliseconds", WORKFLOW_SPAN, {0: 0.5, 700: 0.90}
        ),
        *_histogram("chainlat_chain_duration_milliseconds", DATA, {0: 0.5, 200: 0.90}),
        *_histogram("traces_span_metrics_duration_milliseconds", STEP_SPANS, {0: 0.5, 500: 0.90}),
        RUNS,
        _exceeded("total", f"0x60 1x{STEPS - 60}"),
        _exceeded("data", f"0x100 2x{STEPS - 100}"),
        _exceeded('steps."chat gpt-4o".max', f"0x30 1x{STEPS - 30}"),
    ]


ALL_ALERTS = [
    _alert("total", "800", "runs of chat broke total <= 800 ms (chainlat_budget:runs_over)"),
    _alert("data", "250", "runs of chat broke data <= 250 ms (chainlat_budget:runs_over)"),
    _alert(
        'steps."chat gpt-4o".max',
        "600",
        'runs of chat broke steps."chat gpt-4o".max <= 600 ms (chainlat_budget:runs_over)',
    ),
    _alert("p95.total", "700", "chat: p95.total over 700 ms (chainlat_budget:value_ms)"),
    _alert("p95.data", "200", "chat: p95.data over 200 ms (chainlat_budget:value_ms)"),
    _alert(
        'steps."chat gpt-4o".p95',
        "500",
        'chat: steps."chat gpt-4o".p95 over 500 ms (chainlat_budget:value_ms)',
    ),
]


def _promtool_test(
    promtool: Path, tmp_path: Path, budgets: Budgets, cases: list[dict[str, Any]]
) -> subprocess.CompletedProcess[str]:
    rules = tmp_path / "rules.yml"
    rules.write_text(prometheus_rules(budgets, window="1h"))
    tests = tmp_path / "tests.yml"
    tests.write_text(
        yaml.safe_dump(
            {"rule_files": [rules.name], "evaluation_interval": "30s", "tests": cases},
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


def _case(series: list[dict[str, str]], alerts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "interval": "30s",
        "input_series": series,
        "alert_rule_test": [{"eval_time": "1h", "alertname": ALERT_NAME, "exp_alerts": alerts}],
    }


@pytest.mark.integration
def test_promtool_accepts_the_generated_rules(promtool: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yml"
    rules.write_text(prometheus_rules(_budgets(), window="1h", for_="2m"))
    done = subprocess.run(
        [str(promtool), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 18 rules found" in done.stdout


@pytest.mark.integration
def test_promtool_each_kind_of_limit_fires_when_broken_and_not_when_kept(
    promtool: Path, tmp_path: Path
) -> None:
    """Per-run (split and step max), workflow total, split and step percentiles: every
    alert fires on series that break its limit, and none on series that keep it."""
    done = _promtool_test(
        promtool,
        tmp_path,
        _budgets(),
        [_case(_all_within(), []), _case(_all_broken(), ALL_ALERTS)],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.integration
def test_promtool_compares_for_real(promtool: Path, tmp_path: Path) -> None:
    """The same test expecting silence on broken series fails: the check is not vacuous."""
    done = _promtool_test(promtool, tmp_path, _budgets(), [_case(_all_broken(), [])])
    assert done.returncode != 0
    assert "FAILED" in done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_percentile_waits_for_min_runs(promtool: Path, tmp_path: Path) -> None:
    """A broken p95 over fewer runs than min_runs fires nothing; per-run limits still do."""
    budgets = _budgets(BUDGET_TOML.replace("min_runs = 20", "min_runs = 100000"))
    done = _promtool_test(promtool, tmp_path, budgets, [_case(_all_broken(), ALL_ALERTS[:3])])
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_step_keyed_by_step_name(promtool: Path, tmp_path: Path) -> None:
    """A step with a step name (chainlat.step.name) is judged by it, whatever its span name."""
    named = {
        **STEP_SPANS,
        "span_name": "chat gpt-4o-2024-08-06",
        "chainlat_step_name": "chat gpt-4o",
    }
    series = [
        *_histogram("traces_span_metrics_duration_milliseconds", named, {0: 0.5, 500: 0.90}),
    ]
    budgets = _budgets('[workflows.chat.steps."chat gpt-4o"]\np95 = "500ms"\n')
    expected = [
        _alert(
            'steps."chat gpt-4o".p95',
            "500",
            'chat: steps."chat gpt-4o".p95 over 500 ms (chainlat_budget:value_ms)',
        )
    ]
    done = _promtool_test(promtool, tmp_path, budgets, [_case(series, expected)])
    assert done.returncode == 0, done.stdout + done.stderr


BUDGET_KEYS_TOML = """
min_runs = 20

[prices]
"sim-model" = { input_per_mtok = "1.0", output_per_mtok = "2.0" }

[workflows.voice]
first_output = "300ms"
error_rate = "2%"
cost = "0.01"
cost_p95 = "0.008"
p95 = { first_output = "250ms" }
"""


def test_first_output_error_rate_and_cost_keys_are_one_query_each() -> None:
    budgets = _budgets(BUDGET_KEYS_TOML)
    queries = {q.target: q for q in limit_queries(budgets)}
    assert sorted(queries) == ["cost", "error_rate", "first_output", "p95.first_output"]
    assert (queries["cost"].measure, queries["cost"].unit) == ("per_run", "USD")
    assert (queries["first_output"].measure, queries["first_output"].unit) == ("per_run", "ms")
    rate = queries["error_rate"]
    assert (rate.measure, rate.limit, rate.threshold, rate.min_runs) == ("ratio", 2.0, 0.02, 20)
    assert 'chainlat_chain_kind="first_output"' in queries["p95.first_output"].value
    assert [u.target for u in unexpressed_limits(budgets)] == ["cost_p95"]
    assert 300.0 in chain_boundaries(budgets, []) and 0.01 not in chain_boundaries(budgets, [])


def test_include_errors_keeps_failed_runs_in_the_percentiles() -> None:
    text = BUDGET_TOML.replace("min_runs = 20", "min_runs = 20\ninclude_errors = true")
    queries = {q.target: q for q in limit_queries(_budgets(text))}
    assert "STATUS_CODE_ERROR" not in queries["p95.total"].value
    assert 'error_type=""' not in queries["p95.data"].value
    assert "STATUS_CODE_ERROR" not in queries['steps."chat gpt-4o".p95'].value


VOICE_SPAN = {
    "span_name": "invoke_workflow voice",
    "chainlat_step_kind": "workflow",
    "status_code": "STATUS_CODE_UNSET",
}
FIRST_OUTPUT = {"gen_ai_workflow_name": "voice", "chainlat_chain_kind": "first_output"}


def _voice(errors_per_step: int, first_output_within: float, over: str) -> list[dict[str, str]]:
    calls = "traces_span_metrics_duration_milliseconds_count"
    labels = ", ".join(f'{k}="{v}"' for k, v in VOICE_SPAN.items())
    failed = labels.replace("STATUS_CODE_UNSET", "STATUS_CODE_ERROR")
    return [
        {"series": f"{calls}{{{labels}}}", "values": f"0+{STEP - errors_per_step}x{STEPS}"},
        {"series": f"{calls}{{{failed}}}", "values": f"0+{errors_per_step}x{STEPS}"},
        *_histogram(
            "chainlat_chain_duration_milliseconds",
            FIRST_OUTPUT,
            {0: 0.5, 250: first_output_within},
        ),
        {
            "series": 'chainlat_chain_duration_milliseconds_count{gen_ai_workflow_name="voice", '
            'chainlat_chain_kind="total"}',
            "values": f"0+{STEP}x{STEPS}",
        },
        {
            "series": 'chainlat_budget_exceeded_total{gen_ai_workflow_name="voice", '
            'chainlat_budget_target="cost"}',
            "values": over,
        },
        {
            "series": 'chainlat_budget_exceeded_total{gen_ai_workflow_name="voice", '
            'chainlat_budget_target="first_output"}',
            "values": over,
        },
    ]


def _voice_alert(target: str, limit: str, summary: str) -> dict[str, Any]:
    alert = _alert(target, limit, summary)
    alert["exp_labels"]["workflow"] = "voice"
    return alert


@pytest.mark.integration
def test_promtool_error_rate_first_output_and_cost_fire_when_broken_and_not_when_kept(
    promtool: Path, tmp_path: Path
) -> None:
    """1 % of runs failing keeps error_rate <= 2 %, 5 % breaks it; 97 % of first outputs
    within 250 ms keeps their p95, 90 % breaks it; a run over the cost limit breaks it."""
    budgets = _budgets(BUDGET_KEYS_TOML)
    broken = [
        _voice_alert(
            "first_output",
            "300",
            "runs of voice broke first_output <= 300 ms (chainlat_budget:runs_over)",
        ),
        _voice_alert(
            "cost", "0.01", "runs of voice broke cost <= 0.01 USD (chainlat_budget:runs_over)"
        ),
        _voice_alert(
            "p95.first_output",
            "250",
            "voice: p95.first_output over 250 ms (chainlat_budget:value_ms)",
        ),
        _voice_alert("error_rate", "2", "voice: error_rate over 2% (chainlat_budget:ratio)"),
    ]
    done = _promtool_test(
        promtool,
        tmp_path,
        budgets,
        [
            _case(_voice(1, 0.97, f"0x{STEPS}"), []),
            _case(_voice(5, 0.90, f"0x60 1x{STEPS - 60}"), broken),
        ],
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_a_series_first_scraped_after_the_runs_still_counts(
    promtool: Path, tmp_path: Path
) -> None:
    """An application that exports once, after its over-budget runs: its counter's first
    sample is already 2, which ``increase()`` alone would read as no increase."""
    series = [
        *_all_within(),
    ]
    series = [s for s in series if 'chainlat_budget_target="total"' not in s["series"]]
    series.append(_exceeded("total", f"_x100 2x{STEPS - 100}"))
    expected = [ALL_ALERTS[0]]
    done = _promtool_test(promtool, tmp_path, _budgets(), [_case(series, expected)])
    assert done.returncode == 0, done.stdout + done.stderr


DEMO_BUDGETS = REPO_ROOT / "collector" / "demo.chainlat.toml"


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
    budgets = _budgets(DEMO_BUDGETS.read_text())
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
