"""Provider wire formats for the simulator: what every endpoint shares.

Pure functions over JSON-like values; timing lives in ``_engine``. Each `Api` covers
one endpoint: OpenAI's chat completions, legacy completions and embeddings in
``_openai``, Anthropic's messages in ``_anthropic``. Shapes follow what the official
SDKs parse. Tool calls (the rules are in the `chainlat.sim` docstring) are planned in
``_tools``, their arguments made from each tool's JSON schema in ``_schema``. Here: the
job the engine schedules, the endpoint interface, token and text rules, SSE framing,
OpenAI errors and the request readers both providers use.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Provider = Literal["openai", "anthropic"]
ToolMode = Literal["none", "auto", "required"]

SYSTEM_FINGERPRINT = "fp_chainlat_sim"
DEFAULT_EMBEDDING_DIMENSIONS = 16
MAX_JSON_DEPTH = 128
"""The deepest nesting of arrays and objects a JSON body may have: far past what SDKs
send (a chat request with nested tool schemas is a few dozen levels), well short of the
interpreter's recursion limit, which the decoder and the sim's own walks would hit."""


# Three-letter words, so that every generated token after the first is exactly four
# characters (" the") and the output text counts back to the same number of tokens
# under `count_tokens`, which keeps chained steps predictable.
WORDS = (
    "the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her",
    "was", "one", "our", "out", "day", "get", "has", "him", "his", "how", "man", "new",
    "now", "old", "see", "two", "way", "who", "boy", "did", "its", "let", "put", "say",
    "she", "too", "use", "map", "key", "run", "set", "sum", "top", "low", "fit", "end",
)  # fmt: skip


class ApiError(Exception):
    """A request the endpoint rejects, answered in the provider's error format."""

    def __init__(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        """The request field at fault, as OpenAI names it (``messages[0].role``)."""


def count_tokens(text: str) -> int:
    """The simulator's token rule: ``ceil(len(text) / 4)``, so 0 for empty text."""
    return -(-len(text) // 4)


def generate_tokens(seed: int, model: str, prompt: str, count: int) -> list[str]:
    """``count`` tokens of filler text, the same for the same seed, model and prompt."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    # A str seed goes through SHA-512 in `random.Random`, so this is stable across runs
    # and processes, unlike `hash()`.
    rng = random.Random(f"{seed}:{model}:{digest}")
    words = [rng.choice(WORDS) for _ in range(count)]
    return [w.capitalize() if i == 0 else f" {w}" for i, w in enumerate(words)]


def dump_json(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def sse_data(value: object) -> bytes:
    """One OpenAI-style SSE event (data line only)."""
    payload = value if isinstance(value, bytes) else dump_json(value)
    return b"data: " + payload + b"\n\n"


def sse_event(name: str, value: object) -> bytes:
    """One named SSE event, as Anthropic sends them."""
    return b"event: " + name.encode() + b"\ndata: " + dump_json(value) + b"\n\n"


def openai_error(
    status: int, message: str, code: str | None = None, param: str | None = None
) -> bytes:
    """An error body in the OpenAI format."""
    kind = {429: "requests", 500: "server_error", 503: "server_error"}.get(
        status, "invalid_request_error"
    )
    return dump_json({"error": {"message": message, "type": kind, "param": param, "code": code}})


def load_json(body: bytes) -> object:
    """A request body decoded as strict JSON, or a 400 saying in one line why not.

    Strict as OpenAI's API is: no ``NaN`` or ``Infinity``, no number too large for a
    float, nesting at most `MAX_JSON_DEPTH` deep.
    """
    try:
        value = json.loads(body, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise _too_deep() from None
    except (UnicodeDecodeError, ValueError) as exc:
        # ValueError besides JSONDecodeError: an integer past Python's digit limit.
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ApiError(400, f"request body is not valid JSON: {reason}") from None
    if _deeper_than(value, MAX_JSON_DEPTH):
        raise _too_deep()
    return value


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def _too_deep() -> ApiError:
    return ApiError(400, f"request body is nested more than {MAX_JSON_DEPTH} levels deep")


def _deeper_than(value: object, limit: int) -> bool:
    # A loop, not recursion: the walk must not fail the way it guards against.
    stack: list[tuple[dict[str, Any] | list[Any], int]] = []
    if isinstance(value, dict | list):
        stack.append((value, 1))
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


_JSON_TYPES: dict[type, str] = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


def invalid_type(param: str, expected: str, value: object) -> ApiError:
    """OpenAI's answer to a field of the wrong type, naming the field (``param``)."""
    got = _JSON_TYPES.get(type(value), "a value of another type")
    message = f"Invalid type for '{param}': expected {expected}, but got {got} instead."
    return ApiError(400, message, "invalid_type", param)


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


def require_dict(body: object) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    return body


def model_name(body: dict[str, Any]) -> str:
    model = body.get("model")
    if model is None or model == "":
        raise ApiError(400, "'model' is required and must be a string", param="model")
    if not isinstance(model, str):
        raise invalid_type("model", "a string", model)
    return model


def positive_int(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ApiError(400, f"'{name}' must be an integer >= 1", param=name)
        return value
    return None


def flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool) and value is not None:
        raise invalid_type(name, "a boolean", value)
    return bool(value)


def content_text(content: object) -> str:
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
            texts.append(str(part.get("name", "")) + compact_json(part.get("input", {})))
        elif kind == "tool_result":
            texts.append(content_text(part.get("content")))
        elif isinstance(text := part.get("text"), str):
            texts.append(text)
    return "".join(texts)


def message_text(message: dict[str, Any]) -> str:
    text = content_text(message.get("content"))
    calls = message.get("tool_calls")
    if isinstance(calls, list):  # an OpenAI assistant message that called tools
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                text += str(function.get("name", "")) + str(function.get("arguments", ""))
    return text


def message_list(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The request's messages, each an object with a string ``role`` and a ``content``
    that is text, an array of objects (parts, blocks) or null, as both APIs require."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array", param="messages")
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            raise invalid_type(where, "an object", message)
        if not isinstance(role := message.get("role"), str):
            raise invalid_type(f"{where}.role", "a string", role)
        content = message.get("content")
        if not isinstance(content, str | list) and content is not None:
            raise invalid_type(f"{where}.content", "a string or an array", content)
        for part_index, part in enumerate(content if isinstance(content, list) else ()):
            if not isinstance(part, dict):
                raise invalid_type(f"{where}.content[{part_index}]", "an object", part)
    return messages


def compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def tools_text(body: dict[str, Any]) -> str:
    """The tool definitions as the model reads them: their compact JSON, counted as input."""
    tools = body.get("tools")
    return compact_json(tools) if tools else ""


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

    def error(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ) -> bytes:
        return openai_error(status, message, code, param)

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
