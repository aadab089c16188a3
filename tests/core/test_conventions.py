"""Other instrumentations' spans as steps: each convention's attributes, exactly as its
package writes them (the source file is named above each), classified and read."""

from __future__ import annotations

import doctest
import math
from collections.abc import Iterator, Mapping

import pytest

from chainlat._core import conventions, voice
from chainlat._core.conventions import (
    CONVENTIONS,
    KEYS,
    classify,
    end_reason_of,
    has_output,
    input_tokens_of,
    is_http_level,
    is_run_root,
    model_of,
    output_tokens_of,
    provider_of,
    speech_input_of,
    ttft_ms_of,
    user_bot_latency_ms_of,
    workflow_name_of,
)

Attributes = dict[str, object]

# --- OpenTelemetry GenAI: opentelemetry-util-genai 1.3b0 ---------------------------
# opentelemetry/util/genai/_workflow_invocation.py: "invoke_workflow {name}"
GENAI_WORKFLOW: Attributes = {
    "gen_ai.operation.name": "invoke_workflow",
    "gen_ai.workflow.name": "support-chat",
}
# _agent_invocation.py: "invoke_agent {agent_name}"
GENAI_AGENT: Attributes = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.agent.name": "triage",
}
# _inference_invocation.py, streamed: "chat {request_model}"
GENAI_CHAT: Attributes = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.usage.input_tokens": 120,
    "gen_ai.usage.output_tokens": 30,
    "gen_ai.request.stream": True,
    "gen_ai.response.time_to_first_chunk": 0.25,
    "server.address": "api.openai.com",
}
# _embedding_invocation.py
GENAI_EMBEDDINGS: Attributes = {
    "gen_ai.operation.name": "embeddings",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "text-embedding-3-small",
    "gen_ai.usage.input_tokens": 8,
}
# _retrieval_invocation.py: "retrieval {data_source_id}"
GENAI_RETRIEVAL: Attributes = {
    "gen_ai.operation.name": "retrieval",
    "gen_ai.provider.name": "openai",
    "gen_ai.data_source.id": "kb-support-v3",
}
# _tool_invocation.py: "execute_tool {name}"
GENAI_TOOL: Attributes = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "get_weather",
    "gen_ai.agent.name": "triage",
}
# _fetch_response_invocation.py
GENAI_FETCH_RESPONSE: Attributes = {
    "gen_ai.operation.name": "fetch_response",
    "gen_ai.provider.name": "openai",
    "gen_ai.response.id": "resp_123",
}
# semantic-conventions-genai model/gen-ai/spans.yaml: gen_ai.memory.client, gen_ai.plan.internal
GENAI_SEARCH_MEMORY: Attributes = {"gen_ai.operation.name": "search_memory"}
GENAI_PLAN: Attributes = {"gen_ai.operation.name": "plan", "gen_ai.agent.name": "planner"}
GENAI_CREATE_AGENT: Attributes = {
    "gen_ai.operation.name": "create_agent",
    "gen_ai.provider.name": "openai",
    "gen_ai.agent.name": "triage",
}

# --- OpenInference: openinference-instrumentation-langchain 0.1.80, _tracer.py -------
OI_LLM: Attributes = {
    "openinference.span.kind": "LLM",
    "llm.model_name": "gpt-4o-mini",
    "llm.provider": "openai",
    "llm.system": "openai",
    "llm.token_count.prompt": 100,
    "llm.token_count.completion": 20,
    "llm.token_count.total": 120,
}
OI_EMBEDDING: Attributes = {
    "openinference.span.kind": "EMBEDDING",
    "embedding.model_name": "text-embedding-3-small",
}
OI_RETRIEVER: Attributes = {"openinference.span.kind": "RETRIEVER"}
OI_RERANKER: Attributes = {
    "openinference.span.kind": "RERANKER",
    "reranker.model_name": "rerank-english-v3.0",
}
OI_TOOL: Attributes = {"openinference.span.kind": "TOOL", "tool.name": "search"}
OI_AGENT: Attributes = {"openinference.span.kind": "AGENT"}  # a run named "...agent..."
OI_CHAIN: Attributes = {"openinference.span.kind": "CHAIN"}
# openinference-semantic-conventions 0.1.42 semconv/trace/__init__.py: DECISION spans
OI_DECISION: Attributes = {
    "openinference.span.kind": "DECISION",
    "decision.request.model_name": "jev-latest",
    "decision.response.model_name": "jev-2026-01",
    "decision.provider": "typesafe",
    "decision.token_count.input": 40,
    "decision.token_count.output": 2,
}

