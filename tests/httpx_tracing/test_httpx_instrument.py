"""instrument_httpx / uninstrument_httpx, and living with OpenTelemetry's own instrumentations.

Global instrumentation patches the client classes of httpx and httpx2; every test that
turns it on turns it off again in a fixture, and checks the classes are as they were.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from opentelemetry.instrumentation.httpx import HTTPX2ClientInstrumentor, HTTPXClientInstrumentor

import chainlat
from chainlat._core import attributes as attr
from chainlat.httpx import (
    AsyncTracingTransport,
    TracingTransport,
    instrument_httpx,
    uninstrument_httpx,
)
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import Capture
from support import SimOptions
from support.httpx_checks import check_identity, model_spans, server_spans

PROFILE = ModelProfile("sim-fast", ttft_base_ms=20, decode_ms_per_token=2, output_tokens=5)
MESSAGES: list[Any] = [{"role": "user", "content": "hello"}]
CLASSES = (httpx.Client, httpx.AsyncClient, httpx2.Client, httpx2.AsyncClient)


@pytest.fixture
def sim_options(live: Capture) -> SimOptions:
    return SimOptions(profiles=[PROFILE], tracer_provider=live.provider)


@pytest.fixture
def pristine() -> Iterator[dict[type[Any], Callable[..., None]]]:
    """The client classes' own ``__init__``; checked to be back after the test."""
    originals = {cls: cls.__dict__["__init__"] for cls in CLASSES}
    try:
        yield originals
    finally:
        uninstrument_httpx()
        for cls, init in originals.items():
            assert cls.__dict__["__init__"] is init, cls


def is_traced(client: Any) -> bool:
    return isinstance(client._transport, (TracingTransport, AsyncTracingTransport))


@pytest.mark.parametrize(
    ("module", "cls"),
    [(httpx, "Client"), (httpx, "AsyncClient"), (httpx2, "Client"), (httpx2, "AsyncClient")],
)
def test_one_client_is_instrumented_in_place_and_restored_exactly(
    module: ModuleType, cls: str
) -> None:
    proxy = module.HTTPTransport() if cls == "Client" else module.AsyncHTTPTransport()
    client = getattr(module, cls)(mounts={"http://internal": proxy})
    transport = client._transport
    mounts = dict(client._mounts)
    assert instrument_httpx(client, capture_content=True) is client
    assert is_traced(client)
    assert client._transport.transport is transport
    assert all(
        isinstance(t, (TracingTransport, AsyncTracingTransport)) for t in client._mounts.values()
    )
    instrument_httpx(client)  # again: still one layer
    assert client._transport.transport is transport
    uninstrument_httpx(client)
    assert client._transport is transport
    assert client._mounts == mounts
    assert all(a is b for a, b in zip(client._mounts.values(), mounts.values(), strict=True))


def test_only_httpx_clients_can_be_instrumented() -> None:
    with pytest.raises(TypeError, match="httpx or httpx2 Client"):
        instrument_httpx(object())  # type: ignore[call-overload]


def test_global_instrumentation_covers_the_sdks_default_clients(
    sim: SimServer, live: Capture, pristine: dict[type[Any], Callable[..., None]]
) -> None:
    before = httpx2.Client()
    instrument_httpx(tracer_provider=live.provider)
    with (
        openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0) as oai,
        anthropic.Anthropic(
            base_url=sim.base_url,
            api_key="sk-ant-test",
            max_retries=0,
            # The anthropic SDK traces its own API calls too: into the same provider here.
            open_telemetry={"tracer_provider": live.provider},
        ) as ant,
        chainlat.workflow("both", tracer_provider=live.provider) as run,
    ):
        assert is_traced(oai._client) and is_traced(ant._client)
        oai.chat.completions.create(model="sim-fast", messages=MESSAGES)
        ant.messages.create(model="sim-fast", max_tokens=10, messages=MESSAGES)
    assert not is_traced(before)  # created before: left alone
    before.close()
    spans = model_spans(live.spans())
    assert [(s.attributes or {})[attr.GEN_AI_PROVIDER_NAME] for s in spans] == [
        "openai",
        "anthropic",
    ]
    for span in spans:
        check_identity(span)
    # The SDK's call span is the parent of chainlat's HTTP-level one: one inference each.
    [sdk_span] = [s for s in live.spans() if s.name == "anthropic.messages.create"]
    assert spans[1].parent is not None and spans[1].parent.span_id == sdk_span.context.span_id
    assert run.rollup is not None and run.rollup.inference_count == 2


@pytest.mark.anyio
async def test_global_instrumentation_covers_async_sdk_clients(
    sim: SimServer, live: Capture, pristine: dict[type[Any], Callable[..., None]]
) -> None:
    instrument_httpx(tracer_provider=live.provider)
    async with (
        openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="k", max_retries=0) as oai,
        anthropic.AsyncAnthropic(
            base_url=sim.base_url, api_key="k", max_retries=0, open_telemetry=False
        ) as ant,
    ):
        stream = await oai.chat.completions.create(model="sim-fast", messages=MESSAGES, stream=True)
        async for _ in stream:
            pass
        await ant.messages.create(model="sim-fast", max_tokens=10, messages=MESSAGES)
    spans = model_spans(live.spans())
    assert len(spans) == 2
    assert (spans[0].attributes or {})[attr.STREAM_CHUNKS] == PROFILE.output_tokens


