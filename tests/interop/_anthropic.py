"""The agent of the Anthropic SDK stacks (``agents/openllmetry-anthropic.py``, traced by
OpenLLMetry; ``agents/logfire-anthropic.py``, traced by Logfire): one loop, two ways of
tracing it.

The SDK has no agent loop, retriever or tool: the loop is the reference's, written against
the Messages API (``tool_use`` blocks answered by a user message of ``tool_result``
blocks), and the data stage and tool are chainlat's. The sim serves ``POST /v1/messages``
with the same profiles as the OpenAI API.
"""

# mypy: ignore-errors
# (the framework is installed only in the stacks' environments, not in the dev one)

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any

import _agent

import chainlat

MAX_TOKENS = 1024
"""Required by the Messages API; far above the sim's 20 output tokens."""

TOOL = {
    "name": _agent.TOOL_NAME,
    "description": _agent.TOOL_DESCRIPTION,
    "input_schema": _agent.TOOL_PARAMETERS,
}


def _text(reply: Any) -> str:
    return "".join(block.text for block in reply.content if block.type == "text")


def client(case: _agent.Case) -> Any:
    """The SDK's client of the sim (the SDK appends ``/v1`` itself)."""
    import anthropic

    base_url = case.base_url.removesuffix("/v1")
    return anthropic.Anthropic(base_url=base_url, api_key="sk-interop", max_retries=0)


def agent(client: Any, request: Callable[[], AbstractContextManager[object]]) -> Callable[[], None]:
    """The agent's request, each run inside ``request()``."""

    def run() -> None:
        with request():
            docs = _agent.chainlat_retrieve()
            messages = [{"role": "user", "content": _agent.plan_prompt(docs)}]
            for _round in range(_agent.MAX_TOOL_ROUNDS):
                reply = client.messages.create(
                    model=_agent.PLAN_MODEL,
                    max_tokens=MAX_TOKENS,
                    system=_agent.SYSTEM,
                    messages=messages,
                    tools=[TOOL],
                )
                calls = [block for block in reply.content if block.type == "tool_use"]
                if not calls:
                    break
                messages.append({"role": "assistant", "content": reply.content})
                results = [
                    {
                        "type": "tool_result",
                        "tool_use_id": call.id,
                        "content": _agent.chainlat_tool(str(call.input.get("order_id", "A-1042"))),
                    }
                    for call in calls
                ]
                messages.append({"role": "user", "content": results})
            notes = _text(reply)

            def ask(prompt: str) -> str:
                reply = client.messages.create(
                    model=_agent.FAST_MODEL,
                    max_tokens=MAX_TOKENS,
                    messages=[{"role": "user", "content": prompt + notes}],
                )
                return _text(reply)

            with ThreadPoolExecutor(2) as pool:
                # bind_context: the OpenTelemetry context too, so the calls keep their parent.
                prompts = (_agent.SUMMARY_PROMPT, _agent.POLICY_PROMPT)
                summary, policy = pool.map(chainlat.bind_context(ask), prompts)
            stream = client.messages.create(
                model=_agent.ANSWER_MODEL,
                max_tokens=MAX_TOKENS,
                messages=[{"role": "user", "content": _agent.ANSWER_PROMPT + summary + policy}],
                stream=True,
            )
            for _event in stream:
                pass

    return run
