"""The scaled tier's workload and how its tests read it back: the ``scaled`` fixture
(tests/integration/conftest.py) and the tests/integration/test_scaled_tier_*.py modules.

An application (chainlat, budgets enforced, metrics over OTLP) sends 60 runs through the
load balancer; a second process adds a span to each over-budget trace after its decision.
Every wait is a bounded :func:`poll`, never a sleep on a guess.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from integration.apps import jaeger_spans, trace_id_of
from integration.stack import Jaeger, Sampling, ScaledTier

T = TypeVar("T")

SERVICE = "tier-app"
BUDGET_TOML = """
min_runs = 5

[workflows.checkout]
total = "150ms"
p95 = { total = "150ms" }

[workflows.browse]
total = "5s"
p95 = { total = "2s" }
"""
SAMPLING = Sampling(percent=20, decision_wait_s=2.0, spanmetrics_flush_s=1.0)
POLL_S = 60.0
"""The longest any wait for the pipeline lasts (decision wait, flushes, scrapes)."""


def poll(
    what: str,
    probe: Callable[[], T | None],
    timeout_s: float = POLL_S,
    state: Callable[[], object] | None = None,
) -> T:
    """``probe()`` until it returns something other than None; fail after ``timeout_s``,
    with ``state()`` (what was seen) in the message."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            seen = f"; seen: {state()}" if state is not None else ""
            pytest.fail(f"{what}: not within {timeout_s:g}s{seen}", pytrace=False)
        time.sleep(0.25)


@dataclass
class Workload:
    """What the application sent, from its own copy of every span."""

    spans: list[ReadableSpan] = field(default_factory=list)
    over_budget: set[str] = field(default_factory=set)
    failed: set[str] = field(default_factory=set)
    within: set[str] = field(default_factory=set)
    late_spans: Counter[str] = field(default_factory=Counter)
    """Spans another process added to a trace after its decision wait, by trace id."""
    traces_file: Path = Path()

    def spans_by_trace(self) -> Counter[str]:
        found = Counter(trace_id_of(s) for s in self.spans)
        found.update(self.late_spans)
        return found


@dataclass
class Scaled:
    jaeger: Jaeger
    tier: ScaledTier
    rules: Path
    budgets_file: Path
    workload: Workload
    client: httpx.Client


async def _run(provider: Any, name: str, data_ms: float, *, fail: bool, twin: bool) -> str:
    """One run: data, a model call (seen twice when ``twin``: a framework's span beside
    chainlat's), a tool step that raises when ``fail``."""
    handle: chainlat.WorkflowHandle | None = None
    try:
        async with chainlat.workflow(name, tracer_provider=provider) as handle:
            async with chainlat.data_stage("fetch-cart", tracer_provider=provider):
                await asyncio.sleep(data_ms / 1000)
            framework = None
            if twin:
                framework = provider.get_tracer("framework").start_span(
                    "ChatOpenAI",
                    attributes={"openinference.span.kind": "LLM", "llm.model_name": "sim-model"},
                )
            async with chainlat.inference("sim-model", provider="sim", tracer_provider=provider):
                await asyncio.sleep(0.002)
            if framework is not None:
                framework.end()
            async with chainlat.tool("pay", tracer_provider=provider):
                if fail:
                    raise RuntimeError("payment service unavailable")
    except RuntimeError:
        pass
    assert handle is not None
    return f"{handle.span.get_span_context().trace_id:032x}"


def _late_span_script(endpoint: str, trace_id: str) -> str:
    """A second process adding one span to an existing trace, as a feedback service would."""
    return f"""
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

provider = TracerProvider(resource=Resource.create({{"service.name": "{SERVICE}-feedback"}}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint="{endpoint}/v1/traces")))
parent = SpanContext(int("{trace_id}", 16), 1, is_remote=True, trace_flags=TraceFlags(1))
with provider.get_tracer("feedback").start_as_current_span(
    "user_feedback", context=trace.set_span_in_context(NonRecordingSpan(parent))
):
    pass
provider.shutdown()
"""


def send_workload(
    tier: ScaledTier, budgets_file: Path, out: Path, over: int = 6, *, batch: bool = True
) -> Workload:
    """60 runs (30 + ``over`` - 6 with ``over``): within budget, over budget, failed. With
    ``batch=False`` each span goes in its own request (a SimpleSpanProcessor)."""
    workload = Workload(traces_file=out)
    spans = InMemorySpanExporter()
    reader = InMemoryMetricReader()
    otlp_metrics = PeriodicExportingMetricReader(
        OTLPMetricExporter(endpoint=f"{tier.otlp_http_endpoint}/v1/metrics"),
        export_interval_millis=500,
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", tier.otlp_http_endpoint)
        patch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        # Every span at the force_flush below, together: a trace whose spans the batch
        # processor split across two exports seconds apart (its 5 s timer firing in a run)
        # reached a replica partly after the trace's decision, and the tests' figures hold
        # each trace whole on one side of its decision (late spans are the fixture's own,
        # `add_late_spans`). Seen once in 13 runs: 3 such spans, which the tier's
        # accounting then held undecided for good (collector/README.md, "Losses").
        patch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
        patch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "2048")
        provider = chainlat.configure(
            SERVICE,
            exporter="otlp",
            set_global=False,
            metric_readers=[reader, otlp_metrics],
            budgets=budgets_file,
            batch=batch,
        )
        provider.add_span_processor(SimpleSpanProcessor(spans))
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(out)))

        async def send() -> None:
            for index in range(30):
                twin = index % 3 == 0
                tid = await _run(provider, "checkout", 5, fail=False, twin=twin)
                workload.within.add(tid)
            for index in range(over):
                workload.over_budget.add(
                    await _run(provider, "checkout", 250, fail=False, twin=index == 0)
                )
            for _ in range(4):
                workload.failed.add(await _run(provider, "checkout", 5, fail=True, twin=False))
            for _ in range(20):
                workload.within.add(await _run(provider, "browse", 5, fail=False, twin=False))

        try:
            asyncio.run(send())
            assert provider.force_flush(30_000)
        finally:
            chainlat.shutdown()
            provider.shutdown()
    workload.spans = list(spans.get_finished_spans())
    # The app judged each run: a within-budget one it marked over moves (slow machine).
    marked_over = {
        trace_id_of(s)
        for s in workload.spans
        if (s.attributes or {}).get("chainlat.budget.ok") is False
    }
    workload.within -= marked_over
    workload.over_budget |= marked_over - workload.failed
    return workload


def add_late_spans(tier: ScaledTier, workload: Workload) -> None:
    """After the decision wait, a second process adds a span to each over-budget trace."""
    time.sleep(0)  # the decision wait is passed by the poll in the fixture
    for trace_id in sorted(workload.over_budget):
        done = subprocess.run(
            [sys.executable, "-c", _late_span_script(tier.otlp_http_endpoint, trace_id)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        workload.late_spans[trace_id] += 1


def jaeger_count(client: httpx.Client, jaeger: Jaeger, trace_id: str) -> int:
    """The spans of ``trace_id`` Jaeger returns."""
    return len(jaeger_spans(client, jaeger.query_url, trace_id))


def prometheus(scaled: Scaled, path: str, **params: str) -> Any:
    """The ``data`` of the tier's Prometheus HTTP API answer at ``path``."""
    response = scaled.client.get(f"{scaled.tier.prometheus_url}{path}", params=params)
    response.raise_for_status()
    return response.json()["data"]
