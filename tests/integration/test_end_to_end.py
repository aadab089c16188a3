"""chainlat's own spans through the real pipeline: the demo into the Collector tier and
Jaeger, the tier's span metrics, and ``chainlat check`` reading Jaeger.

Every comparison is between the same spans seen twice: the copy the application kept
locally and what arrived. Arrival is polled with a bound, never waited for blindly.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainlat import Rollup

from .apps import (
    attributes,
    jaeger_span_counts,
    jaeger_spans,
    otlp_app,
    run_workflow,
    spans_in_file,
)
from .otlp import prometheus_samples, wait_for
from .stack import CollectorTier, Jaeger

pytestmark = pytest.mark.integration

# Decision wait (2 s) + decision tick + batching + Jaeger's write, with room for a
# loaded machine.
ARRIVAL_TIMEOUT_S = 30.0
DEMO_TIMEOUT_S = 180.0
DEMO_REQUESTS = 4
"""Runs per variant; the demo runs two variants (large and small planner)."""
WORKFLOW_SPAN = "invoke_workflow support-agent"
CHAIN_PREFIX = "chainlat.chain."
SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
SPAN_KIND_LABELS = {1: "SPAN_KIND_INTERNAL", 2: "SPAN_KIND_SERVER", 3: "SPAN_KIND_CLIENT"}
STATUS_LABELS = {0: "STATUS_CODE_UNSET", 1: "STATUS_CODE_OK", 2: "STATUS_CODE_ERROR"}
DEMO_WITH_COPY = Path(__file__).with_name("demo_with_copy.py")

Spans = list[dict[str, Any]]


@dataclass(frozen=True)
class DemoRun:
    """One ``chainlat demo`` run sent to a Collector tier, and its local copy."""

    service: str
    traces: dict[str, Spans]
    """The spans the demo exported, by trace id, read from the local copy."""

    @property
    def workflow_traces(self) -> dict[str, Spans]:
        return {
            trace_id: spans
            for trace_id, spans in self.traces.items()
            if any(s["name"] == WORKFLOW_SPAN for s in spans)
        }


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as c:
        yield c


@pytest.fixture(scope="module")
def demo_run(
    collector_keep_all: CollectorTier, tmp_path_factory: pytest.TempPathFactory
) -> DemoRun:
    """The demo, exporting over OTLP to a tier that keeps every trace, with a local copy."""
    service = f"chainlat-demo-it-{uuid.uuid4().hex[:8]}"
    copy = tmp_path_factory.mktemp("demo") / "local.jsonl"
    args = [str(DEMO_WITH_COPY), service, str(copy)]
    args += ["--requests", str(DEMO_REQUESTS), "--concurrency", "2"]
    done = subprocess.run(
        [sys.executable, *args],
        env={**os.environ, **collector_keep_all.otel_env()},
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"the demo failed:\n{done.stdout}\n{done.stderr}"
    assert "traces sent over OTLP" in done.stdout, done.stdout
    return DemoRun(service, spans_in_file(copy))


def _shape(span: Mapping[str, Any]) -> dict[str, object]:
    """What must survive the trip: everything but the encoding's ordering and defaults."""
    return {
        "name": span["name"],
        "parent": span.get("parentSpanId", ""),
        "kind": span.get("kind", 0),
        "start_ns": int(span["startTimeUnixNano"]),
        "end_ns": int(span["endTimeUnixNano"]),
        "status": span.get("status", {}).get("code", 0),
        # The sampling layer adds the probability it kept the trace with.
        "attributes": {
            k: v for k, v in attributes(span).items() if k != "chainlat.sampling.probability"
        },
        "events": [
            (e["name"], int(e["timeUnixNano"]), attributes(e)) for e in span.get("events", [])
        ],
    }


def _whole_traces(
    client: httpx.Client, jaeger: Jaeger, expected: Mapping[str, Spans]
) -> dict[str, Spans] | None:
    """Jaeger's copy of each expected trace, once every one holds all its spans."""
    found = {}
    for trace_id, spans in expected.items():
        stored = jaeger_spans(client, jaeger.query_url, trace_id)
        if len(stored) < len(spans):
            return None
        found[trace_id] = stored
    return found


