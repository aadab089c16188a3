"""Model-call tracing under hostile input: a key with a newline, credential headers, huge events."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any, SupportsIndex

import httpx
import openai
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

import chainlat
from chainlat._core import attributes as attr
from chainlat._core.redact import REDACTED
from chainlat.httpx import TracingTransport, instrument_httpx
from chainlat.httpx._decoders import (
    MAX_EVENT_BYTES,
    STREAM_EVENTS_SKIPPED,
    NdjsonDecoder,
    SseDecoder,
)
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import Capture
from support.httpx_checks import model_spans

KEY = "sk-proj-Z1y2X3w4V5u6T7s8R9q0PoNmLk"
PROFILE = ModelProfile("sim-fast", ttft_base_ms=5, decode_ms_per_token=1, output_tokens=3)
MESSAGES: list[Any] = [{"role": "user", "content": "hello"}]
CHAT_URL = "https://api.openai.com/v1/chat/completions"


@pytest.fixture
def sim(live: Capture) -> Iterator[SimServer]:
    with SimServer([PROFILE], tracer_provider=live.provider) as server:
        yield server


def dump(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> str:
    parts: list[str] = []
    for span in spans:
        parts += [span.name, repr(dict(span.attributes or {})), span.status.description or ""]
        parts += [repr(dict(event.attributes or {})) for event in span.events]
    return "\n".join(parts)


# -- 1. an API key read with its trailing newline -----------------------------------------------


def test_a_key_with_a_newline_never_reaches_the_span_through_the_openai_sdk(
    sim: SimServer, live: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="chainlat")
    client = openai.OpenAI(base_url=sim.base_url + "/v1", api_key=KEY + "\n", max_retries=0)
    instrument_httpx(client._client, tracer_provider=live.provider)
    with pytest.raises(openai.APIConnectionError) as raised:
        with chainlat.inference("sim-fast", tracer_provider=live.provider):
            client.chat.completions.create(model="sim-fast", messages=MESSAGES)
    client.close()
    # The application's exception is untouched: its cause still names the header value.
    assert KEY in str(raised.value.__cause__)
    spans = live.spans()
    calls = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert len(calls) == 2  # the traced transport's call and the hand-written step
    for span in calls:
        [event] = span.events
        assert event.name == "exception"
        assert REDACTED in str((event.attributes or {})["exception.stacktrace"])
    text = dump(spans)
    assert "Illegal header value" in text
    assert KEY not in text and KEY[3:] not in text
    assert KEY not in caplog.text


# -- 3. credential headers named in record_headers ------------------------------------------------


def test_credential_headers_are_never_recorded_even_when_asked_for(cap: Capture) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            json={"id": "c", "model": "m", "choices": []},
            headers={
                "x-access-token": KEY,
                "x-amz-security-token": KEY,
                "x-goog-signature": KEY,
                "x-served-by": "edge-1",
            },
        )

    asked = ["x-access-token", "x-amz-security-token", "X-Goog-Signature", "x-served-by"]
    transport = TracingTransport(
        httpx.MockTransport(handler), record_headers=asked, tracer_provider=cap.provider
    )
    with httpx.Client(transport=transport) as client:
        client.post(
            CHAT_URL,
            json={"model": "m", "messages": MESSAGES},
            headers={"x-access-token": KEY, "x-amz-security-token": KEY, "x-served-by": "me"},
        )
    [span] = model_spans(cap.spans())
    attributes = dict(span.attributes or {})
    assert attributes["http.response.header.x-served-by"] == ("edge-1",)
    assert attributes["http.request.header.x-served-by"] == ("me",)
    assert not [k for k in attributes if "token" in k or "signature" in k]
    assert KEY not in dump([span])


def test_instrument_httpx_drops_credential_names_from_its_allow_list() -> None:
    client = instrument_httpx(httpx.Client(), record_headers=["x-access-token", "x-trace"])
    options = client._transport._options  # type: ignore[attr-defined]
    assert "x-access-token" not in options.request_headers | options.response_headers
    assert "x-trace" in options.request_headers
    client.close()


# -- 18. one huge stream event --------------------------------------------------------------------


class _CountingBuffer(bytearray):
    """A decoder's buffer that counts the bytes each operation on it touches.

    Searching, slicing, copying and deleting are charged what a plain implementation
    walks or moves (deleting a head: the bytes behind it), so the total is a measure of
    work that load on the machine cannot move, unlike a CPU-time ratio.
    """

    def __init__(self) -> None:
        super().__init__()
        self.touched = [0]  # shared with the buffers ``+`` makes, so a copy is counted too

    def _charge(self, n: int) -> None:
        self.touched[0] += n

    def find(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self._charge(len(self) - (start or 0))
        return super().find(sub, start, end)

    def rfind(self, sub: Any, start: Any = None, end: Any = None) -> int:
        self._charge(len(self) - (start or 0))
        return super().rfind(sub, start, end)

    def split(self, sep: Any = None, maxsplit: SupportsIndex = -1) -> list[bytearray]:
        self._charge(len(self))
        return super().split(sep, maxsplit)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        self._charge(len(self))
        return super().decode(encoding, errors)

    def __bytes__(self) -> bytes:
        self._charge(len(self))
        return bytes(memoryview(self))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            self._charge(len(range(*key.indices(len(self)))))
        return super().__getitem__(key)

    def __iadd__(self, other: Any) -> _CountingBuffer:
        self._charge(len(other))
        super().__iadd__(other)
        return self

    def __add__(self, other: Any) -> _CountingBuffer:
        joined = _CountingBuffer()
        joined.touched = self.touched
        joined += self
        joined += other
        return joined

    def __delitem__(self, key: Any) -> None:
        super().__delitem__(key)
        self._charge(len(self))


def _bytes_touched(size: int, chunk: int = 4096) -> int:
    """Bytes the decoder's buffer touches to decode one event of ``size`` bytes."""
    payload = b'data: "' + b"a" * size + b'"\n\n'
    decoder = SseDecoder()
    buffer = decoder._buffer = _CountingBuffer()
    events = []
    for i in range(0, len(payload), chunk):
        events += decoder.feed(payload[i : i + chunk])
    assert events == [(None, "a" * size)]
    assert isinstance(decoder._buffer, _CountingBuffer)  # still counting what it does
    return buffer.touched[0]


