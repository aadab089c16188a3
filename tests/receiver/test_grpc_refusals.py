"""OTLP/gRPC refusals counted as OTLP/HTTP's are: a message over the cap and a call past
``max_grpc_calls`` (both refused by grpcio before chainlat's handler sees them) are in the
counters and the warnings, with a real grpc client on 127.0.0.1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from chainlat.receiver import Limits, Receiver
from support import grpc_export, grpc_stream_export, until

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

    with grpc_stream_export(receiver.grpc_port) as stream:
        with pytest.raises(grpc.RpcError) as refused:
            stream(iter([]), timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert refused.value.details() == f"no message received: over {CAP} bytes, or none sent"
    receiver.stop()
    assert (receiver.counters.too_large, receiver.counters.requests) == (1, 0)


def test_a_second_message_in_one_call_is_not_read(receiver: Receiver) -> None:
    """Export takes one message: a client streaming more gets the first one written."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "first"
    with grpc_stream_export(receiver.grpc_port) as stream:
        assert stream(iter([request.SerializeToString(), b"not a protobuf"]), timeout=10) == b""
    receiver.stop()
    assert (receiver.counters.spans, receiver.counters.bad_requests) == (1, 0)
    assert '"name":"first"' in Path(receiver.out).read_text()


def test_calls_past_max_grpc_calls_are_refused_by_grpcio_and_counted(tmp_path: Path) -> None:
    """With two calls in progress and ``max_grpc_calls = 2``, grpcio answers a third
    RESOURCE_EXHAUSTED without chainlat's handler: counted all the same (when the next call
    arrives), and warned of; the two held calls and a later one are written."""
    import grpc

    limits = Limits(max_grpc_calls=2, grpc_threads=2)
    release = threading.Event()

    def held(span_id: bytes) -> Iterator[bytes]:
        release.wait(30)  # a bound, should the test fail before it releases them
        yield _request(span_id)

    with Receiver(tmp_path / "r.jsonl", port=0, grpc_port=0, limits=limits) as receiver:
        with grpc_stream_export(receiver.grpc_port) as stream:
            calls = [stream.future(held(bytes([n]) * 8), timeout=30) for n in (2, 3)]
            try:
                assert until(lambda: receiver.counters.in_flight == 2, seconds=30)
                with pytest.raises(grpc.RpcError) as refused:
                    stream(iter([_request(b"\x04" * 8)]), timeout=10)
            finally:
                release.set()
            assert [call.result(timeout=30) for call in calls] == [b"", b""]
            assert receiver.counters.busy_calls == 0  # not yet: no call came after it
            assert stream(iter([_request(b"\x05" * 8)]), timeout=10) == b""
            assert receiver.counters.busy_calls == 1
        receiver.stop()
        counters = receiver.counters
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (counters.busy_calls, counters.too_large, counters.requests) == (1, 0, 3)
    assert counters.warnings() == [
        "1 gRPC call refused: too many in progress at once (RESOURCE_EXHAUSTED)"
    ]


def test_a_refusal_is_counted_when_the_receiver_stops(tmp_path: Path) -> None:
    """The last call refused, with none after it, is counted once the server has stopped."""
    import grpc

    limits = Limits(max_grpc_calls=1, grpc_threads=1)
    release = threading.Event()

    def held() -> Iterator[bytes]:
        release.wait(30)
        yield _request(b"\x06" * 8)

    receiver = Receiver(tmp_path / "r.jsonl", port=0, grpc_port=0, limits=limits)
    with receiver:
        with grpc_stream_export(receiver.grpc_port) as stream:
            call = stream.future(held(), timeout=30)
            try:
                assert until(lambda: receiver.counters.in_flight == 1, seconds=30)
                with pytest.raises(grpc.RpcError):
                    stream(iter([_request(b"\x07" * 8)]), timeout=10)
            finally:
                release.set()
            assert call.result(timeout=30) == b""
    assert (receiver.counters.busy_calls, receiver.counters.requests) == (1, 1)


def _request(span_id: bytes) -> bytes:
    """An OTLP trace request of one span, as protobuf."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, span_id, "held"
    span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    return request.SerializeToString()
