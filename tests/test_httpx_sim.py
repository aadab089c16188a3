"""chainlat.httpx over real HTTP on 127.0.0.1: the real openai and anthropic SDKs, chainlat.sim.

Every measured part of the breakdown is compared with the latency the simulator was told
to inject. Tolerances: in every run a part may be early by at most `EARLY_MS` (clock reads
on both sides of a loopback socket, and the whole-millisecond ``openai-processing-ms``);
in the best of `RUNS` runs it may be late by at most `LATE_MS`, room for a shared two-core
machine running other test suites. A difference of two arrival times (generation, tpot)
comes out short by as much as its first arrival was late, so its floor in every run is
`FIRST_CHUNK_LATE_MS` below the injected value (the window for the best run is the same).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, MetricsData
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._core import attributes as attr
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.httpx import AsyncTracingTransport, TracingTransport
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import Capture
from httpx_checks import check_identity, duration_ms, latency, model_spans, server_spans

EARLY_MS = 2.0
LATE_MS = 50.0
FIRST_CHUNK_LATE_MS = 20.0
RUNS = 3

NETWORK_MS = 40.0
TTFT_MS = 120.0
DECODE_MS = 15.0
TOKENS = 20
PROFILE = ModelProfile(
    "sim-test",
    ttft_base_ms=TTFT_MS,
    decode_ms_per_token=DECODE_MS,
    output_tokens=TOKENS,
    slots=16,
)
GENERATION_MS = DECODE_MS * (TOKENS - 1)  # 285
SERVER_MS = TTFT_MS + GENERATION_MS  # 405: openai-processing-ms of a whole answer
WAIT_MS = NETWORK_MS + SERVER_MS  # 445
FIRST_TOKEN_MS = NETWORK_MS + TTFT_MS  # 160
MESSAGES: list[Any] = [{"role": "user", "content": "Say something."}]


def within(value: float, expected: float, *, early: float = EARLY_MS) -> bool:
    return expected - early <= value <= expected + LATE_MS


def check_close(
    spans: list[ReadableSpan], part: str, expected: float, *, floor_below: float = EARLY_MS
) -> None:
    """Never below ``expected - floor_below``; within the tolerance in one run at least."""
    values = [latency(s)[part] for s in spans]
    assert all(v >= expected - floor_below for v in values), (part, expected, values)
    assert any(within(v, expected) for v in values), (part, expected, values)


def runs(cap: Capture, call: Callable[[], object], times: int = RUNS) -> list[ReadableSpan]:
    """Make the call ``times`` times; the model span of each run (identity checked)."""
    spans: list[ReadableSpan] = []
    for _ in range(times):
        before = len(model_spans(cap.spans()))
        call()
        new = model_spans(cap.spans())[before:]
        assert len(new) == 1, [s.name for s in new]
        check_identity(new[0])
        spans.append(new[0])
    return spans


@pytest.fixture
def sim(live: Capture) -> Iterator[SimServer]:
    with SimServer([PROFILE], network_delay_ms=NETWORK_MS, tracer_provider=live.provider) as s:
        yield s


def openai_client(sim: SimServer, cap: Capture, **options: Any) -> openai.OpenAI:
    transport = TracingTransport(httpx2.HTTPTransport(), tracer_provider=cap.provider, **options)
    return openai.OpenAI(
        base_url=sim.base_url + "/v1",
        api_key="sk-test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
    )


def async_openai_client(sim: SimServer, cap: Capture) -> openai.AsyncOpenAI:
    transport = AsyncTracingTransport(httpx2.AsyncHTTPTransport(), tracer_provider=cap.provider)
    return openai.AsyncOpenAI(
        base_url=sim.base_url + "/v1",
        api_key="sk-test",
        http_client=httpx2.AsyncClient(transport=transport),
        max_retries=0,
    )


def one_call(cap: Capture) -> ReadableSpan:
    spans = model_spans(cap.spans())
    assert len(spans) == 1, [s.name for s in spans]
    check_identity(spans[0])
    return spans[0]


def check_whole_answer(spans: list[ReadableSpan]) -> None:
    """The breakdown of non-streamed calls to PROFILE."""
    check_close(spans, "wait", WAIT_MS)
    check_close(spans, "server", SERVER_MS)
    check_close(spans, "network", NETWORK_MS)
    check_close(spans, "queue", 0)
    check_close(spans, "receive", 0)
    for span in spans:
        assert "ttft" not in latency(span) and "generation" not in latency(span)


def check_stream(spans: list[ReadableSpan]) -> None:
    """The breakdown of streamed calls to PROFILE (headers go out when a slot is taken)."""
    check_close(spans, "ttft", FIRST_TOKEN_MS)
    check_close(spans, "generation", GENERATION_MS, floor_below=FIRST_CHUNK_LATE_MS)
    check_close(spans, "tpot", DECODE_MS, floor_below=FIRST_CHUNK_LATE_MS / (TOKENS - 1))
    check_close(spans, "network", NETWORK_MS)
    check_close(spans, "server", 0)
    # headers -> last byte: two arrival times, so late headers shorten it
    check_close(spans, "receive", TTFT_MS + GENERATION_MS, floor_below=FIRST_CHUNK_LATE_MS)
    for span in spans:
        found = latency(span)
        attributes = span.attributes or {}
        assert attributes[attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == pytest.approx(
            found["ttft"] / 1000
        )
        assert attributes[attr.STREAM_CHUNKS] == TOKENS
        [event] = [e for e in span.events if e.name == attr.FIRST_TOKEN_EVENT]
        assert span.start_time is not None and event.timestamp is not None
        assert (event.timestamp - span.start_time) / 1e6 == pytest.approx(found["ttft"])


# --- accuracy against injected delays --------------------------------------------------------
def test_openai_sync_whole_answer_breakdown_matches_the_injected_delays(
    sim: SimServer, live: Capture
) -> None:
    replies: list[Any] = []
    with openai_client(sim, live) as client:

        def call() -> None:
            replies.append(
                client.chat.completions.create(model="sim-test", messages=MESSAGES, max_tokens=50)
            )

        spans = runs(live, call)
    check_whole_answer(spans)
    span, reply = spans[-1], replies[-1]
    attributes = span.attributes or {}
    assert span.name == "chat sim-test"
    assert span.kind.name == "CLIENT"
    assert attributes[attr.GEN_AI_PROVIDER_NAME] == "openai"
    assert attributes[attr.GEN_AI_REQUEST_MODEL] == "sim-test"
    assert attributes[attr.GEN_AI_RESPONSE_MODEL] == "sim-test"
    assert attributes[attr.GEN_AI_RESPONSE_ID] == reply.id
    assert attributes[attr.GEN_AI_REQUEST_STREAM] is False
    assert attributes[attr.GEN_AI_REQUEST_MAX_TOKENS] == 50
    assert attributes[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == reply.usage.prompt_tokens
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == TOKENS
    assert attributes[attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0
    assert attributes[attr.SERVER_ADDRESS] == "127.0.0.1"
    assert attributes[attr.SERVER_PORT] == sim.port
    assert attributes[attr.HTTP_RESPONSE_STATUS_CODE] == 200
    assert f"{attr.SERVER_TIMING_PREFIX}prefill_ms" in attributes
    # The first call opened the connection, the others reused it.
    assert latency(spans[0])["connect"] > 0
    assert latency(spans[1])["connect"] == latency(spans[2])["connect"] == 0


def test_openai_sync_stream_breakdown_matches_the_injected_delays(
    sim: SimServer, live: Capture
) -> None:
    with openai_client(sim, live) as client:

        def call() -> None:
            stream = client.chat.completions.create(
                model="sim-test",
                messages=MESSAGES,
                stream=True,
                stream_options={"include_usage": True},
            )
            assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

        spans = runs(live, call)
    check_stream(spans)
    attributes = spans[-1].attributes or {}
    assert attributes[attr.GEN_AI_REQUEST_STREAM] is True
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == TOKENS
    assert attributes[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


async def async_runs(cap: Capture, call: Callable[[], Awaitable[object]]) -> list[ReadableSpan]:
    spans: list[ReadableSpan] = []
    for _ in range(RUNS):
        await call()
        spans = model_spans(cap.spans())
    for span in spans:
        check_identity(span)
    assert len(spans) == RUNS
    return spans


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_openai_async_breakdown_matches_the_injected_delays(
    sim: SimServer, live: Capture, stream: bool
) -> None:
    client = async_openai_client(sim, live)

    async def call() -> None:
        if stream:
            chunks = await client.chat.completions.create(
                model="sim-test", messages=MESSAGES, stream=True
            )
            async for _ in chunks:
                pass
        else:
            await client.chat.completions.create(model="sim-test", messages=MESSAGES)

    spans = await async_runs(live, call)
    await client.close()
    (check_stream if stream else check_whole_answer)(spans)


def test_openai_sdk_over_a_legacy_httpx_client_is_traced(sim: SimServer, live: Capture) -> None:
    transport = TracingTransport(httpx.HTTPTransport(), tracer_provider=live.provider)
    with openai.OpenAI(
        base_url=sim.base_url + "/v1",
        api_key="sk-test",
        # The SDK takes legacy httpx clients too (checked at run time), but types only httpx2.
        http_client=httpx.Client(transport=transport),  # type: ignore[arg-type]
        max_retries=0,
    ) as client:
        spans = runs(
            live, lambda: client.chat.completions.create(model="sim-test", messages=MESSAGES)
        )
    check_whole_answer(spans)


def anthropic_client(sim: SimServer, cap: Capture) -> anthropic.Anthropic:
    transport = TracingTransport(httpx2.HTTPTransport(), tracer_provider=cap.provider)
    return anthropic.Anthropic(
        base_url=sim.base_url,
        api_key="sk-ant-test",
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
        open_telemetry=False,  # the SDK's own spans: only chainlat's are under test here
    )


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_anthropic_sync_breakdown_matches_the_injected_delays(
    sim: SimServer, live: Capture, stream: bool
) -> None:
    messages: list[anthropic.types.Message] = []
    with anthropic_client(sim, live) as client:

        def call() -> None:
            if stream:
                with client.messages.stream(
                    model="sim-test", max_tokens=100, messages=MESSAGES
                ) as s:
                    for _ in s.text_stream:
                        pass
                    messages.append(s.get_final_message())
            else:
                messages.append(
                    client.messages.create(model="sim-test", max_tokens=100, messages=MESSAGES)
                )

        spans = runs(live, call)
    (check_stream if stream else check_whole_answer)(spans)
    attributes = spans[-1].attributes or {}
    message = messages[-1]
    assert attributes[attr.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert attributes[attr.GEN_AI_RESPONSE_ID] == message.id
    assert attributes[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == message.usage.input_tokens
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == TOKENS
    assert attributes[attr.GEN_AI_REQUEST_MAX_TOKENS] == 100


@pytest.mark.anyio
async def test_anthropic_async_stream_breakdown_matches_the_injected_delays(
    sim: SimServer, live: Capture
) -> None:
    transport = AsyncTracingTransport(httpx2.AsyncHTTPTransport(), tracer_provider=live.provider)
    client = anthropic.AsyncAnthropic(
        base_url=sim.base_url,
        api_key="sk-ant-test",
        http_client=httpx2.AsyncClient(transport=transport),
        max_retries=0,
        open_telemetry=False,
    )

    async def call() -> None:
        async with client.messages.stream(model="sim-test", max_tokens=100, messages=MESSAGES) as s:
            async for _ in s.text_stream:
                pass

    spans = await async_runs(live, call)
    await client.close()
    check_stream(spans)


def test_embeddings_are_traced_with_their_input_tokens(sim: SimServer, live: Capture) -> None:
    embed = ModelProfile("sim-embed", ttft_base_ms=30, decode_ms_per_token=0, output_tokens=1)
    with SimServer([embed], tracer_provider=live.provider) as server:
        with openai_client(server, live) as client:
            result = client.embeddings.create(model="sim-embed", input=["a b c d", "e f g h"])
    span = one_call(live)
    attributes = span.attributes or {}
    assert span.name == "embeddings sim-embed"
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == result.usage.prompt_tokens
    assert within(latency(span)["server"], 30.0)


# --- the stream reaches the application as it comes ----------------------------------------------
def test_a_stream_reaches_the_application_chunk_by_chunk_at_the_servers_pace(
    sim: SimServer, live: Capture
) -> None:
    """Each chunk is in the application's hands when the server sends it, not at the end."""
    seen: list[list[int]] = []  # per run, when the application got each token (epoch ns)
    with openai_client(sim, live) as client:

        def call() -> None:
            stream = client.chat.completions.create(
                model="sim-test", messages=MESSAGES, stream=True
            )
            seen.append(
                [time.time_ns() for c in stream if c.choices and c.choices[0].delta.content]
            )

        spans = runs(live, call)
    spreads = [(times[-1] - times[0]) / 1e6 for times in seen]
    # At the server's pace: spread over the whole generation, not a burst at the end
    # (a buffered stream would show a spread near 0) ...
    assert all(len(times) == TOKENS for times in seen)
    assert all(spread >= GENERATION_MS - FIRST_CHUNK_LATE_MS for spread in spreads), spreads
    assert any(within(spread, GENERATION_MS) for spread in spreads), spreads
    # ... and most gaps a whole decode step.
    for times in seen:
        gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(times)]
        assert sum(1 for g in gaps_ms if g >= DECODE_MS - EARLY_MS - 1) >= len(gaps_ms) // 2
    # The application had the first token within milliseconds of its arrival.
    lags_ms: list[float] = []
    for times, span in zip(seen, spans, strict=True):
        [event] = [e for e in span.events if e.name == attr.FIRST_TOKEN_EVENT]
        assert event.timestamp is not None
        lags_ms.append((times[0] - event.timestamp) / 1e6)
    assert all(lag >= 0 for lag in lags_ms) and min(lags_ms) <= LATE_MS, lags_ms


