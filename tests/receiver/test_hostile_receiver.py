"""The receiver under hostile clients on 127.0.0.1: a request that is not HTTP, a message that
is not OTLP, a gzip body of several members, traces that never complete. Each is answered
with a one-line reason and counted, never logged with a traceback, and what is held for the
live view stays bounded in bytes."""

from __future__ import annotations

import gzip
import json
import logging
import socket
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainlat.receiver import Receiver
from chainlat.receiver.live import LiveRuns
from support import grpc_export

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
TOKEN = "sk-live-AbCdEfGhIjKlMnOpQrStUv"


def _tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What reached logging with an exception: logging's last resort prints it on stderr."""
    return [record.getMessage() for record in caplog.records if record.exc_info]


def _raw(port: int, request: bytes) -> bytes:
    """The answer to ``request`` sent as is, read until the server closes (10 s at most)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return answer


MALFORMED = [
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: \x1b[31mjson\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
    + TOKEN.encode() * 400
    + b"\r\n\r\n",
    b"POST /v1/traces HTTP/1.1\r\n" + b"".join(b"X-%d: a\r\n" % i for i in range(200)) + b"\r\n",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(100)),  # a TLS hello
]


def test_a_request_aiohttp_cannot_parse_is_a_counted_400_without_a_traceback(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for request in MALFORMED:
        assert _raw(receiver.port, request).startswith(b"HTTP/1."), request[:40]
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    assert httpx.post(url, json={"resourceSpans": []}, timeout=10).status_code == 200
    assert _tracebacks(caplog) == []
    counters = receiver.counters
    assert counters.bad_requests == len(MALFORMED)
    assert counters.first_problem == "not a well-formed HTTP request: Invalid header value char"
    # A header too long is named, not quoted: its value may be a token.
    assert all(TOKEN not in line for line in counters.warnings())


@pytest.mark.parametrize(
    "message",
    [
        b"not a protobuf at all",
        b"\x0a\x0c\x12\x0a\x12\x08\x2a\x06\xff\xfe\xfd\xfc\xfb\xfa",  # a name not UTF-8
    ],
    ids=["garbage", "a name not UTF-8"],
)
def test_a_grpc_message_that_is_not_otlp_is_invalid_argument_counted_without_a_traceback(
    receiver: Receiver, caplog: pytest.LogCaptureFixture, message: bytes
) -> None:
    import grpc

    caplog.set_level(logging.DEBUG)
    with grpc_export(receiver.grpc_port) as export:
        with pytest.raises(grpc.RpcError) as refused:
            export(message, timeout=10)
        assert export(b"", timeout=10) == b""
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert str(refused.value.details()).startswith("not an OTLP protobuf trace request: ")
    assert _tracebacks(caplog) == []
    assert (receiver.counters.bad_requests, receiver.counters.requests) == (1, 1)


def _protobuf_span(span_id: bytes, name: str) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    span = request.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = b"\x01" * 16, span_id, name
    span.start_time_unix_nano, span.end_time_unix_nano = T0, T0 + MS
    return request.SerializeToString()


def test_a_gzip_body_of_two_members_is_read_whole(receiver: Receiver) -> None:
    """Two protobuf messages one after another are one message with both spans; gzipped as
    two members (RFC 1952), the second member's span was dropped."""
    body = gzip.compress(_protobuf_span(b"\x02" * 8, "first")) + gzip.compress(
        _protobuf_span(b"\x03" * 8, "second")
    )
    headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 200
    receiver.stop()
    (line,) = Path(receiver.out).read_text().splitlines()
    names = [
        span["name"]
        for resource in json.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]
    assert names == ["first", "second"]


@pytest.mark.parametrize(
    ("encoding", "body"),
    [
        ("deflate", zlib.compress(b'{"resourceSpans": []}') + b"more"),
        ("gzip", gzip.compress(b'{"resourceSpans": []}') + b"more"),
    ],
    ids=["deflate", "gzip"],
)
def test_data_after_the_compressed_body_is_400(
    receiver: Receiver, encoding: str, body: bytes
) -> None:
    headers = {"Content-Type": "application/json", "Content-Encoding": encoding}
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    assert httpx.post(url, content=body, headers=headers, timeout=10).status_code == 400
    assert receiver.counters.requests == 0


