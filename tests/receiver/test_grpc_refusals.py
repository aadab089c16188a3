"""OTLP/gRPC refusals counted as OTLP/HTTP's are: a message over the cap (which grpcio
refuses before chainlat's handler sees it) is in the counters and the warnings, with a real
grpc client on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chainlat.receiver import Limits, Receiver
from support import EXPORT_METHOD, grpc_export

CAP = 64 * 1024


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    limits = Limits(max_body_bytes=CAP)
    with Receiver(tmp_path / "r.jsonl", port=0, grpc_port=0, limits=limits) as started:
        yield started


def test_a_grpc_message_over_the_cap_is_resource_exhausted_and_counted(
    receiver: Receiver,
) -> None:
    import grpc

    with grpc_export(receiver.grpc_port) as export:
        with pytest.raises(grpc.RpcError) as refused:
            export(b"\x0a" + b"\xff" * CAP, timeout=10)
        assert export(b"", timeout=10) == b""  # and it keeps serving
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    receiver.stop()  # the client may hear grpcio's refusal before the handler counts it
    counters = receiver.counters
    assert (counters.too_large, counters.requests, counters.bad_requests) == (1, 1, 0)
    assert counters.warnings() == [
        "1 request refused as too large (HTTP 413, gRPC RESOURCE_EXHAUSTED)"
    ]


def test_a_gzip_message_over_the_cap_once_inflated_is_counted_too(receiver: Receiver) -> None:
    import grpc

    zeros = b"\x0a" + bytes(4 * CAP)  # a few hundred bytes gzipped
    with grpc_export(receiver.grpc_port, compression=grpc.Compression.Gzip) as export:
        with pytest.raises(grpc.RpcError) as refused:
            export(zeros, timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    receiver.stop()
    assert receiver.counters.too_large == 1


def test_a_call_without_a_message_is_counted_with_the_too_large(receiver: Receiver) -> None:
    """grpcio tells the handler only that no message came, whether it refused one over the
    cap or the client sent none: both are counted as too large, and answered so."""
    import grpc

    with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
        stream = channel.stream_unary(
            EXPORT_METHOD, request_serializer=bytes, response_deserializer=bytes
        )
        with pytest.raises(grpc.RpcError) as refused:
            stream(iter([]), timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert refused.value.details() == f"no message received: over {CAP} bytes, or none sent"
    receiver.stop()
    assert (receiver.counters.too_large, receiver.counters.requests) == (1, 0)


def test_a_second_message_in_one_call_is_not_read(receiver: Receiver) -> None:
    """Export takes one message: a client streaming more gets the first one written."""
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "first"
    with grpc.insecure_channel(f"127.0.0.1:{receiver.grpc_port}") as channel:
        stream = channel.stream_unary(
            EXPORT_METHOD, request_serializer=bytes, response_deserializer=bytes
        )
        assert stream(iter([request.SerializeToString(), b"not a protobuf"]), timeout=10) == b""
    receiver.stop()
    assert (receiver.counters.spans, receiver.counters.bad_requests) == (1, 0)
    assert '"name":"first"' in Path(receiver.out).read_text()
