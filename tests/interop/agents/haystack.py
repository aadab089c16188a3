"""The interop agent as a Haystack pipeline, traced by opentelemetry-haystack.

Haystack traces through its own tracer interface; opentelemetry-haystack's
``OpenTelemetryTracer``, given an OpenTelemetry tracer, is enabled with
``haystack.tracing.enable_tracing`` (the package does nothing on import). Its spans carry
``haystack.*`` keys only: ``haystack.pipeline.run`` (the pipeline, a root of its own, used
as the run's root: no application span), ``haystack.component.run`` per component
(``haystack.component.name``, ``haystack.component.type``), ``haystack.agent.run``,
``haystack.agent.step``, ``haystack.agent.step.llm`` and ``haystack.agent.step.tool``
(``haystack.tool.name``) inside the ``Agent``. The model, the tokens and the prompts are
only in content tags (``haystack.component.input``/``output``, JSON), written when
``HAYSTACK_CONTENT_TRACING_ENABLED`` is true: the agent sets it, as a user who wants token
counts in the traces does.

The pipeline, run with ``run_async`` (components whose inputs are ready run at once):
``retriever`` (an ``InMemoryBM25Retriever`` over the FAQ, plus the 30 ms standing in for a
remote index) -> ``plan_prompt`` (``ChatPromptBuilder``) -> ``planner`` (an ``Agent`` with
``OpenAIChatGenerator`` on ``sim-plan`` and a ``Tool`` for ``lookup_order``: Haystack runs
the tool loop) -> ``summary_prompt`` and ``policy_prompt`` -> ``summary`` and ``policy``
(two ``OpenAIChatGenerator`` on ``sim-fast``, in parallel) -> ``answer_prompt`` ->
``answer`` (``OpenAIChatGenerator`` on ``sim-answer``, streamed to a callback, its usage
asked for as the reference does). The prompt builders are components of their own, each a
``haystack.component.run`` span of well under a millisecond.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import asyncio
import os
import sys
import time

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent

# Read when haystack's tracer is made (on import): token counts are content tags.
os.environ.setdefault("HAYSTACK_CONTENT_TRACING_ENABLED", "true")
# No usage telemetry of Haystack's own (it would reach for the network).
os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("haystack")
    exporter = _agent.install(case, provider)

    from haystack import Document, Pipeline, component, tracing
    from haystack.components.agents import Agent
    from haystack.components.builders import ChatPromptBuilder
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.dataclasses import ChatMessage, StreamingChunk
    from haystack.document_stores.in_memory import InMemoryDocumentStore
    from haystack.tools import Tool
    from haystack.utils import Secret
    from haystack_integrations.tracing.opentelemetry import OpenTelemetryTracer

    tracing.enable_tracing(OpenTelemetryTracer(provider.get_tracer("haystack")))

    @component
    class FaqRetriever(InMemoryBM25Retriever):
        """BM25 over the FAQ, after the matrix's 30 ms standing in for a remote index."""

        @component.output_types(documents=list[Document])
        def run(self, query: str, filters=None, top_k=None, scale_score=None):
            with _agent.own_interval("data"):
                time.sleep(_agent.RETRIEVE_MS / 1000)
                return InMemoryBM25Retriever.run(self, query, filters, top_k, scale_score)

        @component.output_types(documents=list[Document])
        async def run_async(self, query: str, filters=None, top_k=None, scale_score=None):
            return self.run(query, filters, top_k, scale_score)

    store = InMemoryDocumentStore()
    store.write_documents([Document(content=body) for _title, body in _agent._DOCS])

    def generator(model: str, **kwargs: object) -> OpenAIChatGenerator:
        return OpenAIChatGenerator(
            model=model,
            api_base_url=case.base_url,
            api_key=Secret.from_token("sk-interop"),
            max_retries=0,
            **kwargs,
        )

    lookup_order = Tool(
        name=_agent.TOOL_NAME,
        description=_agent.TOOL_DESCRIPTION,
        parameters=_agent.TOOL_PARAMETERS,
        function=_agent.lookup_order,
    )

    async def on_chunk(_chunk: StreamingChunk) -> None:
        pass

    docs = "{{ documents | map(attribute='content') | join('\n') }}"
    notes = "{{ last_message.text }}"
    pipeline = Pipeline()
    pipeline.add_component("retriever", FaqRetriever(document_store=store, top_k=2))
    pipeline.add_component(
        "plan_prompt",
        ChatPromptBuilder(
            template=[
                ChatMessage.from_system(_agent.SYSTEM),
                ChatMessage.from_user(_agent.QUESTION + "\n\nDocuments:\n" + docs),
            ],
            required_variables="*",
        ),
    )
    pipeline.add_component(
        "planner",
        Agent(
            chat_generator=generator(_agent.PLAN_MODEL),
            tools=[lookup_order],
            max_agent_steps=_agent.MAX_TOOL_ROUNDS,
        ),
    )
    for name, prompt in (("summary", _agent.SUMMARY_PROMPT), ("policy", _agent.POLICY_PROMPT)):
        pipeline.add_component(
            f"{name}_prompt",
            ChatPromptBuilder(
                template=[ChatMessage.from_user(prompt + notes)], required_variables="*"
            ),
        )
        pipeline.add_component(name, generator(_agent.FAST_MODEL))
    pipeline.add_component(
        "answer_prompt",
        ChatPromptBuilder(
            template=[
                ChatMessage.from_user(
                    _agent.ANSWER_PROMPT + "{{ summary[0].text }}{{ policy[0].text }}"
                )
            ],
            required_variables="*",
        ),
    )
    pipeline.add_component(
        "answer",
        generator(
            _agent.ANSWER_MODEL,
            streaming_callback=on_chunk,
            generation_kwargs={"stream_options": {"include_usage": True}},
        ),
    )
    pipeline.connect("retriever.documents", "plan_prompt.documents")
    pipeline.connect("plan_prompt.prompt", "planner.messages")
    for name in ("summary", "policy"):
        pipeline.connect("planner.last_message", f"{name}_prompt.last_message")
        pipeline.connect(f"{name}_prompt.prompt", f"{name}.messages")
        pipeline.connect(f"{name}.replies", f"answer_prompt.{name}")
    pipeline.connect("answer_prompt.prompt", "answer.messages")

    async def agent() -> None:
        await pipeline.run_async({"retriever": {"query": _agent.QUESTION}}, concurrency_limit=4)

    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
