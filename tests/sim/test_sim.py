"""chainlat.sim: the latency-profile server, over real HTTP on 127.0.0.1 with the real SDKs.

Timing assertions compare client-side measurements with the injected latencies. The
tolerance is asymmetric: the server must never be early by more than `EARLY_MS`, and
the fastest of a few runs must not be later than `LATE_MS`, which leaves room for a
noisy two-core machine while still catching a phase that is missing or doubled.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from chainlat.sim import (
    DEFAULT_PROFILES,
    ModelProfile,
    ProfileError,
    SimServer,
    load_profiles,
    main,
)
from support import FakeCollector, SimOptions, StartSim, free_port

EARLY_MS = 2.0
"""The server may look early by this much: clock reads on both sides of a socket."""
LATE_MS = 40.0
"""The fastest of a few measurements may be this much late (noisy 2-core machine)."""
MIN_RUNS = 3
MAX_RUNS = 60
RETRY_S = 20.0
"""While a fastest sample is still late, measure again for up to this long (at most
`MAX_RUNS` runs): a burst of load on a shared machine outlasts a fixed few retries."""

NETWORK_MS = 40.0
PROFILE = ModelProfile(
    "sim-test", ttft_base_ms=120.0, decode_ms_per_token=15.0, output_tokens=20, slots=2
)
EXPECTED_TTFT_MS = NETWORK_MS + 120.0  # 160
EXPECTED_TOTAL_MS = EXPECTED_TTFT_MS + 19 * 15.0  # 445
MESSAGES: list[Any] = [{"role": "user", "content": "Say something."}]


@pytest.fixture
def sim_options() -> SimOptions:
    return SimOptions(profiles=[PROFILE, *DEFAULT_PROFILES], network_delay_ms=NETWORK_MS)


@pytest.fixture
def client(sim: SimServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        # The first call pays for connection set-up and lazy SDK imports; keep it out
        # of the measurements.
        c.models.list()
        yield c


def _anthropic(sim: SimServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)


def _timing(header: str) -> dict[str, float]:
    """Parse a Server-Timing style header into {name: ms}."""
    result: dict[str, float] = {}
    for entry in header.split(","):
        name, _, dur = entry.strip().partition(";dur=")
        result[name] = float(dur)
    return result


class _Timings:
    """Client-side latency samples, checked against the injected latencies.

    Every sample must be at most `EARLY_MS` early and the fastest of each metric at most
    `LATE_MS` late. `runs` measures `MIN_RUNS` times, then again (for up to `RETRY_S`, at
    most `MAX_RUNS` runs) only while a metric's fastest sample is still late, so that a
    burst of load on a shared machine costs retries rather than a failure.
    """

    def __init__(self, **expected_ms: float) -> None:
        self.expected_ms = expected_ms
        self.samples: dict[str, list[float]] = {name: [] for name in expected_ms}

    def runs(self) -> Iterator[int]:
        deadline = time.monotonic() + RETRY_S
        for run in range(MAX_RUNS):
            if run >= MIN_RUNS and (
                time.monotonic() > deadline
                or all(
                    min(samples) <= self.expected_ms[name] + LATE_MS
                    for name, samples in self.samples.items()
                )
            ):
                return
            yield run

    def add(self, name: str, measured_ms: float) -> None:
        self.samples[name].append(measured_ms)

    def check(self) -> None:
        for name, samples in self.samples.items():
            expected = self.expected_ms[name]
            assert min(samples) >= expected - EARLY_MS, f"{name} early: {samples} vs {expected}"
            assert min(samples) <= expected + LATE_MS, f"{name} late: {samples} vs {expected}"


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


# -- latency --------------------------------------------------------------------------


def test_chat_completion_takes_network_plus_prefill_plus_decode(client: openai.OpenAI) -> None:
    timings = _Timings(total=EXPECTED_TOTAL_MS)
    for _ in timings.runs():
        start = time.perf_counter()
        reply = client.chat.completions.create(model="sim-test", messages=MESSAGES)
        timings.add("total", _ms_since(start))
    timings.check()
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 20
    assert reply.usage.prompt_tokens == 4  # ceil(len("Say something.") / 4)
    assert reply.usage.total_tokens == 24
    assert reply.usage.prompt_tokens_details is not None
    assert reply.usage.prompt_tokens_details.cached_tokens == 0
    assert len((reply.choices[0].message.content or "").split()) == 20


def test_stream_first_token_after_prefill_then_one_chunk_per_token(
    client: openai.OpenAI,
) -> None:
    timings = _Timings(ttft=EXPECTED_TTFT_MS, total=EXPECTED_TOTAL_MS)
    for _ in timings.runs():
        start = time.perf_counter()
        stream = client.chat.completions.create(
            model="sim-test",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks: list[openai.types.chat.ChatCompletionChunk] = []
        for chunk in stream:
            if not chunks:
                timings.add("ttft", _ms_since(start))
            chunks.append(chunk)
        timings.add("total", _ms_since(start))
    timings.check()
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == 20
    assert content[0].choices[0].delta.role == "assistant"
    choice_chunks = [c for c in chunks if c.choices]
    assert [c.choices[0].finish_reason for c in choice_chunks][-2:] == [None, "stop"]
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 20
    assert {c.object for c in chunks} == {"chat.completion.chunk"}


def test_max_tokens_caps_output_and_shortens_decode(client: openai.OpenAI) -> None:
    timings = _Timings(total=EXPECTED_TTFT_MS + 4 * 15.0)
    for _ in timings.runs():
        start = time.perf_counter()
        reply = client.chat.completions.create(
            model="sim-test", messages=MESSAGES, max_completion_tokens=5
        )
        timings.add("total", _ms_since(start))
    timings.check()
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 5


def test_prefill_grows_with_input_tokens(start_sim: StartSim) -> None:
    profile = ModelProfile("p", ttft_base_ms=50, ttft_per_input_token_ms=1.0, output_tokens=1)
    prompt = "x" * 400  # 100 tokens -> +100 ms
    server = start_sim(profiles=[profile])
    with openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0) as c:
        c.models.list()
        timings = _Timings(total=150.0)
        for _ in timings.runs():
            start = time.perf_counter()
            c.chat.completions.create(model="p", messages=[{"role": "user", "content": prompt}])
            timings.add("total", _ms_since(start))
    timings.check()


@pytest.mark.anyio
async def test_async_client_non_stream_and_stream(sim: SimServer) -> None:
    async with openai.AsyncOpenAI(
        base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0
    ) as c:
        await c.models.list()
        totals = _Timings(total=EXPECTED_TOTAL_MS)
        for _ in totals.runs():
            start = time.perf_counter()
            reply = await c.chat.completions.create(model="sim-test", messages=MESSAGES)
            totals.add("total", _ms_since(start))
        totals.check()
        assert reply.usage is not None
        assert reply.usage.completion_tokens == 20
        ttfts = _Timings(ttft=EXPECTED_TTFT_MS)
        for _ in ttfts.runs():
            start = time.perf_counter()
            stream = await c.chat.completions.create(
                model="sim-test", messages=MESSAGES, stream=True
            )
            pieces: list[str] = []
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if not pieces:
                        ttfts.add("ttft", _ms_since(start))
                    pieces.append(chunk.choices[0].delta.content)
        ttfts.check()
        assert "".join(pieces) == reply.choices[0].message.content


@pytest.mark.anyio
async def test_requests_beyond_the_slots_queue_fifo_one_request_longer_per_pair(
    start_sim: StartSim,
) -> None:
    profile = ModelProfile(
        "slow", ttft_base_ms=200, decode_ms_per_token=25, output_tokens=5, slots=2
    )
    request_ms = profile.latency_ms(input_tokens=4)  # 300 ms
    provider, exporter = _provider()
    server = start_sim(profiles=[profile], tracer_provider=provider)
    async with openai.AsyncOpenAI(
        base_url=server.base_url + "/v1", api_key="sk-test", max_retries=0
    ) as c:
        call = c.chat.completions.with_raw_response.create
        await call(model="slow", messages=MESSAGES)  # warm the client's code path
        exporter.clear()
        raws = await asyncio.gather(*(call(model="slow", messages=MESSAGES) for _ in range(8)))
    # Slot hand-over instants, read on the server so client overhead does not blur them.
    acquired_ns = sorted(
        span.end_time
        for span in exporter.get_finished_spans()
        if span.name == "queue" and span.end_time
    )
    assert len(acquired_ns) == 8
    offsets_ms = [(t - acquired_ns[0]) / 1e6 for t in acquired_ns]
    for index, offset_ms in enumerate(offsets_ms):
        # Two slots, each held a whole request: pair k waited k requests at least.
        assert offset_ms >= index // 2 * request_ms - EARLY_MS, offsets_ms
    # No slot stayed idle: each hand-over after the first pair came as a request ended
    # (its decode, on the server's clock), not a whole request later. Not cumulative, so
    # load stretching every request does not add up; the median, so one stall does not
    # decide, and even the worst gap is well short of a request.
    released_ns = [
        span.end_time
        for span in exporter.get_finished_spans()
        if span.name == "decode" and span.end_time
    ]
    gaps_ms = sorted(min(abs(t - r) for r in released_ns) / 1e6 for t in acquired_ns[2:])
    assert gaps_ms[len(gaps_ms) // 2] <= LATE_MS and gaps_ms[-1] < request_ms / 2, gaps_ms
    queued_ms = sorted(_timing(r.headers["server-timing"])["queue"] for r in raws)
    assert queued_ms[1] < request_ms / 2 <= queued_ms[2], queued_ms


# -- headers ----------------------------------------------------------------------------


def _in_one_of_a_few_runs(attempt: Callable[[], bool]) -> bool:
    """True once ``attempt`` is: up to `MAX_RUNS` tries, for the bounds load can break."""
    return any(attempt() for _ in range(MAX_RUNS))


def test_non_stream_headers_report_queue_prefill_decode(client: openai.OpenAI) -> None:
    raws: list[Any] = []

    def attempt() -> bool:
        """Checks the floors of one request; whether its upper bounds held too."""
        raw = client.chat.completions.with_raw_response.create(model="sim-test", messages=MESSAGES)
        raws.append(raw)
        timing = _timing(raw.headers["server-timing"])
        assert set(timing) == {"queue", "prefill", "decode"}
        assert timing["prefill"] >= 120.0 - EARLY_MS
        # Decode deadlines count from the planned first token, so a late prefill shortens
        # decode by as much: only the sum is bound to the plan.
        assert timing["prefill"] + timing["decode"] >= 405.0 - EARLY_MS
        processing_ms = int(raw.headers["openai-processing-ms"])
        assert processing_ms >= round(sum(timing.values())) - 1
        # A free slot is taken at once, and the headers follow the decode: unless the
        # server thread was held up, which a busy machine does now and then.
        return timing["queue"] < 1.0 and processing_ms <= sum(timing.values()) + LATE_MS

    assert _in_one_of_a_few_runs(attempt), [r.headers["server-timing"] for r in raws]
    raw = raws[0]
    plan = _timing(raw.headers["x-sim-plan"])
    assert plan == {"network": 40.0, "prefill": 120.0, "decode": 285.0}
    assert raw.headers["x-request-id"].startswith("req_")
    other = client.chat.completions.with_raw_response.create(model="sim-test", messages=MESSAGES)
    assert other.headers["x-request-id"] != raw.headers["x-request-id"]


def test_stream_headers_come_with_the_slot_and_report_queue_only(
    client: openai.OpenAI,
) -> None:
    headers_ms: list[float] = []

    def attempt() -> bool:
        start = time.perf_counter()
        with client.chat.completions.with_streaming_response.create(
            model="sim-test", messages=MESSAGES, stream=True
        ) as response:
            headers_ms.append(_ms_since(start))
            assert set(_timing(response.headers["server-timing"])) == {"queue"}
            assert int(response.headers["openai-processing-ms"]) == 0
            assert response.headers["content-type"].startswith("text/event-stream")
            body = b"".join(response.iter_bytes())
        assert body.rstrip().endswith(b"data: [DONE]")
        # Headers leave before prefill: never before the network delay, and (unless the
        # machine held the client up) well before the first token.
        assert headers_ms[-1] >= NETWORK_MS - EARLY_MS
        return headers_ms[-1] < EXPECTED_TTFT_MS

    assert _in_one_of_a_few_runs(attempt), headers_ms


# -- other endpoints ----------------------------------------------------------------------


def test_embeddings_are_prefill_only(client: openai.OpenAI) -> None:
    raw = client.embeddings.with_raw_response.create(model="sim-test", input=["abcd", "efgh"])
    reply = raw.parse()
    assert set(_timing(raw.headers["server-timing"])) == {"queue", "prefill"}
    assert [d.index for d in reply.data] == [0, 1]
    assert len(reply.data[0].embedding) == 16
    assert reply.usage.prompt_tokens == 2
    floats = client.embeddings.create(
        model="sim-test", input="abcd", encoding_format="float", dimensions=4
    )
    assert len(floats.data[0].embedding) == 4


def test_legacy_completions_and_models(client: openai.OpenAI) -> None:
    reply = client.completions.create(model="sim-test", prompt="Once", max_tokens=3)
    assert reply.choices[0].finish_reason == "length"
    assert len(reply.choices[0].text.split()) == 3
    names = [m.id for m in client.models.list()]
    assert names == ["sim-test", *(p.name for p in DEFAULT_PROFILES)]
    assert client.models.retrieve("sim-small").id == "sim-small"


def test_anthropic_messages_create_and_stream(sim: SimServer) -> None:
    with _anthropic(sim) as a:
        message = a.messages.create(model="sim-test", max_tokens=100, messages=MESSAGES)
        assert message.stop_reason == "end_turn"
        assert message.usage.output_tokens == 20
        assert message.usage.input_tokens == 4
        timings = _Timings(ttft=EXPECTED_TTFT_MS, total=EXPECTED_TOTAL_MS)
        for _ in timings.runs():
            start = time.perf_counter()
            with a.messages.stream(model="sim-test", max_tokens=100, messages=MESSAGES) as s:
                texts: list[str] = []
                for text in s.text_stream:
                    if not texts:
                        timings.add("ttft", _ms_since(start))
                    texts.append(text)
                final = s.get_final_message()
            timings.add("total", _ms_since(start))
        timings.check()
        assert len(texts) == 20
        assert "".join(texts) == final.content[0].text == message.content[0].text  # type: ignore[union-attr]
        assert final.usage.output_tokens == 20
        raw_events = a.messages.create(
            model="sim-test", max_tokens=2, messages=MESSAGES, stream=True
        )
        kinds = [event.type for event in raw_events]
    assert kinds == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]


def test_unknown_model_is_a_404_in_each_provider_format(
    sim: SimServer, client: openai.OpenAI
) -> None:
    with pytest.raises(openai.NotFoundError) as openai_error:
        client.chat.completions.create(model="nope", messages=MESSAGES)
    assert openai_error.value.code == "model_not_found"
    with _anthropic(sim) as a, pytest.raises(anthropic.NotFoundError) as anthropic_error:
        a.messages.create(model="nope", max_tokens=5, messages=MESSAGES)
    body = anthropic_error.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "not_found_error"
    assert "nope" in body["error"]["message"]


def test_bad_json_is_a_400_and_unknown_routes_404(sim: SimServer) -> None:
    with httpx.Client(base_url=sim.base_url) as http:
        bad = http.post("/v1/chat/completions", content=b"{not json")
        assert bad.status_code == 400
        assert bad.json()["error"]["type"] == "invalid_request_error"
        assert http.post("/v1/messages", content=b"[]").json()["type"] == "error"
        assert http.get("/nowhere").status_code == 404
        assert http.get("/v1/chat/completions").status_code == 405
        assert http.get("/health").json() == {"status": "ok"}


def test_chunked_request_bodies_are_read(sim: SimServer) -> None:
    body = json.dumps({"model": "sim-embed", "input": "abcd"}).encode()
    with httpx.Client(base_url=sim.base_url) as http:
        response = http.post("/v1/embeddings", content=iter([body[:10], body[10:]]))
    assert response.status_code == 200
    assert response.request.headers["transfer-encoding"] == "chunked"


def test_expect_100_continue_is_answered_before_the_body(sim: SimServer) -> None:
    body = json.dumps({"model": "sim-embed", "input": "abcd"}).encode()
    head = (
        "POST /v1/embeddings HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", sim.port), timeout=10) as conn:
        conn.sendall(head.encode())
        assert conn.recv(1024) == b"HTTP/1.1 100 Continue\r\n\r\n"
        conn.sendall(body)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n")


def test_same_seed_same_text_and_jitter_other_seed_differs(start_sim: StartSim) -> None:
    jittery = ModelProfile("j", ttft_base_ms=20, decode_ms_per_token=1, output_tokens=8, jitter=0.5)

    def run(seed: int) -> list[tuple[str, str]]:
        server = start_sim(profiles=[jittery], seed=seed)
        with httpx.Client() as http:
            url = server.base_url + "/v1/chat/completions"
            replies = [http.post(url, json={"model": "j", "messages": MESSAGES}) for _ in range(3)]
        return [
            (r.json()["choices"][0]["message"]["content"], r.headers["x-sim-plan"]) for r in replies
        ]

    first, again, other = run(7), run(7), run(8)
    assert first == again
    assert [plan for _, plan in first] != [plan for _, plan in other]
    assert first[0][0] != other[0][0]
    assert len({plan for _, plan in first}) == 3  # jitter varies from request to request


# -- fault injection ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (429, openai.RateLimitError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_x_sim_status_answers_that_error(
    client: openai.OpenAI, status: int, error: type[openai.APIStatusError]
) -> None:
    with pytest.raises(error) as caught:
        client.chat.completions.create(
            model="sim-test", messages=MESSAGES, extra_headers={"x-sim-status": str(status)}
        )
    assert caught.value.status_code == status
    headers = caught.value.response.headers
    assert (headers.get("retry-after"), headers.get("retry-after-ms")) == (
        ("1", "1000") if status == 429 else (None, None)
    )


def test_x_sim_status_in_anthropic_format(sim: SimServer) -> None:
    with _anthropic(sim) as a, pytest.raises(anthropic.RateLimitError) as caught:
        a.messages.create(
            model="sim-test",
            max_tokens=5,
            messages=MESSAGES,
            extra_headers={"x-sim-status": "429", "x-sim-retry-after-ms": "2500"},
        )
    assert caught.value.response.headers["retry-after"] == "3"
    assert caught.value.response.headers["retry-after-ms"] == "2500"
    assert caught.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


def test_x_sim_cut_after_drops_the_stream_after_n_chunks(
    sim: SimServer, client: openai.OpenAI
) -> None:
    received = []
    stream = client.chat.completions.create(
        model="sim-test", messages=MESSAGES, stream=True, extra_headers={"x-sim-cut-after": "3"}
    )
    with pytest.raises(openai.APIConnectionError):
        for chunk in stream:
            received.append(chunk)
    assert len(received) == 3
    with pytest.raises(openai.APIConnectionError):
        client.chat.completions.create(
            model="sim-test", messages=MESSAGES, extra_headers={"x-sim-cut-after": "0"}
        )
    # This anthropic SDK lets the transport's error through unwrapped mid-stream.
    cut_errors = (anthropic.APIConnectionError, httpx2.RemoteProtocolError)
    with _anthropic(sim) as a, pytest.raises(cut_errors):
        with a.messages.stream(
            model="sim-test",
            max_tokens=50,
            messages=MESSAGES,
            extra_headers={"x-sim-cut-after": "5"},
        ) as s:
            for _ in s.text_stream:
                pass
    # The server survives a cut: the next request on a fresh connection works.
    assert client.chat.completions.create(model="sim-test", messages=MESSAGES).choices


def test_x_sim_delay_ms_stalls_before_the_headers(client: openai.OpenAI) -> None:
    timings = _Timings(headers=NETWORK_MS + 100.0)
    for _ in timings.runs():
        start = time.perf_counter()
        with client.chat.completions.with_streaming_response.create(
            model="sim-test",
            messages=MESSAGES,
            stream=True,
            extra_headers={"x-sim-delay-ms": "100"},
        ) as response:
            timings.add("headers", _ms_since(start))
            timing = _timing(response.headers["server-timing"])
            response.read()
    timings.check()
    assert timing["stall"] >= 100.0 - EARLY_MS
    assert int(response.headers["openai-processing-ms"]) >= 100


def test_malformed_fault_header_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="x-sim-status"):
        client.chat.completions.create(
            model="sim-test", messages=MESSAGES, extra_headers={"x-sim-status": "418"}
        )


# -- tracing ----------------------------------------------------------------------------


def _provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_server_spans_join_the_client_trace_with_phase_children(start_sim: StartSim) -> None:
    client_provider, client_spans = _provider()
    server_provider, server_spans = _provider()
    s = start_sim(profiles=[PROFILE], network_delay_ms=NETWORK_MS, tracer_provider=server_provider)
    with openai.OpenAI(base_url=s.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        tracer = client_provider.get_tracer("test")
        with tracer.start_as_current_span("client call") as client_span:
            carrier: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(carrier)
            c.chat.completions.create(model="sim-test", messages=MESSAGES, extra_headers=carrier)
        # Spans end before the response's last bytes leave: no waiting needed.
        spans = server_spans.get_finished_spans()
    assert len(spans) == 4
    server = _by_name(spans, "POST /v1/chat/completions")
    caller = client_span.get_span_context()
    assert server.kind is trace.SpanKind.SERVER
    assert server.parent is not None
    assert server.parent.span_id == caller.span_id
    assert server.context is not None
    assert server.context.trace_id == caller.trace_id
    assert server.instrumentation_scope is not None
    assert server.instrumentation_scope.name == "chainlat.sim"
    assert server.attributes is not None
    assert server.attributes["gen_ai.request.model"] == "sim-test"
    assert server.attributes["gen_ai.usage.input_tokens"] == 4
    assert server.attributes["gen_ai.usage.output_tokens"] == 20
    assert server.attributes["http.response.status_code"] == 200
    queue, prefill, decode = (_by_name(spans, n) for n in ("queue", "prefill", "decode"))
    for child in (queue, prefill, decode):
        assert child.parent is not None
        assert child.parent.span_id == server.context.span_id
    assert server.start_time is not None and server.end_time is not None
    assert queue.start_time is not None and queue.end_time is not None
    assert prefill.start_time is not None and prefill.end_time is not None
    assert decode.start_time is not None and decode.end_time is not None
    assert server.start_time <= queue.start_time
    assert queue.end_time == prefill.start_time
    assert prefill.end_time == decode.start_time
    assert decode.end_time <= server.end_time
    assert (prefill.end_time - prefill.start_time) / 1e6 >= 120.0 - 0.1
    assert (decode.end_time - prefill.start_time) / 1e6 >= 120.0 + 285.0 - 0.1
    # The simulated network transit lies between the client's start and the server's.
    (client_finished,) = client_spans.get_finished_spans()
    assert client_finished.start_time is not None
    assert (server.start_time - client_finished.start_time) / 1e6 >= NETWORK_MS - EARLY_MS


def test_fault_spans_are_errors(start_sim: StartSim) -> None:
    provider, exporter = _provider()
    s = start_sim(profiles=[PROFILE], tracer_provider=provider)
    with (
        openai.OpenAI(base_url=s.base_url + "/v1", api_key="sk-test", max_retries=0) as c,
        pytest.raises(openai.InternalServerError),
    ):
        c.chat.completions.create(
            model="sim-test", messages=MESSAGES, extra_headers={"x-sim-status": "500"}
        )
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "500"


def test_otlp_endpoint_exports_with_service_name_chainlat_sim() -> None:
    with FakeCollector("ok") as collector:
        with SimServer([PROFILE], otlp_endpoint=collector.endpoint) as s, httpx.Client() as http:
            http.get(s.base_url + "/health")
        # stop() flushed the server's own provider.
        names = [
            (
                {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"],
                span.name,
            )
            for request in collector.traces
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]
    assert names == [("chainlat-sim", "GET /health")]


# -- lifecycle --------------------------------------------------------------------------


def test_stop_returns_promptly_with_streams_open() -> None:
    endless = ModelProfile("endless", ttft_base_ms=1, decode_ms_per_token=10, output_tokens=100_000)
    server = SimServer([endless]).start()
    streaming = [threading.Event() for _ in range(3)]
    failures: list[BaseException] = []

    def consume(started: threading.Event) -> None:
        with openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0) as c:
            try:
                for _ in c.chat.completions.create(model="endless", messages=MESSAGES, stream=True):
                    started.set()
            except openai.APIConnectionError as exc:
                failures.append(exc)

    readers = [threading.Thread(target=consume, args=(event,)) for event in streaming]
    for reader in readers:
        reader.start()
    for event in streaming:
        assert event.wait(10)
    start = time.perf_counter()
    server.stop()
    stop_ms = _ms_since(start)
    for reader in readers:
        reader.join(10)
    assert stop_ms < 2000, stop_ms
    assert len(failures) == 3  # each open stream was cut, none completed
    with pytest.raises(RuntimeError):
        _ = server.base_url


@pytest.mark.anyio
async def test_async_context_manager_and_serve() -> None:
    async with SimServer([PROFILE], port=0) as server, httpx.AsyncClient() as http:
        assert (await http.get(server.base_url + "/health")).status_code == 200
    port = free_port()
    task = asyncio.create_task(SimServer([PROFILE], port=port).serve())
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(100):
                try:
                    response = await http.get(f"http://127.0.0.1:{port}/v1/models")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.02)
        assert response.json()["data"][0]["id"] == "sim-test"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_port_in_use_raises_on_start() -> None:
    with SimServer([PROFILE]) as first:
        with pytest.raises(OSError, match="in use"):
            SimServer([PROFILE], port=first.port).start()
        assert main(["--port", str(first.port)]) == 2


# -- profiles -------------------------------------------------------------------------------


def test_default_profiles_reproduce_the_classic_example() -> None:
    large, small, _ = DEFAULT_PROFILES
    assert large.latency_ms(input_tokens=200) == pytest.approx(800.0)
    assert small.latency_ms(input_tokens=200) == pytest.approx(250.0)
    assert large.ttft_ms(200) == pytest.approx(400.0)


def test_load_profiles_from_toml_table_and_json_array(tmp_path: Path) -> None:
    toml_file = tmp_path / "sim.toml"
    toml_file.write_text(
        '[models.fast]\nttft_base_ms = 120\nslots = 2\n\n[models."b"]\nttft_base_ms = 100\n'
    )
    assert load_profiles(toml_file) == [
        ModelProfile("fast", ttft_base_ms=120, slots=2, decode_ms_per_token=0.0),
        ModelProfile("b", decode_ms_per_token=0.0),
    ]
    json_file = tmp_path / "sim.json"
    json_file.write_text(
        json.dumps({"models": [{"name": "x", "ttft_base_ms": 100, "decode_ms_per_token": 2.5}]})
    )
    assert load_profiles(json_file) == [ModelProfile("x", decode_ms_per_token=2.5)]


def test_a_fitted_profile_file_serves_as_a_simulator_file(tmp_path: Path) -> None:
    """What ``chainlat profile -o`` writes, ``chainlat sim --profiles`` reads."""
    from chainlat.analysis.profiles import LatencyProfile, save_profiles

    fitted = LatencyProfile(
        ttft_base_ms=300,
        ttft_per_input_token_ms=0.25,
        decode_ms_per_token=12.5,
        residual_sigma=0.08,
        queue_share=0.01,
        calls=40,
        ttft_calls=40,
        input_tokens_range=(100, 900),
        output_tokens_range=(20, 60),
        note="fitted",
    )
    path = tmp_path / "fitted.toml"
    save_profiles(path, {"gpt-4o": fitted})
    assert load_profiles(path) == [
        ModelProfile(
            "gpt-4o",
            ttft_base_ms=300,
            ttft_per_input_token_ms=0.25,
            decode_ms_per_token=12.5,
            output_tokens=60,
            jitter=0.08,
        )
    ]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "p.toml",
            "[models.fast]\nttft_base_ms = 1\nslots = 0\n",
            "p.toml: models.fast.slots: must be at least 1, got 0",
        ),
        (
            "p.toml",
            "[models.fast]\nttft_base_ms = 1\nttft_ms = 1\n",
            "p.toml: models.fast.ttft_ms: unknown key",
        ),
        (
            "p.toml",
            '[models.fast]\nttft_base_ms = 1\njitter = "a"\n',
            "p.toml: models.fast.jitter: input should be a valid number",
        ),
        ("p.toml", "[models\n", "p.toml: invalid TOML"),
        ("p.toml", "[other]\n", "p.toml: models: required key missing"),
        (
            "p.json",
            '{"models": [{"name": "a"}, {"name": "a"}]}',
            "p.json: models[1].name: duplicate",
        ),
        (
            "p.json",
            '{"models": [{"slots": 1}]}',
            "p.json: models[0]: expected a table with a 'name'",
        ),
        ("p.yaml", "models: {}", "p.yaml: unknown format"),
    ],
)
def test_bad_profiles_file_names_the_file_and_key(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ProfileError) as caught:
        load_profiles(path)
    assert str(caught.value).startswith(str(tmp_path / message.split(":")[0]) + ":")
    assert message.split(": ", 1)[1] in str(caught.value)


def test_invalid_profile_and_server_arguments_raise() -> None:
    with pytest.raises(ProfileError, match="slots"):
        ModelProfile("x", slots=0)
    with pytest.raises(ProfileError, match="duplicate"):
        SimServer([ModelProfile("x"), ModelProfile("x")])
    with pytest.raises(ValueError, match="network_delay_ms"):
        SimServer(network_delay_ms=-1)
    with pytest.raises(ValueError, match="otlp_endpoint"):
        SimServer(otlp_endpoint="localhost:4318")


# -- command line -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--port", "abc"], "argument --port: expected a port"),
        (["--network-delay-ms", "-5"], "argument --network-delay-ms: expected a number >= 0"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--otlp-endpoint", "nope"], "otlp_endpoint: expected an http(s) URL"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("chainlat sim: error: ")
    assert expected in err


def test_cli_bad_profiles_file_exits_2_naming_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text("[models.big]\nttft_base_ms = 1\ndecode_ms_per_token = -1\n")
    assert main(["--profiles", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"chainlat sim: error: {path}: models.big.decode_ms_per_token: must be at least 0, got -1\n"
    )
    assert main(["--profiles", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml: no such profile file" in capsys.readouterr().err


# Python leaves SIGINT ignored, with no KeyboardInterrupt, in a process started with it
# ignored, as every background job of a non-interactive shell is (CI steps, `cmd &`):
# restore the terminal's default so that the test sends the Ctrl-C of an interactive run.
_RUN_MAIN = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from chainlat.sim import main; sys.exit(main(sys.argv[1:]))"
)
STARTUP_S = 60.0
"""Bound on interpreter start, imports and the first line on a loaded machine."""
EXIT_S = 60.0
"""Bound on a clean stop after Ctrl-C; a process that ignored it hangs until killed."""


def _first_line(stream: IO[str], timeout_s: float) -> str:
    """The first line of ``stream``, or "" when none came within ``timeout_s``."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout_s)
    except queue.Empty:
        return ""