# --- OpenLLMetry: traceloop-sdk 0.62.4 decorators/base.py and tracing.py (on_start) ---
TL_WORKFLOW: Attributes = {  # "pipeline.workflow"
    "traceloop.span.kind": "workflow",
    "traceloop.entity.name": "pipeline",
    "traceloop.workflow.name": "pipeline",
}
TL_AGENT: Attributes = {  # "researcher.agent", inside the workflow above
    "traceloop.span.kind": "agent",
    "traceloop.entity.name": "researcher",
    "traceloop.workflow.name": "pipeline",
    "gen_ai.agent.name": "researcher",
}
TL_TOOL: Attributes = {  # "lookup.tool"
    "traceloop.span.kind": "tool",
    "traceloop.entity.name": "lookup",
    "gen_ai.tool.name": "lookup",
    "traceloop.workflow.name": "pipeline",
    "traceloop.entity.path": "lookup",
}
TL_TASK: Attributes = {  # "retrieve_docs.task"
    "traceloop.span.kind": "task",
    "traceloop.entity.name": "retrieve_docs",
    "traceloop.workflow.name": "pipeline",
}
# opentelemetry-instrumentation-langchain 0.62.4 callback_handler.py
TL_LANGCHAIN_WORKFLOW: Attributes = {  # "RunnableSequence.workflow"
    "traceloop.workflow.name": "RunnableSequence",
    "traceloop.span.kind": "workflow",
    "traceloop.entity.name": "RunnableSequence",
    "gen_ai.provider.name": "langchain",
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "RunnableSequence",
    "gen_ai.agent.id": "0b6c4f9e-7a51-4d55-9a1b-1f1f5a1d8e77",
}
TL_LANGCHAIN_TASK: Attributes = {  # "execute_task ChatPromptTemplate"
    "traceloop.workflow.name": "RunnableSequence",
    "traceloop.span.kind": "task",
    "traceloop.entity.name": "ChatPromptTemplate",
    "gen_ai.provider.name": "langchain",
    "gen_ai.operation.name": "execute_task",
    "gen_ai.task.name": "ChatPromptTemplate",
}
TL_LANGCHAIN_RETRIEVE: Attributes = {  # "vector_db_retrieve VectorStoreRetriever"
    "traceloop.workflow.name": "RunnableSequence",
    "gen_ai.operation.name": "vector_db_retrieve",
    "gen_ai.provider.name": "langchain",
    "traceloop.span.kind": "task",
    "traceloop.entity.name": "VectorStoreRetriever",
}
TL_LANGCHAIN_LLM: Attributes = {  # "ChatOpenAI.chat", no model in the LLM's output
    "traceloop.workflow.name": "RunnableSequence",
    "gen_ai.provider.name": "openai",
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "unknown",
    "gen_ai.usage.input_tokens": 31,
    "gen_ai.usage.output_tokens": 9,
    "gen_ai.usage.total_tokens": 40,
}
# opentelemetry-semantic-conventions-ai 0.5.1: the legacy LLM_* names, before gen_ai.operation.name
TL_LEGACY_CHAT: Attributes = {  # "openai.chat"
    "llm.request.type": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.response.model": "gpt-4o-2024-08-06",
    "gen_ai.usage.prompt_tokens": 15,
    "gen_ai.usage.completion_tokens": 9,
    "llm.usage.total_tokens": 24,
}
TL_LEGACY_RERANK: Attributes = {"llm.request.type": "rerank", "gen_ai.system": "cohere"}
# opentelemetry-instrumentation-chromadb / pinecone / qdrant 0.62.4 wrappers
TL_CHROMA: Attributes = {"db.system": "chroma", "db.operation": "query"}
TL_PINECONE: Attributes = {"db.system": "Pinecone", "pinecone.query.top_k": 5}
TL_QDRANT: Attributes = {"db.system": "Qdrant", "qdrant.search.collection_name": "docs"}