def test_raw_httpx_stream_chunks_are_passed_on_unchanged_and_unbatched(
    sim: SimServer, live: Capture
) -> None:
    transport = TracingTransport(httpx.HTTPTransport(), tracer_provider=live.provider)
    body = {"model": "sim-test", "messages": MESSAGES, "stream": True}
    url = sim.base_url + "/v1/chat/completions"
    reads: list[list[tuple[int, bytes]]] = []
    with httpx.Client(transport=transport) as client:

        def call() -> None:
            with client.stream("POST", url, json=body) as response:
                reads.append([(time.time_ns(), raw) for raw in response.iter_raw()])

        runs(live, call)
    with httpx.Client() as plain, plain.stream("POST", url, json=body) as response:
        untraced = b"".join(response.iter_raw())
    for traced in reads:
        data = b"".join(raw for _, raw in traced)
        # The same events as without chainlat (ids and timestamps differ).
        assert data.count(b"data: ") == untraced.count(b"data: ") == TOKENS + 2
        token_times = [t for t, raw in traced if b'"content":"' in raw]
        assert len(token_times) >= TOKENS // 2  # read as they come, not all at the end
    spreads = [
        (tokens[-1] - tokens[0]) / 1e6
        for tokens in ([t for t, raw in traced if b'"content":"' in raw] for traced in reads)
    ]
    assert all(spread >= GENERATION_MS - FIRST_CHUNK_LATE_MS for spread in spreads), spreads
    assert any(within(spread, GENERATION_MS) for spread in spreads), spreads


