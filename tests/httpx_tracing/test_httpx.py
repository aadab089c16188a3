"""chainlat.httpx transports, in-process: httpx's MockTransport driven on the fake clock.

The mock handler plays httpcore's part: it calls the request's ``trace`` extension with
the events httpcore emits and moves the clock between them, and its response streams
chunks at known clock times, so every part of the breakdown has one exact expected value.
"""

from __future__ import annotations

import gzip
import json
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any

import httpx
import httpx2
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import chainlat
import chainlat._core.errors
from chainlat._core import attributes as attr
from chainlat.httpx import AsyncTracingTransport, Route, TracingTransport
from chainlat.testing import Capture, FakeClock
from support.httpx_checks import check_identity, latency, model_spans

MODULES = [pytest.param(httpx, id="httpx"), pytest.param(httpx2, id="httpx2")]
CHAT_URL = "https://api.openai.com/v1/chat/completions"
CHAT_BODY: dict[str, Any] = {
    "model": "gpt-test",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_tokens": 64,
}


def sse(value: object) -> bytes:
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def chat_chunk(content: str | None = None, **extra: Any) -> bytes:
    delta = {} if content is None else {"content": content}
    choice = {"index": 0, "delta": delta, "finish_reason": extra.pop("finish_reason", None)}
    return sse({"id": "chatcmpl-1", "model": "gpt-test-0613", "choices": [choice], **extra})


USAGE = {"prompt_tokens": 7, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 3}}
# (ms to wait before the chunk, the chunk): a role-only chunk, five tokens 10 ms apart,
# the finish reason, the usage, the end marker.
STREAM: list[tuple[float, bytes]] = [
    (0, chat_chunk(None)),
    (20, chat_chunk("He")),
    (10, chat_chunk("llo")),
    (10, chat_chunk(",")),
    (10, chat_chunk(" wor")),
    (10, chat_chunk("ld")),
    (3, chat_chunk(None, finish_reason="stop")),
    (2, sse({"id": "chatcmpl-1", "model": "gpt-test-0613", "choices": [], "usage": USAGE})),
    (0, b"data: [DONE]\n\n"),
]
# queue 3, connect 5, send 2 (headers and body), wait 100; the body takes 65.
EXPECTED = {
    "queue": 3.0,
    "connect": 5.0,
    "send": 2.0,
    "wait": 100.0,
    "receive": 65.0,
    "server": 60.0,
    "network": 40.0,
    "ttft": 130.0,
    "generation": 40.0,
    "tpot": 10.0,  # 40 ms over the 4 tokens after the first (usage says 5)
}

EVENTS: list[tuple[float, str]] = [
    (3, "connection.connect_tcp.started"),
    (4, "connection.connect_tcp.complete"),
    (1, "http11.send_request_headers.started"),
    (1, "http11.send_request_headers.complete"),
    (0, "http11.send_request_body.started"),
    (1, "http11.send_request_body.complete"),
    (0, "http11.receive_response_headers.started"),
    (100, "http11.receive_response_headers.complete"),
]


def sync_stream(module: ModuleType, clock: FakeClock, chunks: list[tuple[float, bytes]]) -> Any:
    class Stream(module.SyncByteStream):  # type: ignore[name-defined,misc]
        closed = False

        def __iter__(self) -> Iterator[bytes]:
            for wait_ms, chunk in chunks:
                clock.advance(ms=wait_ms)
                yield chunk

        def close(self) -> None:
            self.closed = True

    return Stream()


def async_stream(module: ModuleType, clock: FakeClock, chunks: list[tuple[float, bytes]]) -> Any:
    class Stream(module.AsyncByteStream):  # type: ignore[name-defined,misc]
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for wait_ms, chunk in chunks:
                clock.advance(ms=wait_ms)
                yield chunk

    return Stream()


def httpcore_like(
    module: ModuleType,
    clock: FakeClock,
    chunks: list[tuple[float, bytes]] = STREAM,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    seen: list[Any] | None = None,
) -> Callable[[Any], Any]:
    """A mock handler that emits httpcore's trace events on the clock, then streams."""

    def handler(request: Any) -> Any:
        if seen is not None:
            seen.append(request)
        emit = request.extensions.get("trace")
        for wait_ms, event in EVENTS:
            clock.advance(ms=wait_ms)
            if emit is not None:
                emit(event, {})
        return module.Response(
            status,
            headers={
                "content-type": "text/event-stream",
                "openai-processing-ms": "60",
                **(headers or {}),
            },
            stream=sync_stream(module, clock, chunks),
        )

    return handler


def only_call(cap: Capture) -> ReadableSpan:
    [span] = model_spans(cap.spans())
    check_identity(span)
    return span


