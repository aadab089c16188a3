"""Provider wire formats for the simulator: request fields in, bodies, SSE events and errors out.

Pure functions over JSON-like values; timing lives in ``_engine``. Each `Api`
covers one endpoint: OpenAI chat completions, legacy completions and embeddings, and
Anthropic messages. Shapes follow what the official SDKs parse. Tool calls (the rules
are in the `chainlat.sim` docstring) are planned here too: `plan_tool_calls` picks the
tools and makes their arguments from each tool's JSON schema.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import struct
import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeGuard

Provider = Literal["openai", "anthropic"]
ToolMode = Literal["none", "auto", "required"]

SYSTEM_FINGERPRINT = "fp_chainlat_sim"
DEFAULT_EMBEDDING_DIMENSIONS = 16

# Three-letter words, so that every generated token after the first is exactly four
# characters (" the") and the output text counts back to the same number of tokens
# under `count_tokens`, which keeps chained steps predictable.
_WORDS = (
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her",
    "was", "one", "our", "out", "day", "get", "has", "him", "his", "how", "man", "new",
    "now", "old", "see", "two", "way", "who", "boy", "did", "its", "let", "put", "say",
    "she", "too", "use", "map", "key", "run", "set", "sum", "top", "low", "fit", "end",
)  # fmt: skip


class ApiError(Exception):
    """A request the endpoint rejects, answered in the provider's error format."""

    def __init__(self, status: int, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code


def count_tokens(text: str) -> int:
    """The simulator's token rule: ``ceil(len(text) / 4)``, so 0 for empty text."""
    return -(-len(text) // 4)


def generate_tokens(seed: int, model: str, prompt: str, count: int) -> list[str]:
    """``count`` tokens of filler text, the same for the same seed, model and prompt."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    # A str seed goes through SHA-512 in `random.Random`, so this is stable across runs
    # and processes, unlike `hash()`.
    rng = random.Random(f"{seed}:{model}:{digest}")
    words = [rng.choice(_WORDS) for _ in range(count)]
    return [w.capitalize() if i == 0 else f" {w}" for i, w in enumerate(words)]


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def sse_data(value: object) -> bytes:
    """One OpenAI-style SSE event (data line only)."""
    payload = value if isinstance(value, bytes) else _dumps(value)
    return b"data: " + payload + b"\n\n"


def sse_event(name: str, value: object) -> bytes:
    """One named SSE event, as Anthropic sends them."""
    return b"event: " + name.encode() + b"\ndata: " + _dumps(value) + b"\n\n"


def openai_error(status: int, message: str, code: str | None = None) -> bytes:
    """An error body in the OpenAI format."""
    kind = {429: "requests", 500: "server_error", 503: "server_error"}.get(
        status, "invalid_request_error"
    )
    return _dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


def anthropic_error(status: int, message: str) -> bytes:
    """An error body in the Anthropic format."""
    kind = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        503: "overloaded_error",
    }.get(status, "invalid_request_error")
    return _dumps({"type": "error", "error": {"type": kind, "message": message}})


MAX_SCHEMA_DEPTH = 6
"""Deeper (or recursive) schemas get an empty object, array or a word."""

_FORMATS = {
    "date": "2025-01-01",
    "date-time": "2025-01-01T12:00:00Z",
    "time": "12:00:00",
    "duration": "PT1H",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
}


@dataclass(frozen=True)
class Tool:
    """A function tool the request offers: its name and its JSON schema."""

    name: str
    schema: object


@dataclass(frozen=True)
class ToolCall:
    """One tool call of an answer; ``arguments`` is compact JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Piece:
    """One output token of a tool-call answer: a slice of call ``call``'s arguments."""

    call: int
    text: str


@dataclass
class Job:
    """One generation request as the engine schedules it."""

    api: Api
    id: str
    model: str
    prompt: str
    input_tokens: int
    max_tokens: int | None
    stream: bool = False
    include_usage: bool = False
    inputs: list[str | list[int]] = field(default_factory=list)
    dimensions: int = DEFAULT_EMBEDDING_DIMENSIONS
    encoding_format: str = "float"
    created: int = 0
    output_tokens: int = 0
    truncated: bool = False
    """True when ``max_tokens`` cut the answer short."""
    tools: list[Tool] = field(default_factory=list)
    tool_mode: ToolMode = "none"
    forced_tool: str | None = None
    """The tool a named ``tool_choice`` forces."""
    tool_results: int = 0
    """Tool results since the last user message (the current turn)."""
    parallel_tool_calls: bool = True
    tool_calls: list[ToolCall] = field(default_factory=list)
    """The answer's tool calls (empty for a text answer); set by `plan_tool_calls`."""
    pieces: list[Piece] = field(default_factory=list)
    """The tool calls' arguments cut into tokens, before any ``max_tokens`` cap."""

    def emitted_calls(self) -> list[ToolCall]:
        """The tool calls as sent: under a ``max_tokens`` cap, the last may be partial."""
        texts: dict[int, str] = {}
        for piece in self.pieces[: self.output_tokens]:
            texts[piece.call] = texts.get(piece.call, "") + piece.text
        calls = self.tool_calls
        return [ToolCall(calls[i].id, calls[i].name, text) for i, text in sorted(texts.items())]


def _require_dict(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(400, "'model' is required and must be a string")
    return model


def _positive_int(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(400, f"'{name}' must be an integer >= 1")
        return value
    return None


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool) and value is not None:
        raise ApiError(400, f"'{name}' must be a boolean")
    return bool(value)


def _content_text(content: object) -> str:
    """Text of a message content: a string, or the text parts of a list of parts.

    Anthropic ``tool_use`` blocks count as their name and input JSON, ``tool_result``
    blocks as their content, so a tool loop's prompt grows as it would upstream.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "tool_use":
            texts.append(str(part.get("name", "")) + _compact(part.get("input", {})))
        elif kind == "tool_result":
            texts.append(_content_text(part.get("content")))
        elif isinstance(text := part.get("text"), str):
            texts.append(text)
    return "".join(texts)


def _message_text(message: dict[str, Any]) -> str:
    text = _content_text(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list):  # an OpenAI assistant message that called tools
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                text += str(function.get("name", "")) + str(function.get("arguments", ""))
    return text


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array")
    return [m for m in messages if isinstance(m, dict)]


def _messages_text(body: dict[str, Any]) -> str:
    return "".join(_message_text(m) for m in _messages(body))


def _compact(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _tools_text(body: dict[str, Any]) -> str:
    """The tool definitions as the model reads them: their compact JSON, counted as input."""
    tools = body.get("tools")
    return _compact(tools) if tools else ""


# -- tool calls ------------------------------------------------------------------------


def _is_tool_result_turn(message: dict[str, Any]) -> bool:
    """An Anthropic user message that carries tool results (not a new user turn)."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "tool_result" for p in content
    )


def _tool_results(messages: list[dict[str, Any]], provider: Provider) -> int:
    """Tool results after the last user message: the current turn's finished calls."""
    count = 0
    for message in reversed(messages):
        role = message.get("role")
        if provider == "openai":
            if role == "user":
                break
            count += role == "tool"
        elif role == "user":
            if not _is_tool_result_turn(message):
                break
            content = message["content"]
            count += sum(isinstance(p, dict) and p.get("type") == "tool_result" for p in content)
    return count


def plan_tool_calls(job: Job, seed: int, count: int | None) -> None:
    """Decide whether ``job`` answers with tool calls; if so, set its calls and pieces.

    ``count`` is the ``x-sim-tool-calls`` header (None: one call). Deterministic for the
    seed, model and prompt (which holds the tool definitions).
    """
    if not job.tools or job.tool_mode == "none":
        return
    if job.forced_tool is None and job.tool_mode == "auto" and job.tool_results:
        return  # the tool answered: the classic loop ends with text
    n = 1 if count is None or not job.parallel_tool_calls else count
    if job.forced_tool is not None:
        chosen = [next(t for t in job.tools if t.name == job.forced_tool)] * n
    else:
        # "required" moves on one tool per answered call, so a loop that forces tool use
        # and ends on an output tool (pydantic-ai's final_result) still finishes.
        start = job.tool_results if job.tool_mode == "required" else 0
        chosen = [job.tools[(start + i) % len(job.tools)] for i in range(n)]
    digest = hashlib.sha256(job.prompt.encode()).hexdigest()
    prefix = "toolu_" if job.api.provider == "anthropic" else "call_"
    for index, tool in enumerate(chosen):
        key = f"{seed}:{job.model}:{digest}:tool:{index}"
        rng = random.Random(key)
        value = schema_example(tool.schema, rng)
        # Arguments are always an object, even for an empty or non-object schema.
        arguments = _compact(value if isinstance(value, dict) else {})
        call_id = prefix + hashlib.sha256(key.encode()).hexdigest()[:24]
        job.tool_calls.append(ToolCall(call_id, tool.name, arguments))
        # Four characters a token, the simulator's token rule.
        job.pieces.extend(Piece(index, arguments[i : i + 4]) for i in range(0, len(arguments), 4))


def schema_example(schema: object, rng: random.Random) -> object:
    """A value valid for a JSON schema: required properties only, simple values by type."""
    return _example(schema, schema, rng, 0)


def _example(schema: object, root: object, rng: random.Random, depth: int) -> object:
    if not isinstance(schema, dict):
        return rng.choice(_WORDS)  # `true` or a malformed schema: anything goes
    ref = schema.get("$ref")
    if isinstance(ref, str) and depth < MAX_SCHEMA_DEPTH:
        return _example(_resolve(ref, root), root, rng, depth + 1)
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            usable = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
            return _example((usable or options)[0], root, rng, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        if depth >= MAX_SCHEMA_DEPTH:
            return {}
        properties = schema.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        required = schema.get("required")
        names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
        return {n: _example(properties.get(n, {}), root, rng, depth + 1) for n in names}
    if kind == "array":
        if depth >= MAX_SCHEMA_DEPTH:
            return []
        least = schema.get("minItems")
        size = min(max(least, 1), 8) if _is_int(least) else 1
        return [_example(schema.get("items", {}), root, rng, depth + 1) for _ in range(size)]
    if kind == "integer":
        return int(_clamp(schema, rng.randint(1, 9)))
    if kind == "number":
        return _clamp(schema, rng.randint(10, 99) / 10)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _string(schema, rng)


def _resolve(ref: str, root: object) -> object:
    """A local ``#/...`` reference (``#/$defs/Name``); an empty schema otherwise."""
    if not ref.startswith("#"):
        return {}
    node = root
    for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node


def _clamp(schema: dict[str, Any], value: float) -> float:
    low, high = schema.get("minimum"), schema.get("maximum")
    low_x, high_x = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(low_x, (int, float)) and not isinstance(low_x, bool):
        value = max(value, low_x + 1)
    if isinstance(low, (int, float)) and not isinstance(low, bool):
        value = max(value, low)
    if isinstance(high_x, (int, float)) and not isinstance(high_x, bool):
        value = min(value, high_x - 1)
    if isinstance(high, (int, float)) and not isinstance(high, bool):
        value = min(value, high)
    return value


def _string(schema: dict[str, Any], rng: random.Random) -> str:
    word = rng.choice(_WORDS)
    fmt = schema.get("format")
    if fmt in _FORMATS:
        return _FORMATS[str(fmt)]
    if fmt == "email":
        return f"{word}@example.com"
    if fmt in ("uri", "url", "iri"):
        return f"https://example.com/{word}"
    if fmt == "uuid":
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    least, most = schema.get("minLength"), schema.get("maxLength")
    if _is_int(least) and len(word) < least:
        word = (word * (least // len(word) + 1))[:least]
    if _is_int(most) and len(word) > most:
        word = word[:most]
    return word


def _openai_tools(body: dict[str, Any]) -> list[Tool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ApiError(400, "'tools' must be an array")
    result: list[Tool] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ApiError(400, f"'tools[{index}]' must be an object")
        if tool.get("type", "function") != "function":
            continue  # custom or hosted tools: the simulator only calls functions
        function = tool.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, f"'tools[{index}].function.name' is required")
        assert isinstance(function, dict)
        result.append(Tool(name, function.get("parameters", {"type": "object"})))
    return result


def _openai_tool_choice(body: dict[str, Any], tools: list[Tool]) -> tuple[ToolMode, str | None]:
    choice = body.get("tool_choice")
    if choice is None:
        return ("auto" if tools else "none"), None
    if choice in ("none", "auto", "required"):
        mode: ToolMode = choice
        return mode, None
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(choice, dict) or choice.get("type") != "function" or not name:
        raise ApiError(
            400,
            "'tool_choice' must be 'none', 'auto', 'required' or "
            '{"type": "function", "function": {"name": ...}}',
        )
    return "required", _known_tool(name, tools)


def _anthropic_tools(body: dict[str, Any]) -> list[Tool]:
    tools = body.get("tools")
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ApiError(400, "tools: must be an array")
    result: list[Tool] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ApiError(400, f"tools.{index}: must be an object")
        if tool.get("type", "custom") != "custom":
            continue  # server tools (web search, code execution) run upstream, not here
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, f"tools.{index}.name: Field required")
        result.append(Tool(name, tool.get("input_schema", {"type": "object"})))
    return result


def _anthropic_tool_choice(
    body: dict[str, Any], tools: list[Tool]
) -> tuple[ToolMode, str | None, bool]:
    """(mode, forced tool, parallel calls allowed) of an Anthropic ``tool_choice``."""
    choice = body.get("tool_choice")
    if choice is None:
        return ("auto" if tools else "none"), None, True
    kind = choice.get("type") if isinstance(choice, dict) else None
    if not isinstance(choice, dict) or kind not in ("auto", "any", "tool", "none"):
        raise ApiError(400, "tool_choice.type: expected 'auto', 'any', 'tool' or 'none'")
    parallel = choice.get("disable_parallel_tool_use") is not True
    if kind == "tool":
        name = choice.get("name")
        if not isinstance(name, str) or not name:
            raise ApiError(400, "tool_choice.name: Field required")
        return "required", _known_tool(name, tools), parallel
    mode: ToolMode = "required" if kind == "any" else "auto" if kind == "auto" else "none"
    return mode, None, parallel


def _known_tool(name: str, tools: list[Tool]) -> str:
    if all(t.name != name for t in tools):
        raise ApiError(400, f"tool_choice names {name!r}, which is not in 'tools'")
    return name


class Api:
    """One endpoint's wire format."""

    path: ClassVar[str]
    provider: ClassVar[Provider] = "openai"
    operation: ClassVar[str]
    """``gen_ai.operation.name`` for the server span."""
    id_prefix: ClassVar[str]

    def parse(self, raw: object, job_id: str) -> Job:
        """Validate a decoded JSON body into a `Job` (output tokens are the engine's call)."""
        raise NotImplementedError

    def error(self, status: int, message: str, code: str | None = None) -> bytes:
        return openai_error(status, message, code)

    def response(self, job: Job, tokens: list[str]) -> object:
        raise NotImplementedError

    def stream_open(self, job: Job) -> list[bytes]:
        """Events sent with the headers, before the first token."""
        return []

    def stream_token(self, job: Job, index: int, token: str) -> list[bytes]:
        """The events of output token ``index`` (more than one where a tool call starts)."""
        raise NotImplementedError

    def stream_close(self, job: Job) -> list[bytes]:
        raise NotImplementedError

    def _openai_usage(self, job: Job) -> dict[str, Any]:
        return {
            "prompt_tokens": job.input_tokens,
            "completion_tokens": job.output_tokens,
            "total_tokens": job.input_tokens + job.output_tokens,
            "prompt_tokens_details": {"cached_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0},
        }

    def _finish_reason(self, job: Job) -> str:
        if job.truncated:
            return "length"
        return "tool_calls" if job.tool_calls else "stop"


class ChatCompletions(Api):
    """``POST /v1/chat/completions``."""

    path = "/v1/chat/completions"
    operation = "chat"
    id_prefix = "chatcmpl-"

    def parse(self, raw: object, job_id: str) -> Job:
        body = _require_dict(raw)
        model = _model(body)
        messages = _messages(body)
        prompt = "".join(_message_text(m) for m in messages) + _tools_text(body)
        stream = _flag(body, "stream")
        options = body.get("stream_options") or {}
        include_usage = (
            stream and isinstance(options, dict) and options.get("include_usage") is True
        )
        tools = _openai_tools(body)
        mode, forced = _openai_tool_choice(body, tools)
        parallel = body.get("parallel_tool_calls", True)
        if not isinstance(parallel, bool) and parallel is not None:
            raise ApiError(400, "'parallel_tool_calls' must be a boolean")
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt=prompt,
            input_tokens=count_tokens(prompt),
            max_tokens=_positive_int(body, "max_completion_tokens", "max_tokens"),
            stream=stream,
            include_usage=include_usage,
            tools=tools,
            tool_mode=mode,
            forced_tool=forced,
            tool_results=_tool_results(messages, "openai"),
            parallel_tool_calls=parallel is not False,
        )

    def _chunk(self, job: Job, choices: list[dict[str, Any]]) -> dict[str, Any]:
        chunk: dict[str, Any] = {
            "id": job.id,
            "object": "chat.completion.chunk",
            "created": job.created,
            "model": job.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": choices,
        }
        if job.include_usage:
            chunk["usage"] = None
        return chunk

    def response(self, job: Job, tokens: list[str]) -> object:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(tokens),
            "refusal": None,
        }
        if job.tool_calls:
            message["content"] = None
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in job.emitted_calls()
            ]
        return {
            "id": job.id,
            "object": "chat.completion",
            "created": job.created,
            "model": job.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": self._finish_reason(job),
                }
            ],
            "usage": self._openai_usage(job),
        }

    def stream_token(self, job: Job, index: int, token: str) -> list[bytes]:
        if job.tool_calls:
            return self._tool_chunks(job, index)
        delta = {"role": "assistant", "content": token} if index == 0 else {"content": token}
        return [self._delta_chunk(job, delta)]

    def _delta_chunk(self, job: Job, delta: dict[str, Any]) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        return sse_data(self._chunk(job, [choice]))

    def _tool_chunks(self, job: Job, index: int) -> list[bytes]:
        # As the API streams them: a call's id and name with empty arguments, then the
        # arguments in fragments, each delta naming the call by its index.
        piece = job.pieces[index]
        events = []
        if index == 0 or job.pieces[index - 1].call != piece.call:
            call = job.tool_calls[piece.call]
            opening: dict[str, Any] = {
                "index": piece.call,
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            delta: dict[str, Any] = {"tool_calls": [opening]}
            if index == 0:
                delta = {"role": "assistant", "content": None, "refusal": None, **delta}
            events.append(self._delta_chunk(job, delta))
        fragment = {"index": piece.call, "function": {"arguments": piece.text}}
        events.append(self._delta_chunk(job, {"tool_calls": [fragment]}))
        return events

    def stream_close(self, job: Job) -> list[bytes]:
        last = {
            "index": 0,
            "delta": {},
            "logprobs": None,
            "finish_reason": self._finish_reason(job),
        }
        events = [sse_data(self._chunk(job, [last]))]
        if job.include_usage:
            usage_chunk = self._chunk(job, [])
            usage_chunk["usage"] = self._openai_usage(job)
            events.append(sse_data(usage_chunk))
        events.append(sse_data(b"[DONE]"))
        return events


class Completions(Api):
    """``POST /v1/completions`` (legacy text completions)."""

    path = "/v1/completions"
    operation = "text_completion"
    id_prefix = "cmpl-"

    def parse(self, raw: object, job_id: str) -> Job:
        body = _require_dict(raw)
        model = _model(body)
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            prompt = "".join(prompt)
        if not isinstance(prompt, str):
            raise ApiError(400, "'prompt' must be a string or an array of strings")
        stream = _flag(body, "stream")
        options = body.get("stream_options") or {}
        include_usage = (
            stream and isinstance(options, dict) and options.get("include_usage") is True
        )
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt=prompt,
            input_tokens=count_tokens(prompt),
            max_tokens=_positive_int(body, "max_tokens"),
            stream=stream,
            include_usage=include_usage,
        )

    def _body(self, job: Job, text: str, finish: str | None) -> dict[str, Any]:
        return {
            "id": job.id,
            "object": "text_completion",
            "created": job.created,
            "model": job.model,
            "system_fingerprint": SYSTEM_FINGERPRINT,
            "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish}],
        }

    def response(self, job: Job, tokens: list[str]) -> object:
        body = self._body(job, "".join(tokens), self._finish_reason(job))
        body["usage"] = self._openai_usage(job)
        return body

    def stream_token(self, job: Job, index: int, token: str) -> list[bytes]:
        return [sse_data(self._body(job, token, None))]

    def stream_close(self, job: Job) -> list[bytes]:
        events = [sse_data(self._body(job, "", self._finish_reason(job)))]
        if job.include_usage:
            usage_chunk = self._body(job, "", None)
            usage_chunk["choices"] = []
            usage_chunk["usage"] = self._openai_usage(job)
            events.append(sse_data(usage_chunk))
        events.append(sse_data(b"[DONE]"))
        return events


