"""chainlat.sim fault injection: ``x-sim-status``, ``x-sim-cut-after`` and ``x-sim-delay-ms``
in the OpenAI and Anthropic formats, and a malformed fault header.

Timing assertions compare client-side measurements with the injected latencies, never
early by more than `EARLY_MS`, the fastest of a few runs never later than `LATE_MS`
(see tests/support/sim_checks.py)."""

from __future__ import annotations

import time

import anthropic
import httpx2
import openai
import pytest

from chainlat.sim import SimServer
from support.sim_checks import (
    EARLY_MS,
    MESSAGES,
    NETWORK_MS,
    Timings,
    anthropic_client,
    ms_since,
    server_timing,
)


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
    with anthropic_client(sim) as a, pytest.raises(anthropic.RateLimitError) as caught:
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
    with anthropic_client(sim) as a, pytest.raises(cut_errors):
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
    timings = Timings(headers=NETWORK_MS + 100.0)
    for _ in timings.runs():
        start = time.perf_counter()
        with client.chat.completions.with_streaming_response.create(
            model="sim-test",
            messages=MESSAGES,
            stream=True,
            extra_headers={"x-sim-delay-ms": "100"},
        ) as response:
            timings.add("headers", ms_since(start))
            timing = server_timing(response.headers["server-timing"])
            response.read()
    timings.check()
    assert timing["stall"] >= 100.0 - EARLY_MS
    assert int(response.headers["openai-processing-ms"]) >= 100


def test_malformed_fault_header_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="x-sim-status"):
        client.chat.completions.create(
            model="sim-test", messages=MESSAGES, extra_headers={"x-sim-status": "418"}
        )