# --- queueing ----------------------------------------------------------------------------------
FAST_MS = 80.0
FAST = ModelProfile("sim-fast", ttft_base_ms=FAST_MS, decode_ms_per_token=0, output_tokens=1)


async def eight_calls(client: openai.AsyncOpenAI) -> None:
    await asyncio.gather(
        *(client.chat.completions.create(model="sim-fast", messages=MESSAGES) for _ in range(8))
    )
    await client.close()


@pytest.mark.anyio
async def test_a_client_pool_limit_shows_up_as_queue_time(live: Capture) -> None:
    """8 concurrent calls over 2 connections: they wait in the pool in waves of 2."""
    limited = httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_connections=2))
    transport = AsyncTracingTransport(limited, tracer_provider=live.provider)
    with SimServer([FAST], tracer_provider=live.provider) as server:
        client = openai.AsyncOpenAI(
            base_url=server.base_url + "/v1",
            api_key="sk-test",
            http_client=httpx2.AsyncClient(transport=transport),
            max_retries=0,
        )
        await eight_calls(client)
    spans = model_spans(live.spans())
    assert len(spans) == 8
    for span in spans:
        check_identity(span)
        assert latency(span)["wait"] >= FAST_MS - EARLY_MS
    waits = sorted(latency(s)["wait"] for s in spans)
    assert waits[len(waits) // 2] <= FAST_MS + LATE_MS, waits
    queues = sorted(latency(s)["queue"] for s in spans)
    for index, queue in enumerate(queues):
        wave = index // 2  # each earlier wave took at least FAST_MS on the server
        assert FAST_MS * wave - EARLY_MS <= queue <= FAST_MS * wave + LATE_MS * (wave + 1)


@pytest.mark.anyio
async def test_a_server_with_two_slots_shows_queue_in_its_spans_and_longer_waits(
    live: Capture,
) -> None:
    two_slots = ModelProfile(
        "sim-fast", ttft_base_ms=FAST_MS, decode_ms_per_token=0, output_tokens=1, slots=2
    )
    with SimServer([two_slots], tracer_provider=live.provider) as server:
        client = async_openai_client(server, live)
        await eight_calls(client)
    spans = model_spans(live.spans())
    assert len(spans) == 8
    servers = {s.parent.span_id: s for s in server_spans(live, 8) if s.parent is not None}
    server_queue = {
        s.parent.span_id: s for s in live.spans() if s.name == "queue" and s.parent is not None
    }
    waits: list[float] = []
    for span in spans:
        check_identity(span)
        found = latency(span)
        assert found["queue"] <= LATE_MS  # no client-side limit: nothing waits in the pool
        server_span = servers[span.context.span_id]
        queued_ms = duration_ms(server_queue[server_span.context.span_id])
        # The server's queue and prefill happened inside the client's wait, and the
        # server reports them (whole ms) in openai-processing-ms.
        assert found["wait"] >= queued_ms + FAST_MS - EARLY_MS
        assert found["server"] >= queued_ms + FAST_MS - EARLY_MS
        waits.append(found["wait"])
    queued = sorted(duration_ms(s) for s in server_queue.values())
    assert len(queued) == 8
    # Two at a time: six waited at least one turn, four two turns, two three turns
    # (less the few ms between the requests' arrivals).
    for turns, count in ((1, 6), (2, 4), (3, 2)):
        assert sum(1 for q in queued if q >= turns * FAST_MS - 25) >= count, queued
    assert max(waits) >= 4 * FAST_MS - 25


# --- one trace across the wire ----------------------------------------------------------------
def test_client_and_server_spans_form_one_trace(sim: SimServer, live: Capture) -> None:
    with (
        openai_client(sim, live) as client,
        chainlat.workflow("answer", tracer_provider=live.provider) as run,
    ):
        client.chat.completions.create(model="sim-test", messages=MESSAGES, stream=False)
    [server] = server_spans(live, 1)
    spans = live.spans()
    [workflow] = live.workflows()
    [call] = model_spans(spans)
    phases = {s.name: s for s in spans if s.parent and s.parent.span_id == server.context.span_id}
    assert set(phases) == {"queue", "prefill", "decode"}
    trace_ids = {s.context.trace_id for s in (workflow, call, server, *phases.values())}
    assert len(trace_ids) == 1
    assert call.parent is not None and call.parent.span_id == workflow.context.span_id
    assert server.parent is not None and server.parent.span_id == call.context.span_id
    assert (call.attributes or {})[attr.STEP_INDEX] == 0
    # The server's own inference span nests in the client's: one model call in the chain.
    assert run.rollup is not None
    assert run.rollup.inference_count == 1
    assert run.rollup.output_tokens == TOKENS


# --- errors ------------------------------------------------------------------------------------
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def call_both(
    traced: openai.OpenAI, plain: openai.OpenAI, stream: bool = False, **kwargs: Any
) -> tuple[BaseException, BaseException]:
    """The exception each client raises for the same call."""
    caught: list[BaseException] = []
    for client in (traced, plain):
        with pytest.raises(Exception) as info:  # noqa: PT011 - compared below
            result = client.chat.completions.create(
                model="sim-test", messages=MESSAGES, stream=stream, **kwargs
            )
            if stream:
                for _ in result:
                    pass
        caught.append(info.value)
        client.close()
    return caught[0], caught[1]


def plain_client(base_url: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0, **options)


def check_same(traced: BaseException, plain: BaseException) -> None:
    assert type(traced) is type(plain)
    assert str(traced) == str(plain)
    assert type(traced.__cause__) is type(plain.__cause__)


def error_span(cap: Capture) -> ReadableSpan:
    span = one_call(cap)
    assert span.status.status_code.name == "ERROR"
    return span


def test_connection_refused_gives_an_error_span_and_the_same_exception(live: Capture) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"
    traced = openai.OpenAI(
        base_url=base_url,
        api_key="sk-test",
        max_retries=0,
        http_client=httpx2.Client(
            transport=TracingTransport(httpx2.HTTPTransport(), tracer_provider=live.provider)
        ),
    )
    check_same(*call_both(traced, plain_client(base_url)))
    span = error_span(live)
    assert (span.attributes or {})[attr.ERROR_TYPE] == "httpx2.ConnectError"
    found = latency(span)
    assert found["send"] == found["wait"] == found["receive"] == 0
    assert found["connect"] > 0


def test_a_timeout_gives_an_error_span_and_the_same_exception(
    sim: SimServer, live: Capture
) -> None:
    options: dict[str, Any] = {"timeout": 0.2, "default_headers": {"x-sim-delay-ms": "1000"}}
    traced = openai_client(sim, live).with_options(**options)
    check_same(*call_both(traced, plain_client(sim.base_url + "/v1", **options)))
    span = error_span(live)
    assert (span.attributes or {})[attr.ERROR_TYPE] == "httpx2.ReadTimeout"
    assert 200.0 - EARLY_MS <= latency(span)["wait"] <= 200.0 + 3 * LATE_MS


@pytest.mark.parametrize("status", [429, 500])
def test_an_http_error_status_gives_an_error_span_and_the_same_exception(
    sim: SimServer, live: Capture, status: int
) -> None:
    headers = {"x-sim-status": str(status)}
    traced = openai_client(sim, live).with_options(default_headers=headers)
    plain = plain_client(sim.base_url + "/v1", default_headers=headers)
    traced_exc, plain_exc = call_both(traced, plain)
    check_same(traced_exc, plain_exc)
    assert isinstance(traced_exc, openai.APIStatusError) and traced_exc.status_code == status
    span = error_span(live)
    attributes = span.attributes or {}
    assert attributes[attr.ERROR_TYPE] == str(status)
    assert attributes[attr.HTTP_RESPONSE_STATUS_CODE] == status
    if status == 429:
        assert attributes[attr.HTTP_RESPONSE_HEADER_PREFIX + "retry-after"] == ("1",)


def test_a_stream_cut_midway_gives_an_error_span_and_the_same_exception(
    sim: SimServer, live: Capture
) -> None:
    headers = {"x-sim-cut-after": "5"}
    traced = openai_client(sim, live).with_options(default_headers=headers)
    plain = plain_client(sim.base_url + "/v1", default_headers=headers)
    check_same(*call_both(traced, plain, stream=True))
    span = error_span(live)
    attributes = span.attributes or {}
    assert attributes[attr.ERROR_TYPE] == "httpx2.RemoteProtocolError"
    assert attributes[attr.STREAM_CHUNKS] == 5
    found = latency(span)  # checked for gross errors only: one run, not best of several
    assert FIRST_TOKEN_MS - EARLY_MS <= found["ttft"] <= FIRST_TOKEN_MS + 3 * LATE_MS
    assert 4 * DECODE_MS - FIRST_CHUNK_LATE_MS <= found["generation"] <= 4 * DECODE_MS + 3 * LATE_MS


# --- privacy -----------------------------------------------------------------------------------
SECRETS = {
    "authorization": "sk-SECRET-bearer-5f1e0c",
    "x-api-key": "SECRET-x-api-key-91ab2d",
    "cookie": "SECRET-cookie-3c77e0",
    "query": "SECRET-query-key-8d20f4",
    "anthropic": "sk-ant-SECRET-4e9b1a",
}


def test_no_credential_ever_reaches_a_span_a_log_or_a_file(
    sim: SimServer, live: Capture, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="chainlat")
    traces = tmp_path / "traces.jsonl"
    live.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(traces)))
    # Asking for the credential headers by name must not make them recorded.
    asked = ["authorization", "x-api-key", "cookie", "api-key", "x-request-id"]
    client = openai_client(sim, live, record_headers=asked, capture_content=True).with_options(
        api_key=SECRETS["authorization"],
        default_headers={"x-api-key": SECRETS["x-api-key"], "cookie": f"s={SECRETS['cookie']}"},
        default_query={"api-key": SECRETS["query"]},
    )
    client.chat.completions.create(model="sim-test", messages=MESSAGES)
    stream = client.chat.completions.create(model="sim-test", messages=MESSAGES, stream=True)
    for _ in stream:
        pass
    transport = TracingTransport(
        httpx2.HTTPTransport(), tracer_provider=live.provider, record_headers=asked
    )
    claude = anthropic.Anthropic(
        base_url=sim.base_url,
        api_key=SECRETS["anthropic"],
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
        open_telemetry=False,
    )
    claude.messages.create(model="sim-test", max_tokens=10, messages=MESSAGES)
    claude.close()
    client.close()
    live.provider.force_flush()
    spans = live.spans()
    assert len(model_spans(spans)) == 3
    exported = "\n".join(s.to_json() for s in spans) + traces.read_text() + caplog.text
    for secret in SECRETS.values():
        assert secret not in exported
    recorded = {k for s in spans for k in (s.attributes or {}) if k.startswith("http.")}
    assert attr.HTTP_RESPONSE_HEADER_PREFIX + "x-request-id" in recorded  # asked, harmless
    assert not any(("authorization" in k or "api-key" in k or "cookie" in k) for k in recorded)