class Embeddings(Api):
    """``POST /v1/embeddings``: prefill only, never streamed."""

    path = "/v1/embeddings"
    operation = "embeddings"
    id_prefix = "emb-"

    def __init__(self, seed: int) -> None:
        self._seed = seed

    def parse(self, raw: object, job_id: str) -> Job:
        body = _require_dict(raw)
        model = _model(body)
        value = body.get("input")
        inputs: list[str | list[int]]
        if isinstance(value, str):
            inputs = [value]
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            inputs = list(value)
        elif isinstance(value, list) and value and all(_is_int(v) for v in value):
            inputs = [list(value)]
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(v, list) and all(_is_int(i) for i in v) for v in value)
        ):
            inputs = [list(v) for v in value]
        else:
            raise ApiError(400, "'input' must be a string, strings, or token arrays")
        dimensions = _positive_int(body, "dimensions") or DEFAULT_EMBEDDING_DIMENSIONS
        encoding_format = body.get("encoding_format") or "float"
        if encoding_format not in ("float", "base64"):
            raise ApiError(400, "'encoding_format' must be 'float' or 'base64'")
        tokens = sum(len(i) if isinstance(i, list) else count_tokens(i) for i in inputs)
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt="",
            input_tokens=tokens,
            max_tokens=None,
            inputs=inputs,
            dimensions=dimensions,
            encoding_format=encoding_format,
        )

    def _vector(self, model: str, value: str | list[int], dimensions: int) -> list[float]:
        digest = hashlib.sha256(repr(value).encode()).hexdigest()
        rng = random.Random(f"{self._seed}:{model}:{digest}")
        vector = [rng.gauss(0.0, 1.0) for _ in range(dimensions)]
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def response(self, job: Job, tokens: list[str]) -> object:
        data = []
        for index, value in enumerate(job.inputs):
            vector = self._vector(job.model, value, job.dimensions)
            embedding: list[float] | str = vector
            if job.encoding_format == "base64":
                packed = struct.pack(f"<{len(vector)}f", *vector)
                embedding = base64.b64encode(packed).decode()
            data.append({"object": "embedding", "index": index, "embedding": embedding})
        usage = {"prompt_tokens": job.input_tokens, "total_tokens": job.input_tokens}
        return {"object": "list", "data": data, "model": job.model, "usage": usage}


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class Messages(Api):
    """``POST /v1/messages`` (Anthropic Messages API)."""

    path = "/v1/messages"
    provider = "anthropic"
    operation = "chat"
    id_prefix = "msg_"

    def parse(self, raw: object, job_id: str) -> Job:
        body = _require_dict(raw)
        model = _model(body)
        messages = _messages(body)
        prompt = (
            _content_text(body.get("system"))
            + "".join(_message_text(m) for m in messages)
            + _tools_text(body)
        )
        tools = _anthropic_tools(body)
        mode, forced, parallel = _anthropic_tool_choice(body, tools)
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt=prompt,
            input_tokens=count_tokens(prompt),
            max_tokens=_positive_int(body, "max_tokens"),
            stream=_flag(body, "stream"),
            tools=tools,
            tool_mode=mode,
            forced_tool=forced,
            tool_results=_tool_results(messages, "anthropic"),
            parallel_tool_calls=parallel,
        )

    def error(self, status: int, message: str, code: str | None = None) -> bytes:
        return anthropic_error(status, message)

    def _stop_reason(self, job: Job) -> str:
        if job.truncated:
            return "max_tokens"
        return "tool_use" if job.tool_calls else "end_turn"

    def _message(self, job: Job, content: list[dict[str, Any]], *, final: bool) -> dict[str, Any]:
        return {
            "id": job.id,
            "type": "message",
            "role": "assistant",
            "model": job.model,
            "content": content,
            "stop_reason": self._stop_reason(job) if final else None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": job.input_tokens,
                # Like the real API, message_start reports one output token so far.
                "output_tokens": job.output_tokens if final else 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def response(self, job: Job, tokens: list[str]) -> object:
        if not job.tool_calls:
            return self._message(job, [{"type": "text", "text": "".join(tokens)}], final=True)
        blocks = [
            {**self._tool_block(call), "input": _parse_object(call.arguments)}
            for call in job.emitted_calls()
        ]
        return self._message(job, blocks, final=True)

    @staticmethod
    def _tool_block(call: ToolCall) -> dict[str, Any]:
        return {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}

    def _block_start(self, job: Job, index: int) -> bytes:
        block = self._tool_block(job.tool_calls[index]) if job.tool_calls else None
        return sse_event(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": index,
                "content_block": block or {"type": "text", "text": ""},
            },
        )

    @staticmethod
    def _block_stop(index: int) -> bytes:
        return sse_event("content_block_stop", {"type": "content_block_stop", "index": index})

    def stream_open(self, job: Job) -> list[bytes]:
        return [
            sse_event(
                "message_start",
                {"type": "message_start", "message": self._message(job, [], final=False)},
            ),
            self._block_start(job, 0),
            sse_event("ping", {"type": "ping"}),
        ]

    def stream_token(self, job: Job, index: int, token: str) -> list[bytes]:
        if not job.tool_calls:
            delta = {"type": "text_delta", "text": token}
            return [self._block_delta(0, delta)]
        # One content block per tool call, its input streamed as partial JSON.
        piece = job.pieces[index]
        events = []
        if index > 0 and job.pieces[index - 1].call != piece.call:
            events += [self._block_stop(piece.call - 1), self._block_start(job, piece.call)]
        delta = {"type": "input_json_delta", "partial_json": piece.text}
        return [*events, self._block_delta(piece.call, delta)]

    @staticmethod
    def _block_delta(index: int, delta: dict[str, Any]) -> bytes:
        return sse_event(
            "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        )

    def stream_close(self, job: Job) -> list[bytes]:
        last = job.pieces[job.output_tokens - 1].call if job.tool_calls else 0
        return [
            self._block_stop(last),
            sse_event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self._stop_reason(job), "stop_sequence": None},
                    "usage": {"output_tokens": job.output_tokens},
                },
            ),
            sse_event("message_stop", {"type": "message_stop"}),
        ]


def _parse_object(text: str) -> object:
    """A tool call's input; ``{}`` for arguments that ``max_tokens`` cut short."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return {}