# --- pydantic-ai-slim 2.68.0: capabilities/instrumentation.py, _instrumentation.py -----
PAI_AGENT_RUN: Attributes = {  # "invoke_agent support_agent" ("agent run" in version 2)
    "model_name": "gpt-4o",
    "agent_name": "support_agent",
    "gen_ai.agent.name": "support_agent",
    "gen_ai.agent.call.id": "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    "gen_ai.conversation.id": "",
    "gen_ai.operation.name": "invoke_agent",
    "logfire.msg": "support_agent run",
    "logfire.span_type": "span",
}
PAI_CHAT: Attributes = {  # "chat gpt-4o"
    "gen_ai.operation.name": "chat",
    "gen_ai.agent.name": "support_agent",
    "gen_ai.provider.name": "openai",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o",
    "server.address": "api.openai.com",
    "gen_ai.response.model": "gpt-4o-2024-08-06",
    "gen_ai.usage.input_tokens": 50,
    "gen_ai.usage.output_tokens": 12,
    "gen_ai.client.operation.time_to_first_chunk": 0.31,
}
PAI_TOOL: Attributes = {  # "running tool" in version 2, "execute_tool get_weather" after
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "get_weather",
    "gen_ai.tool.call.id": "call_1",
    "logfire.msg": "running tool: get_weather",
}
PAI_DECIDE: Attributes = {  # models/decision.py
    "gen_ai.operation.name": "decide",
    "gen_ai.provider.name": "typesafe",
    "gen_ai.request.model": "jev-latest",
}
# logfire-sdk 5.4.0 _internal/tracer.py: the placeholder a pending-span exporter receives
PAI_AGENT_RUN_PENDING: Attributes = {
    **PAI_AGENT_RUN,
    "logfire.span_type": "pending_span",
    "logfire.pending_parent_id": "0000000000000000",
}

# --- langsmith 0.15.1: _internal/otel/_otel_exporter.py ----------------------------------
LS_LLM: Attributes = {
    "langsmith.span.kind": "llm",
    "langsmith.trace.name": "ChatOpenAI",
    "gen_ai.operation.name": "chat",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.usage.input_tokens": 10,
    "gen_ai.usage.output_tokens": 4,
    "gen_ai.usage.total_tokens": 14,
}
LS_RETRIEVER: Attributes = {
    "langsmith.span.kind": "retriever",
    "langsmith.trace.name": "VectorStoreRetriever",
    "gen_ai.operation.name": "embeddings",
    "gen_ai.system": "langchain",
}
LS_PROMPT: Attributes = {
    "langsmith.span.kind": "prompt",
    "langsmith.trace.name": "ChatPromptTemplate",
    "gen_ai.operation.name": "chat",
}
LS_EMBEDDING: Attributes = {
    "langsmith.span.kind": "embedding",
    "gen_ai.operation.name": "embeddings",
    "gen_ai.request.model": "text-embedding-3-small",
}
LS_TOOL: Attributes = {"langsmith.span.kind": "tool", "gen_ai.operation.name": "execute_tool"}
LS_CHAIN: Attributes = {
    "langsmith.span.kind": "chain",
    "langsmith.trace.name": "RunnableSequence",
    "gen_ai.operation.name": "chain",
}
LS_PARSER: Attributes = {"langsmith.span.kind": "parser", "gen_ai.operation.name": "parser"}

# --- litellm 1.110.2: integrations/opentelemetry.py (default, legacy output) -------------
LITELLM_ASYNC: Attributes = {  # "litellm_request" for litellm.acompletion(...)
    "gen_ai.operation.name": "acompletion",
    "llm.request.type": "acompletion",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.usage.input_tokens": 9,
    "gen_ai.usage.output_tokens": 3,
    "gen_ai.usage.total_tokens": 12,
    "llm.is_streaming": "False",
}
LITELLM_SYNC: Attributes = {  # litellm.completion(...): call type "completion" is "chat"
    "gen_ai.operation.name": "chat",
    "llm.request.type": "completion",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
}
LITELLM_EMBEDDING: Attributes = {
    "gen_ai.operation.name": "aembedding",
    "llm.request.type": "aembedding",
    "gen_ai.system": "openai",
    "gen_ai.request.model": "text-embedding-3-small",
}
LITELLM_RAW_REQUEST: Attributes = {  # "raw_gen_ai_request", child of litellm_request
    "llm.openai.model": "gpt-4o-mini",
    "llm.openai.messages": "[]",
}
LITELLM_UNKNOWN_PROVIDER: Attributes = {  # custom_llm_provider missing
    "gen_ai.operation.name": "acompletion",
    "gen_ai.system": "Unknown",
    "gen_ai.request.model": "my-model",
}
# integrations/otel/model/semconv.py (LITELLM_OTEL_V2): vendor operations
LITELLM_V2_VECTOR_STORE: Attributes = {"gen_ai.operation.name": "litellm.vector_store_management"}
LITELLM_V2_RESPONSES_ADMIN: Attributes = {"gen_ai.operation.name": "litellm.responses_management"}

