"""The scaled tier's accounting rules (collector/rules/tier-losses.yml), proved by promtool
on the Collectors' own metrics of a tier whose replica 2 was killed holding undecided spans
and kept spans queued for Jaeger, and started again: each figure per process, the losses
of the killed process only, and the table closing on what the load balancer received."""

from __future__ import annotations

import inspect
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from chainlat.prometheus import parse_duration, prometheus_rules
from chainlat.prometheus.rules import TIER_METRIC_EXPIRATION
from support.promtool import check_rules, find_promtool

TIER_RULES = Path(__file__).resolve().parents[2] / "collector" / "rules" / "tier-losses.yml"

LB = {"instance": "lb:8887", "service_instance_id": "lb1"}
R1 = {"instance": "r1:8888", "service_instance_id": "r1a"}
R2 = {"instance": "r2:8888", "service_instance_id": "r2a"}
"""Replica 2's first process, killed at 2.5 min (its series stale from then on)."""
R2_AGAIN = {"instance": "r2:8888", "service_instance_id": "r2b"}
"""Replica 2 started again on the same address at 2.75 min, with no traffic since."""


@pytest.fixture(scope="module")
def promtool() -> Path:
    """promtool from collector/build.sh; skips without it (fails under CI)."""
    return find_promtool()


def _series(name: str, process: dict[str, str], values: str, **labels: str) -> dict[str, str]:
    every = {"job": "chainlat-collectors", **process, **labels}
    text = ", ".join(f'{k}="{v}"' for k, v in every.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def _replica(process: dict[str, str], end: str, **counts: str) -> list[dict[str, str]]:
    """A replica process's own metrics: each count ramps to its value in two scrapes and
    stays there, then ``end`` (``x20`` to stay live, ``x8 stale`` to die at 2.5 min)."""

    def ramp(total: str) -> str:
        return f"0 {int(total) // 2} {total}{end}"

    found = [
        _series("otelcol_processor_tail_sampling_sampling_traces_on_memory", process, f"0{end}"),
        _series("otelcol_receiver_accepted_spans_total", process, ramp(counts["accepted"])),
    ]
    for sampled in ("false", "true"):  # late spans, both samplers' releases in one series
        if f"released_{sampled}" in counts:
            found.append(
                _series(
                    "otelcol_processor_tail_sampling_early_releases_from_cache_decision_total",
                    process,
                    ramp(counts[f"released_{sampled}"]),
                    sampled=sampled,
                )
            )
    for sampled in ("false", "true"):
        found.append(
            _series(
                "otelcol_processor_tail_sampling_count_spans_sampled_total",
                process,
                ramp(counts[f"decided_{sampled}"]),
                policy="baseline.baseline",
                sampled=sampled,
            )
        )
    for sampler in ("always", "baseline"):
        found.append(
            _series(
                "otelcol_processor_outgoing_items_total",
                process,
                ramp(counts[f"kept_{sampler}"]),
                processor=f"attributes/kept-{sampler}",
                otel_signal="traces",
            )
        )
    found.append(
        _series(
            "otelcol_exporter_sent_spans_total",
            process,
            ramp(counts["exported"]),
            exporter="otlp/jaeger",
        )
    )
    if "failed" in counts:
        found.append(
            _series(
                "otelcol_exporter_send_failed_spans_total",
                process,
                ramp(counts["failed"]),
                exporter="otlp/jaeger",
            )
        )
    for direction, key in (("incoming", "accepted"), ("outgoing", "to_span_metrics")):
        found.append(
            _series(
                f"otelcol_processor_{direction}_items_total",
                process,
                ramp(counts[key]),
                processor="filter/twins",
                otel_signal="traces",
            )
        )
    return found


def _tier() -> list[dict[str, str]]:
    """The load balancer received 200 spans; replica 1 accepted 110, replica 2 80 (10 were
    accepted by none). Replica 1, live: 100 decided on, 4 late (after their trace's
    decision: each sampler released them by its cached decision, 3 kept by the always
    sampler, 5 dropped in all), 6 undecided, 30 kept (25 sent, 2 failed, 3 queued), 5
    twins. Replica 2, killed: 35 undecided, 20 kept (4 sent, 16 queued). The span metrics
    counted 105 of replica 1's spans and 70 of replica 2's."""
    return [
        _series("otelcol_receiver_accepted_spans_total", LB, "0 100 200x20", transport="http"),
        _series(
            "otelcol_exporter_sent_spans_total",
            LB,
            "0 100 195x20",
            exporter="loadbalancing/traces",
        ),
        *_replica(
            R1,
            "x20",
            accepted="110",
            decided_false="90",
            decided_true="10",
            released_false="5",
            released_true="3",
            kept_always="20",
            kept_baseline="10",
            exported="25",
            failed="2",
            to_span_metrics="105",
        ),
        *_replica(
            R2,
            "x8 stale",
            accepted="80",
            decided_false="40",
            decided_true="5",
            kept_always="15",
            kept_baseline="5",
            exported="4",
            to_span_metrics="80",
        ),
        _series("otelcol_processor_tail_sampling_sampling_traces_on_memory", R2_AGAIN, "_x11 0x10"),
        _series("otelcol_receiver_accepted_spans_total", R2_AGAIN, "_x11 0x10", transport="grpc"),
        {
            "series": 'traces_span_metrics_calls_total{collector_instance_id="c1", span_name="x"}',
            "values": "0 48 105x20",
        },
        {
            "series": 'traces_span_metrics_calls_total{collector_instance_id="c2", span_name="x"}',
            "values": "0 30 70x8 stale",
        },
    ]


def _expect(rule: str, values: dict[str, float] | float) -> dict[str, Any]:
    """A promql_expr_test of ``chainlat_tier:RULE`` at 5 min: per process, or one value."""
    if isinstance(values, dict):
        samples = [
            {
                "labels": f'chainlat_tier:{rule}{{instance="{instance}", '
                f'service_instance_id="{sid}"}}',
                "value": value,
            }
            for (instance, sid), value in ((k.split("/"), v) for k, v in values.items())
        ]
    else:
        samples = [{"labels": f"chainlat_tier:{rule}", "value": values}]
    return {"expr": f"chainlat_tier:{rule}", "eval_time": "5m", "exp_samples": samples}


def _run(promtool: Path, tmp_path: Path, tests: list[dict[str, Any]]) -> str:
    (tmp_path / "tier-losses.yml").write_text(TIER_RULES.read_text())
    (tmp_path / "tests.yml").write_text(
        yaml.safe_dump(
            {
                "rule_files": ["tier-losses.yml"],
                "evaluation_interval": "15s",
                "tests": [{"interval": "15s", "input_series": _tier(), "promql_expr_test": tests}],
            },
            sort_keys=False,
        )
    )
    done = subprocess.run(
        [str(promtool), "test", "rules", "tests.yml"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    return "" if done.returncode == 0 else done.stdout + done.stderr


R1_ = "r1:8888/r1a"
R2_ = "r2:8888/r2a"
R2B = "r2:8888/r2b"


@pytest.mark.integration
def test_promtool_the_tier_rules_count_each_fate_of_a_span_per_process(
    promtool: Path, tmp_path: Path
) -> None:
    """Each figure per process; the killed process's held and queued spans in the two loss
    rules, and nothing for the live processes."""
    assert check_rules(promtool, TIER_RULES).returncode == 0
    failures = _run(
        promtool,
        tmp_path,
        [
            _expect("spans_received", 200),
            _expect("spans_accepted", {R1_: 110, R2_: 80, R2B: 0}),
            _expect("spans_not_accepted_by_a_replica", 10),
            _expect("spans_kept", {R1_: 30, R2_: 20, R2B: 0}),
            _expect("spans_exported", {R1_: 25, R2_: 4, R2B: 0}),
            _expect("spans_export_failed", {R1_: 2, R2_: 0, R2B: 0}),
            _expect("spans_queued_for_jaeger", {R1_: 3, R2_: 16, R2B: 0}),
            _expect("spans_lost_in_jaeger_queue", {R2_: 16}),
            _expect("late_spans", {R1_: 4, R2_: 0, R2B: 0}),
            _expect("undecided_spans", {R1_: 6, R2_: 35, R2B: 0}),
            _expect("spans_lost_with_process", {R2_: 35}),
            _expect("spans_decided_against", {R1_: 74, R2_: 25, R2B: 0}),
            _expect("twin_spans", {R1_: 5, R2_: 0, R2B: 0}),
            _expect("spans_in_span_metrics", 175),
            _expect("spans_missing_from_span_metrics", 10),
        ],
    )
    assert not failures, failures


@pytest.mark.integration
def test_promtool_the_tier_table_closes_with_no_term_left_over(
    promtool: Path, tmp_path: Path
) -> None:
    """Received = not accepted + exported + export failed + queued + decided against +
    undecided, summed over the processes: 200 = 10 + 29 + 2 + 19 + 99 + 41 (the late spans
    among the decided against)."""
    closing = (
        "chainlat_tier:spans_received - (chainlat_tier:spans_not_accepted_by_a_replica"
        " + sum(chainlat_tier:spans_exported) + sum(chainlat_tier:spans_export_failed)"
        " + sum(chainlat_tier:spans_queued_for_jaeger)"
        " + sum(chainlat_tier:spans_decided_against) + sum(chainlat_tier:undecided_spans))"
    )
    test = {"expr": closing, "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 0}]}
    assert not _run(promtool, tmp_path, [test])
    # Not vacuous: the same closing without the queued term misses the 19 queued spans.
    short = closing.replace(" + sum(chainlat_tier:spans_queued_for_jaeger)", "")
    test = {"expr": short, "eval_time": "5m", "exp_samples": [{"labels": "{}", "value": 0}]}
    assert "1.9E+01" in _run(promtool, tmp_path, [test])


def test_the_tier_keeps_a_series_at_least_as_long_as_any_window_of_its_rules() -> None:
    """collector/otelcol.yaml's metric_expiration default (``CHAINLAT_METRIC_EXPIRATION``)
    is the one the rules generator warns from, and no shorter than the default window of
    ``chainlat budgets rules`` or any window of the tier's own rules."""
    config = yaml.safe_load((TIER_RULES.parents[1] / "otelcol.yaml").read_text())
    setting = config["exporters"]["prometheus"]["metric_expiration"]
    match = re.fullmatch(r"\$\{env:CHAINLAT_METRIC_EXPIRATION:-(\w+)\}", setting)
    assert match is not None, setting
    expiration = match.group(1)
    assert expiration == TIER_METRIC_EXPIRATION
    default_window = inspect.signature(prometheus_rules).parameters["window"].default
    windows = [default_window, *re.findall(r"\[(\w+)\]", TIER_RULES.read_text())]
    assert all(parse_duration(w) <= parse_duration(expiration) for w in windows), windows


def test_late_spans_are_divided_by_the_number_of_samplers_the_tier_runs() -> None:
    """``chainlat_tier:late_spans`` halves the samplers' early releases because each of the
    tier's samplers sees every span and releases a late one once, in one series that names
    no sampler: the divisor is the count of ``tail_sampling`` processors the
    Collector's pipelines run, and a pipeline added or removed in collector/otelcol.yaml
    fails here until the rule follows it."""
    config = yaml.safe_load((TIER_RULES.parents[1] / "otelcol.yaml").read_text())
    samplers = {
        processor
        for pipeline in config["service"]["pipelines"].values()
        for processor in pipeline.get("processors", [])
        if processor.split("/", 1)[0] == "tail_sampling"
    }
    rules = yaml.safe_load(TIER_RULES.read_text())
    (late,) = [
        rule["expr"]
        for group in rules["groups"]
        for rule in group["rules"]
        if rule.get("record") == "chainlat_tier:late_spans"
    ]
    divisors = re.findall(r"\)\s*/\s*(\d+)", late)
    assert divisors == [str(len(samplers))], (sorted(samplers), divisors)
