"""The interop agent with Google's Agent Development Kit (ADK) and its own GenAI spans.

ADK traces itself from the global provider (scope ``gcp.vertex.agent``): ``invocation``
per ``Runner.run_async``, ``invoke_agent {name}`` per agent run, ``call_llm`` per model
call and ``execute_tool {name}`` per tool call. The agent is one ``SequentialAgent``, the
run's root (no application span): a ``BaseAgent`` of its own for the retrieval (ADK has
no retriever: chainlat's data stage inside it, its documents put in the session state),
the planner (an ``LlmAgent`` with a ``FunctionTool``: ADK runs the tool loop; its notes
go to the state, ``output_key``), a ``ParallelAgent`` of two ``LlmAgent`` (the two calls
at once) and the answerer, each reading the state through its instruction's
``{placeholders}`` and not the conversation (``include_contents="none"``). The models are
ADK's ``LiteLlm`` wrapper (``openai/<model>`` against the sim, ``api_base``).

ADK streams per run, not per call: the run is made with ``StreamingMode.SSE`` for the
answer to stream, so every model call of it is a stream (the planner's and the two fast
calls too, as with strands), their usage asked for by LiteLlm (``include_usage``).

ADK 2.13 marks ``SequentialAgent`` and ``ParallelAgent`` deprecated in favour of its graph
``Workflow`` (a ``DeprecationWarning`` in the agent's log); they still run, and the
``Workflow`` graph API was not tried here. ADK 2.13 pins
``opentelemetry-sdk<=1.44``, so this stack runs on SDK 1.44.0, not 1.45.
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

# LiteLLM reads its model cost map from the package, not the network.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

APP = "interop"
USER = "user"


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("google-adk")
    # Before ADK is imported: its tracer is taken from the global provider.
    exporter = _agent.install(case, provider)

    from google.adk.agents import BaseAgent, LlmAgent, ParallelAgent, SequentialAgent
    from google.adk.agents.run_config import RunConfig, StreamingMode
    from google.adk.events import Event, EventActions
    from google.adk.models.lite_llm import LiteLlm
    from google.adk.runners import InMemoryRunner
    from google.adk.tools import FunctionTool
    from google.genai import types

    def model(name: str) -> LiteLlm:
        return LiteLlm(model="openai/" + name, api_base=case.base_url, api_key="sk-interop")

    class Retriever(BaseAgent):
        """The FAQ search, its documents put in the session state (``docs``)."""

        async def _run_async_impl(self, ctx):
            docs = _agent.chainlat_retrieve()
            yield Event(
                author=self.name,
                invocation_id=ctx.invocation_id,
                actions=EventActions(state_delta={"docs": "\n".join(docs)}),
            )

    def lookup_order(order_id: str) -> str:
        """Look up an order's status by its id.

        Args:
            order_id: The order id.
        """
        return _agent.lookup_order(order_id)

    def fast(name: str, prompt: str) -> LlmAgent:
        return LlmAgent(
            name=name,
            model=model(_agent.FAST_MODEL),
            instruction=prompt + "{notes}",
            include_contents="none",
            output_key=name,
        )

    root = SequentialAgent(
        name="agent",
        sub_agents=[
            Retriever(name="retrieve"),
            LlmAgent(
                name="planner",
                model=model(_agent.PLAN_MODEL),
                instruction=_agent.SYSTEM + "\n\nDocuments:\n{docs}",
                tools=[FunctionTool(lookup_order)],
                output_key="notes",
            ),
            ParallelAgent(
                name="fan_out",
                sub_agents=[
                    fast("summary", _agent.SUMMARY_PROMPT),
                    fast("policy", _agent.POLICY_PROMPT),
                ],
            ),
            LlmAgent(
                name="answerer",
                model=model(_agent.ANSWER_MODEL),
                instruction=_agent.ANSWER_PROMPT + "{summary}{policy}",
                include_contents="none",
            ),
        ],
    )
    runner = InMemoryRunner(agent=root, app_name=APP)
    question = types.Content(role="user", parts=[types.Part(text=_agent.QUESTION)])
    streamed = RunConfig(streaming_mode=StreamingMode.SSE)

    async def agent() -> None:
        # A session per run, as a request handler would: a session keeps its conversation.
        session = await runner.session_service.create_session(app_name=APP, user_id=USER)
        async for _event in runner.run_async(
            user_id=USER, session_id=session.id, new_message=question, run_config=streamed
        ):
            pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