def test_cli_subprocess_serves_until_interrupted(tmp_path: Path) -> None:
    profiles = tmp_path / "p.json"
    profiles.write_text(json.dumps({"models": {"cli-model": {"ttft_base_ms": 5}}}))
    # The context manager closes the pipes and reaps the process, however the test ends.
    with subprocess.Popen(
        [sys.executable, "-c", _RUN_MAIN, "--port", "0", "--profiles", str(profiles)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    ) as process:
        try:
            assert process.stdout is not None
            line = _first_line(process.stdout, STARTUP_S)
            assert line.startswith("chainlat sim: serving http://127.0.0.1:"), line
            base_url = line.split()[3]
            with httpx.Client(timeout=STARTUP_S) as http:
                models = http.get(base_url + "/v1/models").json()
            assert [m["id"] for m in models["data"]] == ["cli-model"]
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=EXIT_S)
        finally:
            if process.poll() is None:  # a failure above: never leave it running
                process.kill()
                process.communicate()
    assert process.returncode == 0, err
    assert "Traceback" not in err
    assert out == ""  # everything after the first line: nothing


def test_cli_subprocess_bad_input_exits_2_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _RUN_MAIN, "--seed", "x"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr == "chainlat sim: error: argument --seed: invalid int value: 'x'\n"


def test_response_text_counts_back_to_output_tokens(client: openai.OpenAI) -> None:
    """The generated text follows the documented token rule, so chained steps are predictable."""
    reply = client.chat.completions.create(model="sim-test", messages=MESSAGES)
    text = reply.choices[0].message.content or ""
    assert -(-len(text) // 4) == 20
    assert client.embeddings.create(model="sim-test", input=text).usage.prompt_tokens == 20


def test_base64_embeddings_are_little_endian_float32(sim: SimServer) -> None:
    body = {"model": "sim-embed", "input": "abcd", "encoding_format": "base64", "dimensions": 3}
    with httpx.Client() as http:
        reply = http.post(sim.base_url + "/v1/embeddings", json=body).json()
    packed = base64.b64decode(reply["data"][0]["embedding"])
    vector = struct.unpack("<3f", packed)
    assert sum(x * x for x in vector) == pytest.approx(1.0, rel=1e-5)
