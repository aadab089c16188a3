"""The scaled tier for real: applications -> load balancer -> 2 sampling replicas -> Jaeger on
Badger, with Prometheus scraping the replicas and evaluating the rules `chainlat budgets
rules` generated from the applications' budget file.

One workload runs once for the module (``scaled`` fixture); each test checks one claim of
collector/README.md about it. Every wait is a bounded poll, never a sleep on a guess.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import yaml
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat._runtime.processor import STEP_TWIN
from chainlat.budgets import load_budgets
from chainlat.prometheus import bucket_boundaries, buckets_setting, prometheus_rules

from .apps import attributes, jaeger_spans, trace_id_of
from .stack import (
    Jaeger,
    Sampling,
    ScaledTier,
    StackError,
    kill_in_tier,
    start_in_tier,
    start_jaeger,
    start_jaeger_again,
    start_scaled_tier,
    stop,
    stop_in_tier,
)

pytestmark = pytest.mark.integration

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


def _send_workload(
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


def _add_late_spans(tier: ScaledTier, workload: Workload) -> None:
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


def _jaeger_count(client: httpx.Client, jaeger: Jaeger, trace_id: str) -> int:
    return len(jaeger_spans(client, jaeger.query_url, trace_id))


@pytest.fixture(scope="module")
def scaled(jaeger_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scaled]:
    base = tmp_path_factory.mktemp("scaled")
    budgets_file = base / "chainlat.toml"
    budgets_file.write_text(BUDGET_TOML)
    budgets = load_budgets(budgets_file)
    rules = base / "chainlat.rules.yml"
    rules.write_text(prometheus_rules(budgets, window="10m", evaluation_interval="1s"))
    jaeger_dir = base / "jaeger"
    tier_dir = base / "tier"
    jaeger: Jaeger | None = None
    tier: ScaledTier | None = None
    try:
        jaeger = start_jaeger(jaeger_dir, storage="badger")
        tier = start_scaled_tier(
            tier_dir,
            jaeger,
            SAMPLING,
            rules=rules,
            spanmetrics_buckets=buckets_setting(bucket_boundaries(budgets)),
        )
        workload = _send_workload(tier, budgets_file, base / "traces.jsonl")
        with httpx.Client(timeout=10) as client:
            # Decided: every over-budget trace has reached Jaeger.
            poll(
                "over-budget traces in Jaeger",
                lambda: (
                    True
                    if all(_jaeger_count(client, jaeger, t) > 0 for t in workload.over_budget)
                    else None
                ),
            )
            _add_late_spans(tier, workload)
            yield Scaled(jaeger, tier, rules, budgets_file, workload, client)
    except StackError as exc:
        pytest.fail(str(exc), pytrace=False)
    finally:
        if tier is not None:
            stop_in_tier(tier, "tier")
        if jaeger is not None:
            stop(jaeger_dir, "jaeger")


def test_every_over_budget_and_failed_trace_is_in_jaeger_whole(scaled: Scaled) -> None:
    """Each kept trace holds every span the application ended, plus the span a second
    process sent after the decision (it followed the kept decision, on the same replica)."""
    expected = scaled.workload.spans_by_trace()
    keep = scaled.workload.over_budget | scaled.workload.failed
    assert len(scaled.workload.over_budget) >= 6 and len(scaled.workload.failed) == 4

    def whole() -> dict[str, int] | None:
        counts = {t: _jaeger_count(scaled.client, scaled.jaeger, t) for t in keep}
        return counts if all(counts[t] == expected[t] for t in keep) else None

    counts = poll("kept traces whole in Jaeger", whole)
    assert sum(counts.values()) == sum(expected[t] for t in keep)
    assert all(scaled.workload.late_spans[t] == 1 for t in scaled.workload.over_budget)


def _probability(scaled: Scaled, trace_id: str) -> object:
    """chainlat.sampling.probability on the trace's workflow span."""
    spans = jaeger_spans(scaled.client, scaled.jaeger.query_url, trace_id)
    (workflow,) = [s for s in spans if attributes(s).get("chainlat.step.kind") == "workflow"]
    return attributes(workflow).get("chainlat.sampling.probability")


