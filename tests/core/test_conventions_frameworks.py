"""The frameworks' own conventions (OpenInference, OpenLLMetry, pydantic-ai and Logfire,
LangSmith, LiteLLM, LiveKit Agents): each one's spans, as its package writes them, classified
and read."""

from __future__ import annotations

import pytest

from chainlat._core import voice
from chainlat._core.conventions import (
    classify,
    end_reason_of,
    input_tokens_of,
    is_run_root,
    model_of,
    output_tokens_of,
    provider_of,
    ttft_ms_of,
    user_bot_latency_ms_of,
)
from support.convention_samples import (
    LITELLM_ASYNC,
    LITELLM_EMBEDDING,
    LITELLM_RAW_REQUEST,
    LITELLM_SYNC,
    LITELLM_UNKNOWN_PROVIDER,
    LITELLM_V2_RESPONSES_ADMIN,
    LITELLM_V2_VECTOR_STORE,
    LIVEKIT_AGENT_TURN,
    LIVEKIT_LLM_NODE,
    LIVEKIT_TTS_NODE,
    LS_CHAIN,
    LS_EMBEDDING,
    LS_LLM,
    LS_PARSER,
    LS_PROMPT,
    LS_RETRIEVER,
    LS_TOOL,
    OI_AGENT,
    OI_DECISION,
    OI_EMBEDDING,
    OI_LLM,
    OI_RERANKER,
    OI_RETRIEVER,
    OI_TOOL,
    PAI_AGENT_RUN,
    PAI_AGENT_RUN_PENDING,
    PAI_CHAT,
    PAI_DECIDE,
    PAI_TOOL,
    TL_AGENT,
    TL_CHROMA,
    TL_LANGCHAIN_LLM,
    TL_LANGCHAIN_RETRIEVE,
    TL_LANGCHAIN_TASK,
    TL_LANGCHAIN_WORKFLOW,
    TL_LEGACY_CHAT,
    TL_LEGACY_RERANK,
    TL_PINECONE,
    TL_QDRANT,
    TL_TASK,
    TL_TOOL,
    TL_WORKFLOW,
    Attributes,
)

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
