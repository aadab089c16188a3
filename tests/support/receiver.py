"""Raw OTLP for chainlat's receiver: its gRPC ``Export`` taking and giving bytes as they go
on the wire (a malformed message too, or a stream of them), and the span ids of the file
it wrote."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


@contextmanager
def grpc_export(port: int | None, **channel: Any) -> Iterator[Callable[..., bytes]]:
    """``TraceService/Export`` on 127.0.0.1:``port`` (a receiver's ``grpc_port``, which must
    serve), bytes in and bytes out (``channel``: grpc.insecure_channel's options, such as
    ``compression``), while the block runs."""
    import grpc

    assert port is not None, "the receiver serves no gRPC"
    with grpc.insecure_channel(f"127.0.0.1:{port}", **channel) as opened:
        yield opened.unary_unary(
            EXPORT_METHOD, request_serializer=bytes, response_deserializer=bytes
        )


@contextmanager
def grpc_stream_export(port: int | None) -> Iterator[Any]:
    """``TraceService/Export`` on 127.0.0.1:``port`` as a call whose request is a stream of
    bytes (any number of messages, or a generator that waits), while the block runs: the
    multi-callable, to call or to call ``.future()`` on."""
    import grpc

    assert port is not None, "the receiver serves no gRPC"
    with grpc.insecure_channel(f"127.0.0.1:{port}") as opened:
        yield opened.stream_unary(
            EXPORT_METHOD, request_serializer=bytes, response_deserializer=bytes
        )


def received_span_ids(path: str | Path) -> list[str]:
    """The span ids of every span in a receiver's OTLP/JSON lines file, in file order."""
    return [
        span["spanId"]
        for line in Path(path).read_text().splitlines()
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