# --- databases: opentelemetry-semantic-conventions 0.66b2 db_attributes --------------------
DB_NEW: Attributes = {"db.system.name": "postgresql", "db.operation.name": "SELECT"}
DB_OLD: Attributes = {"db.system": "redis", "db.operation": "GET"}

# --- voice turns: semantic-conventions-genai gen-ai-voice-agents.md; pipecat-ai 1.14.0
# turn_trace_observer.py and service_decorators.py -----------------------------------------
GENAI_VOICE_TURN: Attributes = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "voice-agent",
    "gen_ai.agent.invocation.end_reason": "interrupted",
}
PIPECAT_TURN: Attributes = {
    "turn.number": 2,
    "turn.was_interrupted": True,
    "turn.ended_by_conversation_end": False,
    "turn.user_bot_latency_seconds": 0.82,
}
PIPECAT_TTS: Attributes = {
    "gen_ai.operation.name": "tts",
    "gen_ai.request.model": "sim-tts",
    "metrics.ttfb": 0.25,
}
# livekit-agents 1.8.9 voice/agent_activity.py 282-292, 3363, 3420
LIVEKIT_AGENT_TURN: Attributes = {
    "gen_ai.operation.name": "invoke_agent",
    "gen_ai.agent.name": "Assistant",
    "lk.interrupted": False,
    "lk.e2e_latency": 0.76,
}
LIVEKIT_LLM_NODE: Attributes = {"lk.response.ttft": 0.21}  # voice/generation.py 360
LIVEKIT_TTS_NODE: Attributes = {  # voice/generation.py 485-488, 529
    "gen_ai.request.model": "tts-1",
    "lk.response.ttfb": 0.15,
}
CHAINLAT_WIRE_TTS: Attributes = {
    "gen_ai.operation.name": "text_to_speech",
    "gen_ai.request.model": "tts-1",
    "chainlat.speech.input_characters": 42,
}
CHAINLAT_WIRE_STT: Attributes = {
    "gen_ai.operation.name": "speech_to_text",
    "gen_ai.request.model": "whisper-1",
    "chainlat.audio.input_seconds": 3.5,
}

HTTP_CLIENT: Attributes = {
    "http.request.method": "POST",
    "url.full": "https://api.openai.com/v1/chat/completions",
    "http.response.status_code": 200,
}

SAMPLES: dict[str, Attributes] = {
    name: value
    for name, value in globals().items()
    if name.isupper() and isinstance(value, dict) and name != "SAMPLES"
}


# --- chainlat and the GenAI conventions ------------------------------------------------


def test_chainlat_own_kind_wins_over_every_other_convention() -> None:
    attributes = {
        "chainlat.step.kind": "tool",
        "gen_ai.operation.name": "chat",
        "openinference.span.kind": "LLM",
        "db.system": "redis",
    }
    assert classify(attributes) == "tool"


def test_an_unknown_chainlat_kind_falls_through_to_the_operation() -> None:
    assert classify({"chainlat.step.kind": "bogus", "gen_ai.operation.name": "chat"}) == "inference"


def test_a_chainlat_workflow_span_is_a_workflow() -> None:
    assert classify({"chainlat.step.kind": "workflow"}) == "workflow"


@pytest.mark.parametrize(
    "operation", ["chat", "text_completion", "generate_content", "embeddings", "fetch_response"]
)
def test_genai_model_operations_are_inference(operation: str) -> None:
    assert classify({"gen_ai.operation.name": operation}) == "inference"


def test_genai_chat_span_is_inference() -> None:
    assert classify(GENAI_CHAT) == "inference"


def test_genai_embeddings_span_is_inference() -> None:
    assert classify(GENAI_EMBEDDINGS) == "inference"


def test_genai_retrieval_span_is_data() -> None:
    assert classify(GENAI_RETRIEVAL) == "data"


def test_genai_memory_search_is_data() -> None:
    assert classify(GENAI_SEARCH_MEMORY) == "data"


def test_genai_tool_span_is_a_tool() -> None:
    assert classify(GENAI_TOOL) == "tool"


