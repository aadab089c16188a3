"""The interop agent with strands-agents and its own OpenTelemetry spans (GenAI conventions).

Strands traces itself from the global provider: ``invoke_agent {name}`` per agent run,
``execute_event_loop_cycle``, ``chat`` per model call (a stream: strands streams every
call) and ``execute_tool {name}``. The planner is an agent with the tool (strands runs
the tool loop); the two parallel calls are runs of two agents under ``asyncio.gather``
(an agent runs one invocation at a time); the answer is a third agent's
``stream_async``. The agents are made per run, as a request handler would: an agent
keeps its conversation. Strands has no retriever, so the retrieval is chainlat's data
stage; the application's root span groups the agent runs. The model is strands'
``OpenAIModel`` against the sim, given one ``AsyncOpenAI`` client (strands' openai extra
wants openai 2.x).
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
    provider = _agent.tracer_provider("strands-agents")
    # Before strands is imported: its tracer takes the global provider when made.
    exporter = _agent.install(case, provider)

    import openai
    from strands import Agent, tool
    from strands.models.openai import OpenAIModel

    # One client for every call, all on one event loop: by default strands makes a client
    # per call (its connection pool and TLS context included), tens of ms each on a busy
    # machine, in a model-call span of its own.
    client = openai.AsyncOpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)

    def model(model_id: str) -> OpenAIModel:
        return OpenAIModel(client=client, model_id=model_id)

    @tool(name=_agent.TOOL_NAME)
    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id.

        Args:
            order_id: The order id.
        """
        return _agent.lookup_order(order_id)

    def make(name: str, model_id: str, **kwargs: object) -> Agent:
        # callback_handler=None: the default one prints the streamed text.
        return Agent(name=name, model=model(model_id), callback_handler=None, **kwargs)

    async def agent() -> None:
        planner = make(
            "planner", _agent.PLAN_MODEL, system_prompt=_agent.SYSTEM, tools=[lookup_order]
        )
        fast = [make("fast", _agent.FAST_MODEL) for _ in range(2)]
        answerer = make("answerer", _agent.ANSWER_MODEL)
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            notes = str(await planner.invoke_async(_agent.plan_prompt(docs)))
            summary, policy = await asyncio.gather(
                fast[0].invoke_async(_agent.SUMMARY_PROMPT + notes),
                fast[1].invoke_async(_agent.POLICY_PROMPT + notes),
            )
            prompt = _agent.ANSWER_PROMPT + str(summary) + str(policy)
            async for _event in answerer.stream_async(prompt):
                pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
