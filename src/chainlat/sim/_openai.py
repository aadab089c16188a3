"""The simulator's OpenAI endpoints: chat completions, legacy completions, embeddings."""

from __future__ import annotations

import base64
import hashlib
import math
import random
import struct
from typing import Any

from chainlat.sim._formats import (
    DEFAULT_EMBEDDING_DIMENSIONS,
    SYSTEM_FINGERPRINT,
    Api,
    ApiError,
    Job,
    Tool,
    ToolMode,
    count_tokens,
    flag,
    invalid_type,
    message_list,
    message_text,
    model_name,
    positive_int,
    require_dict,
    sse_data,
    tools_text,
)
from chainlat.sim._schema import is_int
from chainlat.sim._tools import declared_tools, known_tool, tool_results_of

MAX_EMBEDDING_DIMENSIONS = 3072
"""The most ``dimensions`` an embedding may ask for, as text-embedding-3-large gives."""
MAX_EMBEDDING_INPUTS = 2048
"""The most inputs one embeddings request may carry, OpenAI's limit."""


def _openai_tools(body: dict[str, Any]) -> list[Tool]:
    return declared_tools(
        body,
        "function",  # custom or hosted tools: the simulator only calls functions
        inner="function",
        schema_key="parameters",
        wording=(
            "'tools' must be an array",
            "'tools[{index}]' must be an object",
            "'tools[{index}].function.name' is required",
        ),
    )


def _openai_tool_choice(body: dict[str, Any], tools: list[Tool]) -> tuple[ToolMode, str | None]:
    choice = body.get("tool_choice")
    if choice is None:
        return ("auto" if tools else "none"), None
    if choice in ("none", "auto", "required"):
        mode: ToolMode = choice
        return mode, None
    function = choice.get("function") if isinstance(choice, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if (
        not isinstance(choice, dict)
        or choice.get("type") != "function"
        or not isinstance(name, str)
        or not name
    ):
        raise ApiError(
            400,
            "'tool_choice' must be 'none', 'auto', 'required' or "
            '{"type": "function", "function": {"name": ...}}',
            param="tool_choice",
        )
    return "required", known_tool(name, tools)


def _stream_usage(body: dict[str, Any]) -> tuple[bool, bool]:
    """(stream, include_usage): a stream ends with a usage chunk only when asked."""
    stream = flag(body, "stream")
    options = body.get("stream_options")
    if options is None:
        return stream, False
    if not isinstance(options, dict):
        raise invalid_type("stream_options", "an object", options)
    usage = options.get("include_usage")
    if not isinstance(usage, bool) and usage is not None:
        raise invalid_type("stream_options.include_usage", "a boolean", usage)
    return stream, stream and usage is True


def _stream_end(last: dict[str, Any], usage: dict[str, Any] | None) -> list[bytes]:
    """A stream's closing events: the finishing chunk, the usage chunk if any, [DONE]."""
    events = [sse_data(last)]
    if usage is not None:
        events.append(sse_data(usage))
    events.append(sse_data(b"[DONE]"))
    return events


class ChatCompletions(Api):
    """``POST /v1/chat/completions``."""

    path = "/v1/chat/completions"
    operation = "chat"
    id_prefix = "chatcmpl-"

    def parse(self, raw: object, job_id: str) -> Job:
        body = require_dict(raw)
        model = model_name(body)
        messages = message_list(body)
        prompt = "".join(message_text(m) for m in messages) + tools_text(body)
        stream, include_usage = _stream_usage(body)
        tools = _openai_tools(body)
        mode, forced = _openai_tool_choice(body, tools)
        parallel = body.get("parallel_tool_calls", True)
        if not isinstance(parallel, bool) and parallel is not None:
            raise invalid_type("parallel_tool_calls", "a boolean", parallel)
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt=prompt,
            input_tokens=count_tokens(prompt),
            max_tokens=positive_int(body, "max_completion_tokens", "max_tokens"),
            stream=stream,
            include_usage=include_usage,
            tools=tools,
            tool_mode=mode,
            forced_tool=forced,
            tool_results=tool_results_of(messages, "openai"),
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
        usage_chunk = None
        if job.include_usage:
            usage_chunk = self._chunk(job, [])
            usage_chunk["usage"] = self._openai_usage(job)
        return _stream_end(self._chunk(job, [last]), usage_chunk)


class Completions(Api):
    """``POST /v1/completions`` (legacy text completions)."""

    path = "/v1/completions"
    operation = "text_completion"
    id_prefix = "cmpl-"

    def parse(self, raw: object, job_id: str) -> Job:
        body = require_dict(raw)
        model = model_name(body)
        prompt = body.get("prompt", "")
        if isinstance(prompt, list) and all(isinstance(p, str) for p in prompt):
            prompt = "".join(prompt)
        if not isinstance(prompt, str):
            raise ApiError(400, "'prompt' must be a string or an array of strings", param="prompt")
        stream, include_usage = _stream_usage(body)
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt=prompt,
            input_tokens=count_tokens(prompt),
            max_tokens=positive_int(body, "max_tokens"),
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
        usage_chunk = None
        if job.include_usage:
            usage_chunk = self._body(job, "", None)
            usage_chunk["choices"] = []
            usage_chunk["usage"] = self._openai_usage(job)
        return _stream_end(self._body(job, "", self._finish_reason(job)), usage_chunk)


class Embeddings(Api):
    """``POST /v1/embeddings``: prefill only, never streamed."""

    path = "/v1/embeddings"
    operation = "embeddings"
    id_prefix = "emb-"

    def __init__(self, seed: int) -> None:
        self._seed = seed

    def parse(self, raw: object, job_id: str) -> Job:
        body = require_dict(raw)
        model = model_name(body)
        value = body.get("input")
        inputs: list[str | list[int]]
        if isinstance(value, str):
            inputs = [value]
        elif isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            inputs = list(value)
        elif isinstance(value, list) and value and all(is_int(v) for v in value):
            inputs = [list(value)]
        elif (
            isinstance(value, list)
            and value
            and all(isinstance(v, list) and all(is_int(i) for i in v) for v in value)
        ):
            inputs = [list(v) for v in value]
        else:
            message = "'input' must be a string, strings, or token arrays"
            raise ApiError(400, message, param="input")
        if len(inputs) > MAX_EMBEDDING_INPUTS:
            message = f"'input' holds {len(inputs)} inputs, at most {MAX_EMBEDDING_INPUTS}"
            raise ApiError(400, message, param="input")
        dimensions = positive_int(body, "dimensions") or DEFAULT_EMBEDDING_DIMENSIONS
        if dimensions > MAX_EMBEDDING_DIMENSIONS:
            message = f"'dimensions' must be at most {MAX_EMBEDDING_DIMENSIONS}"
            raise ApiError(400, message, param="dimensions")
        encoding_format = body.get("encoding_format") or "float"
        if encoding_format not in ("float", "base64"):
            message = "'encoding_format' must be 'float' or 'base64'"
            raise ApiError(400, message, param="encoding_format")
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
