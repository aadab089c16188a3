"""The interop agent with smolagents, traced by openinference-instrumentation-smolagents.

The planner is a ``ToolCallingAgent`` with the ``lookup_order`` tool, on smolagents'
``OpenAIModel`` (``OpenAIServerModel`` is its old name) against the sim: smolagents runs
the loop, and ends it when the model calls its ``final_answer`` tool, so the plan is a
call asking for ``lookup_order``, the tool, and a call asking for ``final_answer`` (its
answer the notes), as with a real model. The two parallel calls are ``OpenAIModel.generate``
in two threads (``chainlat.bind_context``: smolagents has no fan-out of model calls), the
answer ``generate_stream``. smolagents has no retriever, so the retrieval is chainlat's data
stage; the application's root span groups the steps. OpenInference writes an ``AGENT``
span per agent run (``ToolCallingAgent.run``), a ``CHAIN`` span per step (``Step 1``), an
``LLM`` span per ``generate``/``generate_stream`` (``OpenAIModel.generate``) and a ``TOOL``
span per tool call (``lookup_order``, ``FinalAnswerTool``).

The sim counts a tool's result only in a ``tool`` message (OpenAI's shape), and smolagents
sends it as a ``user`` message that says ``Observation:``: the sim would ask for
``lookup_order`` again and again. The model maps smolagents' tool-response role to
``tool`` (``custom_role_conversions``), which the sim reads as the result: it then asks for
the next tool offered, ``final_answer`` (smolagents asks with ``tool_choice`` required).
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent

import chainlat


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("smolagents")
    exporter = _agent.install(case, provider)

    from openinference.instrumentation.smolagents import SmolagentsInstrumentor
    from smolagents import OpenAIModel, ToolCallingAgent, tool
    from smolagents.models import MessageRole, tool_role_conversions
    from smolagents.monitoring import LogLevel

    SmolagentsInstrumentor().instrument(tracer_provider=provider)

    def model(model_id: str, **kwargs: object) -> OpenAIModel:
        return OpenAIModel(
            model_id=model_id,
            api_base=case.base_url,
            api_key="sk-interop",
            client_kwargs={"max_retries": 0},
            **kwargs,
        )

    roles = {**tool_role_conversions, MessageRole.TOOL_RESPONSE: "tool"}
    planner = model(_agent.PLAN_MODEL, custom_role_conversions=roles)
    fast = model(_agent.FAST_MODEL)
    answerer = model(_agent.ANSWER_MODEL)

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id.

        Args:
            order_id: The order id.
        """
        return _agent.lookup_order(order_id)

    def ask(prompt: str) -> str:
        reply = fast.generate([{"role": "user", "content": [{"type": "text", "text": prompt}]}])
        return str(reply.content or "")

    def agent() -> None:
        # Made per run, as a request handler would: an agent keeps its memory.
        plan = ToolCallingAgent(
            tools=[lookup_order],
            model=planner,
            max_steps=_agent.MAX_TOOL_ROUNDS,
            verbosity_level=LogLevel.OFF,
            instructions=_agent.SYSTEM,
        )
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            notes = str(plan.run(_agent.plan_prompt(docs)))
            with ThreadPoolExecutor(2) as pool:
                summary, policy = pool.map(
                    chainlat.bind_context(ask),
                    (_agent.SUMMARY_PROMPT + notes, _agent.POLICY_PROMPT + notes),
                )
            prompt = _agent.ANSWER_PROMPT + summary + policy
            message = {"role": "user", "content": [{"type": "text", "text": prompt}]}
            for _delta in answerer.generate_stream([message]):
                pass

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