def _orphan(index: int, size: int) -> dict[str, object]:
    """One span whose parent never comes, ``size`` bytes of attribute: a trace that never
    completes."""
    span = {
        "traceId": f"{index:032x}",
        "spanId": "b" * 16,
        "parentSpanId": "c" * 16,
        "name": "step",
        "attributes": [{"key": "k", "value": {"stringValue": "x" * size}}],
    }
    return {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}


def test_traces_that_never_complete_are_held_up_to_a_number_of_bytes() -> None:
    """Ten orphan spans of 1 MB each, with room for three: the oldest seven are dropped from
    the live view (a count of traces or spans alone would hold all ten)."""
    documents = [_orphan(index, 1024 * 1024) for index in range(10)]
    size = len(json.dumps(documents[0]))
    live = LiveRuns(lambda run: None, max_open_bytes=3 * size)
    try:
        for document in documents:
            live.add(document, size)
        assert live.dropped_traces == 7
    finally:
        live.close()


def test_the_sink_hands_each_document_over_with_the_size_of_its_line(tmp_path: Path) -> None:
    from chainlat.receiver.sink import Sink

    seen: list[int] = []
    sink = Sink(tmp_path / "r.jsonl", on_document=lambda document, size: seen.append(size))
    document = _orphan(1, 100)
    sink.write(document, spans=1)
    sink.close()
    assert seen == [len((tmp_path / "r.jsonl").read_bytes())]


def test_a_run_line_cuts_a_megabyte_workflow_name_and_escapes_its_controls(
    tmp_path: Path,
) -> None:
    """A span may be named in megabytes and hold terminal escapes: the run's line shows 200
    characters of it, escaped, and the figures after it."""
    from chainlat.budgets import parse_budgets
    from chainlat.receiver import run_line
    from chainlat.traces import read_runs

    name = "\x1b[2J" + "w" * 1_000_000
    span = {
        "traceId": "1" * 32,
        "spanId": "a" * 16,
        "name": "invoke_workflow x",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 5 * MS),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
            {"key": "gen_ai.workflow.name", "value": {"stringValue": name}},
        ],
    }
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + "\n")
    (run,) = read_runs([path])
    budgets = parse_budgets({"workflows": {name: {"total": "1ms"}}})
    line = run_line(run, budgets)
    shown = "\\x1b[2J" + "w" * 193 + "…"
    assert line == f"{shown}, total 5.0 ms, first output -: broken: {shown}"


def _workflow_body(value: str) -> bytes:
    """One workflow span whose attribute ``x`` is ``value`` as written in the body."""
    span = {
        "traceId": "1" * 32,
        "spanId": "a" * 16,
        "name": "invoke_workflow support",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 10 * MS),
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
            {"key": "gen_ai.workflow.name", "value": {"stringValue": "support"}},
            {"key": "x", "value": "VALUE"},
        ],
    }
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}
    return json.dumps(document).replace('"VALUE"', value).encode()


