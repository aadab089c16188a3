"""An OTLP receiver: traces sent over OTLP/HTTP or OTLP/gRPC, written as OTLP/JSON lines.

What ``chainlat serve`` and ``chainlat run`` are built on, so that an agent in any language
(OpenTelemetry JS, Go, Java, Rust) can be judged without a Collector. The package's rooms:
:mod:`~chainlat.receiver.decoding` (a body as an OTLP/JSON document),
:mod:`~chainlat.receiver.sink` (the file and the counters),
:mod:`~chainlat.receiver.otlp_http` (aiohttp), :mod:`~chainlat.receiver.otlp_grpc`
(grpcio), :mod:`~chainlat.receiver.live` (the runs, as they complete),
:mod:`~chainlat.receiver.limits` (the bounds) and :mod:`~chainlat.receiver.server`
(:class:`Receiver`, both servers together). aiohttp and grpcio are imported when a receiver
starts, not by ``import chainlat.receiver``.

Example::

    with Receiver("received.jsonl", port=0, grpc_port=0) as receiver:
        ...  # export to http://127.0.0.1:{receiver.port}/v1/traces
    runs = list(chainlat.traces.read_runs("received.jsonl"))
"""

from __future__ import annotations

from chainlat.receiver.limits import MAX_BODY_BYTES, Limits
from chainlat.receiver.live import run_line
from chainlat.receiver.server import (
    DEFAULT_GRPC_PORT,
    DEFAULT_HOST,
    DEFAULT_HTTP_PORT,
    Receiver,
)
from chainlat.receiver.sink import ReceiverCounters

__all__ = [
    "DEFAULT_GRPC_PORT",
    "DEFAULT_HOST",
    "DEFAULT_HTTP_PORT",
    "MAX_BODY_BYTES",
    "Limits",
    "Receiver",
    "ReceiverCounters",
    "run_line",
]
