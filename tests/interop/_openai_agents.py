"""The agent of the OpenAI Agents SDK stacks (``agents/openai-agents.py``, traced by
OpenInference; ``agents/logfire-openai-agents.py``, traced by Logfire): one agent, two
ways of tracing it.

The sim is the SDK's default client, over chat completions, and the SDK's own trace export
(to OpenAI's service) finds no key and sends nothing. The planner agent has the tool (a
``@function_tool``; the SDK runs the loop), the two parallel calls are runs of a second
agent under ``asyncio.gather``, the answer a third agent's ``run_streamed``; the runs
share one SDK ``trace``. The SDK has no retriever, so the retrieval is chainlat's data
stage; the application's root span (``request``) holds it all.
"""

# mypy: ignore-errors
# (the framework is installed only in the stacks' environments, not in the dev one)

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager

import _agent


def agent(
    case: _agent.Case, request: Callable[[], AbstractContextManager[object]]
) -> Callable[[], Awaitable[None]]:
    """The agent's request as a coroutine function, each run inside ``request()``."""
    import openai
    from agents import (
        Agent,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
        trace,
    )

    client = openai.AsyncOpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)
    set_default_openai_client(client, use_for_tracing=False)
    set_default_openai_api("chat_completions")

    @function_tool(name_override=_agent.TOOL_NAME)
    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id."""
        return _agent.lookup_order(order_id)

    planner = Agent(
        name="planner", instructions=_agent.SYSTEM, model=_agent.PLAN_MODEL, tools=[lookup_order]
    )
    fast = Agent(name="fast", model=_agent.FAST_MODEL)
    answerer = Agent(name="answerer", model=_agent.ANSWER_MODEL)

    async def run() -> None:
        with request(), trace("support-agent"):
            docs = _agent.chainlat_retrieve()
            notes = (await Runner.run(planner, _agent.plan_prompt(docs))).final_output
            summary, policy = await asyncio.gather(
                Runner.run(fast, _agent.SUMMARY_PROMPT + notes),
                Runner.run(fast, _agent.POLICY_PROMPT + notes),
            )
            prompt = _agent.ANSWER_PROMPT + summary.final_output + policy.final_output
            streamed = Runner.run_streamed(answerer, prompt)
            async for _event in streamed.stream_events():
                pass

    return run
