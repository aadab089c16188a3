"""chainlat.httpx over real HTTP on 127.0.0.1: the real openai and anthropic SDKs, chainlat.sim.

Every measured part of the breakdown is compared with the latency the simulator was told
to inject, in two ways (see `Part`):

* Floors, in every run. A duration from an instant the client recorded before the server
  acted (the span's start, the request starting to go out) to one it recorded after
  (headers, a chunk, the end) is never shorter than the injected delay, less `EARLY_MS`
  (clock reads on both sides of a loopback socket, the whole-millisecond
  ``openai-processing-ms``). Load cannot break these: they are the real assertions.
* Windows, in the best run. Load only makes a run slower, and it can shift time between
  adjacent parts: a late first chunk shortens ``generation``, a late "request written"
  shortens ``wait``. So each part must come within [expected - early, expected +
  `LATE_MS`] in one run at least, and the call is repeated (`MIN_RUNS`, then up to
  `MAX_RUNS` while a window is still unmet): a busy moment on the shared two-core
  machine costs a retry, not a failure.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
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
from support import SimOptions, StartSim, free_port
from support.httpx_checks import check_identity, duration_ms, latency, model_spans, server_spans

EARLY_MS = 2.0
"""A floor may look early by this much: clock reads on both sides of a socket, whole ms."""
LATE_MS = 50.0
"""The best run may be this much late: room for a shared two-core machine under load."""
SHIFT_MS = 20.0
"""How much earlier a part starting at a late client instant may look in its best run."""
MIN_RUNS = 3
MAX_RUNS = 8

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


@dataclass(frozen=True)
class Part:
    """A part of the breakdown (or a sum of parts) against the delay injected for it.

    Its best run comes within [expected_ms - early_ms, expected_ms + LATE_MS]. With
    ``floor``, the sum spans from a client instant before the server acted to one after,
    so no run may be shorter than ``expected_ms - EARLY_MS``.
    """

    parts: tuple[str, ...]
    expected_ms: float
    early_ms: float = EARLY_MS
    floor: bool = False

    def values(self, spans: Sequence[ReadableSpan]) -> list[float]:
        return [sum(latency(span)[p] for p in self.parts) for span in spans]

    def met(self, spans: Sequence[ReadableSpan]) -> bool:
        return any(within(v, self.expected_ms, early=self.early_ms) for v in self.values(spans))

    def check(self, spans: Sequence[ReadableSpan]) -> None:
        values = self.values(spans)
        if self.floor:
            assert min(values) >= self.expected_ms - EARLY_MS, (self, values)
        assert self.met(spans), (self, values)


WHOLE_ANSWER = (
    Part(("send", "wait"), WAIT_MS, floor=True),  # request going out -> headers
    Part(("wait",), WAIT_MS, early_ms=SHIFT_MS),  # from "request written", which may be late
    Part(("server",), SERVER_MS, floor=True),  # the server's own measurement
    Part(("send", "network"), NETWORK_MS, floor=True),  # (send + wait) - server
    Part(("network",), NETWORK_MS, early_ms=SHIFT_MS),  # wait - server: as short as wait
    Part(("queue",), 0),  # no pool limit: no wait for a connection
    Part(("receive",), 0),  # the whole body comes right behind the headers
)
"""The breakdown of non-streamed calls to PROFILE."""

STREAM = (
    Part(("ttft",), FIRST_TOKEN_MS, floor=True),  # span start -> first chunk
    Part(("ttft", "generation"), FIRST_TOKEN_MS + GENERATION_MS, floor=True),  # -> last chunk
    Part(("generation",), GENERATION_MS, early_ms=SHIFT_MS),  # from a first chunk read late
    Part(("tpot",), DECODE_MS),  # generation / 19: shifted by 1 ms at most
    Part(("send", "wait"), NETWORK_MS, floor=True),  # headers go out when a slot is taken
    Part(("network",), NETWORK_MS, early_ms=SHIFT_MS),  # = wait, from "request written"
    Part(("server",), 0),  # openai-processing-ms 0: the headers go out before prefill
    # request going out -> last byte, and headers -> last byte (from headers read late)
    Part(("send", "wait", "receive"), NETWORK_MS + TTFT_MS + GENERATION_MS, floor=True),
    Part(("receive",), TTFT_MS + GENERATION_MS, early_ms=SHIFT_MS),
)
"""The breakdown of streamed calls to PROFILE."""

Done = Callable[[list[ReadableSpan]], bool]


def met(parts: Sequence[Part]) -> Done:
    """Measured enough once every part's window is met."""
    return lambda spans: all(part.met(spans) for part in parts)


