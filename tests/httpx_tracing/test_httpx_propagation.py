"""The trace context a model call sends the server: the headers ``propagate.inject`` would
write, whichever global propagator is set (chainlat writes the W3C default pair itself)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.propagators.textmap import default_setter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, TraceState
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from chainlat.httpx._propagation import inject

CONTEXT = SpanContext(
    trace_id=0x0AF7651916CD43DD8448EB211C80319C,
    span_id=0x00F067AA0BA902B7,
    is_remote=False,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", "value"), ("other", "x")]),
)


class _Other(TraceContextTextMapPropagator):
    """A propagator of another type, which writes its own header: left to ``propagate.inject``."""

    def inject(self, carrier: Any, context: Any = None, setter: Any = default_setter) -> None:
        super().inject(carrier, context, setter)
        setter.set(carrier, "x-other", "1")


_TEXTMAPS = {
    "default": lambda: CompositePropagator(
        [TraceContextTextMapPropagator(), W3CBaggagePropagator()]
    ),
    "baggage-only": lambda: CompositePropagator([W3CBaggagePropagator()]),
    "another-type": lambda: CompositePropagator([_Other(), W3CBaggagePropagator()]),
}


@pytest.fixture(params=sorted(_TEXTMAPS))
def textmap(request: pytest.FixtureRequest) -> Iterator[str]:
    previous = propagate.get_global_textmap()
    propagate.set_global_textmap(_TEXTMAPS[request.param]())
    try:
        yield str(request.param)
    finally:
        propagate.set_global_textmap(previous)


@pytest.mark.parametrize(
    "before",
    [
        [("accept", "*/*"), ("traceparent", "stale")],
        [(b"Accept", b"*/*"), (b"X-Id", "é".encode())],  # none to replace: appended
        [("TraceState", "old=1"), ("traceparent", "a"), ("TRACEPARENT", "b")],
    ],
    ids=["stale", "fresh", "mixed-case-twice"],
)
@pytest.mark.parametrize("with_baggage", [False, True])
@pytest.mark.parametrize(
    "span_context",
    [CONTEXT, SpanContext(CONTEXT.trace_id, CONTEXT.span_id, False, TraceFlags(0))],
    ids=["sampled-with-tracestate", "unsampled-plain"],
)
def test_the_headers_are_those_propagate_inject_writes(
    textmap: str,
    with_baggage: bool,
    span_context: SpanContext,
    before: list[tuple[str, str]] | list[tuple[bytes, bytes]],
) -> None:
    parent = baggage.set_baggage("tenant", "a b") if with_baggage else otel_context.get_current()
    context = trace.set_span_in_context(NonRecordingSpan(span_context), parent)
    expected = httpx.Headers(before)
    written = httpx.Headers(before)
    token = otel_context.attach(parent)
    try:
        propagate.inject(expected, context=context)
        inject(written, span_context, context)
    finally:
        otel_context.detach(token)
    assert written.multi_items() == expected.multi_items()
    assert written.raw == expected.raw
    assert written.encoding == expected.encoding
    assert ("x-other" in written) == (textmap == "another-type")
    if textmap != "baggage-only":
        assert written["traceparent"].startswith("00-0af7651916cd43dd8448eb211c80319c-")


def test_a_real_span_gives_the_same_headers() -> None:
    span = TracerProvider().get_tracer("t").start_span("s")
    context = trace.set_span_in_context(span)
    expected, written = httpx.Headers(), httpx.Headers()
    propagate.inject(expected, context=context)
    inject(written, span.get_span_context(), context)
    span.end()
    assert written.multi_items() == expected.multi_items() != []
    assert written.raw == expected.raw
