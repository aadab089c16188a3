"""Trace context into a model call's request headers: what ``propagate.inject`` writes, at
less cost under the default propagators."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate
from opentelemetry.baggage.propagation import W3CBaggagePropagator
from opentelemetry.propagators.composite import CompositePropagator
from opentelemetry.trace import SpanContext
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from chainlat._runtime.otel_compat import composite_members
from chainlat.httpx._httpx_compat import header_triples

_w3c: list[object] = [None, None]
"""[the global propagator last seen, its baggage propagator if it is the W3C default pair]."""


def _w3c_default(textmap: object) -> W3CBaggagePropagator | None:
    # OTEL_PROPAGATORS unset (or "tracecontext,baggage"): W3C trace context, then baggage.
    if type(textmap) is not CompositePropagator:
        return None
    found = composite_members(textmap)
    if (
        len(found) == 2
        and type(found[0]) is TraceContextTextMapPropagator
        and type(found[1]) is W3CBaggagePropagator
    ):
        return found[1]
    return None


def inject(headers: Any, span_context: SpanContext, context: otel_context.Context) -> None:
    """``propagate.inject(headers, context=context)``, for a valid ``span_context`` current
    in ``context``.

    With the default propagators (W3C trace context and baggage) ``traceparent`` and
    ``tracestate`` are written here, as the SDK's propagator writes them, without its
    look-up of the span in the context and its composite's loop; baggage goes through its
    own propagator. Any other global propagator gets ``propagate.inject``.
    """
    textmap = propagate.get_global_textmap()
    if textmap is not _w3c[0]:
        _w3c[:] = [textmap, _w3c_default(textmap)]
    baggage = _w3c[1]
    if not isinstance(baggage, W3CBaggagePropagator):
        propagate.inject(headers, context=context)
        return
    _set(
        headers,
        "traceparent",
        f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{span_context.trace_flags:02x}",
    )
    if span_context.trace_state:
        _set(headers, "tracestate", span_context.trace_state.to_header())
    baggage.inject(headers, context)


def _set(headers: Any, name: str, value: str) -> None:
    """``headers[name] = value``; for an httpx ``Headers`` without ``name``, the triple its
    ``__setitem__`` would append (name, lower-case name, value), without the scan of every
    header for one to replace. ``name`` is lower-case ASCII, and so is ``value``."""
    triples = header_triples(headers)
    if triples is not None:
        key = name.encode("ascii")
        if key not in map(_second, triples):
            triples.append((key, key, value.encode("ascii")))
            return
    headers[name] = value


_second = itemgetter(1)
