"""Simulated tool calls: whether an answer calls tools, which, and with what arguments."""

from __future__ import annotations

import hashlib
import random
from typing import Any

from chainlat.sim._formats import (
    ApiError,
    Job,
    Piece,
    Provider,
    Tool,
    ToolCall,
    compact_json,
)
from chainlat.sim._schema import schema_example


def declared_tools(
    body: dict[str, Any],
    kind: str,
    *,
    inner: str | None,
    schema_key: str,
    wording: tuple[str, str, str],
) -> list[Tool]:
    """The tools of type ``kind`` a request declares, each with its JSON schema.

    ``inner`` is the key that holds a tool's definition (None: the tool itself);
    ``wording`` the provider's error messages: not an array, a tool not an object, a tool
    without a name (the last two take ``{index}``).
    """
    tools = body.get("tools")
    if tools is None:
        return []
    not_array, not_object, no_name = wording
    if not isinstance(tools, list):
        raise ApiError(400, not_array)
    result: list[Tool] = []
    for index, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ApiError(400, not_object.format(index=index))
        if tool.get("type", kind) != kind:
            continue  # hosted or server tools (web search, code execution) run upstream
        definition = tool if inner is None else tool.get(inner)
        name = definition.get("name") if isinstance(definition, dict) else None
        if not isinstance(name, str) or not name:
            raise ApiError(400, no_name.format(index=index))
        assert isinstance(definition, dict)
        result.append(Tool(name, definition.get(schema_key, {"type": "object"})))
    return result


def _is_tool_result_turn(message: dict[str, Any]) -> bool:
    """An Anthropic user message that carries tool results (not a new user turn)."""
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(p, dict) and p.get("type") == "tool_result" for p in content
    )


def tool_results_of(messages: list[dict[str, Any]], provider: Provider) -> int:
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
        arguments = compact_json(value if isinstance(value, dict) else {})
        call_id = prefix + hashlib.sha256(key.encode()).hexdigest()[:24]
        job.tool_calls.append(ToolCall(call_id, tool.name, arguments))
        # Four characters a token, the simulator's token rule.
        job.pieces.extend(Piece(index, arguments[i : i + 4]) for i in range(0, len(arguments), 4))


def known_tool(name: str, tools: list[Tool]) -> str:
    if all(t.name != name for t in tools):
        raise ApiError(400, f"tool_choice names {name!r}, which is not in 'tools'")
    return name
