"""The interop agent with Agno, traced by openinference-instrumentation-agno.

Agno (agno 3.1.10) writes no OpenTelemetry span of its own; OpenInference's
instrumentation wraps its agent runs (``Agent._run`` and the others, an ``AGENT`` span),
its models' ``invoke`` and ``invoke_stream`` (an ``LLM`` span each) and its tools'
``FunctionCall.execute`` (a ``TOOL`` span), as Agno's documentation shows for tracing to
an OpenTelemetry backend.

The plan is an ``Agent`` with the tool (a plain function), run on the question and the
retrieved documents: Agno calls the model, runs the tool the model asks for and calls the
model again on its result. The two parallel calls are two agents' runs under
``asyncio.gather``, and the streamed answer a third agent's ``arun(stream=True)``, all on
``OpenAIChat`` against the sim. Agno has no retriever here without a vector store and an
embedder: the retrieval is chainlat's data stage. Agno's own telemetry (its usage report
to its service) is off (``AGNO_TELEMETRY=false``).
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
    os.environ["AGNO_TELEMETRY"] = "false"
    case = _agent.parse_case()
    provider = _agent.tracer_provider("agno")
    exporter = _agent.install(case, provider)

    from openinference.instrumentation.agno import AgnoInstrumentor

    AgnoInstrumentor().instrument(tracer_provider=provider)

    from agno.agent import Agent
    from agno.models.openai import OpenAIChat

    def model(name: str) -> OpenAIChat:
        return OpenAIChat(id=name, base_url=case.base_url, api_key="sk-interop", max_retries=0)

    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id.

        Args:
            order_id: The order id.
        """
        return _agent.lookup_order(order_id)

    planner = Agent(
        name="planner", model=model(_agent.PLAN_MODEL), tools=[lookup_order],
        instructions=_agent.SYSTEM,
    )  # fmt: skip
    summariser = Agent(name="summariser", model=model(_agent.FAST_MODEL))
    policy_reader = Agent(name="policy", model=model(_agent.FAST_MODEL))
    answerer = Agent(name="answerer", model=model(_agent.ANSWER_MODEL))

    async def agent() -> None:
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            plan = await planner.arun(_agent.plan_prompt(docs))
            notes = str(plan.content or "")
            summary, policy = await asyncio.gather(
                summariser.arun(_agent.SUMMARY_PROMPT + notes),
                policy_reader.arun(_agent.POLICY_PROMPT + notes),
            )
            prompt = _agent.ANSWER_PROMPT + str(summary.content) + str(policy.content)
            async for _event in answerer.arun(prompt, stream=True):
                pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
