"""Every private or version-dependent OpenTelemetry name chainlat uses, in one place.

chainlat reads and writes a few of the SDK's internals where its public seams cost too
much on the hot path (a span's attribute dict, its lock, its slots) or say too little (the
processors a provider holds, the samplers a ``ParentBased`` delegates to). Each such name
is reached only here, through one small function or constant, with the SDK versions it
was checked on: the declared floor (``opentelemetry-sdk`` 1.38.0), 1.44.0 (the newest
some frameworks allow, google-adk among them) and the newest released (1.45.2). Every
accessor falls back to "not an SDK object" (``None``, an empty tuple, an
``AttributeError`` the caller already catches) when a name is missing, so that a future
SDK that renames one makes chainlat take its public (slower) path, never fail.

``tests/runtime/test_otel_compat.py`` holds that no other module of chainlat uses a
private OpenTelemetry name, and ``tests/runtime/test_sdk_floor.py`` runs the runtime on
the floor and on 1.44 in virtual environments of their own.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import context as _otel_context
from opentelemetry.sdk.trace import sampling as _sampling

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable
    from contextlib import AbstractContextManager

    from opentelemetry.attributes import BoundedAttributes


# -- samplers --------------------------------------------------------------------------
# The SDK's own samplers, which decide without reading a span's attributes. Checked on
# 1.38.0, 1.44.0 and 1.45.2: StaticSampler, TraceIdRatioBased, ParentBased and
# ParentBasedTraceIdRatio in all three; AlwaysRecordSampler only from 1.45 (absent in 1.38.0
# and 1.44.0), so it is taken when the installed SDK has it.
BLIND_SAMPLERS: Final[tuple[type, ...]] = tuple(
    sampler
    for sampler in (
        getattr(_sampling, "StaticSampler", None),
        getattr(_sampling, "TraceIdRatioBased", None),
        getattr(_sampling, "ParentBasedTraceIdRatio", None),
        getattr(_sampling, "ParentBased", None),
        getattr(_sampling, "AlwaysRecordSampler", None),
    )
    if isinstance(sampler, type)
)

# Where ParentBased keeps the samplers it delegates to (1.38.0, 1.44.0, 1.45.2: the same
# five names), and AlwaysRecordSampler the one it wraps (1.45.2: ``_root``).
_SAMPLER_DELEGATES: Final = (
    "_root",
    "_remote_parent_sampled",
    "_remote_parent_not_sampled",
    "_local_parent_sampled",
    "_local_parent_not_sampled",
)


def sampler_delegates(sampler: object) -> list[object]:
    """The samplers ``sampler`` (one of :data:`BLIND_SAMPLERS`) hands its decision to."""
    return [getattr(sampler, name) for name in _SAMPLER_DELEGATES if hasattr(sampler, name)]


# -- span processors ---------------------------------------------------------------------
def provider_processors(provider: object) -> object:
    """The processors of an SDK TracerProvider, in the order they run (a tuple), or None.

    ``TracerProvider._active_span_processor`` (a SynchronousMultiSpanProcessor unless the
    application chose another) and its ``_span_processors``, a tuple the SDK replaces when
    a processor is added: 1.38.0, 1.44.0, 1.45.2.
    """
    return multi_processors(getattr(provider, "_active_span_processor", None))


def multi_processors(multi: object) -> object:
    """The ``_span_processors`` of a multi span processor (a tuple on 1.38.0, 1.44.0 and
    1.45.2, for both the synchronous and the concurrent one), or None."""
    return getattr(multi, "_span_processors", None)


# -- a span's attributes and slots --------------------------------------------------------
def bounded_attributes(span: object) -> BoundedAttributes | None:
    """A span's ``BoundedAttributes`` (``Span._attributes`` and ``ReadableSpan._attributes``
    on 1.38.0, 1.44.0, 1.45.2), or None for another kind of span."""
    return getattr(span, "_attributes", None)


def attribute_dict(bounded: object) -> dict[str, Any] | None:
    """The plain dict under a ``BoundedAttributes`` (its ``_dict``), or None.

    1.38.0 and 1.44.0 swap it for an OrderedDict once the attribute limit is reached (then
    None: the SDK's setters keep its order); 1.45.2 keeps a dict throughout.
    """
    inner = getattr(bounded, "_dict", None)
    return inner if type(inner) is dict else None


def span_attribute_dict(span: object) -> dict[str, Any] | None:
    """``attribute_dict(bounded_attributes(span))`` in one call: read on every span's start
    and end."""
    inner = getattr(getattr(span, "_attributes", None), "_dict", None)
    return inner if type(inner) is dict else None


def attributes_lock(bounded: BoundedAttributes) -> AbstractContextManager[object]:
    """The lock a ``BoundedAttributes`` takes around its writes (``_lock``: an RLock on
    1.38.0, a Lock on 1.44.0 and 1.45.2)."""
    return bounded._lock


def attribute_parts(
    span: object,
) -> tuple[BoundedAttributes, dict[str, Any] | None, threading.Lock]:
    """An SDK span's ``BoundedAttributes``, the plain dict under it (None if not a plain
    dict) and the span's own lock (``Span._lock``, a Lock on 1.38.0, 1.44.0 and 1.45.2).

    Raises:
        AttributeError: ``span`` is not an SDK span (the caller takes the public path).
    """
    bounded = span._attributes  # type: ignore[attr-defined]
    return bounded, attribute_dict(bounded), span._lock  # type: ignore[attr-defined]


def span_lock(span: object) -> threading.Lock | None:
    """An SDK span's lock (``Span._lock`` on 1.38.0, 1.44.0, 1.45.2), or None."""
    return getattr(span, "_lock", None)