def more_runs(spans: list[ReadableSpan], done: Done) -> bool:
    return len(spans) < MIN_RUNS or (len(spans) < MAX_RUNS and not done(spans))


def runs(cap: Capture, call: Callable[[], object], done: Done) -> list[ReadableSpan]:
    """Make the call until `done` (see `more_runs`); the model span of each run, checked."""
    spans: list[ReadableSpan] = []
    while more_runs(spans, done):
        before = len(model_spans(cap.spans()))
        call()
        new = model_spans(cap.spans())[before:]
        assert len(new) == 1, [s.name for s in new]
        check_identity(new[0])
        spans.append(new[0])
    return spans


@pytest.fixture
def sim_options(live: Capture) -> SimOptions:
    return SimOptions(
        profiles=[PROFILE], network_delay_ms=NETWORK_MS, tracer_provider=live.provider
    )


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
    for part in WHOLE_ANSWER:
        part.check(spans)
    for span in spans:
        assert "ttft" not in latency(span) and "generation" not in latency(span)


def check_stream(spans: list[ReadableSpan]) -> None:
    """The breakdown of streamed calls to PROFILE (headers go out when a slot is taken)."""
    for part in STREAM:
        part.check(spans)
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

        spans = runs(live, call, met(WHOLE_ANSWER))
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

        spans = runs(live, call, met(STREAM))
    check_stream(spans)
    attributes = spans[-1].attributes or {}
    assert attributes[attr.GEN_AI_REQUEST_STREAM] is True
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == TOKENS
    assert attributes[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)


async def async_runs(
    cap: Capture, call: Callable[[], Awaitable[object]], done: Done
) -> list[ReadableSpan]:
    """`runs` for an async call."""
    spans: list[ReadableSpan] = []
    while more_runs(spans, done):
        before = len(model_spans(cap.spans()))
        await call()
        new = model_spans(cap.spans())[before:]
        assert len(new) == 1, [s.name for s in new]
        check_identity(new[0])
        spans.append(new[0])
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

    spans = await async_runs(live, call, met(STREAM if stream else WHOLE_ANSWER))
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
            live,
            lambda: client.chat.completions.create(model="sim-test", messages=MESSAGES),
            met(WHOLE_ANSWER),
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

        spans = runs(live, call, met(STREAM if stream else WHOLE_ANSWER))
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

    spans = await async_runs(live, call, met(STREAM))
    await client.close()
    check_stream(spans)


def test_embeddings_are_traced_with_their_input_tokens(start_sim: StartSim, live: Capture) -> None:
    embed = ModelProfile("sim-embed", ttft_base_ms=30, decode_ms_per_token=0, output_tokens=1)
    server = start_sim(profiles=[embed], tracer_provider=live.provider)
    results: list[Any] = []
    with openai_client(server, live) as client:

        def call() -> None:
            results.append(client.embeddings.create(model="sim-embed", input=["a b", "c d"]))

        spans = runs(live, call, met([Part(("server",), 30.0, floor=True)]))
    Part(("server",), 30.0, floor=True).check(spans)
    span = spans[-1]
    attributes = span.attributes or {}
    assert span.name == "embeddings sim-embed"
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == results[-1].usage.prompt_tokens


# --- the stream reaches the application as it comes ----------------------------------------------
def spread_ms(times: list[int]) -> float:
    """First to last of the instants (ns) an application got the tokens, in ms."""
    return (times[-1] - times[0]) / 1e6


