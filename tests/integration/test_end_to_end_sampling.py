"""Tail sampling of chainlat's own traces: the budget verdict chainlat writes decides.

The application enforces a budget file at runtime (``configure(budgets=...)``), so
``chainlat.budget.ok=false`` is set by chainlat itself, and sends over OTLP to a
Collector tier. Which traces Jaeger must hold is worked out from the spans the
application kept locally, by the tier's policies; the test also insists that each
kind of workflow came out as designed, so every policy is exercised.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import chainlat

from .apps import App, jaeger_span_counts, otlp_app, run_workflow, trace_id_of
from .conftest import CollectorFactory
from .otlp import wait_for
from .stack import CollectorTier, Jaeger, Sampling

pytestmark = pytest.mark.integration

ARRIVAL_TIMEOUT_S = 30.0
BUDGETS_TOML = """\
[workflows.answer]
total = "250ms"

[workflows.nightly-report]
total = "10s"
"""
OVER_BUDGET_MS = 400
"""A data stage this long breaks the 250 ms total of ``answer`` and stays far below the
2 s latency threshold: such traces are kept for their budget alone."""


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as c:
        yield c


@pytest.fixture
def service() -> str:
    return f"chainlat-sampling-it-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def budgets(tmp_path: Path) -> Path:
    path = tmp_path / "chainlat.toml"
    path.write_text(BUDGETS_TOML)
    return path


@dataclass(frozen=True)
class LocalTrace:
    """A trace as the application exported it, judged by the tier's policies."""

    spans: Sequence[ReadableSpan]

    @property
    def workflow(self) -> ReadableSpan:
        [root] = [s for s in self.spans if s.parent is None]
        return root

    @property
    def budget_ok(self) -> object:
        return (self.workflow.attributes or {}).get("chainlat.budget.ok")

    @property
    def error(self) -> bool:
        return any(s.status.status_code is StatusCode.ERROR for s in self.spans)

    @property
    def duration_ms(self) -> float:
        start = min(s.start_time or 0 for s in self.spans)
        end = max(s.end_time or 0 for s in self.spans)
        return (end - start) / 1e6

    def kept_by(self, sampling: Sampling) -> bool:
        """The verdict of the tier's errors, over-budget and slow policies (0 % baseline)."""
        return self.error or self.budget_ok is False or self.duration_ms > sampling.latency_ms


def _local_traces(app: App, trace_ids: Sequence[str]) -> dict[str, LocalTrace]:
    by_trace: dict[str, list[ReadableSpan]] = {t: [] for t in trace_ids}
    for span in app.spans_of(set(trace_ids)):
        by_trace[trace_id_of(span)].append(span)
    return {trace_id: LocalTrace(spans) for trace_id, spans in by_trace.items()}


def _settle(app: App, client: httpx.Client, jaeger: Jaeger, service: str) -> str:
    """Send one over-budget trace after everything else and wait for it in Jaeger.

    The tier decides traces in the order they arrived, so once this one is in Jaeger
    the earlier ones have been decided too.
    """
    marker = asyncio.run(run_workflow(app.provider, "answer", data_ms=OVER_BUDGET_MS))
    app.flush()
    wait_for(
        lambda: marker in jaeger_span_counts(client, jaeger.query_url, service),
        timeout_s=ARRIVAL_TIMEOUT_S,
        what="the marker trace in Jaeger",
    )
    return marker


STABLE_S = 2.0
"""How long Jaeger's count of a service's traces must hold still to count as settled."""


def _held_settled(client: httpx.Client, jaeger: Jaeger, service: str) -> dict[str, int]:
    """Jaeger's traces of ``service`` once their count holds still for `STABLE_S`.

    The marker of `_settle` is kept by the tier's ``always`` pipeline, a plain trace by its
    ``baseline`` pipeline: two tail samplers and two batches, so the marker can reach
    Jaeger before the plain traces decided with it (a run held 0 of 200 at 50 %).
    """
    deadline = time.monotonic() + ARRIVAL_TIMEOUT_S
    held = jaeger_span_counts(client, jaeger.query_url, service)
    while time.monotonic() < deadline:
        time.sleep(STABLE_S)
        again = jaeger_span_counts(client, jaeger.query_url, service)
        if again == held and len(held) > 1:  # more than the marker, and no more arriving
            return held
        held = again
    return held