def test_uninstrument_restores_the_classes_and_every_client(
    sim: SimServer, live: Capture, pristine: dict[type[Any], Callable[..., None]]
) -> None:
    instrument_httpx(tracer_provider=live.provider)
    instrument_httpx(tracer_provider=live.provider)  # twice: still one patch
    assert httpx2.Client.__dict__["__init__"].__wrapped__ is pristine[httpx2.Client]
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0)
    plain = httpx.Client()
    assert is_traced(client._client) and is_traced(plain)
    uninstrument_httpx()
    for cls, init in pristine.items():
        assert cls.__dict__["__init__"] is init
    assert not is_traced(client._client) and not is_traced(plain)
    client.chat.completions.create(model="sim-fast", messages=MESSAGES)
    assert model_spans(live.spans()) == []
    client.close()
    plain.close()


def test_a_wrapper_added_on_top_of_ours_is_kept_and_ours_goes_inert(
    pristine: dict[type[Any], Callable[..., None]],
) -> None:
    instrument_httpx()
    ours = httpx.Client.__dict__["__init__"]

    @functools.wraps(ours)
    def theirs(self: Any, *args: Any, **kwargs: Any) -> None:
        ours(self, *args, **kwargs)

    httpx.Client.__init__ = theirs  # type: ignore[method-assign]
    try:
        uninstrument_httpx()
        assert httpx.Client.__dict__["__init__"] is theirs
        with httpx.Client() as client:
            assert not is_traced(client)
    finally:
        httpx.Client.__init__ = pristine[httpx.Client]  # type: ignore[method-assign]


# --- next to OpenTelemetry's instrumentations ---------------------------------------------------
def test_the_otel_httpx_instrumentation_nests_its_span_under_the_model_call(
    sim: SimServer, live: Capture
) -> None:
    """Both on the same legacy httpx client: one inference in the chain, one trace."""
    HTTPXClientInstrumentor().instrument(tracer_provider=live.provider)
    try:
        transport = TracingTransport(httpx.HTTPTransport(), tracer_provider=live.provider)
        with (
            httpx.Client(transport=transport) as http,
            chainlat.workflow("w", tracer_provider=live.provider) as run,
        ):
            body = {"model": "sim-fast", "messages": MESSAGES}
            http.post(sim.base_url + "/v1/chat/completions", json=body).raise_for_status()
    finally:
        HTTPXClientInstrumentor().uninstrument()
    [server] = server_spans(live, 1)
    [call] = model_spans(live.spans())
    [http_span] = [s for s in live.spans() if s.name == "POST" and s.kind.name == "CLIENT"]
    assert http_span.parent is not None and http_span.parent.span_id == call.context.span_id
    assert server.parent is not None and server.parent.span_id == http_span.context.span_id
    assert run.rollup is not None and run.rollup.inference_count == 1
    check_identity(call)


def test_the_otel_httpx2_instrumentation_with_chainlat_on_the_sdks_default_client(
    sim: SimServer, live: Capture, pristine: dict[type[Any], Callable[..., None]]
) -> None:
    HTTPX2ClientInstrumentor().instrument(tracer_provider=live.provider)
    instrument_httpx(tracer_provider=live.provider)
    try:
        with (
            openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0) as c,
            chainlat.workflow("w", tracer_provider=live.provider) as run,
        ):
            for _ in c.chat.completions.create(model="sim-fast", messages=MESSAGES, stream=True):
                pass
    finally:
        uninstrument_httpx()
        HTTPX2ClientInstrumentor().uninstrument()
    [server] = server_spans(live, 1)
    [call] = model_spans(live.spans())
    [http_span] = [s for s in live.spans() if s.name == "POST" and s.kind.name == "CLIENT"]
    assert http_span.parent is not None and http_span.parent.span_id == call.context.span_id
    assert server.parent is not None and server.parent.span_id == http_span.context.span_id
    assert (call.attributes or {})[attr.STREAM_CHUNKS] == PROFILE.output_tokens
    assert run.rollup is not None and run.rollup.inference_count == 1
    check_identity(call)


def openai_v2_instrumentor() -> Any:
    try:
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    except ImportError as exc:  # pragma: no cover - depends on the installed versions
        pytest.skip(
            "opentelemetry-instrumentation-openai-v2 cannot be imported here "
            f"({exc}); it needs opentelemetry-util-genai<1"
        )
    return OpenAIInstrumentor()  # type: ignore[no-untyped-call]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_official_openai_and_httpx2_instrumentations_with_chainlat_count_one_inference(
    sim: SimServer,
    live: Capture,
    pristine: dict[type[Any], Callable[..., None]],
    stream: bool,
) -> None:
    official = openai_v2_instrumentor()
    official.instrument(tracer_provider=live.provider)
    HTTPX2ClientInstrumentor().instrument(tracer_provider=live.provider)
    instrument_httpx(tracer_provider=live.provider)
    try:
        with (
            openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0) as c,
            chainlat.workflow("w", tracer_provider=live.provider) as run,
        ):
            if stream:
                for _ in c.chat.completions.create(
                    model="sim-fast", messages=MESSAGES, stream=True
                ):
                    pass
            else:
                c.chat.completions.create(model="sim-fast", messages=MESSAGES)
    finally:
        uninstrument_httpx()
        HTTPX2ClientInstrumentor().uninstrument()
        official.uninstrument()
    spans = live.spans()
    [ours] = model_spans(spans)
    [theirs] = [
        s
        for s in spans
        if s.instrumentation_scope is not None
        and s.instrumentation_scope.name.startswith("opentelemetry.instrumentation.openai")
    ]
    [http_span] = [s for s in spans if s.name == "POST" and s.kind.name == "CLIENT"]
    # SDK-level span > chainlat's HTTP-level span > the plain HTTP span > the server.
    assert ours.parent is not None and ours.parent.span_id == theirs.context.span_id
    assert http_span.parent is not None and http_span.parent.span_id == ours.context.span_id
    assert run.rollup is not None
    assert run.rollup.inference_count == 1
    assert run.rollup.step_count == 1
    check_identity(ours)
