"""A model call's exported span carries the same attributes, value for value, as recorded
in ``tests/httpx_tracing/data/httpx_call_attributes.json``, by the file exporter and by
OTLP/HTTP alike.

The recording was made from the code before the call's hot path was trimmed
(``PYTHONPATH=tests python tests/httpx_tracing/test_httpx_exported_attributes.py`` writes
it), with the same fixed answers and an injected clock that
advances one millisecond per reading: any attribute added, lost or computed differently,
and any change in when the clock is read, shows here. It was written again once, when the
clock came to be read only for the trace events the parts are made of (fewer readings:
the ``chainlat.latency.*`` and first-chunk numbers moved, and nothing else).
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

import chainlat
from chainlat._core import attributes as attr
from chainlat.httpx import TracingTransport
from support.hostile_http import hostile_server
from support.otlp import FakeCollector

RECORDED = Path(__file__).resolve().parent / "data" / "httpx_call_attributes.json"
START_NS = 1_700_000_000_000_000_000

_BODY = json.dumps(
    {
        "id": "chatcmpl-fixed",
        "object": "chat.completion",
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Two days."},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 12,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 4},
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }
).encode()

_EVENTS = [
    {
        "id": "chatcmpl-s",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"role": "assistant"}}],
    },
    {
        "id": "chatcmpl-s",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": "Two"}}],
    },
    {
        "id": "chatcmpl-s",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": " days"}}],
    },
    {
        "id": "chatcmpl-s",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
    },
    {
        "id": "chatcmpl-s",
        "model": "gpt-4o-mini",
        "choices": [],
        "usage": {"prompt_tokens": 12, "completion_tokens": 2},
    },
]
_STREAM = (
    b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in _EVENTS) + b"data: [DONE]\n\n"
)

_HEADERS = (
    b"x-request-id: req-123\r\n"
    b"openai-processing-ms: 3\r\n"
    b"openai-version: 2020-10-01\r\n"
    b"x-ratelimit-remaining-requests: 99\r\n"
    b"X-RateLimit-Remaining-Tokens: 1000\r\n"
    b'server-timing: total;dur=2.5, db;dur=1;desc="lookup"\r\n'
    b"set-cookie: secret=1\r\n"
    b"connection: close\r\n"
)


def _answer(content_type: bytes, body: bytes) -> Callable[[BinaryIO], None]:
    def respond(out: BinaryIO) -> None:
        # One write: the body arrives as one chunk, so the clock is read the same times.
        out.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: "
            + content_type
            + b"\r\n"
            + _HEADERS
            + b"content-length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        out.flush()

    return respond


def _calls(provider: Any) -> dict[str, int]:
    """One non-streamed and one streamed chat completion; the port of each server."""
    ports: dict[str, int] = {}
    request = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "How long?"}],
        "temperature": 0.2,
        "max_tokens": 50,
        "stop": ["\n"],
    }
    with (
        hostile_server(_answer(b"application/json", _BODY)) as call_url,
        hostile_server(_answer(b"text/event-stream", _STREAM)) as stream_url,
    ):
        transport = TracingTransport(
            httpx.HTTPTransport(), tracer_provider=provider, record_headers=["x-client-tag"]
        )
        with httpx.Client(transport=transport) as client:
            client.post(
                f"{call_url}/v1/chat/completions",
                json=request,
                headers={"x-client-tag": "t1", "openai-beta": "b1", "authorization": "Bearer k"},
            ).read()
            with client.stream(
                "POST", f"{stream_url}/v1/chat/completions", json={**request, "stream": True}
            ) as response:
                for _ in response.iter_bytes():
                    pass
        ports["call"] = httpx.URL(call_url).port or 0
        ports["stream"] = httpx.URL(stream_url).port or 0
    return ports


def _clock() -> Callable[[], int]:
    return itertools.count(START_NS, 1_000_000).__next__


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _keyed(spans: list[tuple[str, dict[str, Any]]], ports: dict[str, int]) -> dict[str, Any]:
    """The two model-call spans' attributes, by call, with the (random) port checked and
    taken out."""
    out: dict[str, Any] = {}
    for name, attributes in spans:
        if attributes.get(attr.GEN_AI_OPERATION_NAME) != "chat":
            continue
        which = "stream" if attributes.get(attr.GEN_AI_REQUEST_STREAM) else "call"
        assert attributes.pop(attr.SERVER_PORT) == ports[which]
        out[which] = {"name": name, "attributes": {k: _plain(v) for k, v in attributes.items()}}
    return out


def _from_file(path: Path, ports: dict[str, int]) -> dict[str, Any]:
    spans = []
    for line in path.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    values = {a["key"]: _json_value(a["value"]) for a in span["attributes"]}
                    spans.append((span["name"], values))
    return _keyed(spans, ports)


def _json_value(value: dict[str, Any]) -> Any:
    [(kind, given)] = value.items()
    if kind == "intValue":
        return int(given)
    if kind == "arrayValue":
        return [_json_value(v) for v in given.get("values", [])]
    return given


def _proto_value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    assert kind is not None
    if kind == "array_value":
        return [_proto_value(v) for v in value.array_value.values]
    return getattr(value, kind)


def _from_collector(
    requests: list[ExportTraceServiceRequest], ports: dict[str, int]
) -> dict[str, Any]:
    spans = [
        (span.name, {kv.key: _proto_value(kv.value) for kv in span.attributes})
        for request in requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    return _keyed(spans, ports)


def record_by_file(directory: Path) -> dict[str, Any]:
    path = directory / "traces.jsonl"
    provider = chainlat.configure(
        "exported-attributes",
        exporter="file",
        traces_file=path,
        set_global=False,
        metric_readers=[],
        clock=_clock(),
    )
    try:
        ports = _calls(provider)
    finally:
        assert chainlat.shutdown()
    return _from_file(path, ports)


@pytest.fixture
def recorded() -> dict[str, Any]:
    found: dict[str, Any] = json.loads(RECORDED.read_text())
    assert set(found) == {"call", "stream"}
    return found


def test_the_file_exporter_writes_the_recorded_attributes(
    tmp_path: Path, recorded: dict[str, Any]
) -> None:
    assert record_by_file(tmp_path) == recorded


def test_otlp_http_sends_the_recorded_attributes(
    monkeypatch: pytest.MonkeyPatch, recorded: dict[str, Any]
) -> None:
    with FakeCollector("ok") as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        provider = chainlat.configure(
            "exported-attributes",
            exporter="otlp",
            set_global=False,
            metric_readers=[],
            clock=_clock(),
        )
        try:
            ports = _calls(provider)
        finally:
            assert chainlat.shutdown()
        requests = list(receiver.traces)
    assert _from_collector(requests, ports) == recorded


def test_the_recording_has_what_a_call_records() -> None:
    """The recording is not empty: the calls, their timing parts and response headers."""
    found = json.loads(RECORDED.read_text())
    call = found["call"]["attributes"]
    assert call[attr.LATENCY_SERVER_MS] == 2.5
    assert call["http.response.header.x-request-id"] == ["req-123"]
    assert "http.response.header.set-cookie" not in call
    assert call["http.request.header.x-client-tag"] == ["t1"]
    assert found["stream"]["attributes"][attr.STREAM_CHUNKS] == 2


def _write(out: Path) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        found = record_by_file(Path(tmp))
    out.write_text(json.dumps(found, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    _write(Path(sys.argv[1]) if len(sys.argv) > 1 else RECORDED)