def has_ended(span: object) -> bool:
    """Whether an SDK span has ended (``_end_time`` set by ``end()``: 1.38.0, 1.44.0,
    1.45.2); read under the span's lock to be current."""
    return getattr(span, "_end_time", None) is not None


def start_time(span: object) -> object:
    """An SDK span's ``_start_time`` (an int once started: 1.38.0, 1.44.0, 1.45.2)."""
    return getattr(span, "_start_time", None)


def move_start(span: object, start_ns: int) -> None:
    """Set an open SDK span's start (the API has no setter; exporters read ``_start_time``
    once the span ended: 1.38.0, 1.44.0, 1.45.2). Call it under :func:`span_lock`."""
    span._start_time = start_ns  # type: ignore[attr-defined]


span_slots: Final[Callable[[object], tuple[Any, ...]]] = operator.attrgetter(
    "_context", "_parent", "_name", "_start_time", "_end_time", "_attributes", "_events"
)
"""Context, parent, name, start, end, BoundedAttributes and events of an SDK span, read
from the slots its public properties return, in one C call: the same seven names on
``ReadableSpan`` (and so ``Span``) in 1.38.0, 1.44.0 and 1.45.2."""


def event_count_source(events: object) -> object:
    """What to test for "any events" cheaply: the deque under the SDK's ``BoundedList``
    (``_dq`` on 1.38.0, 1.44.0, 1.45.2), whose length is answered in C; ``events`` itself
    for anything else."""
    return getattr(events, "_dq", events)


# -- context and exporters -----------------------------------------------------------------
SUPPRESS_INSTRUMENTATION_KEY: Final[str] = getattr(
    _otel_context, "_SUPPRESS_INSTRUMENTATION_KEY", None
) or _otel_context.create_key("suppress_instrumentation")
"""The context key an exporting processor sets so that the export's own HTTP calls are not
traced (what the SDK's SimpleSpanProcessor sets): ``opentelemetry.context`` in 1.38.0,
1.44.0 and 1.45.2."""


def exporter_endpoint(exporter: object) -> object:
    """The URL an OTLP exporter sends to (``_endpoint`` of the HTTP and gRPC span exporters
    on 1.38.0, 1.44.0, 1.45.2), or None."""
    return getattr(exporter, "_endpoint", None)


def composite_members(textmap: object) -> tuple[object, ...]:
    """The propagators a ``CompositePropagator`` runs, in order (``_propagators`` on 1.38.0,
    1.44.0, 1.45.2); empty for anything else."""
    return tuple(getattr(textmap, "_propagators", ()))


# -- version-dependent signatures ------------------------------------------------------------
def accepts_meter_provider(cls: type) -> bool:
    """Whether an SDK span processor takes ``meter_provider=`` (for its own metrics): the
    keyword arrived in 1.39; 1.38.0 has none, 1.44.0 and 1.45.2 take it on both the
    Simple and the Batch span processor."""
    import inspect

    return "meter_provider" in inspect.signature(cls).parameters
