"""The interop agent with the OpenAI Agents SDK, bridged to OpenTelemetry by OpenInference.

``OpenAIAgentsInstrumentor`` replaces the SDK's trace processors with its own (so
nothing is exported to OpenAI) and turns the SDK's spans into OpenTelemetry ones. The
sim is the default client, over chat completions. The planner agent has the tool (a
``@function_tool``; the SDK runs the loop), the two parallel calls are runs of a second
agent under ``asyncio.gather``, the answer a third agent's ``run_streamed``; the runs
share one SDK ``trace``. The SDK has no retriever, so the retrieval is chainlat's data
stage; the application's root span holds it all.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import asyncio
import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("openai-agents")
    exporter = _agent.install(case, provider)

    import openai
    from agents import (
        Agent,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
        trace,
    )
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider, exclusive_processor=True)
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

    async def agent() -> None:
        with _agent.app_span(), trace("support-agent"):
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

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
