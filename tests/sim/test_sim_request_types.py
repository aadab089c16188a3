"""chainlat.sim refuses a request whose fields have the wrong type, whose JSON nests too
deep or holds what JSON does not (``NaN``, a number past a float, an integer past
Python's digits) with a 400 and one line naming the field, on every route, as OpenAI's API
would; never a 500 with a traceback in the simulator's log."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from chainlat.sim import SimServer

MESSAGES = [{"role": "user", "content": "hi"}]
VALID: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": {"model": "fast-chat", "messages": MESSAGES},
    "/v1/completions": {"model": "fast-chat", "prompt": "hi"},
    "/v1/embeddings": {"model": "fast-chat", "input": "hi"},
    "/v1/messages": {"model": "fast-chat", "max_tokens": 5, "messages": MESSAGES},
    "/v1/audio/speech": {"model": "fast-tts", "voice": "alloy", "input": "hi"},
}
"""A request each JSON route answers with a 200; the cases below spoil one field."""
CHAT, COMPLETIONS, EMBEDDINGS, MESSAGES_PATH, SPEECH = VALID
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}


@pytest.fixture
def no_traceback(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Nothing the test makes the server do is logged as an error."""
    caplog.set_level(logging.ERROR, logger="chainlat.sim")
    yield
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, errors


def post(sim: SimServer, path: str, content: bytes) -> httpx.Response:
    headers = {"content-type": "application/json"}
    return httpx.post(sim.base_url + path, content=content, headers=headers, timeout=30.0)


def refusal(response: httpx.Response, path: str) -> tuple[str, object]:
    """(message, param) of a 400 in the route's provider's error shape, one line."""
    assert response.status_code == 400, response.text
    body = response.json()
    if path == MESSAGES_PATH:
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        message, param = body["error"]["message"], None
    else:
        error = body["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error"
        message, param = error["message"], error["param"]
    assert isinstance(message, str) and message and "\n" not in message
    return message, param


@pytest.mark.parametrize(
    ("path", "field", "value", "param"),
    [
        (CHAT, "model", ["fast-chat"], "model"),
        (CHAT, "messages", "hi", "messages"),
        (CHAT, "messages", ["hi"], "messages[0]"),
        (CHAT, "messages", [{"role": 1, "content": "hi"}], "messages[0].role"),
        (CHAT, "messages", [{"role": "user", "content": 5}], "messages[0].content"),
        (CHAT, "messages", [{"role": "user", "content": [1]}], "messages[0].content[0]"),
        (CHAT, "stream", "yes", "stream"),
        (CHAT, "stream_options", [], "stream_options"),
        (CHAT, "stream_options", {"include_usage": "yes"}, "stream_options.include_usage"),
        (CHAT, "max_tokens", 0, "max_tokens"),
        (CHAT, "max_tokens", "5", "max_tokens"),
        (CHAT, "max_completion_tokens", 1.5, "max_completion_tokens"),
        (CHAT, "parallel_tool_calls", "no", "parallel_tool_calls"),
        (CHAT, "tool_choice", 5, "tool_choice"),
        (CHAT, "tool_choice", {"type": "function", "function": {"name": ["f"]}}, "tool_choice"),
        (COMPLETIONS, "model", 5, "model"),
        (COMPLETIONS, "prompt", {"text": "hi"}, "prompt"),
        (COMPLETIONS, "stream", 1, "stream"),
        (COMPLETIONS, "max_tokens", -1, "max_tokens"),
        (EMBEDDINGS, "model", {}, "model"),
        (EMBEDDINGS, "input", 5, "input"),
        (EMBEDDINGS, "input", [1.5], "input"),
        (EMBEDDINGS, "input", ["hi"] * 2049, "input"),
        (EMBEDDINGS, "dimensions", "16", "dimensions"),
        (EMBEDDINGS, "dimensions", 100_000_000, "dimensions"),
        (EMBEDDINGS, "encoding_format", ["float"], "encoding_format"),
        (MESSAGES_PATH, "model", ["fast-chat"], None),
        (MESSAGES_PATH, "messages", [["hi"]], None),
        (MESSAGES_PATH, "system", 5, None),
        (MESSAGES_PATH, "stream", "true", None),
        (MESSAGES_PATH, "max_tokens", "5", None),
        (MESSAGES_PATH, "tool_choice", "auto", None),
        (SPEECH, "model", ["sim-tts"], "model"),
        (SPEECH, "input", 5, "input"),
        (SPEECH, "input", ["hi"], "input"),
        (SPEECH, "response_format", ["wav"], "response_format"),
        (SPEECH, "stream_format", 1, "stream_format"),
    ],
)
@pytest.mark.usefixtures("no_traceback")
def test_a_field_of_the_wrong_type_is_a_400_naming_it(
    fast_sim: SimServer, path: str, field: str, value: object, param: str | None
) -> None:
    response = post(fast_sim, path, json.dumps({**VALID[path], field: value}).encode())
    message, said_param = refusal(response, path)
    assert said_param == param
    assert field in message


@pytest.mark.parametrize("path", [*VALID])
@pytest.mark.usefixtures("no_traceback")
def test_every_json_route_answers_its_valid_request(fast_sim: SimServer, path: str) -> None:
    """The requests the refusals above spoil are fine as they stand."""
    assert post(fast_sim, path, json.dumps(VALID[path]).encode()).status_code == 200


@pytest.mark.parametrize("path", [*VALID])
@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"[" * 100_000, "nested more than 128 levels deep"),
        (b'{"model": "x", "extra": ' + b"[" * 129 + b"]" * 129 + b"}", "nested more than 128"),
        (b'{"model": "x", "temperature": NaN}', "NaN is not a JSON number"),
        (b'{"model": "x", "temperature": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"model": "x", "temperature": 1e400}', "the number 1e400 is too large"),
        (b'{"model": "x", "max_tokens": ' + b"9" * 5000 + b"}", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
    ],
    ids=["100000-brackets", "129-levels", "nan", "infinity", "1e400", "5000-digits", "not-utf8"],
)
@pytest.mark.usefixtures("no_traceback")
def test_json_that_nests_too_deep_or_holds_no_json_number_is_a_400(
    fast_sim: SimServer, path: str, body: bytes, says: str
) -> None:
    message, _ = refusal(post(fast_sim, path, body), path)
    assert says in message


