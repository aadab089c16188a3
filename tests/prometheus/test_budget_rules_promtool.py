"""Budgets as Prometheus rules, proved by promtool on synthetic series (``promtool check
rules`` and ``promtool test rules``): each kind of limit breaks and keeps, percentiles wait
for ``min_runs``, steps are keyed by step name, error rate, first output and cost fire, and a
series first scraped late counts. promtool comes from collector/build.sh."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from chainlat.budgets import Budgets
from chainlat.prometheus import ALERT_NAME, limit_queries, prometheus_rules
from support.budget_rules import BUDGET_KEYS_TOML, BUDGET_TOML, budgets_of
from support.promtool import find_promtool

STEP = 100
"""Observations per 30 s step in the synthetic series."""
STEPS = 120
"""An hour of 30 s steps."""
BUCKETS = (100.0, 200.0, 250.0, 500.0, 600.0, 700.0, 800.0, 1280.0)


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool from collector/build.sh; skips without it (fails under CI)."""
    return find_promtool()


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
    rules.write_text(prometheus_rules(budgets_of(), window="1h", for_="2m"))
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
        budgets_of(),
        [_case(_all_within(), []), _case(_all_broken(), ALL_ALERTS)],
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.integration
def test_promtool_compares_for_real(promtool: Path, tmp_path: Path) -> None:
    """The same test expecting silence on broken series fails: the check is not vacuous."""
    done = _promtool_test(promtool, tmp_path, budgets_of(), [_case(_all_broken(), [])])
    assert done.returncode != 0
    assert "FAILED" in done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_percentile_waits_for_min_runs(promtool: Path, tmp_path: Path) -> None:
    """A broken p95 over fewer runs than min_runs fires nothing; per-run limits still do."""
    budgets = budgets_of(BUDGET_TOML.replace("min_runs = 20", "min_runs = 100000"))
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
    budgets = budgets_of('[workflows.chat.steps."chat gpt-4o"]\np95 = "500ms"\n')
    expected = [
        _alert(
            'steps."chat gpt-4o".p95',
            "500",
            'chat: steps."chat gpt-4o".p95 over 500 ms (chainlat_budget:value_ms)',
        )
    ]
    done = _promtool_test(promtool, tmp_path, budgets, [_case(series, expected)])
    assert done.returncode == 0, done.stdout + done.stderr


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
    budgets = budgets_of(BUDGET_KEYS_TOML)
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
    done = _promtool_test(promtool, tmp_path, budgets_of(), [_case(series, expected)])
    assert done.returncode == 0, done.stdout + done.stderr


INTERRUPTED = {"gen_ai_agent_invocation_end_reason": "interrupted"}
INTERRUPTED_PER_STEP = 20
"""Interrupted turns per 30 s step, beside the STEP answered ones: every one slow."""


def _with_slow_interrupted_turns(answered_within: float) -> list[dict[str, str]]:
    """``answered_within`` of the answered turns within each workflow percentile limit, and
    a sixth as many interrupted turns (barge-in), all over it, in the span histogram of the
    workflow spans and in chainlat's data histogram; every other limit kept."""
    kept = [
        s
        for s in _all_within()
        if 'span_name="invoke_workflow chat"' not in s["series"]
        and 'chainlat_chain_kind="data"' not in s["series"]
    ]
    return [
        *kept,
        *_histogram(
            "traces_span_metrics_duration_milliseconds",
            WORKFLOW_SPAN,
            {0: 0.5, 700: answered_within},
        ),
        *_histogram(
            "traces_span_metrics_duration_milliseconds",
            {**WORKFLOW_SPAN, **INTERRUPTED},
            {0: 0.0},
            INTERRUPTED_PER_STEP,
        ),
        *_histogram("chainlat_chain_duration_milliseconds", DATA, {0: 0.5, 200: answered_within}),
        *_histogram(
            "chainlat_chain_duration_milliseconds",
            {**DATA, **INTERRUPTED},
            {0: 0.0},
            INTERRUPTED_PER_STEP,
        ),
    ]


@pytest.mark.integration
@pytest.mark.parametrize("include", [False, True])
def test_promtool_interrupted_turns_are_left_out_of_the_percentiles_unless_included(
    promtool: Path, tmp_path: Path, include: bool
) -> None:
    """97 % of the answered turns within 700 ms (total) and 200 ms (data) keeps both p95s
    while the slow interrupted turns are left out, as check leaves them out; with
    ``include_interrupted = true`` they count (97 of 120 within) and both p95s break."""
    setting = f"include_interrupted = {'true' if include else 'false'}"
    text = BUDGET_TOML.replace("min_runs = 20", f"min_runs = 20\n{setting}")
    expected = [ALL_ALERTS[3], ALL_ALERTS[4]] if include else []
    done = _promtool_test(
        promtool, tmp_path, budgets_of(text), [_case(_with_slow_interrupted_turns(0.97), expected)]
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_min_runs_counts_only_the_turns_the_percentile_reads(
    promtool: Path, tmp_path: Path
) -> None:
    """An hour holds 12,000 answered turns and 2,400 interrupted ones: a broken p95 waits for
    min_runs = 13,000, which only the interrupted turns, left out, would make up."""
    text = BUDGET_TOML.replace("min_runs = 20", "min_runs = 13000")
    done = _promtool_test(
        promtool, tmp_path, budgets_of(text), [_case(_with_slow_interrupted_turns(0.90), [])]
    )
    assert done.returncode == 0, done.stdout + done.stderr
    included = text.replace("min_runs = 13000", "min_runs = 13000\ninclude_interrupted = true")
    broken = [ALL_ALERTS[3], ALL_ALERTS[4]]
    done = _promtool_test(
        promtool,
        tmp_path,
        budgets_of(included),
        [_case(_with_slow_interrupted_turns(0.90), broken)],
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.integration
def test_promtool_counts_the_interrupted_turns_a_step_percentile_would_count(
    promtool: Path, tmp_path: Path
) -> None:
    """The count ``check --prometheus`` asks before it judges a step's percentile: the
    workflow's turns ended by barge-in over the window (20 per 30 s step: 2,400 in the hour
    of turns, 1,200 in a window that holds its last half), none of the answered ones nor
    of another workflow."""
    budgets = budgets_of()
    (step_p95,) = (
        q for q in limit_queries(budgets, window="1h") if q.target == 'steps."chat gpt-4o".p95'
    )
    assert step_p95.interrupted is not None
    other = {**WORKFLOW_SPAN, "span_name": "invoke_workflow other", **INTERRUPTED}
    series = [
        *_with_slow_interrupted_turns(0.97),
        {
            "series": "traces_span_metrics_duration_milliseconds_count"
            + "{"
            + ", ".join(f'{k}="{v}"' for k, v in other.items())
            + "}",
            "values": f"0+7x{STEPS}",
        },
    ]
    case = {
        "interval": "30s",
        "input_series": series,
        "promql_expr_test": [
            {
                "expr": step_p95.interrupted,
                "eval_time": "1h",
                "exp_samples": [{"labels": "{}", "value": INTERRUPTED_PER_STEP * STEPS}],
            },
            {
                "expr": step_p95.interrupted,
                "eval_time": "90m",  # the turns of the last half hour only
                "exp_samples": [{"labels": "{}", "value": INTERRUPTED_PER_STEP * STEPS // 2}],
            },
        ],
    }
    done = _promtool_test(promtool, tmp_path, budgets, [case])
    assert done.returncode == 0, done.stdout + done.stderr
