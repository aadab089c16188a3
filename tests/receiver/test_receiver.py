"""The receiver against real clients on 127.0.0.1: the OpenTelemetry SDK's OTLP exporters,
hand-made OTLP/JSON bodies (chunked, gzip), and bad input, each bounded."""

from __future__ import annotations

import gzip
import json
import select
import socket
import time
from pathlib import Path

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter

from chainlat.receiver import Limits, Receiver
from chainlat.traces import read_runs
from support import grpc_export, until

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
WORKFLOW = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support"}


def _export_run(exporter: SpanExporter, step_ms: int) -> None:
    """One workflow run with one step of ``step_ms``, at injected times, exported."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    workflow = tracer.start_span("invoke_workflow support", start_time=T0, attributes=WORKFLOW)
    context = trace.set_span_in_context(workflow)
    step = tracer.start_span("retrieve docs", context=context, start_time=T0 + MS)
    step.end(end_time=T0 + MS + step_ms * MS)
    workflow.end(end_time=T0 + 2 * MS + step_ms * MS)
    provider.shutdown()


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_sdk_http_protobuf_exporter_is_received_as_otlp_json_lines_with_hex_ids(
    receiver: Receiver,
) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    _export_run(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{receiver.port}/v1/traces"), 50)
    receiver.stop()
    text = Path(receiver.out).read_text()
    span = json.loads(text.splitlines()[0])["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span["traceId"]) == 32 and int(span["traceId"], 16)
    assert len(span["spanId"]) == 16 and int(span["spanId"], 16)
    (run,) = read_runs([receiver.out])
    assert run.workflow == "support" and run.total_ms == pytest.approx(52.0)
    assert receiver.counters.spans == 2


def test_the_sdk_grpc_exporter_is_received_as_the_same_runs(receiver: Receiver) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{receiver.grpc_port}", insecure=True)
    _export_run(exporter, 150)
    receiver.stop()
    (run,) = read_runs([receiver.out])
    assert run.workflow == "support" and run.total_ms == pytest.approx(152.0)


def _json_request(step_ms: int = 30) -> dict[str, object]:
    trace_id = "5b8efff798038103d269b633813fc60c"
    root, child = "eee19b7ec3c1b174", "eee19b7ec3c1b175"
    attributes = [{"key": k, "value": {"stringValue": v}} for k, v in WORKFLOW.items()]
    spans = [
        {
            "traceId": trace_id,
            "spanId": child,
            "parentSpanId": root,
            "name": "retrieve docs",
            "kind": 1,
            "startTimeUnixNano": str(T0 + MS),
            "endTimeUnixNano": str(T0 + MS + step_ms * MS),
        },
        {
            "traceId": trace_id,
            "spanId": root,
            "name": "invoke_workflow support",
            "kind": 1,
            "startTimeUnixNano": str(T0),
            "endTimeUnixNano": str(T0 + 2 * MS + step_ms * MS),
            "attributes": attributes,
        },
    ]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}


def test_a_json_body_sent_chunked_and_gzipped_is_received(receiver: Receiver) -> None:
    """httpx sends a body from an iterator with Transfer-Encoding: chunked and no length."""
    body = gzip.compress(json.dumps(_json_request()).encode())
    chunks = [body[i : i + 100] for i in range(0, len(body), 100)]
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    answer = httpx.post(url, content=iter(chunks), headers=headers, timeout=10)
    assert answer.status_code == 200 and answer.json() == {}
    assert answer.request.headers["Transfer-Encoding"] == "chunked"
    receiver.stop()
    (run,) = read_runs([receiver.out])
    assert run.total_ms == pytest.approx(32.0)


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("application/x-protobuf", b"not a protobuf at all"),
        ("application/x-protobuf", b"\x0a\xff\xff\xff\x0f\x0a"),  # a length past the end
        ("application/json", b'{"resourceSpans": [{"scopeSpans": [{"spans": [1'),
        ("application/json", b'{"resourceSpans": 3}'),
    ],
)
def test_garbage_and_truncated_bodies_are_400_and_the_server_keeps_serving(
    receiver: Receiver, content_type: str, body: bytes
) -> None:
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    with httpx.Client(timeout=10) as client:
        bad = client.post(url, content=body, headers={"Content-Type": content_type})
        good = client.post(url, json=_json_request())
    assert (bad.status_code, good.status_code) == (400, 200)
    assert receiver.counters.bad_requests == 1 and receiver.counters.requests == 1
    assert "refused as not OTLP trace data" in receiver.counters.warnings()[0]


def test_a_gzip_bomb_is_413_without_being_inflated_past_the_cap(receiver: Receiver) -> None:
    """65 MiB of zeros gzip to 64 KiB: over the stated 64 MiB cap once decompressed."""
    bomb = gzip.compress(bytes(65 * 1024 * 1024), compresslevel=1)
    assert len(bomb) < 1024 * 1024
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    with httpx.Client(timeout=30) as client:
        assert client.post(url, content=bomb, headers=headers).status_code == 413
        assert client.post(url, json=_json_request()).status_code == 200
    assert receiver.counters.too_large == 1


def test_a_body_over_the_cap_is_413_chunked_or_not(tmp_path: Path) -> None:
    limits = Limits(max_body_bytes=64 * 1024)
    big = b"x" * (65 * 1024)
    with Receiver(tmp_path / "r.jsonl", port=0, grpc_port=None, limits=limits) as receiver:
        url = f"http://127.0.0.1:{receiver.port}/v1/traces"
        headers = {"Content-Type": "application/json"}
        sized = httpx.post(url, content=big, headers=headers, timeout=10)
        chunked = httpx.post(url, content=iter([big[:40_000], big[40_000:]]), headers=headers)
        assert (sized.status_code, chunked.status_code) == (413, 413)
        assert receiver.counters.too_large == 2


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    return sock


def _read_all(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (10 s at most, the socket's)."""
    data = b""
    while chunk := sock.recv(4096):
        data += chunk
    return data


