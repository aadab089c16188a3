"""chainlat.sim under fuzzed requests (hypothesis): any JSON value as the body of every
route, and every field a route reads given any JSON value or a plausible one, is answered
with a 200 or a 4xx, never a 5xx or a traceback in the log, and the server keeps answering
``/v1/models``. Transcriptions get multipart forms with wav headers of any numbers."""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chainlat.sim import SimServer

EXAMPLES = 100
"""Examples per route: bounded, so the module runs in seconds."""
FUZZ = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    deadline=None,
    # One server serves every example; it holds no state one example could leave behind.
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

JSON_VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
MODELS = st.sampled_from(["fast-chat", "fast-tts", "fast-stt", "nope", ""])
ROLES = st.sampled_from(["user", "assistant", "system", "tool", "developer"])
PARTS = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "tool_use", "tool_result", "image_url"])},
    optional={"text": JSON_VALUES, "content": JSON_VALUES, "input": JSON_VALUES},
)
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES | JSON_VALUES},
    optional={
        "content": st.text(max_size=20) | st.lists(PARTS, max_size=3) | JSON_VALUES,
        "tool_calls": JSON_VALUES,
    },
)
TOOL = st.fixed_dictionaries(
    {"type": st.sampled_from(["function", "custom"]) | JSON_VALUES},
    optional={
        "function": st.fixed_dictionaries(
            {"name": st.sampled_from(["f", "g"]) | JSON_VALUES},
            optional={"parameters": JSON_VALUES},
        ),
        "name": st.sampled_from(["f", "g"]) | JSON_VALUES,
        "input_schema": JSON_VALUES,
    },
)
SMALL_INTS = st.integers(min_value=-2, max_value=64)
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "model": MODELS,
    "messages": st.lists(MESSAGE, max_size=3),
    "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({}, optional={"include_usage": JSON_VALUES}),
    "max_tokens": SMALL_INTS,
    "max_completion_tokens": SMALL_INTS,
    "tools": st.lists(TOOL, max_size=2),
    "tool_choice": st.sampled_from(["none", "auto", "required", "any"])
    | st.fixed_dictionaries(
        {"type": st.sampled_from(["function", "tool", "auto", "any"])},
        optional={"name": JSON_VALUES, "function": JSON_VALUES},
    ),
    "parallel_tool_calls": st.booleans(),
    "prompt": st.text(max_size=20) | st.lists(st.text(max_size=5), max_size=3),
    "input": st.text(max_size=20)
    | st.lists(st.text(max_size=5) | st.lists(SMALL_INTS), max_size=3),
    "dimensions": SMALL_INTS,
    "encoding_format": st.sampled_from(["float", "base64", "x"]),
    "system": st.text(max_size=20) | st.lists(PARTS, max_size=2),
    "voice": st.text(max_size=8),
    "response_format": st.sampled_from(["wav", "pcm", "mp3", "opus"]),
    "stream_format": st.sampled_from(["sse", "audio"]),
}
"""Values of the fields the simulator reads that are close to what an SDK sends."""
CHAT = ("model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
        "tools", "tool_choice", "parallel_tool_calls")  # fmt: skip
ROUTES: dict[str, tuple[str, ...]] = {
    "/v1/chat/completions": CHAT,
    "/v1/completions": ("model", "prompt", "stream", "stream_options", "max_tokens"),
    "/v1/embeddings": ("model", "input", "dimensions", "encoding_format"),
    "/v1/responses": ("model", "input", "stream", "tools"),
    "/v1/messages": ("model", "messages", "system", "max_tokens", "stream", "tools", "tool_choice"),
    "/v1/audio/speech": ("model", "input", "voice", "response_format", "stream_format"),
}
"""The JSON routes and the fields each reads (``/v1/responses`` is not served: a 404)."""


def bodies(fields: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """Any JSON value, or an object of the route's fields, each plausible or any value."""
    optional = {name: PLAUSIBLE[name] | JSON_VALUES for name in fields}
    return JSON_VALUES | st.fixed_dictionaries({}, optional=optional)


def answered(http: httpx.Client, response: httpx.Response) -> None:
    """A 200 or a 4xx, and the server still lists its models."""
    assert response.status_code == 200 or 400 <= response.status_code < 500, response.text
    assert http.get("/v1/models").status_code == 200


@pytest.fixture
def http(fast_sim: SimServer, caplog: pytest.LogCaptureFixture) -> Iterator[httpx.Client]:
    """A client of ``fast_sim``; the server logs no error while the test runs."""
    caplog.set_level(logging.ERROR, logger="chainlat.sim")
    with httpx.Client(base_url=fast_sim.base_url, timeout=30.0) as client:
        yield client
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("path", [*ROUTES])
def test_any_json_body_is_answered_with_a_200_or_a_4xx(http: httpx.Client, path: str) -> None:
    @FUZZ
    @given(body=bodies(ROUTES[path]))
    def check(body: Any) -> None:
        content = json.dumps(body).encode()
        answered(
            http, http.post(path, content=content, headers={"content-type": "application/json"})
        )

    check()


U16 = st.integers(min_value=0, max_value=2**16 - 1)
U32 = st.integers(min_value=0, max_value=2**32 - 1)


@st.composite
def recordings(draw: st.DrawFn) -> bytes:
    """A wav file whose header holds any numbers, or bytes that are no wav at all."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=200))
    fmt = struct.pack(
        "<HHIIHH",
        draw(st.sampled_from([1, 3, 0x11, 0xFFFE]) | U16),
        draw(st.integers(min_value=0, max_value=3) | U16),
        draw(st.sampled_from([8000, 16000, 24000]) | U32),
        draw(st.sampled_from([16000, 32000]) | U32),
        draw(U16),
        draw(st.sampled_from([8, 16]) | U16),
    )
    data = bytes(draw(st.integers(min_value=0, max_value=4000)))
    size = draw(st.just(len(data)) | st.sampled_from([0, 0xFFFF_FFFF]) | U32)
    fmt_size = draw(st.just(16) | U32)
    head = b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVE"
    return (
        head
        + b"fmt "
        + struct.pack("<I", fmt_size)
        + fmt
        + b"data"
        + struct.pack("<I", size)
        + data
    )


@pytest.mark.parametrize("path", ["/v1/audio/transcriptions", "/v1/audio/translations"])
def test_any_upload_is_answered_with_a_200_or_a_4xx(http: httpx.Client, path: str) -> None:
    @FUZZ
    @given(
        audio=recordings(),
        model=MODELS,
        fields=st.dictionaries(
            st.sampled_from(["response_format", "stream", "language", "prompt"]),
            st.sampled_from(["json", "text", "verbose_json", "true", "false", "", "\x00"]),
        ),
    )
    def check(audio: bytes, model: str, fields: dict[str, str]) -> None:
        files = {"file": ("a.wav", audio, "audio/wav")}
        answered(http, http.post(path, data={"model": model, **fields}, files=files))

    check()
