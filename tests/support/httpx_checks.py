"""Checks shared by the chainlat.httpx tests: the breakdown identity, finding the spans."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from chainlat._core import attributes as attr
from chainlat.testing import Capture

PHASES = (
    attr.LATENCY_QUEUE_MS,
    attr.LATENCY_CONNECT_MS,
    attr.LATENCY_SEND_MS,
    attr.LATENCY_WAIT_MS,
    attr.LATENCY_RECEIVE_MS,
)
ROUNDING_MS = 1e-6
"""The parts are exact in integer ns; as float ms they may differ in the last bits."""


def latency(span: ReadableSpan) -> dict[str, float]:
    """The ``chainlat.latency.*`` attributes of a span, short names: ``{"queue": 1.5, ...}``."""
    prefix = "chainlat.latency."
    out: dict[str, float] = {}
    for key, value in (span.attributes or {}).items():
        if key.startswith(prefix) and isinstance(value, (int, float)):
            out[key[len(prefix) :].removesuffix("_ms")] = float(value)
    return out


def duration_ms(span: ReadableSpan) -> float:
    assert span.start_time is not None and span.end_time is not None
    return (span.end_time - span.start_time) / 1e6


def check_identity(span: ReadableSpan) -> None:
    """queue + connect + send + wait + receive == duration; server + network == wait."""
    attributes: Mapping[str, object] = span.attributes or {}
    parts = [attributes[key] for key in PHASES]
    assert all(isinstance(p, float) and p >= 0 for p in parts), parts
    total = sum(p for p in parts if isinstance(p, float))
    assert total == pytest.approx(duration_ms(span), abs=ROUNDING_MS)
    found = latency(span)
    if "server" in found:
        assert found["network"] == pytest.approx(
            max(found["wait"] - found["server"], 0.0), abs=ROUNDING_MS
        )
        assert found["network"] >= 0
    if "ttft" in found:
        before_body = found["queue"] + found["connect"] + found["send"] + found["wait"]
        assert found["ttft"] >= before_body - ROUNDING_MS
        assert found["ttft"] + found["generation"] <= duration_ms(span) + ROUNDING_MS


def model_spans(spans: Iterable[ReadableSpan]) -> list[ReadableSpan]:
    """The spans chainlat.httpx made (client inference spans of the ``chainlat`` scope)."""
    return [
        s
        for s in spans
        if s.instrumentation_scope is not None
        and s.instrumentation_scope.name == attr.TRACER_NAME
        and (s.attributes or {}).get(attr.LATENCY_QUEUE_MS) is not None
    ]


def server_spans(cap: Capture, count: int, timeout_s: float = 5.0) -> list[ReadableSpan]:
    """The simulator's SERVER spans, once ``count`` of them have ended.

    The simulator emits its spans after the response has gone out, from its own
    thread, so they may arrive a moment after the client has read the answer.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        found = [s for s in cap.spans() if s.kind.name == "SERVER"]
        if len(found) >= count or time.monotonic() > deadline:
            assert len(found) == count, [s.name for s in found]
            return found
        time.sleep(0.01)
