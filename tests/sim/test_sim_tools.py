"""chainlat.sim answers tool calls, through the real openai and anthropic SDKs.

Every server listens on 127.0.0.1 in a background thread. The latency test compares a
tool-call answer's wall-clock time with the profile's formula (jitter 0): at most
`EARLY_MS` early and at most `LATE_MS` late, generous on purpose for a loaded two-core
machine; the planned durations in ``x-sim-plan`` are checked exactly.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import jsonschema
import openai
import pydantic
import pytest

from chainlat.sim import ModelProfile, SimServer

EARLY_MS = 5.0
"""A tool-call answer may look early by this much (clock reads around a socket)."""
LATE_MS = 250.0
"""And late by this much: a loaded shared machine, not a missing phase, is the worry."""

PROFILE = ModelProfile(
    "sim-tools",
    ttft_base_ms=30.0,
    ttft_per_input_token_ms=0.5,
    decode_ms_per_token=4.0,
    output_tokens=12,
    slots=8,
)
WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
        "include_wind": {"type": "boolean"},
        "note": {"type": "string"},
    },
    "required": ["city", "unit", "days", "include_wind"],
    "additionalProperties": False,
}
SEARCH_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "filters": {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string"}},
                "limit": {"type": "number"},
            },
            "required": ["tags", "limit"],
        },
    },
    "required": ["query", "filters"],
}
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather forecast",
            "parameters": WEATHER_SCHEMA,
        },
    },
    {"type": "function", "function": {"name": "search", "parameters": SEARCH_SCHEMA}},
]
ANTHROPIC_TOOLS: list[Any] = [
    {"name": "get_weather", "description": "Weather forecast", "input_schema": WEATHER_SCHEMA},
    {"name": "search", "input_schema": SEARCH_SCHEMA},
]
SCHEMAS = {"get_weather": WEATHER_SCHEMA, "search": SEARCH_SCHEMA}
QUESTION = "What is the weather in Paris?"
MESSAGES: list[Any] = [{"role": "user", "content": QUESTION}]


@pytest.fixture
def sim() -> Iterator[SimServer]:
    with SimServer([PROFILE], seed=5) as server:
        yield server


@pytest.fixture
def client(sim: SimServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        yield c


@pytest.fixture
def claude(sim: SimServer) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant", max_retries=0) as c:
        yield c


def _tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _check_arguments(name: str, arguments: object) -> None:
    """Valid for the tool's schema, with exactly its required properties."""
    schema = SCHEMAS[name]
    jsonschema.validate(arguments, schema)
    assert isinstance(arguments, dict)
    assert sorted(arguments) == sorted(schema["required"])


def _openai_calls(reply: openai.types.chat.ChatCompletion) -> list[tuple[str, str, str]]:
    calls = reply.choices[0].message.tool_calls or []
    result = []
    for call in calls:
        assert call.type == "function"
        result.append((call.id, call.function.name, call.function.arguments))
    return result


# -- OpenAI chat completions ---------------------------------------------------------------