def test_genai_invoke_workflow_is_a_workflow() -> None:
    assert classify(GENAI_WORKFLOW) == "workflow"


def test_genai_invoke_agent_is_a_workflow() -> None:
    assert classify(GENAI_AGENT) == "workflow"


def test_genai_plan_is_transparent() -> None:
    """The model call under the plan span is the step."""
    assert classify(GENAI_PLAN) is None


def test_genai_create_agent_is_transparent() -> None:
    assert classify(GENAI_CREATE_AGENT) is None


def test_genai_fetch_response_is_inference() -> None:
    assert classify(GENAI_FETCH_RESPONSE) == "inference"


# --- OpenInference ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        (OI_LLM, "inference"),
        (OI_EMBEDDING, "inference"),
        (OI_DECISION, "inference"),
        (OI_RETRIEVER, "data"),
        (OI_RERANKER, "data"),
        (OI_TOOL, "tool"),
        (OI_AGENT, "workflow"),
    ],
)
def test_openinference_span_kinds_map_to_steps(attributes: Attributes, kind: str) -> None:
    assert classify(attributes) == kind


@pytest.mark.parametrize("span_kind", ["CHAIN", "PROMPT", "GUARDRAIL", "EVALUATOR", "UNKNOWN"])
def test_openinference_glue_kinds_are_transparent(span_kind: str) -> None:
    assert classify({"openinference.span.kind": span_kind}) is None


def test_openinference_model_provider_and_tokens_are_read() -> None:
    assert model_of(OI_LLM) == "gpt-4o-mini"
    assert provider_of(OI_LLM) == "openai"
    assert (input_tokens_of(OI_LLM), output_tokens_of(OI_LLM)) == (100, 20)


def test_openinference_embedding_model_is_read() -> None:
    assert model_of(OI_EMBEDDING) == "text-embedding-3-small"


def test_openinference_decision_reads_the_response_model_and_its_tokens() -> None:
    assert model_of(OI_DECISION) == "jev-2026-01"
    assert provider_of(OI_DECISION) == "typesafe"
    assert (input_tokens_of(OI_DECISION), output_tokens_of(OI_DECISION)) == (40, 2)


# --- OpenLLMetry -----------------------------------------------------------------------


def test_traceloop_workflow_is_a_workflow() -> None:
    assert classify(TL_WORKFLOW) == "workflow"


def test_traceloop_agent_is_a_workflow() -> None:
    assert classify(TL_AGENT) == "workflow"


def test_traceloop_tool_is_a_tool() -> None:
    assert classify(TL_TOOL) == "tool"


def test_traceloop_task_is_transparent() -> None:
    assert classify(TL_TASK) is None


def test_traceloop_langchain_top_chain_is_a_workflow() -> None:
    assert classify(TL_LANGCHAIN_WORKFLOW) == "workflow"


def test_traceloop_langchain_task_is_transparent() -> None:
    assert classify(TL_LANGCHAIN_TASK) is None


def test_traceloop_langchain_retriever_is_data() -> None:
    assert classify(TL_LANGCHAIN_RETRIEVE) == "data"


def test_traceloop_langchain_llm_is_inference() -> None:
    assert classify(TL_LANGCHAIN_LLM) == "inference"


def test_a_placeholder_unknown_response_model_gives_way_to_the_request_model() -> None:
    assert model_of(TL_LANGCHAIN_LLM) == "gpt-4o-mini"


def test_traceloop_legacy_llm_span_is_inference_by_request_type() -> None:
    assert classify(TL_LEGACY_CHAT) == "inference"


def test_traceloop_legacy_rerank_is_data() -> None:
    assert classify(TL_LEGACY_RERANK) == "data"


def test_traceloop_legacy_names_give_provider_and_tokens() -> None:
    assert provider_of(TL_LEGACY_CHAT) == "openai"
    assert model_of(TL_LEGACY_CHAT) == "gpt-4o-2024-08-06"
    assert (input_tokens_of(TL_LEGACY_CHAT), output_tokens_of(TL_LEGACY_CHAT)) == (15, 9)


@pytest.mark.parametrize("attributes", [TL_CHROMA, TL_PINECONE, TL_QDRANT])
def test_vector_store_spans_are_data(attributes: Attributes) -> None:
    assert classify(attributes) == "data"


# --- pydantic-ai and Logfire ---------------------------------------------------------------