def _closed_by_server(
    socks: list[socket.socket], expected: int, seconds: float = 30.0
) -> tuple[list[socket.socket], list[bytes]]:
    """The sockets the server closed without a byte, polled until ``expected`` are or
    ``seconds`` pass, and what any socket was sent instead."""
    closed: list[socket.socket] = []
    answered: list[bytes] = []
    deadline = time.monotonic() + seconds
    while len(closed) < expected and time.monotonic() < deadline:
        waiting = [s for s in socks if s not in closed]
        readable, _, _ = select.select(waiting, [], [], 0.05)
        for sock in readable:
            data = sock.recv(4096)
            if data:
                answered.append(data)
            closed.append(sock)
    return closed, answered


def test_a_body_that_drips_in_is_cut_off_at_the_deadline_with_408(tmp_path: Path) -> None:
    limits = Limits(body_timeout_s=0.3)
    with Receiver(tmp_path / "r.jsonl", port=0, grpc_port=None, limits=limits) as receiver:
        sock = _connect(receiver.port)
        sock.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        started = time.monotonic()
        answer = _read_all(sock)  # the client sends nothing more
        took = time.monotonic() - started
        sock.close()
        assert answer.startswith(b"HTTP/1.1 408")
        assert took < 5  # the deadline is 0.3 s; 5 s allows for a loaded machine
        assert receiver.counters.timed_out == 1


def test_headers_that_drip_in_are_cut_off_by_the_idle_timeout(tmp_path: Path) -> None:
    limits = Limits(idle_timeout_s=0.3)
    with Receiver(tmp_path / "r.jsonl", port=0, grpc_port=None, limits=limits) as receiver:
        sock = _connect(receiver.port)
        sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\n")
        started = time.monotonic()
        assert _read_all(sock) == b""  # closed without an answer
        assert time.monotonic() - started < 5
        sock.close()


def test_connections_past_the_limit_are_closed_at_once_and_counted(tmp_path: Path) -> None:
    limits = Limits(max_connections=4)
    with Receiver(tmp_path / "r.jsonl", port=0, grpc_port=None, limits=limits) as receiver:
        socks = [_connect(receiver.port) for _ in range(10)]
        try:
            # 30 s: a bound for a loaded machine, whose server thread may wait its turn.
            counted = until(lambda: receiver.counters.refused_connections >= 6, seconds=30)
            assert counted, f"{receiver.counters.refused_connections} refused, expected 6"
            assert receiver.counters.refused_connections == 6
            # Which six the server refused is its accept order's to say: the six closed
            # with no byte sent, the four others still open.
            closed, answered = _closed_by_server(socks, 6)
            assert (len(closed), answered) == (6, [])
            # the four kept ones still answer
            url = f"http://127.0.0.1:{receiver.port}/v1/traces"
            for sock in socks:
                if sock not in closed:
                    sock.close()
            assert until(lambda: httpx.post(url, json=_json_request()).status_code == 200)
        finally:
            for sock in socks:
                sock.close()
        warning = receiver.counters.warnings()[0]
        assert warning == "6 connections refused: too many open at once"


def test_each_run_is_handed_out_live_once_its_trace_is_complete(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    seen: list[float] = []
    out = tmp_path / "r.jsonl"
    with Receiver(out, port=0, grpc_port=None, on_run=lambda r: seen.append(r.total_ms)) as rec:
        _export_run(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{rec.port}/v1/traces"), 40)
        assert until(lambda: seen == [pytest.approx(42.0)])


def test_grpc_refuses_garbage_and_a_message_over_the_cap_and_keeps_serving(
    receiver: Receiver,
) -> None:
    import grpc

    with grpc_export(receiver.grpc_port) as export:
        with pytest.raises(grpc.RpcError) as garbage:
            export(b"not a protobuf at all", timeout=10)
        with pytest.raises(grpc.RpcError) as too_large:
            export(b"\x0a" + b"\xff" * (65 * 1024 * 1024), timeout=30)
        assert export(b"", timeout=10) == b""
    assert garbage.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert too_large.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    receiver.stop()  # the client may hear grpcio's refusal before the handler counts it
    assert (receiver.counters.bad_requests, receiver.counters.too_large) == (1, 1)