def test_openai_tool_call_parses_into_typed_tool_calls(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="sim-tools", messages=MESSAGES, tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    [(call_id, name, arguments)] = _openai_calls(reply)
    assert call_id.startswith("call_")
    assert name == "get_weather"
    _check_arguments(name, json.loads(arguments))
    assert reply.usage is not None
    assert reply.usage.completion_tokens == _tokens(arguments)
    # The tool definitions are input too, as their compact JSON.
    assert reply.usage.prompt_tokens == _tokens(QUESTION + _compact(TOOLS))


def test_openai_stream_sends_id_and_name_then_argument_fragments(
    client: openai.OpenAI,
) -> None:
    reply = client.chat.completions.create(model="sim-tools", messages=MESSAGES, tools=TOOLS)
    [(call_id, name, arguments)] = _openai_calls(reply)
    chunks = list(
        client.chat.completions.create(
            model="sim-tools",
            messages=MESSAGES,
            tools=TOOLS,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    opening = deltas[0].tool_calls
    assert opening is not None
    assert deltas[0].role == "assistant"
    assert opening[0].index == 0
    assert opening[0].id == call_id
    assert opening[0].function is not None
    assert opening[0].function.name == name
    assert opening[0].function.arguments == ""
    fragments = []
    for delta in deltas[1:]:
        assert delta.tool_calls is not None
        [part] = delta.tool_calls
        assert part.index == 0 and part.id is None and part.function is not None
        fragments.append(part.function.arguments or "")
    assert "".join(fragments) == arguments
    assert len(fragments) == _tokens(arguments) > 1  # one token per chunk
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == len(fragments)


def test_openai_stream_helper_accumulates_the_same_call(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="sim-tools", messages=MESSAGES, tools=TOOLS)
    with client.chat.completions.stream(
        model="sim-tools", messages=MESSAGES, tools=TOOLS
    ) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].finish_reason == "tool_calls"
    assert [
        (c.id, c.function.name, c.function.arguments)
        for c in final.choices[0].message.tool_calls or []
    ] == _openai_calls(reply)


def test_openai_loop_call_then_tool_result_then_text(client: openai.OpenAI) -> None:
    """The classic loop terminates: one call, its result, then a text answer."""
    messages: list[Any] = list(MESSAGES)
    for _ in range(5):
        reply = client.chat.completions.create(model="sim-tools", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        if not message.tool_calls:
            break
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"})
    assert reply.choices[0].finish_reason == "stop"
    assert message.content
    assert [m["role"] for m in messages] == ["user", "assistant", "tool"]
    # The call and its result are input of the second turn.
    call = messages[1]["tool_calls"][0]["function"]
    expected = QUESTION + call["name"] + call["arguments"] + "Sunny, 21 C" + _compact(TOOLS)
    assert reply.usage is not None
    assert reply.usage.prompt_tokens == _tokens(expected)


def test_openai_tool_choice_none_required_and_named(client: openai.OpenAI) -> None:
    def calls(messages: list[Any], tool_choice: Any) -> list[str]:
        reply = client.chat.completions.create(
            model="sim-tools", messages=messages, tools=TOOLS, tool_choice=tool_choice
        )
        return [name for _, name, _ in _openai_calls(reply)]

    search: Any = {"type": "function", "function": {"name": "search"}}
    answered = [
        *MESSAGES,
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
    ]
    assert calls(MESSAGES, "none") == []
    assert calls(MESSAGES, "auto") == ["get_weather"]
    assert calls(MESSAGES, "required") == ["get_weather"]
    assert calls(MESSAGES, search) == ["search"]
    assert calls(answered, "auto") == []  # answered: text
    assert calls(answered, search) == ["search"]  # a named tool is always called
    assert calls(answered, "required") == ["search"]  # moves on to the next tool
    # A new user message starts a new turn: the first tool again.
    assert calls([*answered, {"role": "user", "content": "And Rome?"}], "auto") == ["get_weather"]


def test_openai_unknown_named_tool_is_a_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError, match="nope"):
        client.chat.completions.create(
            model="sim-tools",
            messages=MESSAGES,
            tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "nope"}},
        )


def test_x_sim_tool_calls_asks_for_parallel_calls(client: openai.OpenAI) -> None:
    headers = {"x-sim-tool-calls": "3"}
    reply = client.chat.completions.create(
        model="sim-tools", messages=MESSAGES, tools=TOOLS, extra_headers=headers
    )
    calls = _openai_calls(reply)
    assert [name for _, name, _ in calls] == ["get_weather", "search", "get_weather"]
    assert len({call_id for call_id, _, _ in calls}) == 3
    for _, name, arguments in calls:
        _check_arguments(name, json.loads(arguments))
    assert reply.usage is not None
    assert reply.usage.completion_tokens == sum(_tokens(a) for _, _, a in calls)

    with client.chat.completions.stream(
        model="sim-tools", messages=MESSAGES, tools=TOOLS, extra_headers=headers
    ) as stream:
        final = stream.get_final_completion()
    streamed = final.choices[0].message.tool_calls or []
    assert [(c.id, c.function.name, c.function.arguments) for c in streamed] == calls

    single = client.chat.completions.create(
        model="sim-tools",
        messages=MESSAGES,
        tools=TOOLS,
        parallel_tool_calls=False,
        extra_headers=headers,
    )
    assert len(_openai_calls(single)) == 1
    with pytest.raises(openai.BadRequestError, match="x-sim-tool-calls"):
        client.chat.completions.create(
            model="sim-tools",
            messages=MESSAGES,
            tools=TOOLS,
            extra_headers={"x-sim-tool-calls": "0"},
        )


def test_max_tokens_cuts_the_arguments_short(client: openai.OpenAI) -> None:
    [(_, _, arguments)] = _openai_calls(
        client.chat.completions.create(model="sim-tools", messages=MESSAGES, tools=TOOLS)
    )
    reply = client.chat.completions.create(
        model="sim-tools", messages=MESSAGES, tools=TOOLS, max_completion_tokens=3
    )
    assert reply.choices[0].finish_reason == "length"
    [(_, _, cut)] = _openai_calls(reply)
    assert cut == arguments[:12]
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 3