def test_decoding_one_large_event_is_linear_in_its_size() -> None:
    """Each byte of a large event is searched, copied and cut out a bounded number of
    times: 8x the bytes touches 8x as many (a search restarted at each chunk: 64x)."""
    small = _bytes_touched(1 << 18)
    large = _bytes_touched(8 << 18)
    assert small <= 4 * (1 << 18)
    assert large <= 4 * (8 << 18)
    assert large <= 8 * small + 4096


def test_the_decoder_never_holds_more_than_its_cap_and_counts_what_it_skips() -> None:
    decoder = SseDecoder(max_bytes=1000)
    events: list[Any] = []
    held = 0
    chunks = [b'data: {"n": 1}\n\n', b'data: "', *[b"x" * 300] * 20, b'"\n', b"data: 2\n\n"]
    chunks += [b'data: {"n":\r\n', b"data: 3}\r\n\r\n"]
    for chunk in chunks:
        events += decoder.feed(chunk)
        held = max(held, decoder.buffered_bytes)
    assert events == [(None, {"n": 1}), (None, {"n": 3})]
    assert decoder.skipped == 1 and held <= 1000
    many = SseDecoder(max_bytes=100)  # many data lines, each small, together too large
    assert many.feed(b"data: 1\n" * 60 + b"\n" + b"data: 7\n\n") == [(None, 7)]
    assert many.skipped == 1
    lines = NdjsonDecoder(max_bytes=10)
    assert lines.feed(b'{"a":1}\n{"b":"xxxxxxxx') == [(None, {"a": 1})]
    assert lines.feed(b'xxxxxxxx"}\n{"c":3}\n') == [(None, {"c": 3})]
    assert lines.skipped == 1 and lines.buffered_bytes == 0


def test_a_stream_with_an_event_beyond_the_cap_is_traced_and_passed_on_whole(
    cap: Capture,
) -> None:
    def chat(content: str) -> bytes:
        delta = {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"content": content}}]}
        return b"data: " + json.dumps(delta).encode() + b"\n\n"

    huge = b'data: "' + b"z" * (MAX_EVENT_BYTES + (1 << 20)) + b'"\n\n'
    body = [chat("a"), *[huge[i : i + (1 << 20)] for i in range(0, len(huge), 1 << 20)]]
    body += [chat("b"), b"data: [DONE]\n\n"]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=iter(body)
        )

    transport = TracingTransport(httpx.MockTransport(handler), tracer_provider=cap.provider)
    received = 0
    with (
        httpx.Client(transport=transport) as client,
        client.stream(
            "POST", CHAT_URL, json={"model": "m", "messages": MESSAGES, "stream": True}
        ) as response,
    ):
        for chunk in response.iter_raw():
            received += len(chunk)
    assert received == sum(len(c) for c in body)
    [span] = model_spans(cap.spans())
    attributes = dict(span.attributes or {})
    assert attributes[attr.STREAM_CHUNKS] == 2
    assert attributes[STREAM_EVENTS_SKIPPED] == 1
    assert span.status.status_code is StatusCode.UNSET
