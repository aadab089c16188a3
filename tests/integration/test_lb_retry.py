"""The load balancer's retry window (``CHAINLAT_LB_RETRY_MAX_ELAPSED``), measured.

A replica that does not answer has its share retried for that long, then counted failed
(``otelcol_exporter_send_failed_spans``), as collector/README.md states; no shorter
deadline cuts the retries off first.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from .stack import Jaeger, Sampling, start_scaled_tier, stop_in_tier

pytestmark = pytest.mark.integration

RETRY_S = 12.0
"""Longer than the 5 s each attempt may take, so that a deadline of one attempt shows."""
SPANS = 8
"""Single-span traces sent at once: some hash to the stopped replica (all 8 to the
other one with probability 1/256)."""
SEND_FAILED = "otelcol_exporter_send_failed_spans"
LB = 'exporter="loadbalancing/traces"'


def _failed(url: str) -> float:
    total = 0.0
    for line in httpx.get(url, timeout=10).text.splitlines():
        if line.startswith(SEND_FAILED) and LB in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_a_dead_replicas_share_is_retried_for_the_retry_window(
    jaeger: Jaeger, tmp_path: Path
) -> None:
    """With the retry window at 12 s, the share of a stopped replica is counted failed
    between 9 s (retries stop when the next backoff, at most 2 s randomized by half, would
    end past the window) and the window plus one attempt's 5 s timeout after it was sent.
    With the load balancer's own 5 s deadline over the whole send (the default before),
    it was counted failed after 3 to 5 s."""
    rules = tmp_path / "rules.yml"
    rules.write_text("groups: []\n")
    tier = start_scaled_tier(tmp_path / "tier", jaeger, Sampling(), rules=rules, lb_retry_s=RETRY_S)
    try:
        stop_in_tier(tier, "replica-2")
        provider = TracerProvider(resource=Resource.create({"service.name": "lb-retry-it"}))
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{tier.otlp_http_endpoint}/v1/traces"))
        )
        tracer = provider.get_tracer("lb-retry")
        sent = time.monotonic()
        for _ in range(SPANS):
            tracer.start_span(f"probe-{random.getrandbits(16)}").end()
        deadline = sent + RETRY_S + 30.0
        first = last = None
        failed = 0.0
        while time.monotonic() < deadline:
            now = _failed(tier.lb_telemetry_url)
            if now > failed:
                first = first if first is not None else time.monotonic() - sent
                last = time.monotonic() - sent
                failed = now
            time.sleep(0.1)
        provider.shutdown()
    finally:
        stop_in_tier(tier, "tier")
    assert 0 < failed < SPANS, failed
    assert first is not None and last is not None
    print(
        f"\n{failed:g} of {SPANS} spans counted failed {first:.1f} s to {last:.1f} s after sending"
    )
    assert first >= RETRY_S - 3.0 and last <= RETRY_S + 5.0 + 1.0, (first, last)
