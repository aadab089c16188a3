"""Other instrumentations' spans as attribute sets, exactly as each package writes them (the
source file is named above each), for the convention tests in tests/core/."""

from __future__ import annotations

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

HTTP_CLIENT_OLD: Attributes = {
    "http.method": "POST",
    "http.url": "http://127.0.0.1:8000/v1/chat/completions",
    "http.status_code": 200,
}

HTTP_CLIENT_OTHER_ROUTE: Attributes = {
    "http.request.method": "GET",
    "url.full": "https://example.com/orders/42",
}

AI_SDK_DO_STREAM: Attributes = {
    "ai.operationId": "ai.streamText.doStream",
    "ai.model.id": "sim-answer",
    "ai.model.provider": "openai.chat",
    "gen_ai.system": "openai.chat",
    "gen_ai.request.model": "sim-answer",
    "ai.response.msToFirstChunk": 45.5,
    "ai.response.finishReason": "stop",
    "ai.usage.inputTokens": 53,
    "ai.usage.outputTokens": 20,
    "gen_ai.usage.input_tokens": 53,
    "gen_ai.usage.output_tokens": 20,
}

AI_SDK_V4_DO_GENERATE: Attributes = {
    "ai.operationId": "ai.generateText.doGenerate",
    "ai.model.id": "gpt-4o-mini",
    "ai.usage.promptTokens": 12,
    "ai.usage.completionTokens": 7,
    "ai.stream.msToFirstChunk": 30.0,
    "ai.response.id": "chatcmpl-1",
}

AI_SDK_GENERATE_TEXT: Attributes = {
    "ai.operationId": "ai.generateText",
    "ai.telemetry.functionId": "support-chat",
    "ai.usage.inputTokens": 285,
}

AI_SDK_TOOL_CALL: Attributes = {
    "ai.operationId": "ai.toolCall",
    "ai.toolCall.name": "lookup_order",
}

HAYSTACK_CHAT_GENERATOR: Attributes = {
    "haystack.component.name": "answer",
    "haystack.component.type": "OpenAIChatGenerator",
}

HAYSTACK_RETRIEVER: Attributes = {
    "haystack.component.name": "retriever",
    "haystack.component.type": "InMemoryBM25Retriever",
}

HAYSTACK_AGENT_TOOL: Attributes = {"haystack.tool.name": "lookup_order"}

HAYSTACK_PIPELINE: Attributes = {"haystack.pipeline.name": "support"}

# @mastra/otel-exporter 1.4.0 (its span converter), a model call of Mastra 1.71.0: the
# first chunk's instant, an ISO date (tests/data/foreign/mastra)
MASTRA_CHAT: Attributes = {
    "gen_ai.operation.name": "chat",
    "mastra.span.type": "model_inference",
    "gen_ai.request.model": "sim-plan",
    "gen_ai.provider.name": "sim",
    "gen_ai.usage.input_tokens": "131",
    "gen_ai.usage.output_tokens": "5",
    "gen_ai.response.finish_reasons": '["tool-calls"]',
    "mastra.completion_start_time": "2026-12-07T11:42:25.426Z",
}

# langfuse 5.0.4: its OpenAI client's generation (openai.py, _client/attributes.py
# create_generation_attributes), content left out; usage as the response gave it, JSON
LANGFUSE_GENERATION: Attributes = {
    "langfuse.observation.type": "generation",
    "langfuse.observation.model.name": "sim-answer",
    "langfuse.observation.usage_details": (
        '{"completion_tokens": 20, "prompt_tokens": 53, "total_tokens": 73, '
        '"completion_tokens_details": {"reasoning_tokens": 0}}'
    ),
    "langfuse.observation.completion_start_time": '"2026-12-07T17:27:42.001693Z"',
    "langfuse.observation.metadata.finish_reason": '"stop"',
}
# @observe(as_type="retriever") and @observe(as_type="tool") (_client/observe.py)
LANGFUSE_RETRIEVER: Attributes = {"langfuse.observation.type": "retriever"}
LANGFUSE_TOOL: Attributes = {"langfuse.observation.type": "tool"}

# mlflow-tracing 3.17.2: a chat call of its OpenAI autologging (mlflow/openai/autolog.py),
# inputs and outputs left out; every value JSON text, a string in its quotes
MLFLOW_CHAT: Attributes = {
    "mlflow.spanType": '"CHAT_MODEL"',
    "mlflow.llm.model": '"sim-answer"',
    "mlflow.chat.tokenUsage": (
        '{"input_tokens": 53, "output_tokens": 20, "total_tokens": 73, '
        '"cache_read_input_tokens": 0}'
    ),
    "mlflow.message.format": '"openai"',
}
# the key its span processor puts on a span not its own (here the wire's)
MLFLOW_ON_THE_WIRE: Attributes = {
    "mlflow.spanType": "null",
    "http.request.method": "POST",
    "url.full": "http://127.0.0.1:8000/v1/chat/completions",
}

MODEL_AND_TOKENS_ONLY: Attributes = {
    "gen_ai.request.model": "gpt-4o",
    "gen_ai.usage.input_tokens": 10,
}

SAMPLES: dict[str, Attributes] = {
    name: value
    for name, value in globals().items()
    if name.isupper() and isinstance(value, dict) and name != "SAMPLES"
}