@pytest.mark.parametrize(
    "value",
    ['{"doubleValue":NaN}', '{"doubleValue":-Infinity}', '{"doubleValue":1e999}'],
    ids=["NaN", "-Infinity", "past a double"],
)
def test_a_json_body_with_a_number_json_has_not_is_400_and_the_file_stays_readable(
    receiver: Receiver, value: str
) -> None:
    """Python's parser takes NaN, Infinity and 1e999; written to the file, that one line made
    every reader refuse the whole file, and the summary of serve and run with it."""
    from chainlat.traces import read_runs

    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    headers = {"Content-Type": "application/json"}
    bad = httpx.post(url, content=_workflow_body(value), headers=headers, timeout=10)
    good = httpx.post(url, content=_workflow_body('{"doubleValue":"NaN"}'), headers=headers)
    assert (bad.status_code, good.status_code) == (400, 200)
    assert bad.text.startswith("not JSON: ")
    receiver.stop()
    (run,) = read_runs([receiver.out])
    assert run.total_ms == 10.0


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full (a disk always full)")
def test_a_file_that_cannot_be_written_is_503_and_said_so_not_a_chainlat_bug() -> None:
    """A full disk: the exporter is told to retry (HTTP 503, gRPC UNAVAILABLE), the warning
    names the file and the reason; it was a 500 counted as a failure of the receiver."""
    import grpc

    with Receiver("/dev/full", port=0, grpc_port=0) as receiver:
        url = f"http://127.0.0.1:{receiver.port}/v1/traces"
        answer = httpx.post(url, json={"resourceSpans": []}, timeout=10)
        with grpc_export(receiver.grpc_port) as export, pytest.raises(grpc.RpcError) as refused:
            export(b"", timeout=10)
    assert answer.status_code == 503
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert receiver.counters.warnings() == [
        "2 requests not written (cannot write /dev/full: No space left on device): their "
        "spans are not judged"
    ]


def test_the_traces_still_open_at_the_end_are_read_together_in_one_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2,000 complete traces handed out at close: one read of them all, each run to on_run in
    the order the runs started. One read per trace held serve 18 s after Ctrl-C with 5,000."""
    import chainlat.traces

    reads: list[object] = []
    real = chainlat.traces.read_runs

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(chainlat.traces, "read_runs", counted)
    starts: list[int] = []
    live = LiveRuns(lambda run: starts.append(run.start_ns), settle_s=3600)
    spans = [
        {
            "traceId": f"{index + 1:032x}",
            "spanId": "a" * 16,
            "name": "invoke_workflow support",
            "startTimeUnixNano": str(T0 + (2000 - index) * MS),
            "endTimeUnixNano": str(T0 + (2000 - index) * MS + MS),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
                {"key": "gen_ai.workflow.name", "value": {"stringValue": "support"}},
            ],
        }
        for index in range(2000)
    ]
    live.add({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    live.close()
    assert len(reads) == 1
    assert starts == [T0 + n * MS for n in range(1, 2001)]


def _status_line(sock: socket.socket) -> bytes:
    """The first line the server sends (10 s at most)."""
    answer = b""
    while b"\r\n" not in answer and (chunk := sock.recv(4096)):
        answer += chunk
    return answer.split(b"\r\n", 1)[0]


def test_expect_100_continue_with_a_length_over_the_cap_is_413_without_inviting_the_body(
    receiver: Receiver,
) -> None:
    """The client waits for 100 Continue before it sends the body: a length over the cap is
    answered 413 at once, counted, and the connection closed (it was invited with 100
    Continue, then refused)."""
    from chainlat.receiver import MAX_BODY_BYTES

    head = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\n"
        b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY_BYTES + 1)
    )
    answer = _raw(receiver.port, head)  # read until the server closes: no body is awaited
    assert answer.split(b"\r\n", 1)[0] == b"HTTP/1.1 413 Request Entity Too Large"
    assert answer.endswith(b"body of %d bytes over %d\n" % (MAX_BODY_BYTES + 1, MAX_BODY_BYTES))
    assert receiver.counters.too_large == 1
    assert receiver.counters.warnings() == [
        "1 request refused as too large (HTTP 413, gRPC RESOURCE_EXHAUSTED)"
    ]


def test_expect_100_continue_within_the_cap_is_invited_and_taken(receiver: Receiver) -> None:
    body = json.dumps({"resourceSpans": []}).encode()
    head = (
        b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body)
    )
    with socket.create_connection(("127.0.0.1", receiver.port), timeout=10) as sock:
        sock.sendall(head)
        assert _status_line(sock) == b"HTTP/1.1 100 Continue"
        sock.sendall(body)
        answer = b""
        while b"{}" not in answer and (chunk := sock.recv(4096)):
            answer += chunk
    assert b"HTTP/1.1 200 OK" in answer
    assert receiver.counters.requests == 1
