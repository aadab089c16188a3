"""The interop agent with LlamaIndex, traced by openinference-instrumentation-llama-index.

Every step is LlamaIndex's, each a span of its instrumentation dispatcher that
OpenInference names after the class and method: a ``BaseRetriever`` over the index (a
``RETRIEVER`` span), the ``OpenAI`` LLM offered a ``FunctionTool`` through
``achat_with_tools`` (its request building, ``_prepare_chat_with_tools``, an ``LLM``
span beside ``achat``), the tool's ``acall`` (a ``TOOL`` span), two ``achat`` calls under
``asyncio.gather``, and ``astream_chat`` for the answer. The application's root span
groups them: LlamaIndex names no run.

The sim's models are added to llama-index-llms-openai's model tables (context window,
chat model), which the ``OpenAI`` class reads for any model name it is given; it refuses
a name it does not know. llama-index-llms-openai wants openai 2.x.
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

CONTEXT_WINDOW = 128_000


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("openinference-llama-index")
    exporter = _agent.install(case, provider)

    from llama_index.core.base.base_retriever import BaseRetriever
    from llama_index.core.llms import ChatMessage
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
    from llama_index.core.tools import FunctionTool
    from llama_index.llms.openai import OpenAI
    from llama_index.llms.openai import utils as openai_utils
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

    LlamaIndexInstrumentor().instrument(tracer_provider=provider)
    for name in (_agent.PLAN_MODEL, _agent.FAST_MODEL, _agent.ANSWER_MODEL):
        openai_utils.ALL_AVAILABLE_MODELS[name] = CONTEXT_WINDOW
        openai_utils.CHAT_MODELS[name] = CONTEXT_WINDOW

    class FaqRetriever(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [
                NodeWithScore(node=TextNode(text=body), score=1.0)
                for body in _agent.INDEX.search(query_bundle.query_str)
            ]

    def llm(model: str, **kwargs: object) -> OpenAI:
        return OpenAI(
            model=model, api_base=case.base_url, api_key="sk-interop", max_retries=0, **kwargs
        )

    retriever = FaqRetriever()
    lookup_order = FunctionTool.from_defaults(
        fn=_agent.lookup_order, name=_agent.TOOL_NAME, description=_agent.TOOL_DESCRIPTION
    )
    planner = llm(_agent.PLAN_MODEL)
    fast = llm(_agent.FAST_MODEL)
    # The usage of a stream comes only when asked for, as with the reference.
    answerer = llm(
        _agent.ANSWER_MODEL, additional_kwargs={"stream_options": {"include_usage": True}}
    )

    async def agent() -> None:
        with _agent.app_span():
            nodes = await retriever.aretrieve(_agent.QUESTION)
            docs = [node.get_content() for node in nodes]
            history = [
                ChatMessage(role="system", content=_agent.SYSTEM),
                ChatMessage(role="user", content=_agent.plan_prompt(docs)),
            ]
            for _round in range(_agent.MAX_TOOL_ROUNDS):
                reply = await planner.achat_with_tools([lookup_order], chat_history=history)
                calls = planner.get_tool_calls_from_response(reply, error_on_no_tool_call=False)
                if not calls:
                    break
                history.append(reply.message)
                for call in calls:
                    output = await lookup_order.acall(**call.tool_kwargs)
                    history.append(
                        ChatMessage(
                            role="tool",
                            content=str(output),
                            additional_kwargs={"tool_call_id": call.tool_id},
                        )
                    )
            notes = str(reply.message.content or "")

            async def ask(prompt: str) -> str:
                answer = await fast.achat([ChatMessage(role="user", content=prompt + notes)])
                return str(answer.message.content or "")

            summary, policy = await asyncio.gather(
                ask(_agent.SUMMARY_PROMPT), ask(_agent.POLICY_PROMPT)
            )
            prompt = _agent.ANSWER_PROMPT + summary + policy
            stream = await answerer.astream_chat([ChatMessage(role="user", content=prompt)])
            async for _chunk in stream:
                pass

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
