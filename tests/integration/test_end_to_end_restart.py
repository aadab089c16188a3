"""A Collector tier restarted in the middle of a run: the application carries on, and
what its exporter could not deliver is counted and reported, never lost in silence.

One application, one configure(), three phases: the tier up, the tier stopped, the
tier started again on the same ports. Each phase ends with a flush, so that every
span's fate (delivered or failed) is settled before the next phase starts.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest

from .apps import App, jaeger_span_counts, otlp_app, run_workflow
from .conftest import CollectorFactory
from .otlp import wait_for
from .stack import Jaeger, Sampling, start_tier, stop

pytestmark = pytest.mark.integration

ARRIVAL_TIMEOUT_S = 30.0
RUNS_PER_PHASE = 5
SPANS_PER_RUN = 4  # the workflow and its data, inference and tool steps
EXPORT_TIMEOUT_S = 2
"""Per export request, retries included (OTEL_EXPORTER_OTLP_TRACES_TIMEOUT): how long
the exporter keeps trying an unreachable tier before it gives the batch up."""
DROPPED_METRIC = "chainlat.export.dropped_spans"


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10.0) as c:
        yield c


def _phase(app: App) -> tuple[list[str], float]:
    """RUNS_PER_PHASE workflows side by side; their trace ids and the wall time they took."""

    async def workload() -> list[str]:
        runs = (
            run_workflow(app.provider, "answer", data_ms=5, inference_ms=20, tool_ms=5)
            for _ in range(RUNS_PER_PHASE)
        )
        return list(await asyncio.gather(*runs))

    started = time.monotonic()
    trace_ids = asyncio.run(workload())
    return trace_ids, time.monotonic() - started


def test_restarted_tier_loses_only_what_chainlat_reports_as_dropped(
    collector_factory: CollectorFactory,
    jaeger: Jaeger,
    client: httpx.Client,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Spans sent while the tier is down are counted (log line and metric); the rest arrive."""
    tier = collector_factory(Sampling(percent=100))
    service = f"chainlat-restart-it-{uuid.uuid4().hex[:8]}"
    phase_spans = RUNS_PER_PHASE * SPANS_PER_RUN
    env = {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": str(EXPORT_TIMEOUT_S)}
    caplog.set_level(logging.WARNING, logger="chainlat")

    def in_jaeger() -> dict[str, int]:
        return jaeger_span_counts(client, jaeger.query_url, service)

    with otlp_app(tier.otlp_http_endpoint, service, env=env) as app:
        before, _ = _phase(app)
        app.flush()
        # Delivered and passed on: the tier holds nothing of them when it stops.
        wait_for(
            lambda: in_jaeger() == dict.fromkeys(before, SPANS_PER_RUN),
            timeout_s=ARRIVAL_TIMEOUT_S,
            what="the spans sent before the restart, in Jaeger",
        )
        assert app.metric_sum(DROPPED_METRIC) == 0

        stop(tier.run_dir, "collector")
        try:
            during, took_s = _phase(app)
            # Ending a span only queues it: the workflows did not wait for the tier.
            assert took_s < EXPORT_TIMEOUT_S, f"workflows took {took_s:.1f} s with the tier down"
            app.flush()  # returns once the exporter has given the batch up
            failed = app.metric_sum(DROPPED_METRIC, **{"error.type": "export_failed"})
            assert failed == phase_spans
        finally:
            start_tier(tier, jaeger)

        after, _ = _phase(app)
        app.flush()
        assert app.metric_sum(DROPPED_METRIC) == phase_spans  # nothing more failed
        wait_for(
            lambda: set(in_jaeger()) == set(before + after),
            timeout_s=ARRIVAL_TIMEOUT_S,
            what="the spans sent after the restart, in Jaeger",
        )

    # The first failure was logged at once, and the total at shutdown, one line each.
    assert in_jaeger() == dict.fromkeys(before + after, SPANS_PER_RUN)
    assert set(during).isdisjoint(in_jaeger())  # these are the ones counted
    messages = [r.getMessage() for r in caplog.records if r.name == "chainlat"]
    endpoint = re.escape(f"{tier.otlp_http_endpoint}/v1/traces")
    first_failure = rf"^chainlat: could not export {phase_spans} spans to {endpoint} \("
    assert [m for m in messages if re.match(first_failure, m)], messages
    total = (
        rf"^chainlat: {phase_spans} of {3 * phase_spans} spans were not exported to {endpoint}: "
        rf"{phase_spans} in failed exports, 0 dropped"
    )
    assert [m for m in messages if re.match(total, m)], messages
    # Conservation: every span the application ended is in Jaeger or in the count.
    delivered = sum(in_jaeger().values())
    assert delivered + phase_spans == 3 * phase_spans