@pytest.mark.parametrize("module", MODULES)
def test_the_breakdown_is_exact_on_a_known_timeline(module: ModuleType, cap: Capture) -> None:
    inner = module.MockTransport(httpcore_like(module, cap.clock))
    transport = TracingTransport(inner, tracer_provider=cap.provider)
    transport._pooled = True  # the mock stands for httpcore's pool
    with module.Client(transport=transport) as client:
        with client.stream("POST", CHAT_URL, json=CHAT_BODY) as response:
            body = b"".join(response.iter_raw())
    assert body == b"".join(chunk for _, chunk in STREAM)
    span = only_call(cap)
    assert latency(span) == EXPECTED
    attributes = span.attributes or {}
    assert span.name == "chat gpt-test"
    assert attributes[attr.GEN_AI_RESPONSE_MODEL] == "gpt-test-0613"
    assert attributes[attr.GEN_AI_RESPONSE_ID] == "chatcmpl-1"
    assert attributes[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == 7
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    assert attributes[attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 3
    assert attributes[attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == pytest.approx(0.130)
    assert attributes[attr.STREAM_CHUNKS] == 5
    assert attributes[attr.GEN_AI_REQUEST_MAX_TOKENS] == 64
    assert attributes[attr.SERVER_PORT] == 443
    assert span.start_time is not None and span.end_time is not None
    assert span.end_time - span.start_time == 175_000_000


@pytest.mark.anyio
@pytest.mark.parametrize("module", MODULES)
async def test_the_async_breakdown_is_exact_on_a_known_timeline(
    module: ModuleType, cap: Capture
) -> None:
    clock = cap.clock

    async def handler(request: Any) -> Any:
        emit = request.extensions["trace"]
        for wait_ms, event in EVENTS:
            clock.advance(ms=wait_ms)
            await emit(event, {})
        return module.Response(
            200,
            headers={"content-type": "text/event-stream", "openai-processing-ms": "60"},
            stream=async_stream(module, clock, STREAM),
        )

    transport = AsyncTracingTransport(module.MockTransport(handler), tracer_provider=cap.provider)
    transport._pooled = True
    async with (
        module.AsyncClient(transport=transport) as client,
        client.stream("POST", CHAT_URL, json=CHAT_BODY) as response,
    ):
        async for _ in response.aiter_raw():
            pass
    assert latency(only_call(cap)) == EXPECTED


def test_a_transport_without_trace_events_counts_everything_before_the_headers_as_wait(
    cap: Capture,
) -> None:
    clock = cap.clock

    def handler(request: httpx.Request) -> httpx.Response:
        clock.advance(ms=70)
        return httpx.Response(200, json={"id": "x", "choices": []})

    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with httpx.Client(transport=transport) as client:
        client.post(CHAT_URL, json={**CHAT_BODY, "stream": False})
    found = latency(only_call(cap))
    assert found == {"queue": 0, "connect": 0, "send": 0, "wait": 70.0, "receive": 0}


def test_a_response_closed_before_it_is_read_ends_the_span_at_the_close(cap: Capture) -> None:
    transport = TracingTransport(
        httpx.MockTransport(httpcore_like(httpx, cap.clock)), tracer_provider=cap.provider
    )
    with httpx.Client(transport=transport) as client:
        with client.stream("POST", CHAT_URL, json=CHAT_BODY):
            assert model_spans(cap.spans()) == []  # open until the body is done
            cap.clock.advance(ms=7)
        span = only_call(cap)
    found = latency(span)
    assert found["receive"] == 7.0
    assert "ttft" not in found
    assert span.status.status_code.name == "UNSET"


def test_a_reader_that_stops_early_ends_the_span_without_an_error(cap: Capture) -> None:
    transport = TracingTransport(
        httpx.MockTransport(httpcore_like(httpx, cap.clock)), tracer_provider=cap.provider
    )
    with httpx.Client(transport=transport) as client:
        with client.stream("POST", CHAT_URL, json=CHAT_BODY) as response:
            for index, _ in enumerate(response.iter_raw()):
                if index == 1:  # the role chunk and the first token, still unread
                    break
    span = only_call(cap)
    assert latency(span)["ttft"] == 130.0
    assert (span.attributes or {})[attr.STREAM_CHUNKS] == 1
    assert span.status.status_code.name == "UNSET"


def test_an_error_in_the_middle_of_the_body_reaches_the_caller_unchanged(cap: Capture) -> None:
    boom = httpx.ReadError("connection reset")

    def handler(request: httpx.Request) -> httpx.Response:
        def chunks() -> Iterator[bytes]:
            yield chat_chunk("a")
            cap.clock.advance(ms=4)
            raise boom

        class Broken(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                return chunks()

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=Broken())

    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with httpx.Client(transport=transport) as client:
        with (
            pytest.raises(httpx.ReadError) as caught,
            client.stream("POST", CHAT_URL, json=CHAT_BODY) as response,
        ):
            response.read()
    assert caught.value is boom
    span = only_call(cap)
    assert (span.attributes or {})[attr.ERROR_TYPE] == "httpx.ReadError"
    assert latency(span)["receive"] == 4.0
    assert [e.name for e in span.events] == [attr.FIRST_TOKEN_EVENT, "exception"]


def test_an_error_from_the_inner_transport_reaches_the_caller_unchanged(cap: Capture) -> None:
    boom = httpx.ConnectError("refused")

    def handler(request: httpx.Request) -> httpx.Response:
        request.extensions["trace"]("connection.connect_tcp.started", {})
        cap.clock.advance(ms=9)
        raise boom

    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    transport._pooled = True
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.ConnectError) as caught:
        client.post(CHAT_URL, json=CHAT_BODY)
    assert caught.value is boom
    span = only_call(cap)
    assert (span.attributes or {})[attr.ERROR_TYPE] == "httpx.ConnectError"
    assert latency(span) == {"queue": 0, "connect": 9.0, "send": 0, "wait": 0, "receive": 0}


def test_a_call_that_never_left_the_pool_is_all_queue(cap: Capture) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        cap.clock.advance(ms=30)
        raise httpx.PoolTimeout("no connection")

    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    transport._pooled = True
    with httpx.Client(transport=transport) as client, pytest.raises(httpx.PoolTimeout):
        client.post(CHAT_URL, json=CHAT_BODY)
    assert latency(only_call(cap))["queue"] == 30.0


@pytest.mark.parametrize("status", [429, 503])
def test_an_error_status_marks_the_span(cap: Capture, status: int) -> None:
    handler = httpcore_like(
        httpx, cap.clock, [(1, b'{"error": {}}')], status=status, headers={"retry-after": "2"}
    )
    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with httpx.Client(transport=transport) as client:
        assert client.post(CHAT_URL, json=CHAT_BODY).status_code == status
    span = only_call(cap)
    attributes = span.attributes or {}
    assert attributes[attr.ERROR_TYPE] == str(status)
    assert attributes[attr.HTTP_RESPONSE_STATUS_CODE] == status
    assert attributes[attr.HTTP_RESPONSE_HEADER_PREFIX + "retry-after"] == ("2",)
    assert span.status.status_code.name == "ERROR"


def test_other_requests_are_left_alone(cap: Capture) -> None:
    seen: list[httpx.Request] = []
    handler = httpcore_like(httpx, cap.clock, [(0, b"{}")], seen=seen)
    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with httpx.Client(transport=transport) as client:
        client.get("https://api.openai.com/v1/models")
        client.post("https://example.com/v1/chat/completions", json={"no": "messages"})
        client.post("https://example.com/search", json={"messages": []})
    assert cap.spans() == ()
    for request in seen:
        assert "traceparent" not in request.headers
        assert "trace" not in request.extensions


def test_the_server_joins_the_trace_through_traceparent(cap: Capture) -> None:
    seen: list[httpx.Request] = []
    handler = httpcore_like(httpx, cap.clock, seen=seen)
    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with (
        chainlat.workflow("w", tracer_provider=cap.provider),
        httpx.Client(transport=transport) as client,
    ):
        client.post(CHAT_URL, json=CHAT_BODY)
    span = only_call(cap)
    parent = TraceContextTextMapPropagator().extract(dict(seen[0].headers))
    remote = trace.get_current_span(parent).get_span_context()
    assert remote.trace_id == span.context.trace_id
    assert remote.span_id == span.context.span_id
    assert (span.attributes or {})[attr.STEP_INDEX] == 0


def test_a_trace_extension_of_the_caller_still_gets_every_event(cap: Capture) -> None:
    got: list[str] = []

    def mine(event: str, info: dict[str, Any]) -> None:
        got.append(event)

    seen: list[httpx.Request] = []
    handler = httpcore_like(httpx, cap.clock, seen=seen)
    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with httpx.Client(transport=transport) as client:
        client.post(CHAT_URL, json=CHAT_BODY, extensions={"trace": mine})
    assert got == [event for _, event in EVENTS]
    assert seen[0].extensions["trace"] is mine  # given back once the headers are in
    assert latency(only_call(cap))["connect"] == 5.0


def test_nested_tracing_transports_trace_a_call_once(cap: Capture) -> None:
    inner = TracingTransport(
        httpx.MockTransport(httpcore_like(httpx, cap.clock)), tracer_provider=cap.provider
    )
    outer = TracingTransport(inner, tracer_provider=cap.provider)
    with httpx.Client(transport=outer) as client:
        client.post(CHAT_URL, json=CHAT_BODY)
    assert len(model_spans(cap.spans())) == 1


def test_a_gzip_answer_is_read_for_its_usage(cap: Capture) -> None:
    body = {
        "id": "chatcmpl-9",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": {"content": "ok"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 1},
    }
    packed = gzip.compress(json.dumps(body).encode())
    third = len(packed) // 3
    chunks = [(1.0, packed[:third]), (1.0, packed[third : 2 * third]), (1.0, packed[2 * third :])]
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    handler = httpcore_like(httpx, cap.clock, chunks, headers=headers)
    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with httpx.Client(transport=transport) as client:
        reply = client.post(CHAT_URL, json={**CHAT_BODY, "stream": False})
    assert reply.json() == body  # the application still gets the decoded body
    attributes = only_call(cap).attributes or {}
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert attributes[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("length",)


def test_a_body_over_the_size_limit_is_not_parsed(
    cap: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("chainlat.httpx._call.MAX_BODY_BYTES", 10)
    body = json.dumps({"usage": {"prompt_tokens": 3}}).encode()
    handler = httpcore_like(
        httpx, cap.clock, [(1, body)], headers={"content-type": "application/json"}
    )
    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    with httpx.Client(transport=transport) as client:
        assert client.post(CHAT_URL, json=CHAT_BODY).content == body
    assert attr.GEN_AI_USAGE_INPUT_TOKENS not in (only_call(cap).attributes or {})


def test_a_user_route_comes_before_the_built_in_ones(cap: Capture) -> None:
    route = Route("/chat/completions", operation="chat", provider="acme", format="opaque")
    handler = httpcore_like(httpx, cap.clock)
    transport = TracingTransport(
        httpx.MockTransport(handler), tracer_provider=cap.provider, matchers=[route]
    )
    with httpx.Client(transport=transport) as client:
        client.post("https://llm.acme.test/chat/completions", json=CHAT_BODY)
    attributes = only_call(cap).attributes or {}
    assert attributes[attr.GEN_AI_PROVIDER_NAME] == "acme"
    assert attr.GEN_AI_RESPONSE_ID not in attributes  # opaque: the body is not read


def test_a_failing_matcher_never_breaks_the_request(
    cap: Capture, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(chainlat._core.errors, "RAISE_INTERNAL_ERRORS", False)
    monkeypatch.setattr(chainlat._core.errors, "_reported", set())

    def broken(request: object) -> Route | None:
        raise RuntimeError("matcher bug")

    transport = TracingTransport(
        httpx.MockTransport(httpcore_like(httpx, cap.clock)),
        tracer_provider=cap.provider,
        matchers=[broken],
    )
    with (
        caplog.at_level(logging.ERROR, logger="chainlat"),
        httpx.Client(transport=transport) as client,
    ):
        assert client.post(CHAT_URL, json=CHAT_BODY).status_code == 200
    assert cap.spans() == ()
    assert "chainlat: internal error while starting a model-call span" in caplog.text


def test_without_a_recording_provider_nothing_is_wrapped(cap: Capture) -> None:
    handler = httpcore_like(httpx, cap.clock)
    transport = TracingTransport(
        httpx.MockTransport(handler), tracer_provider=trace.NoOpTracerProvider()
    )
    with httpx.Client(transport=transport) as client:
        response = client.post(CHAT_URL, json=CHAT_BODY)
    assert type(response.stream).__name__ == "BoundSyncStream"
    inner = response.stream._stream  # type: ignore[union-attr]
    assert type(inner).__name__ == "Stream"  # the handler's own, as it was


def test_the_transport_passes_close_and_context_on(cap: Capture) -> None:
    class Inner(httpx.BaseTransport):
        def __init__(self) -> None:
            self.events: list[str] = []

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(204)

        def __enter__(self) -> Inner:
            self.events.append("enter")
            return self

        def close(self) -> None:
            self.events.append("close")

    inner = Inner()
    transport = TracingTransport(inner, tracer_provider=cap.provider)
    with httpx.Client(transport=transport):
        pass
    assert inner.events == ["enter", "close"]
    assert repr(transport).startswith("TracingTransport(")


def test_content_length_must_be_a_non_negative_int() -> None:
    with pytest.raises(ValueError, match="max_content_length"):
        TracingTransport(httpx.MockTransport(lambda r: httpx.Response(200)), max_content_length=-1)
    with pytest.raises(TypeError, match="max_content_length"):
        TracingTransport(httpx.MockTransport(lambda r: httpx.Response(200)), max_content_length=1.5)  # type: ignore[arg-type]