class _Address(pydantic.BaseModel):
    street: str
    zip_code: str | None
    country: str = "FR"


class _Booking(pydantic.BaseModel):
    guest: str
    email: str = pydantic.Field(json_schema_extra={"format": "email"})
    nights: int = pydantic.Field(ge=2, le=5)
    check_in: Any = pydantic.Field(json_schema_extra={"format": "date"})
    address: _Address
    rooms: list[_Address]
    kind: str = pydantic.Field(json_schema_extra={"enum": ["single", "double"]})
    breakfast: bool
    budget: float


def test_arguments_validate_against_a_pydantic_models_schema(client: openai.OpenAI) -> None:
    """$ref/$defs, nullable anyOf, formats, bounds: what pydantic-ai's tools send."""
    schema = _Booking.model_json_schema()
    tools: Any = [
        {"type": "function", "function": {"name": "book", "parameters": schema}},
        {"type": "function", "function": {"name": "ping", "parameters": {}}},
    ]
    reply = client.chat.completions.create(
        model="sim-tools",
        messages=MESSAGES,
        tools=tools,
        extra_headers={"x-sim-tool-calls": "2"},
    )
    [(_, book, arguments), (_, ping, empty)] = _openai_calls(reply)
    assert (book, ping) == ("book", "ping")
    booking = _Booking.model_validate_json(arguments)
    assert 2 <= booking.nights <= 5
    assert booking.kind == "single"
    assert booking.check_in == "2025-01-01"
    assert "country" not in json.loads(arguments)  # not required: left out
    jsonschema.validate(json.loads(arguments), schema)
    assert empty == "{}"  # no schema still means an object


# -- Anthropic messages ----------------------------------------------------------------------


def test_anthropic_tool_use_block(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(
        model="sim-tools", max_tokens=200, messages=MESSAGES, tools=ANTHROPIC_TOOLS
    )
    assert message.stop_reason == "tool_use"
    block = message.content[0]
    assert block.type == "tool_use"
    assert block.id.startswith("toolu_")
    assert block.name == "get_weather"
    _check_arguments(block.name, block.input)
    assert message.usage.output_tokens == _tokens(_compact(block.input))
    assert message.usage.input_tokens == _tokens(QUESTION + _compact(ANTHROPIC_TOOLS))


def test_anthropic_stream_sends_input_json_deltas(claude: anthropic.Anthropic) -> None:
    message = claude.messages.create(
        model="sim-tools", max_tokens=200, messages=MESSAGES, tools=ANTHROPIC_TOOLS
    )
    with claude.messages.stream(
        model="sim-tools", max_tokens=200, messages=MESSAGES, tools=ANTHROPIC_TOOLS
    ) as stream:
        events = list(stream)
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert [b.model_dump() for b in final.content] == [b.model_dump() for b in message.content]
    starts = [e for e in events if e.type == "content_block_start"]
    assert [s.content_block.type for s in starts] == ["tool_use"]
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert {d.type for d in deltas} == {"input_json_delta"}
    assert len(deltas) == final.usage.output_tokens > 1
    assert [e.type for e in events if e.type.startswith("content_block_")][-1] == (
        "content_block_stop"
    )


def test_anthropic_parallel_calls_stream_one_block_each(claude: anthropic.Anthropic) -> None:
    headers = {"x-sim-tool-calls": "2"}
    with claude.messages.stream(
        model="sim-tools",
        max_tokens=200,
        messages=MESSAGES,
        tools=ANTHROPIC_TOOLS,
        extra_headers=headers,
    ) as stream:
        final = stream.get_final_message()
    blocks = [b for b in final.content if b.type == "tool_use"]
    assert [b.name for b in blocks] == ["get_weather", "search"]
    for block in blocks:
        _check_arguments(block.name, block.input)
    single = claude.messages.create(
        model="sim-tools",
        max_tokens=200,
        messages=MESSAGES,
        tools=ANTHROPIC_TOOLS,
        tool_choice={"type": "auto", "disable_parallel_tool_use": True},
        extra_headers=headers,
    )
    assert len(single.content) == 1


def test_anthropic_loop_call_then_tool_result_then_text(claude: anthropic.Anthropic) -> None:
    """The classic loop terminates: tool_use, a tool_result, then a text answer."""
    messages: list[Any] = list(MESSAGES)
    for _ in range(5):
        message = claude.messages.create(
            model="sim-tools", max_tokens=200, messages=messages, tools=ANTHROPIC_TOOLS
        )
        if message.stop_reason != "tool_use":
            break
        messages.append({"role": "assistant", "content": message.content})
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": "Sunny, 21 C"}
            for b in message.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results})
    assert message.stop_reason == "end_turn"
    assert message.content[0].type == "text"
    assert len(messages) == 3
    # The tool_use block and its tool_result are input of the second turn.
    [call] = messages[1]["content"]
    expected = QUESTION + call.name + _compact(call.input) + "Sunny, 21 C"
    assert message.usage.input_tokens == _tokens(expected + _compact(ANTHROPIC_TOOLS))


