"""chainlat.httpx over real HTTP on 127.0.0.1, against chainlat.sim: a refused connection,
a timeout, an error status or a stream cut midway gives an error span and the same
exception as without chainlat."""

from __future__ import annotations

from typing import Any

import httpx2
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan

from chainlat._core import attributes as attr
from chainlat.httpx import TracingTransport
from chainlat.sim import SimServer
from chainlat.testing import Capture
from support import free_port
from support.httpx_checks import check_identity, latency, model_spans
from support.httpx_sim import (
    DECODE_MS,
    EARLY_MS,
    FIRST_TOKEN_MS,
    GENERATION_MS,
    MESSAGES,
    openai_client,
)


def one_call(cap: Capture) -> ReadableSpan:
    spans = model_spans(cap.spans())
    assert len(spans) == 1, [s.name for s in spans]
    check_identity(spans[0])
    return spans[0]


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