def test_tier_keeps_every_over_budget_slow_and_error_trace_and_no_plain_one(
    collector: CollectorTier,
    jaeger: Jaeger,
    client: httpx.Client,
    service: str,
    budgets: Path,
) -> None:
    """At 0 %: Jaeger holds exactly the over-budget, slow and error workflows, each whole."""
    sampling = collector.sampling
    assert sampling.percent == 0
    slow_ms = sampling.latency_ms + 300
    with otlp_app(collector.otlp_http_endpoint, service, budgets=budgets) as app:
        provider = app.provider

        async def workload() -> dict[str, list[str]]:
            # The fast runs one at a time: run side by side, each would last as long as
            # all of them together and might break its budget.
            groups: dict[str, list[str]] = {
                "fast within budget": [await run_workflow(provider, "answer") for _ in range(20)],
                "fast, no budget": [await run_workflow(provider, "chitchat") for _ in range(5)],
                "error": [await run_workflow(provider, "answer", fail=True) for _ in range(5)],
            }
            groups["over budget"] = list(
                await asyncio.gather(
                    *(run_workflow(provider, "answer", data_ms=OVER_BUDGET_MS) for _ in range(5))
                )
            )
            groups["slow within budget"] = list(
                await asyncio.gather(
                    *(
                        run_workflow(provider, "nightly-report", inference_ms=slow_ms)
                        for _ in range(3)
                    )
                )
            )
            return groups

        groups = asyncio.run(workload())
        app.flush()
        local = _local_traces(app, [t for ids in groups.values() for t in ids])
        marker = _settle(app, client, jaeger, service)

    # Each group came out as designed, so each policy has something to keep (or drop).
    for trace_id in groups["fast within budget"]:
        assert local[trace_id].budget_ok is True
        assert not local[trace_id].error
    assert all(local[t].budget_ok is None for t in groups["fast, no budget"])
    assert all(local[t].budget_ok is False for t in groups["over budget"])
    for trace_id in groups["slow within budget"]:
        assert local[trace_id].budget_ok is True
        assert local[trace_id].duration_ms > sampling.latency_ms
    assert all(local[t].error and local[t].budget_ok is True for t in groups["error"])
    fast = groups["fast within budget"] + groups["fast, no budget"] + groups["over budget"]
    fast += groups["error"]
    slowest_fast = max(local[t].duration_ms for t in fast)
    assert slowest_fast < sampling.latency_ms, f"a fast workflow took {slowest_fast:.0f} ms"
    expected = {t for t, trace in local.items() if trace.kept_by(sampling)}
    assert expected == set(groups["over budget"] + groups["slow within budget"] + groups["error"])

    # Decisions are made in arrival order: wait (bounded) for the last kept ones to land.
    wait_for(
        lambda: expected <= set(jaeger_span_counts(client, jaeger.query_url, service)),
        timeout_s=ARRIVAL_TIMEOUT_S,
        what="every kept trace in Jaeger",
    )
    held = jaeger_span_counts(client, jaeger.query_url, service)
    held.pop(marker)
    assert set(held) == expected
    assert held == {t: len(local[t].spans) for t in expected}


def test_intermediate_share_keeps_about_that_share_of_plain_workflows(
    collector_factory: CollectorFactory,
    jaeger: Jaeger,
    client: httpx.Client,
    service: str,
    budgets: Path,
) -> None:
    """At 50 %, about half of 200 plain workflows (no budget, fast, no error) is kept, whole.

    The share is binomial in chainlat's random trace ids: 65 to 135 is 5 sigma.
    """
    tier = collector_factory(Sampling(percent=50))
    runs = 200
    with otlp_app(tier.otlp_http_endpoint, service, budgets=budgets) as app:

        async def workload() -> list[str]:
            return [await run_workflow(app.provider, "chitchat") for _ in range(runs)]

        plain = asyncio.run(workload())
        app.flush()
        local = _local_traces(app, plain)
        marker = _settle(app, client, jaeger, service)

    assert all(t.budget_ok is None and not t.error for t in local.values())
    assert max(t.duration_ms for t in local.values()) < tier.sampling.latency_ms
    held = _held_settled(client, jaeger, service)
    held.pop(marker)
    assert set(held) <= set(plain)
    assert 65 <= len(held) <= 135, len(held)
    assert all(count == len(local[t].spans) for t, count in held.items())


OUTCOME_DELAY_S = 3.0
"""How long after a fast workflow its outcome is recorded: past the 2 s latency threshold,
within the decision wait of the tier below, as a grader that runs later would."""


def test_an_outcome_recorded_seconds_later_does_not_make_a_fast_workflow_slow(
    collector_factory: CollectorFactory,
    jaeger: Jaeger,
    client: httpx.Client,
    service: str,
    budgets: Path,
) -> None:
    """The slow policy measures the workflow span, not the trace: a fast workflow whose
    ``record_outcome`` span lands 3 s later is not kept (0 %), a slow one still is, whole
    with its outcome."""
    tier = collector_factory(Sampling(decision_wait_s=OUTCOME_DELAY_S + 5.0))
    latency_ms = tier.sampling.latency_ms
    with otlp_app(tier.otlp_http_endpoint, service, budgets=budgets) as app:

        async def workload() -> tuple[str, str]:
            fast = await run_workflow(app.provider, "chitchat")
            slow = await run_workflow(app.provider, "chitchat", inference_ms=latency_ms + 300)
            return fast, slow

        fast, slow = asyncio.run(workload())
        chainlat.record_outcome(slow, success=True, tracer_provider=app.provider)
        app.flush()
        # A wall-clock wait on purpose: the outcome must arrive this much later.
        time.sleep(OUTCOME_DELAY_S)
        chainlat.record_outcome(fast, success=True, tracer_provider=app.provider)
        app.flush()
        local = _local_traces(app, [fast, slow])
        marker = _settle(app, client, jaeger, service)

    # The premise: measured over all its spans the fast trace is slow; its workflow is not.
    assert local[fast].duration_ms > latency_ms
    workflow = local[fast].workflow
    assert workflow.end_time is not None and workflow.start_time is not None
    assert (workflow.end_time - workflow.start_time) / 1e6 < latency_ms
    assert all(not t.error and t.budget_ok is None for t in local.values())
    assert len(local[fast].spans) == len(local[slow].spans) == 5  # workflow, 3 steps, outcome

    wait_for(
        lambda: slow in jaeger_span_counts(client, jaeger.query_url, service),
        timeout_s=ARRIVAL_TIMEOUT_S,
        what="the slow trace in Jaeger",
    )
    held = jaeger_span_counts(client, jaeger.query_url, service)
    held.pop(marker)
    assert held == {slow: len(local[slow].spans)}
