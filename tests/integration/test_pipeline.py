"""The Collector tier (collector/otelcol.yaml) in front of Jaeger: what it keeps, what it measures.

Traces are built by hand with chosen timestamps, so a "slow" trace costs no waiting;
the tail-sampling decision waits 2 s. Each test uses its own service name in Jaeger.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterator
from typing import Any, Final

import httpx
import pytest

from .conftest import CollectorFactory
from .otlp import (
    Sample,
    attribute_map,
    jaeger_trace_ids,
    jaeger_trace_v3,
    prometheus_samples,
    send,
    wait_for,
    workflow_trace,
)
from .stack import CollectorTier, Jaeger, Sampling

pytestmark = pytest.mark.integration

# Decision wait (2 s) + a decision tick (1 s) + batching + Jaeger's write, with room.
ARRIVAL_TIMEOUT_S = 20.0


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as c:
        yield c


@pytest.fixture
def service() -> str:
    return f"chainlat-it-{uuid.uuid4().hex[:8]}"


def _settle(
    client: httpx.Client, collector: CollectorTier, jaeger: Jaeger, service: str, seed: int
) -> str:
    """Send an over-budget marker trace and wait for it: earlier traces are decided too."""
    marker = workflow_trace(random.Random(seed), budget_ok=False)
    send(client, collector.otlp_http_endpoint, service, [marker])
    wait_for(
        lambda: marker.trace_id in jaeger_trace_ids(client, jaeger.query_url, service),
        timeout_s=ARRIVAL_TIMEOUT_S,
        what="the marker trace",
    )
    return marker.trace_id


def test_over_budget_workflow_arrives_whole_in_jaeger(
    collector: CollectorTier, jaeger: Jaeger, client: httpx.Client, service: str
) -> None:
    """A workflow with chainlat.budget.ok=false reaches Jaeger with all spans and attributes."""
    trace = workflow_trace(random.Random(10), budget_ok=False, duration_ms=250)
    send(client, collector.otlp_http_endpoint, service, [trace])

    def whole_trace() -> list[dict[str, Any]] | None:
        spans = jaeger_trace_v3(client, jaeger.query_url, trace.trace_id)
        return spans if len(spans) == len(trace.spans) else None

    spans = wait_for(
        whole_trace, timeout_s=ARRIVAL_TIMEOUT_S, what="the over-budget trace in Jaeger"
    )
    by_name = {s["name"]: s for s in spans}
    assert set(by_name) == {s.name for s in trace.spans}
    root = by_name["invoke_workflow support-chat"]
    assert attribute_map(root)["chainlat.budget.ok"] is False
    chat = attribute_map(by_name["chat gpt-4o-mini"])
    assert chat["gen_ai.request.model"] == "gpt-4o-mini"
    assert chat["chainlat.step.kind"] == "inference"
    children = [s for s in spans if s is not root]
    assert all(s["parentSpanId"] == root["spanId"] for s in children)


def test_kept_and_dropped_traces_follow_the_policies(
    collector: CollectorTier, jaeger: Jaeger, client: httpx.Client, service: str
) -> None:
    """At 0 %: every error, over-budget and slow trace is kept, no plain fast one."""
    rng = random.Random(20)
    errors = [workflow_trace(rng, error=True) for _ in range(5)]
    over_budget = [workflow_trace(rng, budget_ok=False) for _ in range(5)]
    slow = [workflow_trace(rng, duration_ms=collector.sampling.latency_ms + 1000) for _ in range(5)]
    plain = [workflow_trace(rng) for _ in range(20)]
    unbudgeted = [workflow_trace(rng, budget_ok=None) for _ in range(5)]
    send(client, collector.otlp_http_endpoint, service, errors + over_budget + slow)
    send(client, collector.otlp_http_endpoint, service, plain + unbudgeted)
    marker = _settle(client, collector, jaeger, service, seed=21)

    kept = jaeger_trace_ids(client, jaeger.query_url, service) - {marker}
    assert kept == {t.trace_id for t in errors + over_budget + slow}


def test_everything_is_kept_at_100_percent(
    collector_keep_all: CollectorTier, jaeger: Jaeger, client: httpx.Client, service: str
) -> None:
    tier = collector_keep_all
    plain = [workflow_trace(random.Random(30 + i)) for i in range(20)]
    send(client, tier.otlp_http_endpoint, service, plain)
    expected = {t.trace_id for t in plain}
    wait_for(
        lambda: jaeger_trace_ids(client, jaeger.query_url, service) >= expected,
        timeout_s=ARRIVAL_TIMEOUT_S,
        what="all 20 plain traces",
    )


def _baseline_decisions(client: httpx.Client, tier: CollectorTier) -> dict[str, float]:
    """The baseline sampler's decisions so far, from the Collector's own metrics:
    {"true": traces kept, "false": traces dropped}."""
    decided = {"true": 0.0, "false": 0.0}
    for sample in prometheus_samples(client.get(tier.telemetry_url).text):
        if (
            sample.name == "otelcol_processor_tail_sampling_count_traces_sampled"
            and sample.labels.get("policy") == "baseline.baseline"
        ):
            decided[sample.labels["sampled"]] += sample.value
    return decided


# X ~ Binomial(400, 0.25): mean 100, sigma 8.66. P(X < 57 or X > 143) = 7.2e-7 (exact sum
# of the binomial tails; 43 is 4.97 sigma), so a count outside says the sampler does not keep
# a quarter, not bad luck. The trace ids are fixed and the Collector hashes them, so the
# count is also the same on every run.
SHARE_TRACES: Final = 400
SHARE_BOUNDS: Final = (57, 143)


def test_intermediate_rate_keeps_about_that_share(
    collector_factory: CollectorFactory, jaeger: Jaeger, client: httpx.Client, service: str
) -> None:
    """At 25 %, about a quarter of 400 plain traces is kept (binomial bound: 57 to 143),
    and Jaeger gets every trace the sampler kept."""
    tier = collector_factory(Sampling(percent=25))
    rng = random.Random(40)  # fixed ids: the outcome is the same on every run
    plain = [workflow_trace(rng) for _ in range(SHARE_TRACES)]
    for start in range(0, len(plain), 100):
        send(client, tier.otlp_http_endpoint, service, plain[start : start + 100])

    # Wait for the sampler's own count of decisions, not for a marker trace: a marker is
    # kept by the other sampler, whose pipeline exports apart from this one, so its arrival
    # says nothing about whether the baseline's kept traces have reached Jaeger yet.
    def all_decided() -> dict[str, float] | None:
        decided = _baseline_decisions(client, tier)
        return decided if decided["true"] + decided["false"] >= SHARE_TRACES else None

    decided = wait_for(
        all_decided,
        timeout_s=ARRIVAL_TIMEOUT_S,
        what=f"the baseline sampler's decisions on {SHARE_TRACES} traces",
    )
    assert decided["true"] + decided["false"] == SHARE_TRACES, decided
    sampled = int(decided["true"])
    low, high = SHARE_BOUNDS
    assert low <= sampled <= high, sampled

    def all_arrived() -> set[str] | None:
        ids = jaeger_trace_ids(client, jaeger.query_url, service)
        return ids if len(ids) >= sampled else None

    kept = wait_for(
        all_arrived,
        timeout_s=ARRIVAL_TIMEOUT_S,
        what=f"the {sampled} traces the sampler kept, in Jaeger",
    )
    assert kept <= {t.trace_id for t in plain}
    assert len(kept) == sampled


def test_span_metrics_expose_latency_histograms_per_span_name(
    collector: CollectorTier, client: httpx.Client, service: str
) -> None:
    """Every span, kept or not, lands in a duration histogram labelled by kind and model."""
    model = f"gpt-it-{uuid.uuid4().hex[:6]}"
    traces = [workflow_trace(random.Random(50 + i), model=model) for i in range(3)]
    send(client, collector.otlp_http_endpoint, service, traces)

    def histograms() -> dict[str, Sample] | None:
        counts = {
            sample.labels["span_name"]: sample
            for sample in prometheus_samples(client.get(collector.metrics_url).text)
            if sample.name == "traces_span_metrics_duration_milliseconds_count"
            and sample.labels.get("service_name") == service
        }
        return counts if len(counts) == 4 else None

    counts = wait_for(histograms, timeout_s=ARRIVAL_TIMEOUT_S, what="four span histograms")
    assert set(counts) == {s.name for s in traces[0].spans}
    assert all(sample.value == len(traces) for sample in counts.values())
    chat = counts[f"chat {model}"].labels
    assert chat["gen_ai_request_model"] == model
    assert chat["chainlat_step_kind"] == "inference"
    assert counts["execute_tool lookup-order"].labels["chainlat_step_kind"] == "tool"
    assert "gen_ai_request_model" not in counts["execute_tool lookup-order"].labels


def test_span_metrics_label_an_interrupted_turn_by_its_end_reason(
    collector: CollectorTier, client: httpx.Client, service: str
) -> None:
    """A workflow span ended ``gen_ai.agent.invocation.end_reason = "interrupted"`` is counted
    in a series of its own, labelled ``gen_ai_agent_invocation_end_reason``, which the budget
    rules leave out of the percentiles; the other workflow spans carry no such label."""
    traces = [workflow_trace(random.Random(70 + i)) for i in range(3)]
    root = traces[0].spans[0]
    cut = dataclasses.replace(
        root, attributes={**root.attributes, "gen_ai.agent.invocation.end_reason": "interrupted"}
    )
    traces[0] = dataclasses.replace(traces[0], spans=[cut, *traces[0].spans[1:]])
    send(client, collector.otlp_http_endpoint, service, traces)

    def by_end_reason() -> dict[str | None, float] | None:
        counts = {
            sample.labels.get("gen_ai_agent_invocation_end_reason"): sample.value
            for sample in prometheus_samples(client.get(collector.metrics_url).text)
            if sample.name == "traces_span_metrics_duration_milliseconds_count"
            and sample.labels.get("service_name") == service
            and sample.labels["span_name"] == "invoke_workflow support-chat"
        }
        return counts if sum(counts.values()) == len(traces) else None

    counts = wait_for(by_end_reason, timeout_s=ARRIVAL_TIMEOUT_S, what="the workflow spans")
    assert counts == {"interrupted": 1, None: 2}