def test_within_budget_traces_are_kept_only_as_the_sampled_share(scaled: Scaled) -> None:
    """A within-budget trace in Jaeger was kept by the baseline sampler, which says so
    with its probability (0.2), and about 20 % of them are; every over-budget and failed
    trace was kept with probability 1."""
    kept = [t for t in scaled.workload.within if _jaeger_count(scaled.client, scaled.jaeger, t)]
    for trace_id in kept:
        assert _probability(scaled, trace_id) == pytest.approx(0.2), trace_id
    # 50 within-budget traces at 20 %: P(more than 25 kept) < 1e-6.
    assert len(kept) <= 25, len(kept)
    for trace_id in scaled.workload.over_budget | scaled.workload.failed:
        assert _probability(scaled, trace_id) == 1.0, trace_id


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


def _prometheus(scaled: Scaled, path: str, **params: str) -> Any:
    response = scaled.client.get(f"{scaled.tier.prometheus_url}{path}", params=params)
    response.raise_for_status()
    return response.json()["data"]


def test_the_over_budget_alert_fires_and_the_within_budget_workflow_fires_nothing(
    scaled: Scaled,
) -> None:
    def firing() -> list[dict[str, str]] | None:
        alerts = _prometheus(scaled, "/api/v1/alerts")["alerts"]
        labels = [a["labels"] for a in alerts if a["state"] == "firing"]
        wanted = {"total", "p95.total"}
        fired = {a["target"] for a in labels if a["workflow"] == "checkout"}
        return labels if wanted <= fired else None

    def rules() -> object:
        groups = _prometheus(scaled, "/api/v1/rules")["groups"]
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
            result = _prometheus(scaled, "/api/v1/query", query=series)["result"]
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
        result = _prometheus(
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


def test_jaeger_restarted_loses_no_stored_trace(scaled: Scaled) -> None:
    """Badger keeps every trace through a stop and start of Jaeger."""
    keep = scaled.workload.over_budget | scaled.workload.failed
    before = {t: _jaeger_count(scaled.client, scaled.jaeger, t) for t in keep}
    assert all(before.values())
    stop(scaled.jaeger.run_dir, "jaeger")
    start_jaeger_again(scaled.jaeger)
    after = poll(
        "Jaeger answering again",
        lambda: _safe_counts(scaled, keep),
    )
    assert after == before


def _safe_counts(scaled: Scaled, keep: set[str]) -> dict[str, int] | None:
    try:
        return {t: _jaeger_count(scaled.client, scaled.jaeger, t) for t in keep}
    except httpx.HTTPError:
        return None


def _telemetry_sum(url: str, prefix: str, *labels: str) -> float:
    """The sum of a Collector's own metric (``prefix``) over the series whose line holds
    every one of ``labels``."""
    text = httpx.get(url, timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith(prefix) and all(label in line for label in labels):
            total += float(line.rsplit(" ", 1)[1])
    return total


ACCEPTED = "otelcol_receiver_accepted_spans"
SENT = "otelcol_exporter_sent_spans"
SEND_FAILED = "otelcol_exporter_send_failed_spans"
ENQUEUE_FAILED = "otelcol_exporter_enqueue_failed_spans"
DECIDED = "otelcol_processor_tail_sampling_count_spans_sampled"
IN_MEMORY = "otelcol_processor_tail_sampling_sampling_traces_on_memory"
LB = 'exporter="loadbalancing/traces"'
RELEASED = "otelcol_processor_outgoing_items"
KEPT = 'processor="attributes/kept-'
"""The processors right after each sampler: what they pass on is what the samplers kept."""
TO_JAEGER = 'exporter="otlp/jaeger"'
BASELINE = 'policy="baseline.baseline"'
"""The baseline sampler has one policy (``baseline``, labelled with its sampler's name),
so its span counts per decision add up to every span it decided on, once."""


@dataclass(frozen=True)
class Tally:
    """The tier's own counts at one moment: the load balancer's and each replica's."""

    lb_accepted: float
    lb_sent: float
    lb_failed: float
    lb_enqueue_failed: float
    accepted: tuple[float, ...]
    decided: tuple[float, ...]
    released: tuple[float, ...]
    """Spans the samplers kept and passed on towards Jaeger."""
    to_jaeger: tuple[float, ...]

    @staticmethod
    def read(tier: ScaledTier, replicas: tuple[int, ...]) -> Tally:
        urls = [tier.replica_telemetry_urls[k] for k in replicas]
        lb = tier.lb_telemetry_url
        return Tally(
            _telemetry_sum(lb, ACCEPTED),
            _telemetry_sum(lb, SENT, LB),
            _telemetry_sum(lb, SEND_FAILED, LB),
            _telemetry_sum(lb, ENQUEUE_FAILED, LB),
            tuple(_telemetry_sum(u, ACCEPTED) for u in urls),
            tuple(_telemetry_sum(u, DECIDED, BASELINE) for u in urls),
            tuple(_telemetry_sum(u, RELEASED, KEPT) for u in urls),
            tuple(_telemetry_sum(u, SENT, TO_JAEGER) for u in urls),
        )


def _in_memory(url: str) -> float:
    return _telemetry_sum(url, IN_MEMORY)


def _idle(url: str) -> bool | None:
    """True once the replica holds no trace and has sent (or failed to send) Jaeger every
    span its samplers kept."""
    pending = (
        _telemetry_sum(url, RELEASED, KEPT)
        - _telemetry_sum(url, SENT, TO_JAEGER)
        - _telemetry_sum(url, SEND_FAILED, TO_JAEGER)
    )
    return True if _in_memory(url) == 0 and pending == 0 else None


def test_a_stopped_replica_loses_only_what_the_load_balancer_counts(scaled: Scaled) -> None:
    """Replica 2 stops in the middle of a workload, holding traces it has not decided
    on; the rest of the workload is routed to it all the same.

    - The traces replica 2 held are not lost: stopping, it decides on each of them and
      exports the kept ones (every over-budget and failed trace of the first half is in
      Jaeger whole).
    - What the load balancer could not deliver afterwards it counts, span for span, in
      ``otelcol_exporter_send_failed_spans``: every span the application sent was
      accepted by a replica or counted failed there; the over-budget and failed traces
      missing from Jaeger are among those counted.

    Replica 2 runs here with a decision wait longer than the test (the shipped default
    is 30 s), so that what it holds when it stops does not depend on timing. The
    application sends each span in its own request, so that the failed count is exactly
    the spans for the stopped replica (with batches, the load balancer counts a whole
    request that was in part for it: collector/README.md)."""
    tier = scaled.tier
    stop_in_tier(tier, "replica-2")
    start_in_tier(tier, "replica-2", CHAINLAT_SAMPLING_DECISION_WAIT="600s")
    # Nothing of the module's workload is still in flight at replica 1.
    poll("replica 1 idle", lambda: _idle(tier.replica_telemetry_urls[0]))
    before = Tally.read(tier, (0, 1))

    first = _send_workload(
        tier, scaled.budgets_file, tier.run_dir / "before-stop.jsonl", over=16, batch=False
    )

    def delivered() -> Tally | None:
        now = Tally.read(tier, (0, 1))
        accepted = now.lb_accepted - before.lb_accepted
        done = accepted == len(first.spans) and now.lb_sent - before.lb_sent == accepted
        return now if done else None

    held = poll(
        "the first half delivered to both replicas",
        delivered,
        state=lambda: (len(first.spans), before, Tally.read(tier, (0, 1))),
    )
    replica_2_accepted = held.accepted[1] - before.accepted[1]
    # Replica 2 has decided on nothing: it holds every span it accepted.
    assert held.decided[1] == before.decided[1] and replica_2_accepted > 0
    replica_2_traces = _in_memory(tier.replica_telemetry_urls[1])
    stop_in_tier(tier, "replica-2")

    second = _send_workload(
        tier, scaled.budgets_file, tier.run_dir / "after-stop.jsonl", over=16, batch=False
    )
    sent = len(first.spans) + len(second.spans)

    def settled() -> Tally | None:
        now = Tally.read(tier, (0,))
        accepted = now.lb_accepted - before.lb_accepted
        done = now.lb_sent - before.lb_sent + now.lb_failed - before.lb_failed
        # Replica 1 has decided on every span it accepted (it counts a tick's decisions
        # after it has released their traces, so this is polled, not read once), and
        # sent Jaeger every span it kept.
        decided = now.decided[0] - before.decided[0] == now.accepted[0] - before.accepted[0]
        exported = now.to_jaeger[0] - before.to_jaeger[0] == now.released[0] - before.released[0]
        return now if accepted == sent and done == accepted and decided and exported else None

    after = poll(
        "every span delivered or counted failed, and decided on at replica 1",
        settled,
        state=lambda: Tally.read(tier, (0,)),
    )
    lost_at_lb = after.lb_failed - before.lb_failed
    replica_1_accepted = after.accepted[0] - before.accepted[0]
    replica_1_kept = after.to_jaeger[0] - before.to_jaeger[0]

    # The load balancer: every span accepted went to a replica, or is counted failed.
    assert after.lb_enqueue_failed == before.lb_enqueue_failed
    assert after.lb_accepted - before.lb_accepted == sent
    assert replica_1_accepted + replica_2_accepted + lost_at_lb == sent
    assert lost_at_lb > 0
    # Kept traces: replica 1's, plus what replica 2 kept of what it held as it stopped.
    traces = set(first.spans_by_trace()) | set(second.spans_by_trace())
    in_jaeger = poll(
        "the kept spans in Jaeger",
        lambda: _jaeger_total(scaled, traces, replica_1_kept),
        state=lambda: (_jaeger_sum(scaled, traces), replica_1_kept),
    )
    kept_at_stop = in_jaeger - replica_1_kept
    assert 0 < kept_at_stop <= replica_2_accepted
    # Over-budget and failed traces: the first half's all whole, though replica 2 held
    # some of them undecided; the second half's whole, or lost whole at the load balancer.
    expected = first.spans_by_trace()
    for trace_id in first.over_budget | first.failed:
        found = _jaeger_count(scaled.client, scaled.jaeger, trace_id)
        assert found == expected[trace_id], (trace_id, found, expected[trace_id])
    expected = second.spans_by_trace()
    missing = 0
    for trace_id in second.over_budget | second.failed:
        found = _jaeger_count(scaled.client, scaled.jaeger, trace_id)
        assert found in (0, expected[trace_id]), (trace_id, found, expected[trace_id])
        missing += expected[trace_id] if found == 0 else 0
    assert 0 < missing <= lost_at_lb
    decided_against = replica_1_accepted + replica_2_accepted - in_jaeger
    print(
        f"\nsent {sent} spans: {in_jaeger:g} in Jaeger ({kept_at_stop:g} kept by replica 2 as "
        f"it stopped, holding {replica_2_accepted:g} spans of {replica_2_traces:g} traces), "
        f"{decided_against:g} decided against, {lost_at_lb:g} counted failed by the load "
        f"balancer ({missing} of them of over-budget or failed traces)"
    )


def _jaeger_sum(scaled: Scaled, traces: set[str]) -> int:
    return sum(_jaeger_count(scaled.client, scaled.jaeger, t) for t in traces)


def _jaeger_total(scaled: Scaled, traces: set[str], at_least: float) -> float | None:
    """Spans of ``traces`` in Jaeger, once at least ``at_least`` and unchanged over two reads."""
    found = _jaeger_sum(scaled, traces)
    if found < at_least:
        return None
    time.sleep(1.0)
    return found if _jaeger_sum(scaled, traces) == found else None


def _last_scraped(
    scaled: Scaled, metric: str, url: str, since: float, *labels: str
) -> float | None:
    """The sum of ``metric``'s series from the target ``url`` as Prometheus last scraped
    them since ``since`` (epoch seconds; also after the target is gone), so that an
    earlier process on the same address does not count; None before Prometheus has any."""
    instance = url.split("//")[1].split("/")[0]
    matchers = ", ".join([f'__name__=~"{metric}(_total)?"', f'instance="{instance}"', *labels])
    window = math.ceil(time.time() - since)
    result = _prometheus(
        scaled, "/api/v1/query", query=f"sum(last_over_time({{{matchers}}}[{window}s]))"
    )["result"]
    return float(result[0]["value"][1]) if result else None


def test_a_killed_replica_loses_what_prometheus_last_counted_it_holding(scaled: Scaled) -> None:
    """Replica 2, killed (SIGKILL, as by the OOM killer) while it holds undecided traces,
    loses them: exactly the spans Prometheus last scraped it as having accepted and not
    decided on. Every span sent is in Jaeger (all by replica 1), decided against by
    replica 1, held by replica 2 when it died, or counted failed by the load balancer."""
    tier = scaled.tier
    replica_2 = tier.replica_telemetry_urls[1]
    # Replica 2 is stopped (the test before stopped it): what Prometheus scraped from it
    # since now comes from the process started here.
    restarted = time.time()
    start_in_tier(tier, "replica-2", CHAINLAT_SAMPLING_DECISION_WAIT="600s")
    # A fresh load balancer: its connection to replica 2 had failed until now, and gRPC
    # backs off reconnecting (up to 2 min), during which replica 2's share would fail.
    stop_in_tier(tier, "lb")
    start_in_tier(tier, "lb")
    poll("replica 1 idle", lambda: _idle(tier.replica_telemetry_urls[0]))
    before = Tally.read(tier, (0, 1))
    workload = _send_workload(
        tier, scaled.budgets_file, tier.run_dir / "before-kill.jsonl", over=16, batch=False
    )
    sent = len(workload.spans)

    def delivered() -> Tally | None:
        now = Tally.read(tier, (0, 1))
        accepted = now.lb_accepted - before.lb_accepted
        done = now.lb_sent - before.lb_sent + now.lb_failed - before.lb_failed
        return now if accepted == sent and done == accepted else None

    held = poll(
        "the workload delivered (or counted failed)",
        delivered,
        state=lambda: (sent, before, Tally.read(tier, (0, 1))),
    )
    replica_2_accepted = held.accepted[1] - before.accepted[1]
    assert held.decided[1] == before.decided[1] and replica_2_accepted > 0

    # Prometheus has scraped replica 2 holding all of it (nothing changes there now: no
    # traffic, no decision for 600 s).
    def scraped() -> float | None:
        found = _last_scraped(scaled, ACCEPTED, replica_2, restarted)
        return found if found == held.accepted[1] else None

    poll(
        "Prometheus scraping replica 2's accepted spans",
        scraped,
        state=lambda: (_last_scraped(scaled, ACCEPTED, replica_2, restarted), held),
    )
    killed_id = _instance_id(replica_2)
    kill_in_tier(tier, "replica-2")
    # After the kill, from Prometheus alone: spans replica 2 accepted and never decided on.
    accepted_2 = _last_scraped(scaled, ACCEPTED, replica_2, restarted)
    decided_2 = _last_scraped(scaled, DECIDED, replica_2, restarted, BASELINE) or 0.0
    assert accepted_2 is not None
    lost_at_replica = accepted_2 - decided_2 - (before.accepted[1] - before.decided[1])
    assert lost_at_replica == replica_2_accepted

    def settled() -> Tally | None:
        now = Tally.read(tier, (0,))
        decided = now.decided[0] - before.decided[0] == now.accepted[0] - before.accepted[0]
        exported = now.to_jaeger[0] - before.to_jaeger[0] == now.released[0] - before.released[0]
        return now if decided and exported else None

    after = poll(
        "replica 1 decided on all it accepted, and sent Jaeger what it kept",
        settled,
        state=lambda: (before, Tally.read(tier, (0,))),
    )
    lost_at_lb = held.lb_failed - before.lb_failed
    replica_1_accepted = after.accepted[0] - before.accepted[0]
    replica_1_decided = after.decided[0] - before.decided[0]
    replica_1_kept = after.to_jaeger[0] - before.to_jaeger[0]
    assert replica_1_accepted + replica_2_accepted + lost_at_lb == sent
    traces = set(workload.spans_by_trace())
    in_jaeger = poll(
        "replica 1's kept spans in Jaeger",
        lambda: _jaeger_total(scaled, traces, replica_1_kept),
        state=lambda: (_jaeger_sum(scaled, traces), replica_1_kept),
    )
    # Replica 2 exported nothing: Jaeger holds exactly what replica 1 kept.
    assert in_jaeger == replica_1_kept
    decided_against = replica_1_decided - replica_1_kept
    assert in_jaeger + decided_against + lost_at_replica + lost_at_lb == sent
    # The over-budget and failed traces missing from Jaeger are among the counted losses.
    expected = workload.spans_by_trace()
    missing = 0
    for trace_id in workload.over_budget | workload.failed:
        found = _jaeger_count(scaled.client, scaled.jaeger, trace_id)
        assert found in (0, expected[trace_id]), (trace_id, found, expected[trace_id])
        missing += expected[trace_id] if found == 0 else 0
    assert 0 < missing <= lost_at_replica + lost_at_lb
    # The operator's recipe, the tier's recording rule, still reads the killed process's
    # loss once a new one runs on its address (its own service_instance_id), and reads
    # nothing for the new one.
    start_in_tier(tier, "replica-2", CHAINLAT_SAMPLING_DECISION_WAIT="600s")
    restarted_id = poll("replica 2 answering again", lambda: _safe_instance_id(replica_2))
    assert restarted_id != killed_id

    def recorded() -> dict[str, float] | None:
        lost = _lost_with_process(scaled, replica_2)
        scraped_again = _prometheus(
            scaled, "/api/v1/query", query=f'target_info{{service_instance_id="{restarted_id}"}}'
        )["result"]
        return lost if killed_id in lost and scraped_again else None

    def seen() -> object:
        instance = replica_2.split("//")[1].split("/")[0]
        raw = _prometheus(
            scaled,
            "/api/v1/query",
            query=f'{{__name__=~"{ACCEPTED}(_total)?", instance="{instance}"}}',
        )["result"]
        rule = _prometheus(scaled, "/api/v1/query", query="chainlat_tier:undecided_spans")
        return (killed_id, restarted_id, [r["metric"] for r in raw], rule["result"])

    lost = poll("the tier's rule reading replica 2's loss after its restart", recorded, state=seen)
    # Earlier replica 2 processes of this module, stopped, have figures of their own.
    assert lost[killed_id] == held.accepted[1] - held.decided[1], (lost, held)
    assert restarted_id not in lost
    print(
        f"\nsent {sent} spans: {in_jaeger:g} in Jaeger, {decided_against:g} decided against, "
        f"{lost_at_replica:g} lost with replica 2 (killed; Prometheus's last scrape), "
        f"{lost_at_lb:g} counted failed by the load balancer ({missing} of them of "
        f"over-budget or failed traces); after its restart the tier's rule reads "
        f"{lost[killed_id]:g} lost with the killed process"
    )


def _instance_id(url: str) -> str:
    """The ``service_instance_id`` a Collector labels its own metrics with (one per process)."""
    for line in httpx.get(url, timeout=10).text.splitlines():
        found = re.search(r'service_instance_id="([^"]+)"', line)
        if found:
            return found.group(1)
    raise AssertionError(f"{url}: no service_instance_id label")


def _safe_instance_id(url: str) -> str | None:
    try:
        return _instance_id(url)
    except httpx.HTTPError:
        return None


def _lost_with_process(scaled: Scaled, url: str) -> dict[str, float]:
    """``chainlat_tier:spans_lost_with_process`` (collector/rules/tier-losses.yml) for the
    address of ``url``, by process."""
    instance = url.split("//")[1].split("/")[0]
    result = _prometheus(
        scaled,
        "/api/v1/query",
        query=f'chainlat_tier:spans_lost_with_process{{instance="{instance}"}}',
    )["result"]
    return {r["metric"].get("service_instance_id", ""): float(r["value"][1]) for r in result}


TIER_RULES = Path(__file__).resolve().parents[2] / "collector" / "rules" / "tier-losses.yml"


def _tier_rule(name: str) -> str:
    """The expression of one of the tier's recording rules, as shipped."""
    document = yaml.safe_load(TIER_RULES.read_text())
    (expr,) = [r["expr"] for g in document["groups"] for r in g["rules"] if r["record"] == name]
    return str(expr)


def _live_sum(scaled: Scaled, metric: str, url: str) -> float:
    """``metric`` summed over the live series Prometheus scraped from ``url``'s address."""
    instance = url.split("//")[1].split("/")[0]
    query = f'sum({{__name__=~"{metric}(_total)?", instance="{instance}"}})'
    result = _prometheus(scaled, "/api/v1/query", query=query)["result"]
    return float(result[0]["value"][1]) if result else 0.0


def _not_accepted(scaled: Scaled, replica_1: float, lb: float) -> float | None:
    """The tier's ``chainlat_tier:spans_not_accepted_by_a_replica``, evaluated now, once
    Prometheus has scraped the load balancer's and replica 1's accepted counts as given."""
    tier = scaled.tier
    if _live_sum(scaled, ACCEPTED, tier.lb_telemetry_url) != lb:
        return None
    if _live_sum(scaled, ACCEPTED, tier.replica_telemetry_urls[0]) != replica_1:
        return None
    expr = _tier_rule("chainlat_tier:spans_not_accepted_by_a_replica")
    result = _prometheus(scaled, "/api/v1/query", query=expr)["result"]
    return float(result[0]["value"][1]) if result else None


def test_the_tiers_rule_counts_per_span_what_no_replica_accepted(scaled: Scaled) -> None:
    """With replica 2 down and the SDK's batches, the load balancer counts each request
    with a share for replica 2 failed whole, also the spans replica 1 took; the tier's
    rule counts, span for span, those no replica accepted."""
    tier = scaled.tier
    stop_in_tier(tier, "replica-2")
    poll("replica 1 idle", lambda: _idle(tier.replica_telemetry_urls[0]))
    before = Tally.read(tier, (0,))
    rule_before = poll(
        "Prometheus caught up before the workload",
        lambda: _not_accepted(scaled, before.accepted[0], before.lb_accepted),
    )
    workload = _send_workload(tier, scaled.budgets_file, tier.run_dir / "batched.jsonl")
    sent = len(workload.spans)

    def delivered() -> Tally | None:
        now = Tally.read(tier, (0,))
        accepted = now.lb_accepted - before.lb_accepted
        done = now.lb_sent - before.lb_sent + now.lb_failed - before.lb_failed
        return now if accepted == sent and done == accepted else None

    after = poll("the workload delivered (or counted failed)", delivered)
    not_accepted = sent - (after.accepted[0] - before.accepted[0])
    counted_failed = after.lb_failed - before.lb_failed
    assert not_accepted > 0

    def recorded() -> float | None:
        now = _not_accepted(scaled, after.accepted[0], after.lb_accepted)
        return now if now is not None and now - rule_before == not_accepted else None

    poll(
        "the rule counting the spans no replica accepted",
        recorded,
        state=lambda: (
            _not_accepted(scaled, after.accepted[0], after.lb_accepted),
            rule_before,
            not_accepted,
            counted_failed,
        ),
    )
    assert counted_failed >= not_accepted
    print(
        f"\nbatched, replica 2 down: {sent} spans sent, {not_accepted:g} accepted by no "
        f"replica (the rule: the same), {counted_failed:g} counted failed by the load "
        "balancer (whole requests)"
    )
