"""The interop agent with the Microsoft Agent Framework and its own GenAI spans.

The Agent Framework traces itself on the global tracer provider, on by default since
1.0 (``ENABLE_INSTRUMENTATION``; its observability guide's "third-party setup": a
provider made by the application, no ``configure_otel_providers``), sensitive data off
(``ENABLE_SENSITIVE_DATA``, the default): ``invoke_agent {name}`` per agent run,
``chat {model}`` per model call and ``execute_tool {name}`` per tool call. The planner is
an ``Agent`` with ``lookup_order`` as a ``@tool`` (the framework runs the tool loop:
automatic function calling); the two parallel calls are runs of two agents under
``asyncio.gather``; the answer is a third agent's ``run(stream=True)``, read to the end.
The agents are made per run, as a request handler would. The framework has no retriever,
so the retrieval is chainlat's data stage; the application's root span groups the agent
runs. The model client is ``OpenAIChatCompletionClient`` (the Chat Completions API; the
package's ``OpenAIChatClient`` speaks the Responses API, which the sim does not serve).
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("agent-framework")
    exporter = _agent.install(case, provider)

    from agent_framework import Agent, tool
    from agent_framework.openai import OpenAIChatCompletionClient

    def client(model: str) -> OpenAIChatCompletionClient:
        return OpenAIChatCompletionClient(model=model, base_url=case.base_url, api_key="sk-interop")

    planner_client = client(_agent.PLAN_MODEL)
    fast_client = client(_agent.FAST_MODEL)
    answer_client = client(_agent.ANSWER_MODEL)

    # approval_mode: the tool runs when the model asks for it, without a human's approval.
    @tool(
        name=_agent.TOOL_NAME,
        description=_agent.TOOL_DESCRIPTION,
        approval_mode="never_require",
    )
    def lookup_order(order_id: Annotated[str, "The order id."]) -> str:
        return _agent.lookup_order(order_id)

    async def agent() -> None:
        planner = Agent(planner_client, _agent.SYSTEM, name="planner", tools=[lookup_order])
        fast = [Agent(fast_client, name="fast") for _ in range(2)]
        answerer = Agent(answer_client, name="answerer")
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            notes = (await planner.run(_agent.plan_prompt(docs))).text
            summary, policy = await asyncio.gather(
                fast[0].run(_agent.SUMMARY_PROMPT + notes),
                fast[1].run(_agent.POLICY_PROMPT + notes),
            )
            prompt = _agent.ANSWER_PROMPT + summary.text + policy.text
            async for _update in answerer.run(prompt, stream=True):
                pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
