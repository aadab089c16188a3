"""chainlat.httpx over real HTTP on 127.0.0.1, against chainlat.sim: the latency breakdown
of the real openai and anthropic SDKs' calls (sync, async, streamed, embeddings) matches
the delays the simulator injected, floors in every run and windows in the best run
(see tests/support/httpx_sim.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from chainlat._core import attributes as attr
from chainlat.httpx import AsyncTracingTransport, TracingTransport
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import Capture
from support import StartSim
from support.httpx_checks import check_identity, latency, model_spans
from support.httpx_sim import (
    DECODE_MS,
    EARLY_MS,
    FIRST_TOKEN_MS,
    GENERATION_MS,
    MESSAGES,
    NETWORK_MS,
    SERVER_MS,
    SHIFT_MS,
    TOKENS,
    TTFT_MS,
    WAIT_MS,
    Done,
    async_openai_client,
    more_runs,
    openai_client,
    runs,
    within,
)


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


def met(parts: Sequence[Part]) -> Done:
    """Measured enough once every part's window is met."""
    return lambda spans: all(part.met(spans) for part in parts)


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