def test_pydantic_ai_agent_run_is_a_workflow() -> None:
    assert classify(PAI_AGENT_RUN) == "workflow"


def test_pydantic_ai_chat_is_inference() -> None:
    assert classify(PAI_CHAT) == "inference"


def test_pydantic_ai_tool_is_a_tool() -> None:
    assert classify(PAI_TOOL) == "tool"


def test_pydantic_ai_decision_is_inference() -> None:
    assert classify(PAI_DECIDE) == "inference"


def test_pydantic_ai_ttft_is_read_from_the_metric_named_attribute() -> None:
    assert ttft_ms_of(PAI_CHAT) == pytest.approx(310.0)


def test_a_logfire_pending_span_makes_no_run() -> None:
    assert classify(PAI_AGENT_RUN_PENDING) is None
    assert not is_run_root(PAI_AGENT_RUN_PENDING, "invoke_agent support_agent", top_level=True)


# --- LangSmith -------------------------------------------------------------------------------


def test_langsmith_llm_is_inference() -> None:
    assert classify(LS_LLM) == "inference"


def test_langsmith_retriever_is_data_though_its_operation_says_embeddings() -> None:
    assert classify(LS_RETRIEVER) == "data"


def test_langsmith_prompt_is_transparent_though_its_operation_says_chat() -> None:
    assert classify(LS_PROMPT) is None


def test_langsmith_embedding_is_inference() -> None:
    assert classify(LS_EMBEDDING) == "inference"


def test_langsmith_tool_is_a_tool() -> None:
    assert classify(LS_TOOL) == "tool"


@pytest.mark.parametrize("attributes", [LS_CHAIN, LS_PARSER])
def test_langsmith_chain_and_parser_are_transparent(attributes: Attributes) -> None:
    assert classify(attributes) is None


# --- LiteLLM -----------------------------------------------------------------------------------


def test_litellm_async_call_is_inference() -> None:
    """Without the semconv opt-in the operation is the call type, ``acompletion``."""
    assert classify(LITELLM_ASYNC) == "inference"


def test_litellm_sync_call_is_inference() -> None:
    assert classify(LITELLM_SYNC) == "inference"


def test_litellm_embedding_call_is_inference() -> None:
    assert classify(LITELLM_EMBEDDING) == "inference"


def test_litellm_raw_request_span_is_transparent() -> None:
    assert classify(LITELLM_RAW_REQUEST) is None


def test_litellm_model_and_provider_are_read() -> None:
    assert model_of(LITELLM_ASYNC) == "gpt-4o-mini-2024-07-18"
    assert provider_of(LITELLM_ASYNC) == "openai"


def test_litellm_unknown_provider_counts_as_absent() -> None:
    assert provider_of(LITELLM_UNKNOWN_PROVIDER) is None


def test_litellm_v2_vector_store_operation_is_data() -> None:
    assert classify(LITELLM_V2_VECTOR_STORE) == "data"


def test_litellm_v2_responses_management_is_transparent() -> None:
    assert classify(LITELLM_V2_RESPONSES_ADMIN) is None


# --- databases and the unknown -------------------------------------------------------------------


def test_a_database_span_by_the_new_attribute_is_data() -> None:
    assert classify(DB_NEW) == "data"


def test_a_database_span_by_the_old_attribute_is_data() -> None:
    assert classify(DB_OLD) == "data"


def test_an_http_client_span_is_transparent() -> None:
    assert classify(HTTP_CLIENT) is None


def test_an_unknown_operation_is_transparent() -> None:
    assert classify({"gen_ai.operation.name": "something_new"}) is None


def test_an_unknown_openinference_kind_is_transparent() -> None:
    assert classify({"openinference.span.kind": "SOMETHING_NEW"}) is None


@pytest.mark.parametrize(
    "key", ["chainlat.step.kind", "gen_ai.operation.name", "openinference.span.kind"]
)
def test_a_non_string_kind_value_is_ignored(key: str) -> None:
    assert classify({key: ["chat"]}) is None


def test_no_attributes_is_transparent() -> None:
    assert classify({}) is None


# --- run roots and their names --------------------------------------------------------------------


def test_a_workflow_span_is_a_run_root_at_any_depth() -> None:
    assert is_run_root(GENAI_WORKFLOW, "invoke_workflow support-chat", top_level=False)


def test_a_top_level_openinference_chain_is_a_run_root() -> None:
    assert is_run_root(OI_CHAIN, "LangGraph", top_level=True)


