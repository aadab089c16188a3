"""``instrument_httpx(openai.OpenAI())``: a model SDK's client is instrumented through the
httpx/httpx2 client it holds, sync and async, with the real SDKs against chainlat.sim."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

import chainlat
from chainlat._core import attributes as attr
from chainlat.httpx import AsyncTracingTransport, TracingTransport, uninstrument_httpx
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import Capture
from support import SimOptions
from support.httpx_checks import model_spans

PROFILE = ModelProfile("sim-fast", ttft_base_ms=5, decode_ms_per_token=1, output_tokens=4)
MESSAGES: list[Any] = [{"role": "user", "content": "hello"}]


@pytest.fixture
def sim_options() -> SimOptions:
    return SimOptions(profiles=[PROFILE])


def is_traced(client: Any) -> bool:
    return isinstance(client._transport, (TracingTransport, AsyncTracingTransport))


def test_an_openai_client_is_instrumented_through_its_inner_client(
    sim: SimServer, live: Capture
) -> None:
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
    inner = client._client
    assert isinstance(inner, httpx.Client | httpx2.Client)
    transport = inner._transport
    assert chainlat.instrument_httpx(client, tracer_provider=live.provider) is client
    assert is_traced(inner)
    with chainlat.workflow("answer", tracer_provider=live.provider) as run:
        client.chat.completions.create(model="sim-fast", messages=MESSAGES)
    [span] = model_spans(live.spans())
    assert span.name == "chat sim-fast"
    assert (span.attributes or {})[attr.GEN_AI_PROVIDER_NAME] == "openai"
    assert run.rollup is not None and run.rollup.inference_count == 1
    uninstrument_httpx(client)
    assert inner._transport is transport
    client.close()


def test_an_anthropic_client_is_instrumented_through_its_inner_client(
    sim: SimServer, live: Capture
) -> None:
    client = anthropic.Anthropic(
        base_url=sim.base_url, api_key="sk-ant-test", max_retries=0, open_telemetry=False
    )
    assert chainlat.instrument_httpx(client, tracer_provider=live.provider) is client
    assert is_traced(client._client)
    client.messages.create(model="sim-fast", max_tokens=10, messages=MESSAGES)
    [span] = model_spans(live.spans())
    assert (span.attributes or {})[attr.GEN_AI_PROVIDER_NAME] == "anthropic"
    assert (span.attributes or {})[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == PROFILE.output_tokens
    uninstrument_httpx(client)
    assert not is_traced(client._client)
    client.close()


@pytest.mark.anyio
async def test_async_sdk_clients_are_instrumented_through_their_inner_clients(
    sim: SimServer, live: Capture
) -> None:
    async with (
        openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0) as oai,
        anthropic.AsyncAnthropic(
            base_url=sim.base_url, api_key="k", max_retries=0, open_telemetry=False
        ) as ant,
    ):
        assert chainlat.instrument_httpx(oai, tracer_provider=live.provider) is oai
        assert chainlat.instrument_httpx(ant, tracer_provider=live.provider) is ant
        assert isinstance(oai._client._transport, AsyncTracingTransport)
        assert isinstance(ant._client._transport, AsyncTracingTransport)
        stream = await oai.chat.completions.create(model="sim-fast", messages=MESSAGES, stream=True)
        async for _ in stream:
            pass
        await ant.messages.create(model="sim-fast", max_tokens=10, messages=MESSAGES)
    spans = model_spans(live.spans())
    assert [(s.attributes or {})[attr.GEN_AI_PROVIDER_NAME] for s in spans] == [
        "openai",
        "anthropic",
    ]
    assert (spans[0].attributes or {})[attr.STREAM_CHUNKS] == PROFILE.output_tokens


def test_an_object_holding_no_httpx_client_is_still_a_type_error() -> None:
    class Holder:
        _client = object()

    with pytest.raises(TypeError, match=r"got httpx_tracing\.test_httpx_sdk_clients\..*Holder"):
        chainlat.instrument_httpx(Holder())
