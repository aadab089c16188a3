"""The interop agent with the OpenAI Agents SDK, traced by Pydantic Logfire.

``logfire.instrument_openai_agents()`` wraps the SDK's trace provider, so that each span
the SDK makes (an agent's run, a model call, a function tool's call) is also a Logfire
span, written through Logfire's provider; as in the ``logfire`` stack, Logfire is
configured to send nothing to its service, and chainlat's processor and the file export
are added to the provider it made global. The agent is the ``openai-agents`` stack's: the
planner with the tool (a ``@function_tool``), two runs of a second agent under
``asyncio.gather``, a third agent's ``run_streamed``, over chat completions against the
sim, the runs in one SDK ``trace``, the retrieval chainlat's data stage.
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

    import logfire
    import openai
    from agents import (
        Agent,
        Runner,
        function_tool,
        set_default_openai_api,
        set_default_openai_client,
        trace,
    )
    from opentelemetry import trace as otel_trace

    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name="interop-logfire-openai-agents",
        inspect_arguments=False,
    )
    exporter = _agent.install(case, otel_trace.get_tracer_provider(), set_global=False)
    logfire.instrument_openai_agents()
    client = openai.AsyncOpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)
    # The SDK's own trace export (to OpenAI's service) finds no key and sends nothing.
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
        with logfire.span("agent"), trace("support-agent"):
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
