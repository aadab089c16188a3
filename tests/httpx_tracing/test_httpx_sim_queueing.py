"""chainlat.httpx over real HTTP on 127.0.0.1, against chainlat.sim: a client pool limit
shows up as queue time, a server's slots as longer waits."""

from __future__ import annotations

import asyncio

import httpx2
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from chainlat.httpx import AsyncTracingTransport
from chainlat.sim import ModelProfile
from chainlat.testing import Capture
from support import StartSim
from support.httpx_checks import check_identity, duration_ms, latency, model_spans, server_spans
from support.httpx_sim import EARLY_MS, LATE_MS, MAX_RUNS, MESSAGES, async_openai_client

FAST_MS = 80.0
FAST = ModelProfile("sim-fast", ttft_base_ms=FAST_MS, decode_ms_per_token=0, output_tokens=1)


async def eight_calls(client: openai.AsyncOpenAI) -> None:
    await asyncio.gather(
        *(client.chat.completions.create(model="sim-fast", messages=MESSAGES) for _ in range(8))
    )
    await client.close()


def start_ns(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def end_ns(span: ReadableSpan) -> int:
    assert span.end_time is not None
    return span.end_time


def left_the_pool_ns(span: ReadableSpan) -> int:
    """When the call got its connection: the end of its queue part."""
    return start_ns(span) + round(latency(span)["queue"] * 1e6)


def check_turns(instants_ns: list[int], since_ns: int, turn_ms: float) -> None:
    """Two at a time, each held `turn_ms` at least: the i-th came i // 2 turns after ``since``.

    Physically guaranteed, whatever the load: at the i-th instant at most two are in
    progress, so i - 1 have finished, one after another on one of the two at least.
    """
    for index, instant in enumerate(sorted(instants_ns)):
        assert (instant - since_ns) / 1e6 >= turn_ms * (index // 2) - EARLY_MS, (index, instant)


@pytest.mark.anyio
async def test_a_client_pool_limit_shows_up_as_queue_time(
    start_sim: StartSim, live: Capture
) -> None:
    """8 concurrent calls over 2 connections: they wait in the pool in waves of 2.

    The floors hold in every attempt; the windows (a call left the pool when another gave
    its connection back, a wait of one turn) in one attempt at least, up to `MAX_RUNS`:
    a descheduled moment on a loaded machine makes one attempt late, not the reading.
    """
    server = start_sim(profiles=[FAST], tracer_provider=live.provider)
    missed: list[tuple[int, list[float], list[float]]] = []
    for _ in range(MAX_RUNS):
        live.clear()
        limited = httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_connections=2))
        transport = AsyncTracingTransport(limited, tracer_provider=live.provider)
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
            found = latency(span)
            # request going out -> headers: the server's FAST_MS at least, in every call
            assert found["send"] + found["wait"] >= FAST_MS - EARLY_MS
        # The pool let the calls out two at a time, one turn of FAST_MS apart at least.
        check_turns([left_the_pool_ns(s) for s in spans], min(map(start_ns, spans)), FAST_MS)
        # A call that waited in the pool left it when another call ended and gave its
        # connection back (the median: one call descheduled does not decide).
        ends = [end_ns(s) for s in spans]
        waited = [s for s in spans if latency(s)["queue"] > FAST_MS / 2]
        gaps_ms = sorted(min(abs(left_the_pool_ns(s) - e) for e in ends) / 1e6 for s in waited)
        waits = sorted(latency(s)["wait"] for s in spans)
        if (
            len(waited) >= 4  # six in waves 1 to 3, less any that started a whole wave late
            and gaps_ms[len(gaps_ms) // 2] <= LATE_MS
            and waits[len(waits) // 2] <= FAST_MS + LATE_MS  # median: a turn, not more
        ):
            return
        missed.append((len(waited), gaps_ms, waits))
    pytest.fail(f"no attempt of {MAX_RUNS} within the windows (waited, gaps, waits): {missed}")


@pytest.mark.anyio
async def test_a_server_with_two_slots_shows_queue_in_its_spans_and_longer_waits(
    start_sim: StartSim, live: Capture
) -> None:
    two_slots = ModelProfile(
        "sim-fast", ttft_base_ms=FAST_MS, decode_ms_per_token=0, output_tokens=1, slots=2
    )
    server = start_sim(profiles=[two_slots], tracer_provider=live.provider)
    await eight_calls(async_openai_client(server, live))
    spans = model_spans(live.spans())
    assert len(spans) == 8
    servers = {s.parent.span_id: s for s in server_spans(live, 8) if s.parent is not None}
    server_queue = {
        s.parent.span_id: s for s in live.spans() if s.name == "queue" and s.parent is not None
    }
    assert len(server_queue) == 8
    ends = [end_ns(s) for s in spans]
    for span in spans:
        check_identity(span)
        found = latency(span)
        # No client-side limit: no call waited in the pool for another to end (one that
        # had would have left the pool at or after the first end since it started).
        assert left_the_pool_ns(span) < min(e for e in ends if e > start_ns(span))
        server_span = servers[span.context.span_id]
        queued_ms = duration_ms(server_queue[server_span.context.span_id])
        # The server's queue and prefill happened between the request going out and
        # the headers, and the server reports them (whole ms) in openai-processing-ms.
        assert found["send"] + found["wait"] >= queued_ms + FAST_MS - EARLY_MS
        assert found["server"] >= queued_ms + FAST_MS - EARLY_MS
    # Two slots: the server let the requests out of its queue two at a time, a turn apart ...
    queues = list(server_queue.values())
    check_turns([end_ns(q) for q in queues], min(map(start_ns, queues)), FAST_MS)
    # ... so the last headers came four turns after the first call started.
    headers_ns = [
        start_ns(s) + round(sum(latency(s)[p] for p in ("queue", "connect", "send", "wait")) * 1e6)
        for s in spans
    ]
    assert (max(headers_ns) - min(map(start_ns, spans))) / 1e6 >= 4 * FAST_MS - EARLY_MS