@pytest.mark.usefixtures("no_traceback")
def test_128_levels_of_nesting_are_read(fast_sim: SimServer) -> None:
    """The limit counts the body itself as one level: 127 more fit in a field."""
    body = {**VALID[CHAT], "metadata": json.loads("[" * 127 + "]" * 127)}
    assert post(fast_sim, CHAT, json.dumps(body).encode()).status_code == 200


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": ["date"]},
        {"type": "string", "format": {"x": 1}},
        {"type": "string", "minLength": 10**9},
        {"type": "integer", "minimum": 1.7e308},
        {"type": "integer", "exclusiveMaximum": -(10**4000)},
        {"type": ["string", {"x": 1}]},
        {"anyOf": [[], {}]},
        {"$ref": "#/a/b/c"},
    ],
)
@pytest.mark.usefixtures("no_traceback")
def test_a_tool_schema_of_any_shape_gets_arguments(fast_sim: SimServer, schema: object) -> None:
    """A tool's schema is the request's own: odd values in it are read, not trusted."""
    parameters = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    tool = {"type": "function", "function": {"name": "f", "parameters": parameters}}
    body = {**VALID[CHAT], "tools": [tool]}
    response = post(fast_sim, CHAT, json.dumps(body).encode())
    assert response.status_code == 200, response.text
    arguments = response.json()["choices"][0]["message"]["tool_calls"][0]["function"]
    assert len(arguments["arguments"]) < 5000


@pytest.mark.usefixtures("no_traceback")
def test_a_transcription_form_field_over_64_kib_is_a_400(fast_sim: SimServer) -> None:
    response = httpx.post(
        fast_sim.base_url + "/v1/audio/transcriptions",
        data={"model": "fast-stt", "prompt": "x" * 70_000},
        files={"file": ("a.wav", b"\x00" * 320, "audio/wav")},
        timeout=30.0,
    )
    message, param = refusal(response, "/v1/audio/transcriptions")
    assert (message, param) == ("form field 'prompt' is 70000 bytes, at most 65536", "prompt")
