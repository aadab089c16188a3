"""The interop agent with AutoGen (autogen-agentchat), its model calls traced by
opentelemetry-instrumentation-openai-v2.

AutoGen traces its agents and tools itself, in the GenAI conventions (``create_agent``,
``invoke_agent``, ``execute_tool`` spans, autogen-core's ``_telemetry/_genai.py``), through
the global tracer provider; its model clients write no span, so the openai SDK under
``OpenAIChatCompletionClient`` is traced by OpenTelemetry's own instrumentation (AutoGen's
telemetry guide lists its runtime, its tools and its agents as what it instruments).

The plan is an ``AssistantAgent`` with the tool (a ``FunctionTool``), run on the question
and the retrieved documents: it calls the model, runs the tool the model asks for, and
calls the model again on the tool's result (``reflect_on_tool_use``). The two parallel
calls and the streamed answer are ``create`` and ``create_stream`` of AutoGen's model
client. AutoGen has no retriever: the retrieval is chainlat's data stage.
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

MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": False,
    "structured_output": False,
    "family": "unknown",
}
"""What AutoGen must be told of a model whose name it does not know (the sim's)."""


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("autogen")
    exporter = _agent.install(case, provider)

    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=provider)

    from autogen_agentchat.agents import AssistantAgent
    from autogen_core.models import UserMessage
    from autogen_core.tools import FunctionTool
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    def client(model: str) -> OpenAIChatCompletionClient:
        return OpenAIChatCompletionClient(
            model=model,
            base_url=case.base_url,
            api_key="sk-interop",
            max_retries=0,
            model_info=MODEL_INFO,
        )

    planner_model, fast, answerer = (
        client(_agent.PLAN_MODEL),
        client(_agent.FAST_MODEL),
        client(_agent.ANSWER_MODEL),
    )

    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id."""
        return _agent.lookup_order(order_id)

    tool = FunctionTool(lookup_order, description=_agent.TOOL_DESCRIPTION, name=_agent.TOOL_NAME)

    async def ask(prompt: str, notes: str) -> str:
        reply = await fast.create([UserMessage(content=prompt + notes, source="user")])
        return str(reply.content)

    async def agent() -> None:
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            # A new agent each request: an AssistantAgent keeps its conversation.
            planner = AssistantAgent(
                "planner",
                model_client=planner_model,
                tools=[tool],
                system_message=_agent.SYSTEM,
                reflect_on_tool_use=True,
            )
            result = await planner.run(task=_agent.plan_prompt(docs))
            notes = str(result.messages[-1].content)
            summary, policy = await asyncio.gather(
                ask(_agent.SUMMARY_PROMPT, notes), ask(_agent.POLICY_PROMPT, notes)
            )
            message = UserMessage(content=_agent.ANSWER_PROMPT + summary + policy, source="user")
            async for _chunk in answerer.create_stream([message], include_usage=True):
                pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