def test_anthropic_tool_choice_any_tool_and_none(claude: anthropic.Anthropic) -> None:
    def blocks(messages: list[Any], tool_choice: Any) -> list[str]:
        message = claude.messages.create(
            model="sim-tools",
            max_tokens=200,
            messages=messages,
            tools=ANTHROPIC_TOOLS,
            tool_choice=tool_choice,
        )
        return [b.name if b.type == "tool_use" else b.type for b in message.content]

    answered = [
        *MESSAGES,
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]
    assert blocks(MESSAGES, {"type": "none"}) == ["text"]
    assert blocks(MESSAGES, {"type": "any"}) == ["get_weather"]
    assert blocks(MESSAGES, {"type": "tool", "name": "search"}) == ["search"]
    assert blocks(answered, {"type": "auto"}) == ["text"]
    assert blocks(answered, {"type": "any"}) == ["search"]
    with pytest.raises(anthropic.BadRequestError, match="nope"):
        blocks(MESSAGES, {"type": "tool", "name": "nope"})


# -- determinism and latency -------------------------------------------------------------------


def _answer_bytes(server: SimServer, path: str, body: dict[str, Any]) -> list[bytes]:
    """The answer's bytes, without the per-request id and timestamp."""
    with httpx.Client(base_url=server.base_url) as http:
        reply = http.post(path, json=body)
    reply.raise_for_status()
    if not body.get("stream"):
        value = reply.json()
        value.pop("id")
        value.pop("created", None)
        return [_compact(value).encode()]
    events = []
    for line in reply.text.splitlines():
        if not line.startswith("data: {"):
            continue
        value = json.loads(line.removeprefix("data: "))
        for holder in (value, value.get("message", {})):
            holder.pop("id", None)
            holder.pop("created", None)
        events.append(_compact(value).encode())
    return events


@pytest.mark.parametrize("stream", [False, True])
def test_same_seed_same_tool_calls_other_seed_differs(stream: bool) -> None:
    chat = {"model": "sim-tools", "messages": MESSAGES, "tools": TOOLS, "stream": stream}
    messages = {
        "model": "sim-tools",
        "max_tokens": 200,
        "messages": MESSAGES,
        "tools": ANTHROPIC_TOOLS,
        "stream": stream,
    }

    def run(seed: int) -> list[list[bytes]]:
        with SimServer([PROFILE], seed=seed) as server:
            return [
                _answer_bytes(server, "/v1/chat/completions", chat),
                _answer_bytes(server, "/v1/messages", messages),
            ]

    first, again, other = run(1), run(1), run(2)
    assert first == again
    assert first[0] != other[0] and first[1] != other[1]
    assert b"call_" in b"".join(first[0]) and b"toolu_" in b"".join(first[1])


@pytest.mark.parametrize("stream", [False, True])
def test_tool_call_latency_follows_the_profile(client: openai.OpenAI, stream: bool) -> None:
    """Prefill from the input (tools included), decode from the arguments' tokens."""
    client.models.list()  # connection set-up and lazy imports stay out of the timing
    reply = client.chat.completions.create(model="sim-tools", messages=MESSAGES, tools=TOOLS)
    [(_, _, arguments)] = _openai_calls(reply)
    input_tokens = _tokens(QUESTION + _compact(TOOLS))
    output_tokens = _tokens(arguments)
    prefill_ms = PROFILE.ttft_base_ms + PROFILE.ttft_per_input_token_ms * input_tokens
    decode_ms = PROFILE.decode_ms_per_token * (output_tokens - 1)
    expected_ms = prefill_ms + decode_ms

    start = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(
        model="sim-tools", messages=MESSAGES, tools=TOOLS, stream=stream
    )
    if stream:
        list(raw.parse())
    else:
        raw.parse()
    measured_ms = (time.perf_counter() - start) * 1000

    plan = dict(entry.split(";dur=") for entry in raw.headers["x-sim-plan"].split(", "))
    assert float(plan["prefill"]) == pytest.approx(prefill_ms, abs=1e-3)
    assert float(plan["decode"]) == pytest.approx(decode_ms, abs=1e-3)
    assert expected_ms - EARLY_MS <= measured_ms <= expected_ms + LATE_MS