def test_demo_traces_reach_jaeger_exactly_as_the_demo_exported_them(
    demo_run: DemoRun, jaeger: Jaeger, client: httpx.Client
) -> None:
    """Every span of every demo trace arrives with its ids, parent, kind, times and attributes."""
    assert len(demo_run.workflow_traces) == 2 * DEMO_REQUESTS
    stored = wait_for(
        lambda: _whole_traces(client, jaeger, demo_run.traces),
        timeout_s=ARRIVAL_TIMEOUT_S,
        what=f"the {len(demo_run.traces)} demo traces, whole, in Jaeger",
    )
    for trace_id, local in demo_run.traces.items():
        arrived = {s["spanId"]: _shape(s) for s in stored[trace_id]}
        assert arrived == {s["spanId"]: _shape(s) for s in local}, trace_id
    # Nothing else arrived under the service either.
    counts = jaeger_span_counts(client, jaeger.query_url, demo_run.service)
    assert counts == {trace_id: len(spans) for trace_id, spans in demo_run.traces.items()}


def test_rollup_attributes_in_jaeger_equal_the_ones_the_demo_computed(
    demo_run: DemoRun, jaeger: Jaeger, client: httpx.Client
) -> None:
    """chainlat.chain.* on each workflow span survive OTLP -> Collector -> Jaeger bit for bit."""
    workflows = demo_run.workflow_traces
    stored = wait_for(
        lambda: _whole_traces(client, jaeger, workflows),
        timeout_s=ARRIVAL_TIMEOUT_S,
        what="the demo's workflow traces in Jaeger",
    )
    for trace_id, local_spans in workflows.items():
        [local] = [s for s in local_spans if s["name"] == WORKFLOW_SPAN]
        [arrived] = [s for s in stored[trace_id] if s["name"] == WORKFLOW_SPAN]
        local_chain = {k: v for k, v in attributes(local).items() if k.startswith(CHAIN_PREFIX)}
        arrived_chain = {k: v for k, v in attributes(arrived).items() if k.startswith(CHAIN_PREFIX)}
        # 17 of the rollup, 5 of the first output and its split, the cost (the demo has prices)
        assert len(local_chain) == 23, sorted(local_chain)
        for key, value in local_chain.items():
            # Exact equality, and the same type: a float stays a float, an int an int.
            assert arrived_chain[key] == value, key
            assert type(arrived_chain[key]) is type(value), key
        assert arrived_chain.keys() == local_chain.keys()
        rollup = Rollup.from_attributes(arrived_chain)
        assert rollup is not None
        assert rollup == Rollup.from_attributes(local_chain)
        assert (
            rollup.total_ms
            == (int(local["endTimeUnixNano"]) - int(local["startTimeUnixNano"])) / 1e6
        )


def test_demo_span_tree_in_jaeger(demo_run: DemoRun, jaeger: Jaeger, client: httpx.Client) -> None:
    """Each workflow trace: a root over the four steps and the outcome, with the right kinds."""
    stored = wait_for(
        lambda: _whole_traces(client, jaeger, demo_run.workflow_traces),
        timeout_s=ARRIVAL_TIMEOUT_S,
        what="the demo's workflow traces in Jaeger",
    )
    variants: Counter[object] = Counter()
    for trace_id, spans in stored.items():
        [root] = [s for s in spans if not s.get("parentSpanId")]
        root_attributes = attributes(root)
        variant = root_attributes["chainlat.variant"]
        variants[variant] += 1
        planner = "sim-large" if variant == "large-planner" else "sim-small"
        assert root["name"] == WORKFLOW_SPAN, trace_id
        assert root["kind"] == SPAN_KIND_INTERNAL
        assert root_attributes["chainlat.step.kind"] == "workflow"
        children = [s for s in spans if s is not root]
        assert all(s["parentSpanId"] == root["spanId"] for s in children), trace_id
        steps = sorted(
            (s for s in children if "chainlat.step.index" in attributes(s)),
            key=lambda s: int(s["startTimeUnixNano"]),
        )
        assert [
            (
                s["name"],
                s["kind"],
                attributes(s)["chainlat.step.kind"],
                attributes(s)["chainlat.step.index"],
            )
            for s in steps
        ] == [
            ("data retrieve-docs", SPAN_KIND_INTERNAL, "data", 0),
            (f"chat {planner}", SPAN_KIND_CLIENT, "inference", 1),
            ("execute_tool order-status", SPAN_KIND_INTERNAL, "tool", 2),
            ("chat sim-small", SPAN_KIND_CLIENT, "inference", 3),
        ], trace_id
        [outcome] = [s for s in children if s not in steps]
        assert outcome["name"] == "record_outcome"
        for step in steps[1::2]:
            assert attributes(step)["gen_ai.request.model"] == step["name"].removeprefix("chat ")
    assert variants == {"large-planner": DEMO_REQUESTS, "small-planner": DEMO_REQUESTS}


