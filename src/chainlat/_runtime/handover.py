"""A step's attributes handed to chainlat's span processor, which writes them as the span
starts, rather than passed to ``start_span``, which checks and copies each one.

The SDK cleans every attribute given to ``start_span`` one call at a time (about ninety
bytecodes each; a model call starts with eight). chainlat's own values need none of it,
and its processor already writes such values straight into a span
(``span_attributes.set_attributes``). Handing them over changes what can see them at the start,
so it is done only where nothing could tell: the tracer's sampler never reads attributes
(the SDK's own samplers, by exact type), and every processor that runs ``on_start`` before
chainlat's does nothing there (the SDK's export processors). Anywhere else the attributes
go to ``start_span`` as before.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

from chainlat._runtime.otel_compat import BLIND_SAMPLERS, sampler_delegates


class Handover(threading.local):
    """Attributes waiting for the next span this thread starts (None: nothing waits)."""

    values: Mapping[str, Any] | None = None


_IDLE_STARTS: Final = frozenset(
    (SpanProcessor.on_start, BatchSpanProcessor.on_start, SimpleSpanProcessor.on_start)
)


def sampler_is_blind(sampler: object, depth: int = 0) -> bool:
    """Whether ``sampler`` decides without reading attributes: one of the SDK's samplers (its
    exact type, not a subclass that may override ``should_sample``), delegating only to such."""
    if type(sampler) not in BLIND_SAMPLERS or depth > 4:
        return False
    return all(sampler_is_blind(delegate, depth + 1) for delegate in sampler_delegates(sampler))


def first_to_start(processors: tuple[object, ...], ours: object) -> bool:
    """Whether ``ours`` is in ``processors`` and every processor before it does nothing on
    start (its class keeps one of the SDK's empty ``on_start`` methods)."""
    for processor in processors:
        if processor is ours:
            return True
        if getattr(type(processor), "on_start", None) not in _IDLE_STARTS:
            return False
    return False
