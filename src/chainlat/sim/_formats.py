"""Provider wire formats for the simulator: request fields in, bodies, SSE events and errors out.

Pure functions over JSON-like values; timing lives in ``_sim_engine``. Each `Api`
covers one endpoint: OpenAI chat completions, legacy completions and embeddings, and
Anthropic messages. Shapes follow what the official SDKs parse.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import struct
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

Provider = Literal["openai", "anthropic"]

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
    """Text of a message content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def _messages_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty array")
    return "".join(_content_text(m.get("content")) for m in messages if isinstance(m, dict))


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

    def stream_token(self, job: Job, index: int, token: str) -> bytes:
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
        return "length" if job.truncated else "stop"


class ChatCompletions(Api):
    """``POST /v1/chat/completions``."""

    path = "/v1/chat/completions"
    operation = "chat"
    id_prefix = "chatcmpl-"

    def parse(self, raw: object, job_id: str) -> Job:
        body = _require_dict(raw)
        model = _model(body)
        prompt = _messages_text(body)
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
            max_tokens=_positive_int(body, "max_completion_tokens", "max_tokens"),
            stream=stream,
            include_usage=include_usage,
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
        message = {"role": "assistant", "content": "".join(tokens), "refusal": None}
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

    def stream_token(self, job: Job, index: int, token: str) -> bytes:
        delta = {"role": "assistant", "content": token} if index == 0 else {"content": token}
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
        return sse_data(self._chunk(job, [choice]))

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

    def stream_token(self, job: Job, index: int, token: str) -> bytes:
        return sse_data(self._body(job, token, None))

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


def _is_int(value: object) -> bool:
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
        prompt = _content_text(body.get("system")) + _messages_text(body)
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt=prompt,
            input_tokens=count_tokens(prompt),
            max_tokens=_positive_int(body, "max_tokens"),
            stream=_flag(body, "stream"),
        )

    def error(self, status: int, message: str, code: str | None = None) -> bytes:
        return anthropic_error(status, message)

    def _stop_reason(self, job: Job) -> str:
        return "max_tokens" if job.truncated else "end_turn"

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
        return self._message(job, [{"type": "text", "text": "".join(tokens)}], final=True)

    def stream_open(self, job: Job) -> list[bytes]:
        return [
            sse_event(
                "message_start",
                {"type": "message_start", "message": self._message(job, [], final=False)},
            ),
            sse_event(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            sse_event("ping", {"type": "ping"}),
        ]

    def stream_token(self, job: Job, index: int, token: str) -> bytes:
        return sse_event(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": token},
            },
        )

    def stream_close(self, job: Job) -> list[bytes]:
        return [
            sse_event("content_block_stop", {"type": "content_block_stop", "index": 0}),
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