def at_the_servers_pace(times: list[int]) -> bool:
    """Tokens spread over the whole generation, most gaps a whole decode step.

    A buffered stream would show a spread near 0. The spread runs from the first token,
    which may be read late, so it may look short by `SHIFT_MS`.
    """
    gaps_ms = [(b - a) / 1e6 for a, b in itertools.pairwise(times)]
    whole_steps = sum(1 for g in gaps_ms if g >= DECODE_MS - EARLY_MS - 1)
    return (
        within(spread_ms(times), GENERATION_MS, early=SHIFT_MS) and whole_steps >= len(gaps_ms) // 2
    )


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

        def lag_ms(times: list[int], span: ReadableSpan) -> float:
            """From chainlat seeing the first token to the application getting it."""
            [event] = [e for e in span.events if e.name == attr.FIRST_TOKEN_EVENT]
            assert event.timestamp is not None
            return (times[0] - event.timestamp) / 1e6

        def done(spans: list[ReadableSpan]) -> bool:
            return any(at_the_servers_pace(times) for times in seen) and any(
                lag_ms(times, span) <= LATE_MS for times, span in zip(seen, spans, strict=True)
            )

        spans = runs(live, call, done)
    assert all(len(times) == TOKENS for times in seen)
    # The last token came a whole generation after the first token was sent: never earlier.
    assert all(
        (times[-1] - span.start_time) / 1e6 >= FIRST_TOKEN_MS + GENERATION_MS - EARLY_MS
        for times, span in zip(seen, spans, strict=True)
        if span.start_time is not None
    )
    assert any(at_the_servers_pace(times) for times in seen), [spread_ms(t) for t in seen]
    # The application gets the first token after chainlat saw it, within ms in the best run.
    lags_ms = [lag_ms(times, span) for times, span in zip(seen, spans, strict=True)]
    assert all(lag >= 0 for lag in lags_ms) and min(lags_ms) <= LATE_MS, lags_ms


def test_raw_httpx_stream_chunks_are_passed_on_unchanged_and_unbatched(
    sim: SimServer, live: Capture
) -> None:
    transport = TracingTransport(httpx.HTTPTransport(), tracer_provider=live.provider)
    body = {"model": "sim-test", "messages": MESSAGES, "stream": True}
    url = sim.base_url + "/v1/chat/completions"
    reads: list[list[tuple[int, bytes]]] = []

    def token_times(traced: list[tuple[int, bytes]]) -> list[int]:
        return [t for t, raw in traced if b'"content":"' in raw]

    with httpx.Client(transport=transport) as client:

        def call() -> None:
            with client.stream("POST", url, json=body) as response:
                reads.append([(time.time_ns(), raw) for raw in response.iter_raw()])

        def done(spans: list[ReadableSpan]) -> bool:
            spreads = [spread_ms(token_times(traced)) for traced in reads]
            return any(within(s, GENERATION_MS, early=SHIFT_MS) for s in spreads)

        spans = runs(live, call, done)
    with httpx.Client() as plain, plain.stream("POST", url, json=body) as response:
        untraced = b"".join(response.iter_raw())
    for traced, span in zip(reads, spans, strict=True):
        data = b"".join(raw for _, raw in traced)
        # The same events as without chainlat (ids and timestamps differ).
        assert data.count(b"data: ") == untraced.count(b"data: ") == TOKENS + 2
        tokens = token_times(traced)
        assert len(tokens) >= TOKENS // 2  # read as they come, not all at the end
        # The last token never comes before a whole generation after the request started.
        assert span.start_time is not None
        assert (tokens[-1] - span.start_time) / 1e6 >= FIRST_TOKEN_MS + GENERATION_MS - EARLY_MS
    spreads = [spread_ms(token_times(traced)) for traced in reads]
    # Spread over the generation in the best run (from a first token that may be read late).
    assert any(within(spread, GENERATION_MS, early=SHIFT_MS) for spread in spreads), spreads


# --- queueing ----------------------------------------------------------------------------------
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
    base_url = f"http://127.0.0.1:{free_port()}/v1"
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
    stall_ms = 5000.0
    options: dict[str, Any] = {
        "timeout": 0.2,
        "default_headers": {"x-sim-delay-ms": str(int(stall_ms))},
    }
    traced = openai_client(sim, live).with_options(**options)
    check_same(*call_both(traced, plain_client(sim.base_url + "/v1", **options)))
    span = error_span(live)
    assert (span.attributes or {})[attr.ERROR_TYPE] == "httpx2.ReadTimeout"
    # Never before the 200 ms timeout; and the span ended at the timeout, not when the
    # stalled server would have answered (load can delay the timeout, never by seconds).
    assert 200.0 - EARLY_MS <= latency(span)["wait"] < stall_ms, latency(span)


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
    found = latency(span)
    # Floors: the first and the fifth chunk never come before the server sent them.
    assert found["ttft"] >= FIRST_TOKEN_MS - EARLY_MS
    assert found["ttft"] + found["generation"] >= FIRST_TOKEN_MS + 4 * DECODE_MS - EARLY_MS
    # One run, not the best of several, so no window: only that the generation ended
    # at the cut (4 decode steps after the first chunk), not a whole answer's later.
    assert 0 < found["generation"] < GENERATION_MS


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