def test_a_nested_openinference_chain_is_no_run_root() -> None:
    assert not is_run_root(OI_CHAIN, "RunnableSequence", top_level=False)


def test_a_top_level_langsmith_chain_is_a_run_root() -> None:
    assert is_run_root(LS_CHAIN, "RunnableSequence", top_level=True)


def test_a_top_level_model_call_is_no_run_root() -> None:
    assert not is_run_root(OI_LLM, "ChatOpenAI", top_level=True)


def test_the_workflow_name_attribute_names_the_run() -> None:
    assert workflow_name_of(GENAI_WORKFLOW, "invoke_workflow something-else") == "support-chat"


def test_the_agent_name_names_an_agent_run() -> None:
    assert workflow_name_of(GENAI_AGENT, "invoke_agent triage") == "triage"


def test_a_traceloop_agent_is_named_by_its_entity_not_the_enclosing_workflow() -> None:
    assert workflow_name_of(TL_AGENT, "researcher.agent") == "researcher"


def test_a_traceloop_workflow_is_named_by_its_entity() -> None:
    assert workflow_name_of(TL_WORKFLOW, "pipeline.workflow") == "pipeline"


def test_a_pydantic_ai_version_2_run_is_named_by_its_agent() -> None:
    attributes = {k: v for k, v in PAI_AGENT_RUN.items() if k != "gen_ai.agent.name"}
    assert workflow_name_of(attributes, "agent run") == "support_agent"


def test_without_a_name_attribute_the_invoke_prefix_is_removed() -> None:
    assert workflow_name_of({}, "invoke_agent triage") == "triage"


def test_without_a_name_attribute_a_chain_is_named_by_its_span() -> None:
    assert workflow_name_of(OI_CHAIN, "LangGraph") == "LangGraph"


def test_a_bare_prefix_is_kept_as_the_name() -> None:
    assert workflow_name_of({}, "invoke_workflow") == "invoke_workflow"


# --- model calls: model, provider, tokens, time to first token ------------------------------------


def test_the_response_model_wins_over_the_request_model() -> None:
    assert model_of(GENAI_CHAT) == "gpt-4o-mini-2024-07-18"


def test_the_new_provider_attribute_wins_over_the_old_one() -> None:
    assert provider_of({"gen_ai.provider.name": "azure.ai.openai", "gen_ai.system": "az"}) == (
        "azure.ai.openai"
    )


def test_no_model_is_none() -> None:
    assert model_of(HTTP_CLIENT) is None


def test_tokens_from_the_genai_attributes() -> None:
    assert (input_tokens_of(GENAI_CHAT), output_tokens_of(GENAI_CHAT)) == (120, 30)


def test_tokens_from_digit_strings() -> None:
    """OTLP JSON writes 64-bit integers as strings."""
    attributes = {"gen_ai.usage.input_tokens": "120", "gen_ai.usage.output_tokens": "30"}
    assert (input_tokens_of(attributes), output_tokens_of(attributes)) == (120, 30)


def test_a_bool_is_not_a_token_count() -> None:
    assert input_tokens_of({"gen_ai.usage.input_tokens": True}) is None


@pytest.mark.parametrize("value", [-1, "-1", "1.5", " 12", "", "١٢", 1.5, math.nan, None])
def test_a_value_that_is_no_count_is_no_token_count(value: object) -> None:
    assert output_tokens_of({"gen_ai.usage.output_tokens": value}) is None


def test_a_whole_float_is_a_token_count() -> None:
    assert input_tokens_of({"llm.token_count.prompt": 12.0}) == 12


def test_a_bad_new_count_gives_way_to_an_old_one() -> None:
    attributes = {"gen_ai.usage.input_tokens": "n/a", "gen_ai.usage.prompt_tokens": 7}
    assert input_tokens_of(attributes) == 7


def test_ttft_in_seconds_becomes_milliseconds() -> None:
    assert ttft_ms_of(GENAI_CHAT) == pytest.approx(250.0)


def test_chainlat_ttft_in_milliseconds_wins() -> None:
    attributes = {"chainlat.latency.ttft_ms": 180.5, "gen_ai.response.time_to_first_chunk": 0.25}
    assert ttft_ms_of(attributes) == 180.5


