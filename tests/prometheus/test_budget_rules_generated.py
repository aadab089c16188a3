"""Budgets as Prometheus rules, what is generated: one query per limit metrics can express,
the rest listed, one group per workflow, the bucket boundaries, and the CLI that writes
them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

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
from support.budget_rules import BUDGET_KEYS_TOML, BUDGET_TOML, budgets_of


def test_every_limit_metrics_can_express_is_one_query() -> None:
    """Per-run limits (split and step max), workflow and step percentiles: one query each."""
    queries = {(q.workflow, q.target): q for q in limit_queries(budgets_of(), window="1h")}
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
    missing = unexpressed_limits(budgets_of())
    assert [(u.workflow, u.target) for u in missing] == [("chat", 'steps."chat gpt-4o".ttft_p95')]
    text = prometheus_rules(budgets_of())
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any('workflows.chat.steps."chat gpt-4o".ttft_p95' in line for line in header)


def test_rules_file_is_one_group_per_workflow_with_a_record_pair_and_alert_per_limit() -> None:
    document = yaml.safe_load(prometheus_rules(budgets_of(), window="30m"))
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
    spans = bucket_boundaries(budgets_of())
    assert {700.0, 500.0, 600.0} <= set(spans) and 10.0 in spans
    chain = chain_boundaries(budgets_of(), [10.0, 20.0])
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
    assert capsys.readouterr().out.strip() == buckets_setting(bucket_boundaries(budgets_of()))


def test_cli_rejects_a_bad_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    budget_file = tmp_path / "chainlat.toml"
    budget_file.write_text(BUDGET_TOML)
    assert main(["budgets", "rules", str(budget_file), "--window", "an hour"]) == 2
    err = capsys.readouterr().err
    assert "an hour" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_first_output_error_rate_and_cost_keys_are_one_query_each() -> None:
    budgets = budgets_of(BUDGET_KEYS_TOML)
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
    queries = {q.target: q for q in limit_queries(budgets_of(text))}
    assert "STATUS_CODE_ERROR" not in queries["p95.total"].value
    assert 'error_type=""' not in queries["p95.data"].value
    assert "STATUS_CODE_ERROR" not in queries['steps."chat gpt-4o".p95'].value


@pytest.mark.parametrize(("window", "named"), [("1h", False), ("2h", False), ("6h", True)])
def test_a_window_longer_than_the_tiers_series_expiry_names_the_setting(
    window: str, named: bool
) -> None:
    """The tier keeps a series 2 h without an update: a longer window says, in the header,
    to start it with CHAINLAT_METRIC_EXPIRATION at least the window."""
    text = prometheus_rules(budgets_of(), window=window)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert (f"#   CHAINLAT_METRIC_EXPIRATION={window}" in header) is named


NOT_INTERRUPTED = 'gen_ai_agent_invocation_end_reason!="interrupted"'


def test_interrupted_turns_are_left_out_of_each_workflow_percentile_and_its_runs() -> None:
    """As check leaves them out: the total's span histogram, the split's chain histogram and
    the runs each is read from (min_runs) filter interrupted turns out, as do the runs of a
    per-run limit; the step percentile cannot (its spans do not carry the turn's end)."""
    queries = {q.target: q for q in limit_queries(budgets_of())}
    for target in ("p95.total", "p95.data"):
        query = queries[target]
        for expression in (query.value, query.runs):
            selectors = re.findall(r"_(?:bucket|count)\{[^}]*\}", expression)
            assert selectors and all(NOT_INTERRUPTED in s for s in selectors), expression
    assert 'status_code!="STATUS_CODE_ERROR", ' + NOT_INTERRUPTED in queries["p95.total"].value
    assert 'error_type="", ' + NOT_INTERRUPTED in queries["p95.data"].runs
    assert NOT_INTERRUPTED in queries["total"].runs
    assert NOT_INTERRUPTED not in queries["total"].value  # the application's own count
    assert NOT_INTERRUPTED not in queries['steps."chat gpt-4o".p95'].value


@pytest.mark.parametrize("where", ["top", "workflow"])
def test_include_interrupted_keeps_interrupted_turns_in_the_percentiles(where: str) -> None:
    """``include_interrupted = true``, for every workflow or for this one: no filter, and
    failed runs are still left out."""
    if where == "top":
        text = BUDGET_TOML.replace("min_runs = 20", "min_runs = 20\ninclude_interrupted = true")
    else:
        text = BUDGET_TOML.replace('data = "250ms"', 'data = "250ms"\ninclude_interrupted = true')
    queries = limit_queries(budgets_of(text))
    assert queries and all(
        "gen_ai_agent_invocation_end_reason" not in q.value + q.runs for q in queries
    )
    by_target = {q.target: q for q in queries}
    assert 'status_code!="STATUS_CODE_ERROR"' in by_target["p95.total"].value
    assert 'error_type=""' in by_target["p95.data"].value