def test_content_is_recorded_only_when_asked_and_then_truncated(
    sim: SimServer, live: Capture
) -> None:
    question = "Please tell me everything about the weather in Lyon today. " * 4
    messages: list[Any] = [{"role": "user", "content": question}]
    with openai_client(sim, live) as client:
        client.chat.completions.create(model="sim-test", messages=messages)
    [plain] = model_spans(live.spans())
    assert not any(k.startswith("gen_ai.input") for k in (plain.attributes or {}))
    assert attr.GEN_AI_OUTPUT_MESSAGES not in (plain.attributes or {})
    live.clear()
    with openai_client(sim, live, capture_content=True, max_content_length=40) as client:
        reply = client.chat.completions.create(model="sim-test", messages=messages)
    [captured] = model_spans(live.spans())
    attributes = captured.attributes or {}
    [sent] = json.loads(str(attributes[attr.GEN_AI_INPUT_MESSAGES]))
    assert sent == {"role": "user", "parts": [{"type": "text", "content": question[:40]}]}
    [answer] = json.loads(str(attributes[attr.GEN_AI_OUTPUT_MESSAGES]))
    assert answer["role"] == "assistant" and answer["finish_reason"] == "stop"
    assert reply.choices[0].message.content is not None
    assert answer["parts"][0]["content"] == reply.choices[0].message.content[:40]
    assert attributes[attr.CONTENT_TRUNCATED] is True