def test_ttft_from_a_numeric_string() -> None:
    assert ttft_ms_of({"gen_ai.response.time_to_first_chunk": "0.5"}) == pytest.approx(500.0)


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, -0.1, "NaN", "Infinity", "-1", True, "fast", None]
)
def test_a_ttft_that_is_not_finite_and_non_negative_is_rejected(value: object) -> None:
    assert ttft_ms_of({"gen_ai.response.time_to_first_chunk": value}) is None
    assert ttft_ms_of({"chainlat.latency.ttft_ms": value}) is None


def test_a_rejected_chainlat_ttft_gives_way_to_the_genai_one() -> None:
    attributes = {"chainlat.latency.ttft_ms": math.nan, "gen_ai.response.time_to_first_chunk": 0.1}
    assert ttft_ms_of(attributes) == pytest.approx(100.0)


# --- the table and the keys -----------------------------------------------------------------------


class Recording(Mapping[str, object]):
    """A mapping that notes every key asked for, however it is asked."""

    def __init__(self, data: Mapping[str, object]) -> None:
        self._data = dict(data)
        self.asked: set[str] = set()

    def __getitem__(self, key: str) -> object:
        self.asked.add(key)
        return self._data[key]

    def get(self, key: str, default: object = None) -> object:
        self.asked.add(key)
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.asked.add(key)
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the functions look keys up, they never scan")

    def __len__(self) -> int:
        return len(self._data)


def _ask_everything(attributes: Mapping[str, object]) -> set[str]:
    recording = Recording(attributes)
    classify(recording)
    is_run_root(recording, "span", top_level=True)
    is_run_root(recording, "span", top_level=False)
    workflow_name_of(recording, "span")
    model_of(recording)
    provider_of(recording)
    input_tokens_of(recording)
    output_tokens_of(recording)
    ttft_ms_of(recording)
    is_http_level(recording)
    has_output(recording)
    end_reason_of(recording)
    user_bot_latency_ms_of(recording)
    speech_input_of(recording)
    return recording.asked


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_key_read_is_in_keys(name: str) -> None:
    assert _ask_everything(SAMPLES[name]) <= KEYS


def test_every_key_in_keys_is_read() -> None:
    asked = set().union(*(_ask_everything(a) for a in [{}, *SAMPLES.values()]))
    assert asked == KEYS


def test_no_two_conventions_give_one_value_two_kinds() -> None:
    seen: dict[tuple[str, str], str | None] = {}
    for convention in CONVENTIONS:
        for key, values in convention.kinds.items():
            for value, kind in values.items():
                assert seen.setdefault((key, value), kind) == kind, (convention.name, key, value)


def test_every_convention_names_the_packages_it_was_checked_against() -> None:
    for convention in CONVENTIONS:
        assert convention.checked, convention.name
        assert convention.kinds, convention.name


def test_the_docstring_examples_hold() -> None:
    assert doctest.testmod(conventions, raise_on_error=True).failed == 0


def test_a_time_to_first_token_no_clock_could_hold_is_not_read() -> None:
    """1.8e299 s in nanoseconds is infinite: the rollup could not place the instant."""
    from chainlat._core.conventions import ttft_ms_of

    assert ttft_ms_of({"gen_ai.response.time_to_first_chunk": 1.7976931348623156e299}) is None
    assert ttft_ms_of({"chainlat.latency.ttft_ms": 2e12}) is None
    assert ttft_ms_of({"chainlat.latency.ttft_ms": 250.0}) == 250.0


# --- LiveKit Agents ----------------------------------------------------------------------


def test_livekit_tts_node_is_a_speech_call_and_its_llm_node_no_second_model_call() -> None:
    assert classify(LIVEKIT_TTS_NODE) == "inference"
    assert voice.operation_of(LIVEKIT_TTS_NODE) == "text_to_speech"
    assert classify(LIVEKIT_LLM_NODE) is None  # its llm_request (chat) is the call
    assert ttft_ms_of(LIVEKIT_LLM_NODE) == pytest.approx(210.0)


def test_livekit_agent_turn_says_how_it_ended_and_its_own_first_audio() -> None:
    assert classify(LIVEKIT_AGENT_TURN) == "workflow"
    assert end_reason_of(LIVEKIT_AGENT_TURN) == "completed"
    assert end_reason_of({**LIVEKIT_AGENT_TURN, "lk.interrupted": True}) == "interrupted"
    assert user_bot_latency_ms_of(LIVEKIT_AGENT_TURN) == pytest.approx(760.0)
