"""chainlat.sim latency: network, prefill and decode as the profile says, over real HTTP on
127.0.0.1 with the real SDKs, sync and async, and requests beyond the slots queueing FIFO.

Timing assertions compare client-side measurements with the injected latencies, never
early by more than `EARLY_MS`, the fastest of a few runs never later than `LATE_MS`
(see tests/support/sim_checks.py)."""

from __future__ import annotations

import asyncio
import time

import openai
import pytest

from chainlat.sim import ModelProfile, SimServer
from support import StartSim
from support.sim_checks import (
    EARLY_MS,
    EXPECTED_TOTAL_MS,
    EXPECTED_TTFT_MS,
    LATE_MS,
    MESSAGES,
    Timings,
    memory_provider,
    ms_since,
    server_timing,
)


def test_chat_completion_takes_network_plus_prefill_plus_decode(client: openai.OpenAI) -> None:
    timings = Timings(total=EXPECTED_TOTAL_MS)
    for _ in timings.runs():
        start = time.perf_counter()
        reply = client.chat.completions.create(model="sim-test", messages=MESSAGES)
        timings.add("total", ms_since(start))
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
    timings = Timings(ttft=EXPECTED_TTFT_MS, total=EXPECTED_TOTAL_MS)
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
                timings.add("ttft", ms_since(start))
            chunks.append(chunk)
        timings.add("total", ms_since(start))
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
    timings = Timings(total=EXPECTED_TTFT_MS + 4 * 15.0)
    for _ in timings.runs():
        start = time.perf_counter()
        reply = client.chat.completions.create(
            model="sim-test", messages=MESSAGES, max_completion_tokens=5
        )
        timings.add("total", ms_since(start))
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
        timings = Timings(total=150.0)
        for _ in timings.runs():
            start = time.perf_counter()
            c.chat.completions.create(model="p", messages=[{"role": "user", "content": prompt}])
            timings.add("total", ms_since(start))
    timings.check()


@pytest.mark.anyio
async def test_async_client_non_stream_and_stream(sim: SimServer) -> None:
    async with openai.AsyncOpenAI(
        base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0
    ) as c:
        await c.models.list()
        totals = Timings(total=EXPECTED_TOTAL_MS)
        for _ in totals.runs():
            start = time.perf_counter()
            reply = await c.chat.completions.create(model="sim-test", messages=MESSAGES)
            totals.add("total", ms_since(start))
        totals.check()
        assert reply.usage is not None
        assert reply.usage.completion_tokens == 20
        ttfts = Timings(ttft=EXPECTED_TTFT_MS)
        for _ in ttfts.runs():
            start = time.perf_counter()
            stream = await c.chat.completions.create(
                model="sim-test", messages=MESSAGES, stream=True
            )
            pieces: list[str] = []
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    if not pieces:
                        ttfts.add("ttft", ms_since(start))
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
    provider, exporter = memory_provider()
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
    queued_ms = sorted(server_timing(r.headers["server-timing"])["queue"] for r in raws)
    assert queued_ms[1] < request_ms / 2 <= queued_ms[2], queued_ms