# --- metrics -------------------------------------------------------------------------------------
def histogram(data: MetricsData | None, name: str) -> list[HistogramDataPoint]:
    assert data is not None
    points: list[HistogramDataPoint] = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    points.extend(p for p in metric.data.data_points)  # type: ignore[misc]
    return points


def test_streamed_calls_record_the_genai_client_metrics_with_semconv_buckets(
    sim: SimServer, live: Capture
) -> None:
    with openai_client(sim, live) as client:
        stream = client.chat.completions.create(
            model="sim-test", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        for _ in stream:
            pass
    data = live.metric_reader.get_metrics_data()
    [duration] = histogram(data, attr.METRIC_OPERATION_DURATION)
    [first] = histogram(data, attr.METRIC_TIME_TO_FIRST_CHUNK)
    [per_chunk] = histogram(data, attr.METRIC_TIME_PER_OUTPUT_CHUNK)
    tokens = histogram(data, attr.METRIC_TOKEN_USAGE)
    assert duration.count == first.count == 1
    assert per_chunk.count == TOKENS - 1
    assert tuple(per_chunk.explicit_bounds) == attr.DURATION_BUCKETS_S
    assert tuple(first.explicit_bounds) == attr.DURATION_BUCKETS_S
    # The gaps between chunks add up to the generation time on the span.
    [span] = model_spans(live.spans())
    assert per_chunk.sum == pytest.approx(latency(span)["generation"] / 1000, abs=1e-9)
    assert first.sum == pytest.approx(latency(span)["ttft"] / 1000, abs=1e-9)
    assert {dict(p.attributes or {}).get(attr.GEN_AI_TOKEN_TYPE) for p in tokens} == {
        "input",
        "output",
    }
    labels = dict(per_chunk.attributes or {})
    assert labels[attr.GEN_AI_REQUEST_MODEL] == "sim-test"
    assert labels[attr.SERVER_PORT] == sim.port


def test_a_whole_answer_records_no_streaming_metrics(sim: SimServer, live: Capture) -> None:
    with openai_client(sim, live) as client:
        client.chat.completions.create(model="sim-test", messages=MESSAGES)
    data = live.metric_reader.get_metrics_data()
    assert len(histogram(data, attr.METRIC_OPERATION_DURATION)) == 1
    assert histogram(data, attr.METRIC_TIME_TO_FIRST_CHUNK) == []
    assert histogram(data, attr.METRIC_TIME_PER_OUTPUT_CHUNK) == []
