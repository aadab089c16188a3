"""The interop agent with Semantic Kernel and its own OpenTelemetry diagnostics.

Semantic Kernel traces its model calls and kernel functions itself, once
``SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS`` is true (read when the
package is imported), on the global tracer provider: ``chat <model>`` spans with
``gen_ai.operation.name = "chat"``, ``gen_ai.system``, the service's base URL as
``server.address``, and ``execute_tool <plugin>-<function>`` spans for the functions the
model asks for. The planner is a kernel with the ``orders`` plugin and automatic function
calling (Semantic Kernel runs the tool loop); the two parallel calls go to a second chat
service under ``asyncio.gather``; the answer is a third service's streamed chat, read to
the end. Semantic Kernel has no retriever here (its vector stores need a store), so the
retrieval is chainlat's data stage; the application's root span groups the calls.
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

# Read by semantic_kernel when it is imported: set before the first import.
os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"] = "true"


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("semantic-kernel")
    exporter = _agent.install(case, provider)

    from openai import AsyncOpenAI
    from semantic_kernel import Kernel
    from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
    from semantic_kernel.connectors.ai.open_ai import (
        OpenAIChatCompletion,
        OpenAIChatPromptExecutionSettings,
    )
    from semantic_kernel.contents import ChatHistory
    from semantic_kernel.functions import kernel_function

    class Orders:
        @kernel_function(name=_agent.TOOL_NAME, description=_agent.TOOL_DESCRIPTION)
        def lookup_order(self, order_id: str) -> str:
            """Look up an order's status by its id."""
            return _agent.lookup_order(order_id)

    client = AsyncOpenAI(base_url=case.base_url, api_key="sk-interop")
    planner = OpenAIChatCompletion(ai_model_id=_agent.PLAN_MODEL, async_client=client)
    fast = OpenAIChatCompletion(ai_model_id=_agent.FAST_MODEL, async_client=client)
    answerer = OpenAIChatCompletion(ai_model_id=_agent.ANSWER_MODEL, async_client=client)
    kernel = Kernel()
    kernel.add_plugin(Orders(), plugin_name="orders")
    auto = OpenAIChatPromptExecutionSettings(
        function_choice_behavior=FunctionChoiceBehavior.Auto(
            maximum_auto_invoke_attempts=_agent.MAX_TOOL_ROUNDS
        )
    )
    plain = OpenAIChatPromptExecutionSettings()

    def history(prompt: str, system: str | None = None) -> ChatHistory:
        chat = ChatHistory(system_message=system) if system else ChatHistory()
        chat.add_user_message(prompt)
        return chat

    async def ask(service: OpenAIChatCompletion, prompt: str) -> str:
        reply = await service.get_chat_message_content(history(prompt), plain)
        return str(reply)

    async def agent() -> None:
        with _agent.app_span():
            docs = _agent.chainlat_retrieve()
            plan = history(_agent.plan_prompt(docs), _agent.SYSTEM)
            notes = str(await planner.get_chat_message_content(plan, auto, kernel=kernel))
            summary, policy = await asyncio.gather(
                ask(fast, _agent.SUMMARY_PROMPT + notes), ask(fast, _agent.POLICY_PROMPT + notes)
            )
            prompt = history(_agent.ANSWER_PROMPT + summary + policy)
            async for _chunk in answerer.get_streaming_chat_message_content(prompt, plain):
                pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
