"""The interop agent with pydantic-ai and its own OpenTelemetry instrumentation.

``Agent.instrument_all(InstrumentationSettings(tracer_provider=...))``, no Logfire. The
planner is an agent with the tool (pydantic-ai runs the tool loop); the two parallel
calls are runs of a second agent under ``asyncio.gather``; the answer is a third agent's
``run_stream``. pydantic-ai has no retriever, so the retrieval is chainlat's data stage;
the application's root span groups the agent runs.
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
    provider = _agent.tracer_provider("pydantic-ai")
    exporter = _agent.install(case, provider)

    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    sim = OpenAIProvider(base_url=case.base_url, api_key="sk-interop")
    # Named: an unnamed agent's run is ``invoke_agent agent``, the name of the workflow.
    planner = Agent(
        OpenAIChatModel(_agent.PLAN_MODEL, provider=sim),
        name="planner",
        system_prompt=_agent.SYSTEM,
    )
    fast = Agent(OpenAIChatModel(_agent.FAST_MODEL, provider=sim), name="fast")
    answerer = Agent(OpenAIChatModel(_agent.ANSWER_MODEL, provider=sim), name="answerer")

    @planner.tool_plain(name=_agent.TOOL_NAME)
    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id."""
        return _agent.lookup_order(order_id)

    async def agent() -> None:
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            notes = (await planner.run(_agent.plan_prompt(docs))).output
            summary, policy = await asyncio.gather(
                fast.run(_agent.SUMMARY_PROMPT + notes), fast.run(_agent.POLICY_PROMPT + notes)
            )
            prompt = _agent.ANSWER_PROMPT + summary.output + policy.output
            async with answerer.run_stream(prompt) as stream:
                async for _text in stream.stream_text(delta=True, debounce_by=None):
                    pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
