"""The bounds every receiver keeps, whatever its clients send."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MAX_BODY_BYTES: Final = 64 * 1024 * 1024
"""The largest request taken, as sent and decompressed (OTLP/HTTP and OTLP/gRPC alike)."""
RECENT_SPANS: Final = 262_144
"""Span ids remembered to leave out a span sent again (``sink.RecentSpans``)."""


@dataclass(frozen=True)
class Limits:
    """What one receiver allows; the defaults are those ``chainlat serve`` and ``run`` use.

    Example::

        limits = Limits(max_body_bytes=8 * 1024 * 1024)
        receiver = Receiver("received.jsonl", limits=limits)
    """

    max_body_bytes: int = MAX_BODY_BYTES
    """A body over this, as sent or decompressed, is refused (HTTP 413, gRPC
    RESOURCE_EXHAUSTED)."""
    body_timeout_s: float = 10.0
    """An HTTP body must have all arrived this long after its headers (else 408)."""
    idle_timeout_s: float = 15.0
    """An HTTP connection that sends no complete request head for this long is closed: a
    client that drips its headers, or an idle kept-alive connection. gRPC connections idle
    this long are closed too."""
    max_connections: int = 64
    """HTTP connections open at once; past it a new one is closed at once."""
    decode_threads: int = 4
    """Threads decoding HTTP bodies (protobuf to JSON), beside the event loop."""
    grpc_threads: int = 8
    """Threads answering gRPC calls."""
    max_grpc_calls: int = 64
    """gRPC calls in progress at once; past it gRPC answers RESOURCE_EXHAUSTED."""
    recent_spans: int = RECENT_SPANS
    """Span ids (trace and span id) remembered, about 100 bytes each: a span received again
    among the last this many (an exporter's retry of a batch already taken) is written and
    counted once (``sink.RecentSpans``)."""
