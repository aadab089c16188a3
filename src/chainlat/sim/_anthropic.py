"""The simulator's Anthropic endpoint: messages, its events and its errors."""

from __future__ import annotations

import json
from typing import Any

from chainlat.sim._formats import (
    Api,
    ApiError,
    Job,
    Tool,
    ToolCall,
    ToolMode,
    content_text,
    count_tokens,
    dump_json,
    flag,
    invalid_type,
    message_list,
    message_text,
    model_name,
    positive_int,
    require_dict,
    sse_event,
    tools_text,
)
from chainlat.sim._tools import declared_tools, known_tool, tool_results_of


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
    return dump_json({"type": "error", "error": {"type": kind, "message": message}})


def _anthropic_tools(body: dict[str, Any]) -> list[Tool]:
    return declared_tools(
        body,
        "custom",  # server tools (web search, code execution) run upstream, not here
        inner=None,
        schema_key="input_schema",
        wording=(
            "tools: must be an array",
            "tools.{index}: must be an object",
            "tools.{index}.name: Field required",
        ),
    )


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
        return "required", known_tool(name, tools), parallel
    mode: ToolMode = "required" if kind == "any" else "auto" if kind == "auto" else "none"
    return mode, None, parallel


class Messages(Api):
    """``POST /v1/messages`` (Anthropic Messages API)."""

    path = "/v1/messages"
    provider = "anthropic"
    operation = "chat"
    id_prefix = "msg_"

    def parse(self, raw: object, job_id: str) -> Job:
        body = require_dict(raw)
        model = model_name(body)
        messages = message_list(body)
        system = body.get("system")
        if not isinstance(system, str | list) and system is not None:
            raise invalid_type("system", "a string or an array", system)
        prompt = (
            content_text(system) + "".join(message_text(m) for m in messages) + tools_text(body)
        )
        tools = _anthropic_tools(body)
        mode, forced, parallel = _anthropic_tool_choice(body, tools)
        return Job(
            api=self,
            id=self.id_prefix + job_id,
            model=model,
            prompt=prompt,
            input_tokens=count_tokens(prompt),
            max_tokens=positive_int(body, "max_tokens"),
            stream=flag(body, "stream"),
            tools=tools,
            tool_mode=mode,
            forced_tool=forced,
            tool_results=tool_results_of(messages, "anthropic"),
            parallel_tool_calls=parallel,
        )

    def error(
        self, status: int, message: str, code: str | None = None, param: str | None = None
    ) -> bytes:
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