# --- span metrics ----------------------------------------------------------------------------

SeriesKey = tuple[str, str, str, str | None, str | None, str | None, str | None]
"""span_name, span_kind, status_code, chainlat_step_kind, gen_ai_request_model,
chainlat_workflow_name, chainlat_step_name."""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _series_of_local_span(span: Mapping[str, Any]) -> SeriesKey:
    values = attributes(span)
    return (
        span["name"],
        SPAN_KIND_LABELS[span.get("kind", 0)],
        STATUS_LABELS[span.get("status", {}).get("code", 0)],
        _text(values.get("chainlat.step.kind")),
        _text(values.get("gen_ai.request.model")),
        _text(values.get("chainlat.workflow.name")),
        _text(values.get("chainlat.step.name")),
    )


def _series_of_sample(labels: Mapping[str, str]) -> SeriesKey:
    return (
        labels["span_name"],
        labels["span_kind"],
        labels["status_code"],
        labels.get("chainlat_step_kind"),
        labels.get("gen_ai_request_model"),
        labels.get("chainlat_workflow_name"),
        labels.get("chainlat_step_name"),
    )


def test_span_metrics_hold_a_latency_histogram_per_demo_step(
    demo_run: DemoRun, collector_keep_all: CollectorTier, client: httpx.Client
) -> None:
    """Per span name, kind and model: the count, the buckets and the sum of the demo's spans."""
    durations_ms: dict[SeriesKey, list[float]] = {}
    for spans in demo_run.traces.values():
        for span in spans:
            if attributes(span).get("chainlat.step.twin") is True:
                continue  # a model call's second span: the span metrics count the call once
            duration = (int(span["endTimeUnixNano"]) - int(span["startTimeUnixNano"])) / 1e6
            durations_ms.setdefault(_series_of_local_span(span), []).append(duration)
    expected_counts = {key: len(values) for key, values in durations_ms.items()}
    names = {key[0] for key in durations_ms}
    assert {"chat sim-large", "chat sim-small", "data retrieve-docs"} <= names
    assert {"execute_tool order-status", WORKFLOW_SPAN} <= names

    def scrape() -> list[Any]:
        text = client.get(collector_keep_all.metrics_url).text
        return [
            s for s in prometheus_samples(text) if s.labels.get("service_name") == demo_run.service
        ]

    def counted() -> list[Any] | None:
        samples = scrape()
        counts = {
            _series_of_sample(s.labels): int(s.value)
            for s in samples
            if s.name == "traces_span_metrics_duration_milliseconds_count"
        }
        return samples if counts == expected_counts else None

    samples = wait_for(counted, timeout_s=ARRIVAL_TIMEOUT_S, what=f"span metrics {expected_counts}")
    for key, values in durations_ms.items():
        buckets = {
            float(s.labels["le"]): int(s.value)
            for s in samples
            if s.name == "traces_span_metrics_duration_milliseconds_bucket"
            and _series_of_sample(s.labels) == key
        }
        assert len(buckets) == 15, (key, buckets)  # 14 bounds and +Inf
        assert buckets == {le: sum(v <= le for v in values) for le in buckets}, key
        [total] = [
            s.value
            for s in samples
            if s.name == "traces_span_metrics_duration_milliseconds_sum"
            and _series_of_sample(s.labels) == key
        ]
        assert total == pytest.approx(sum(values), rel=1e-9), key
    chat_large = [k[:5] for k in durations_ms if k[0] == "chat sim-large"]
    assert set(chat_large) == {
        ("chat sim-large", "SPAN_KIND_CLIENT", "STATUS_CODE_UNSET", "inference", "sim-large")
    }


def test_the_applications_genai_histograms_reach_prometheus_through_the_tier(
    demo_run: DemoRun, collector_keep_all: CollectorTier, client: httpx.Client
) -> None:
    """chainlat's OTLP metrics pass the tier's metrics pipeline: counts match the spans."""
    calls: dict[str, int] = {}
    for spans in demo_run.traces.values():
        for span in spans:
            if span["name"].startswith("chat "):
                model = span["name"].removeprefix("chat ")
                calls[model] = calls.get(model, 0) + 1

    def counted() -> dict[str, int] | None:
        text = client.get(collector_keep_all.metrics_url).text
        found: dict[str, int] = {}
        for sample in prometheus_samples(text):
            if (
                sample.name == "gen_ai_client_operation_duration_seconds_count"
                # The Prometheus exporter turns service.name into `job`.
                and sample.labels.get("job") == demo_run.service
            ):
                model = sample.labels["gen_ai_request_model"]
                found[model] = found.get(model, 0) + int(sample.value)
        return found if found == calls else None

    assert wait_for(counted, timeout_s=ARRIVAL_TIMEOUT_S, what=f"GenAI histograms {calls}")


# --- chainlat check on Jaeger and on the local file -------------------------------------------

CHECK_RUNS = 10
BUDGETS_TOML = """\
[workflows.answer]
total = "500ms"
p95 = "500ms"
"""


def _chainlat_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", *args, "--format", "json", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("slow_runs", "expected_exit"),
    [(0, 0), (2, 1)],
    ids=["within-budget", "over-budget"],
)
def test_check_on_jaeger_gives_the_verdict_of_the_local_file(
    jaeger: Jaeger, client: httpx.Client, tmp_path: Path, slow_runs: int, expected_exit: int
) -> None:
    """`chainlat check --jaeger` and `chainlat check FILE` on the same spans: the same report."""
    service = f"chainlat-check-it-{uuid.uuid4().hex[:8]}"
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(BUDGETS_TOML)
    local_file = tmp_path / "local.jsonl"
    # Straight into Jaeger's OTLP receiver: no sampling between the two copies.
    with otlp_app(jaeger.otlp_http_endpoint, service, traces_file=local_file) as app:

        async def workload() -> list[str]:
            return await asyncio.gather(
                *(
                    run_workflow(
                        app.provider,
                        "answer",
                        data_ms=5,
                        inference_ms=600 if i < slow_runs else 15,
                        tool_ms=5,
                    )
                    for i in range(CHECK_RUNS)
                )
            )

        trace_ids = asyncio.run(workload())
        app.flush()
    local = spans_in_file(local_file)
    assert set(local) == set(trace_ids)
    expected = {trace_id: len(spans) for trace_id, spans in local.items()}
    wait_for(
        lambda: jaeger_span_counts(client, jaeger.query_url, service) == expected,
        timeout_s=ARRIVAL_TIMEOUT_S,
        what=f"{CHECK_RUNS} traces of {service} in Jaeger",
    )

    from_jaeger = _chainlat_check(
        "--jaeger", jaeger.query_url, "--service", service, "--lookback", "10m",
        "--limit", "50", "--budgets", str(budgets),
    )  # fmt: skip
    from_file = _chainlat_check(str(local_file), "--budgets", str(budgets))

    assert from_file.returncode == expected_exit, from_file.stdout + from_file.stderr
    assert from_jaeger.returncode == expected_exit, from_jaeger.stdout + from_jaeger.stderr
    jaeger_report, file_report = json.loads(from_jaeger.stdout), json.loads(from_file.stdout)
    assert jaeger_report == file_report
    assert jaeger_report["ok"] is (expected_exit == 0)
    broken = [v for v in jaeger_report["verdicts"] if v["status"] == "broken"]
    assert [v["broken_runs"] for v in broken if v["kind"] == "run"] == (
        [slow_runs] if slow_runs else []
    )
