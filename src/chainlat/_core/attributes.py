"""Every attribute key, span-name rule and metric name chainlat writes or reads.

``gen_ai.*`` keys follow the OpenTelemetry GenAI semantic conventions of
:data:`GEN_AI_CONVENTIONS` (the one place the version is pinned; older forms are still
read, see :mod:`chainlat._core.conventions`). ``chainlat.*`` keys are our own.
Times in ``*_ms`` attributes are milliseconds (floats); the semconv keys keep
their own units (seconds).
"""

from __future__ import annotations

from typing import Final, Literal

StepKind = Literal["inference", "data", "tool"]
"""The three kinds of step a chain spends its time in; the rest is overhead."""

STEP_KINDS: Final[tuple[StepKind, ...]] = ("inference", "data", "tool")

SpanKind = Literal["inference", "data", "tool", "workflow"]
"""What a span counts as in a workflow: a step kind, or ``workflow`` for a span that makes a
run (a nested workflow is also a step of the run around it)."""

GEN_AI_CONVENTIONS: Final = "open-telemetry/semantic-conventions-genai v0.1.0"
"""The GenAI conventions chainlat writes: their first standalone release (development status,
on top of the general conventions v1.42.0). Retrieval data stages are ``retrieval`` spans,
workflow spans carry ``gen_ai.agent.name`` beside ``gen_ai.workflow.name``, and every
workflow records ``gen_ai.workflow.duration``."""

TRACER_NAME: Final = "chainlat"
"""One fixed instrumentation scope for every span chainlat starts."""

# --- GenAI semantic conventions -------------------------------------------------
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
"""Seconds from the request to the first streamed chunk."""
GEN_AI_WORKFLOW_NAME: Final = "gen_ai.workflow.name"
GEN_AI_DATA_SOURCE_ID: Final = "gen_ai.data_source.id"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
"""On workflow spans beside ``gen_ai.workflow.name``: the conventions' ``invoke_agent``
internal span names its agent here."""
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
DB_SYSTEM: Final = "db.system"
DB_SYSTEM_NAME: Final = "db.system.name"

OP_INVOKE_WORKFLOW: Final = "invoke_workflow"
OP_EXECUTE_TOOL: Final = "execute_tool"
OP_RETRIEVAL: Final = "retrieval"
OP_SPEECH_TO_TEXT: Final = "speech_to_text"
OP_TEXT_TO_SPEECH: Final = "text_to_speech"
OP_REALTIME: Final = "realtime"
"""A speech-to-speech model's response in a realtime session (audio in, audio out, over one
WebSocket; docs/voice.md): its first token is its first audio."""
SPEECH_OPERATIONS: Final = (OP_SPEECH_TO_TEXT, OP_TEXT_TO_SPEECH)
"""The voice operations: the rollup splits inference time by them (docs/voice.md)."""
DATA_KIND: Final = "chainlat.data.kind"
"""A data stage's own operation (``feature-fetch``, ``etl``), when it is not a retrieval."""
DATA_SOURCE: Final = "chainlat.data.source"
"""The source of a data stage that is not a retrieval (``gen_ai.data_source.id`` belongs to
``retrieval`` spans: on another span, Jaeger's GenAI view calls it an unknown GenAI span)."""

# --- chainlat step attributes ---------------------------------------------------
STEP_KIND: Final = "chainlat.step.kind"
"""``inference``, ``data`` or ``tool``; ``workflow`` on a workflow span."""
STEP_INDEX: Final = "chainlat.step.index"
"""0-based start order of a step within its workflow."""
STEP_FOREIGN: Final = "chainlat.step.foreign"
"""``true`` on another instrumentation's step of a workflow, where chainlat's span processor
wrote ``chainlat.step.kind``: the span is not chainlat's own (docs/attributes.md, rule 17)."""
STEP_NAME: Final = "chainlat.step.name"
"""The step's own name (``chainlat.inference(..., step="plan")``,
``chainlat.step_name("plan")``): every command and budget keys a step by it when set, by
its span name otherwise."""
USER_FACING: Final = "chainlat.step.user_facing"
"""``true`` on the model call whose first token is the workflow's first output."""
WORKFLOW_FIRST_OUTPUT_MS: Final = "chainlat.workflow.first_output_ms"
"""Set by ``run.first_output()``: the application's own mark of its first output, in ms
from the workflow's start; the rollup uses it over every inferred rule."""
WORKFLOW_SPEECH_END_MS: Final = "chainlat.workflow.speech_end_ms"
"""Set by chainlat's Pipecat observer on Pipecat's ``turn`` span: the end of the caller's
words (the VAD's stop less the silence it waited), in ms from the span's start; the turn
starts there (``chainlat._core.turn_start``)."""
WORKFLOW_START_UNKNOWN: Final = "chainlat.workflow.start_unknown"
"""Set on a voice turn whose start is no known end of the caller's words, by what placed it
(``chainlat.realtime`` and chainlat's Pipecat observer under a server's ``semantic_vad``,
which waits as long as its model decides after the words): why, in a phrase. The run's
``unknown_start`` (docs/attributes.md, rule 16)."""
FIRST_OUTPUT_EVENT: Final = "chainlat.first_output"
"""Span event on the workflow span: ``run.first_output()`` marked this instant."""
WORKFLOW_NAME: Final = "chainlat.workflow.name"
"""Name of the workflow a step belongs to."""
CACHE_HIT: Final = "chainlat.cache.hit"
FIRST_TOKEN_EVENT: Final = "chainlat.first_token"
"""Span event at the instant the first content token arrived."""
LATENCY_TTFT_MS: Final = "chainlat.latency.ttft_ms"
VARIANT: Final = "chainlat.variant"
"""Configuration label of a workflow run (``small-planner``), for comparing runs."""
OUTCOME_SUCCESS: Final = "chainlat.outcome.success"
"""``true`` when the run did its job (``run.record_outcome(success=True)``)."""
OUTCOME_SCORE: Final = "chainlat.outcome.score"
"""A quality score of the run, higher is better (a rubric, a grader, a user rating)."""
OUTCOME_SPAN_NAME: Final = "record_outcome"
"""Name of the span ``chainlat.record_outcome(trace_id=...)`` adds to a finished trace."""

WORKFLOW_KIND_VALUE: Final = "workflow"

# --- the rollup, on the workflow span ---------------------------------------------
CHAIN_TOTAL_MS: Final = "chainlat.chain.total_ms"
CHAIN_INFERENCE_MS: Final = "chainlat.chain.inference_ms"
CHAIN_DATA_MS: Final = "chainlat.chain.data_ms"
CHAIN_TOOL_MS: Final = "chainlat.chain.tool_ms"
CHAIN_OVERHEAD_MS: Final = "chainlat.chain.overhead_ms"
CHAIN_INFERENCE_SUM_MS: Final = "chainlat.chain.inference_sum_ms"
CHAIN_DATA_SUM_MS: Final = "chainlat.chain.data_sum_ms"
CHAIN_TOOL_SUM_MS: Final = "chainlat.chain.tool_sum_ms"
CHAIN_PARALLELISM: Final = "chainlat.chain.parallelism"
CHAIN_STEP_COUNT: Final = "chainlat.chain.step_count"
CHAIN_INFERENCE_COUNT: Final = "chainlat.chain.inference_count"
CHAIN_DATA_COUNT: Final = "chainlat.chain.data_count"
CHAIN_TOOL_COUNT: Final = "chainlat.chain.tool_count"
CHAIN_CACHE_HITS: Final = "chainlat.chain.cache_hits"
CHAIN_INPUT_TOKENS: Final = "chainlat.chain.input_tokens"
CHAIN_OUTPUT_TOKENS: Final = "chainlat.chain.output_tokens"
CHAIN_CRITICAL_PATH: Final = "chainlat.chain.critical_path"
CHAIN_FIRST_OUTPUT_MS: Final = "chainlat.chain.first_output_ms"
"""From the workflow's start to the first output that reached the user (see docs/attributes.md)."""
CHAIN_FIRST_OUTPUT_INFERENCE_MS: Final = "chainlat.chain.first_output.inference_ms"
CHAIN_FIRST_OUTPUT_DATA_MS: Final = "chainlat.chain.first_output.data_ms"
CHAIN_FIRST_OUTPUT_TOOL_MS: Final = "chainlat.chain.first_output.tool_ms"
CHAIN_FIRST_OUTPUT_OVERHEAD_MS: Final = "chainlat.chain.first_output.overhead_ms"
CHAIN_UNRECORDED: Final = "chainlat.chain.unrecorded"
"""The model calls (step keys) whose end the trace does not record: the instrumentation ended
each span before its own events (docs/attributes.md, rule 13); absent when there is none."""
CHAIN_UNRECORDED_PARTS: Final = "chainlat.chain.unrecorded_parts"
"""What those ends leave unknown: ``inference`` and ``overhead`` always, ``data`` and ``tool``
when another step ran past such a call's recorded end, ``first_output`` and
``first_output_split`` when the first output (taken from a call's end) or its wait
depends on one."""
CHAIN_UNUSABLE: Final = "chainlat.chain.unusable"
"""The model calls (step keys) whose first token the trace gives by a value that is no time
(docs/attributes.md, rule 15): their first token is not known; absent when there is none."""
CHAIN_UNUSABLE_VALUES: Final = "chainlat.chain.unusable_values"
"""What each of those calls gives, in the same order (``metrics.ttfb = -1``)."""
CHAIN_UNUSABLE_PARTS: Final = "chainlat.chain.unusable_parts"
"""What those first tokens leave unknown: ``first_output`` and ``first_output_split`` when
the first output depends on one (it is then a lower bound); absent when it does not."""
CHAIN_UNCOUNTED_CALLS: Final = "chainlat.chain.uncounted_calls"
"""How many model calls the trace gives no token counts for (no usage, or a usage of
nothing: docs/attributes.md, rule 21), which ``input_tokens`` and ``output_tokens`` leave
out; absent when none. Cache hits and speech calls are never counted."""
CHAIN_SPEECH_TO_TEXT_MS: Final = "chainlat.chain.speech_to_text_ms"
"""Critical-path time in ``speech_to_text`` calls: a part of ``chainlat.chain.inference_ms``,
set on runs that made a speech call (docs/voice.md)."""
CHAIN_TEXT_TO_SPEECH_MS: Final = "chainlat.chain.text_to_speech_ms"
"""Critical-path time in ``text_to_speech`` calls: a part of ``chainlat.chain.inference_ms``."""
CHAIN_FIRST_OUTPUT_SPEECH_TO_TEXT_MS: Final = "chainlat.chain.first_output.speech_to_text_ms"
"""The part of ``chainlat.chain.first_output.inference_ms`` spent in ``speech_to_text`` calls."""
CHAIN_FIRST_OUTPUT_TEXT_TO_SPEECH_MS: Final = "chainlat.chain.first_output.text_to_speech_ms"
"""The part of ``chainlat.chain.first_output.inference_ms`` spent in ``text_to_speech`` calls."""
CHAIN_FIRST_OUTPUT_END_OF_TURN_MS: Final = "chainlat.chain.first_output.end_of_turn_ms"
"""The part of ``chainlat.chain.first_output.overhead_ms`` spent waiting for the end of the
caller's turn to be detected (endpointing): from the end of their words to the instant the
framework decided they had finished; set on voice turns whose trace says both
(docs/voice.md)."""
SAMPLING_PROBABILITY: Final = "chainlat.sampling.probability"
"""The probability a sampler kept this trace with (0 < p <= 1), set by the Collector tier:
percentiles weight each run by 1/p."""
TAIL_SAMPLING_POLICY: Final = "tailsampling.policy"
"""The tail sampler's record of the policy that kept a trace (a Collector feature gate)."""
CHAIN_COST_USD: Final = "chainlat.chain.cost_usd"
"""What the run's model calls cost, in US dollars, when prices are configured."""

# --- latency budgets, on the workflow span ------------------------------------------
BUDGET_OK: Final = "chainlat.budget.ok"
"""``true`` when the run kept every per-run limit of its workflow's budget; ``false`` when
it broke one, or one could not be judged on it (`BUDGET_NOT_JUDGED` says why)."""
BUDGET_NOT_JUDGED: Final = "chainlat.budget.not_judged"
"""Why a per-run limit could not be judged on the run (a cost limit on a run whose cost is
not known: a call without a price or without token counts)."""
BUDGET_TOTAL_MS: Final = "chainlat.budget.total_ms"
"""The per-run ``total`` limit, when the budget sets one."""
BUDGET_EXCEEDED_EVENT: Final = "chainlat.budget.exceeded"
"""Span event, one per broken limit, at the workflow's end."""
BUDGET_TARGET: Final = "chainlat.budget.target"
"""Which limit broke, as its key path inside the workflow's budget (``total``,
``steps."chat gpt-4o".ttft``)."""
BUDGET_LIMIT_MS: Final = "chainlat.budget.limit_ms"
BUDGET_ACTUAL_MS: Final = "chainlat.budget.actual_ms"

# --- model calls seen on the wire (chainlat.httpx) ----------------------------------
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_STREAM: Final = "gen_ai.request.stream"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_FREQUENCY_PENALTY: Final = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY: Final = "gen_ai.request.presence_penalty"
GEN_AI_REQUEST_CHOICE_COUNT: Final = "gen_ai.request.choice.count"
GEN_AI_REQUEST_ENCODING_FORMATS: Final = "gen_ai.request.encoding_formats"
GEN_AI_EMBEDDINGS_DIMENSION_COUNT: Final = "gen_ai.embeddings.dimension.count"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
"""Opt-in content: JSON ``[{"role", "parts": [{"type": "text", "content"}]}]``."""
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
HTTP_REQUEST_HEADER_PREFIX: Final = "http.request.header."
"""Followed by the lower-case header name; only allow-listed, never credentials."""
HTTP_RESPONSE_HEADER_PREFIX: Final = "http.response.header."

LATENCY_QUEUE_MS: Final = "chainlat.latency.queue_ms"
"""Waiting for a connection from the client's pool."""
LATENCY_CONNECT_MS: Final = "chainlat.latency.connect_ms"
"""TCP connect and TLS handshake; 0 on a reused connection."""
LATENCY_SEND_MS: Final = "chainlat.latency.send_ms"
"""Writing the request."""
LATENCY_WAIT_MS: Final = "chainlat.latency.wait_ms"
"""Request written to response headers received."""
LATENCY_RECEIVE_MS: Final = "chainlat.latency.receive_ms"
"""Response headers to the end of the body. queue + connect + send + wait + receive = duration."""
LATENCY_SERVER_MS: Final = "chainlat.latency.server_ms"
"""The server's own processing time up to the headers, as it reports it."""
LATENCY_NETWORK_MS: Final = "chainlat.latency.network_ms"
"""``wait_ms - server_ms`` (at least 0): transit and everything the server does not count."""
LATENCY_GENERATION_MS: Final = "chainlat.latency.generation_ms"
"""First output chunk to the last one (streams)."""
LATENCY_TPOT_MS: Final = "chainlat.latency.tpot_ms"
"""``generation_ms / (output tokens - 1)``: time per output token after the first (streams)."""
SERVER_TIMING_PREFIX: Final = "chainlat.server_timing."
"""``chainlat.server_timing.{metric}_ms``: each ``Server-Timing`` metric with a duration."""
STREAM_EVENTS_SKIPPED: Final = "chainlat.stream.events_skipped"
"""Stream events larger than the decoder's cap (16 MiB), skipped unread; the stream itself
reaches the application untouched."""
STREAM_CHUNKS: Final = "chainlat.stream.chunks"
"""Stream events that carried output (the samples of time per output chunk, plus one)."""
CONTENT_TRUNCATED: Final = "chainlat.content.truncated"
"""``true`` when captured content was cut to the configured length."""
REQUEST_BODY_UNREAD: Final = "chainlat.request.body_unread"
"""``true`` when the request body was too large to decode: the route alone recognised the
call, ``gen_ai.request.model`` comes from a search of the body's ends (or is missing), and
the other request attributes and the input messages are missing."""

# --- voice (docs/voice.md) -----------------------------------------------------------
GEN_AI_OUTPUT_TYPE: Final = "gen_ai.output.type"
"""``speech`` on a ``text_to_speech`` call."""
GEN_AI_SPEECH_VOICE: Final = "gen_ai.speech.voice"
GEN_AI_SPEECH_INPUT_LANGUAGE: Final = "gen_ai.speech.input.language"
GEN_AI_USAGE_AUDIO_INPUT_TOKENS: Final = "gen_ai.usage.audio.input_tokens"
"""Audio input tokens, a part of ``gen_ai.usage.input_tokens`` (the registry's spelling; the
voice-agents page writes ``gen_ai.usage.input_audio_tokens``, which readers accept too)."""
GEN_AI_USAGE_AUDIO_OUTPUT_TOKENS: Final = "gen_ai.usage.audio.output_tokens"
GEN_AI_AGENT_INVOCATION_END_REASON: Final = "gen_ai.agent.invocation.end_reason"
"""How a turn ended: ``completed``, ``interrupted`` (barge-in) or ``session_closed``."""
END_REASONS: Final = ("completed", "interrupted", "session_closed")
AUDIO_FORMAT: Final = "chainlat.audio.format"
"""The audio format asked of a speech call (``wav``, ``pcm``, ``mp3``...)."""
AUDIO_OUTPUT_BYTES: Final = "chainlat.audio.output_bytes"
"""Bytes of audio a ``text_to_speech`` call returned (the audio itself is never recorded)."""
AUDIO_INPUT_SECONDS: Final = "chainlat.audio.input_seconds"
"""Seconds of audio a ``speech_to_text`` call transcribed, when the response says."""
SPEECH_INPUT_CHARACTERS: Final = "chainlat.speech.input_characters"
"""Characters of text a ``text_to_speech`` call was asked to speak (the text is never recorded)."""
TRANSCRIPT_CHARACTERS: Final = "chainlat.speech.transcript_characters"
"""Characters of the transcript a ``speech_to_text`` call returned."""

# --- read from other instrumentations (chainlat._core.conventions) -------------------
# GenAI semantic conventions, older forms and extensions
GEN_AI_SYSTEM: Final = "gen_ai.system"
"""Deprecated for ``gen_ai.provider.name``; LiteLLM, LangSmith and OpenLLMetry write it."""
GEN_AI_USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
"""Deprecated for ``gen_ai.usage.input_tokens``; OpenLLMetry before 0.5 wrote it."""
GEN_AI_USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
"""Deprecated for ``gen_ai.usage.output_tokens``; OpenLLMetry before 0.5 wrote it."""
GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
"""Seconds: the conventions' metric name, which pydantic-ai also writes on its ``chat`` spans."""
GEN_AI_SERVER_TIME_TO_FIRST_TOKEN: Final = "gen_ai.server.time_to_first_token"
"""Milliseconds on a model call span, as strands-agents writes it (the conventions' metric of
that name is in seconds; no span attribute of the conventions carries it)."""
GEN_AI_COMPLETION_ROLE: Final = "gen_ai.completion.0.role"
"""OpenLLMetry's first output message (its role: short, unlike its content)."""
GEN_AI_COMPLETION_FINISH_REASON: Final = "gen_ai.completion.0.finish_reason"
LLM_OUTPUT_MESSAGE_ROLE: Final = "llm.output_messages.0.message.role"
"""OpenInference's first output message of an LLM span (``output.value`` is any span's
return value: a request builder returns one too)."""
OPENINFERENCE_FIRST_TOKEN_EVENT: Final = "First Token Stream Event"
"""OpenInference's span event at the first streamed chunk (openinference-instrumentation-openai
``_stream.py``, the LlamaIndex handler likewise)."""
OPENLLMETRY_CHUNK_EVENT: Final = "llm.content.completion.chunk"
"""OpenLLMetry's span event per streamed chunk: the first one is the first token."""

# --- OpenInference (Arize) ----------------------------------------------------------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
LLM_MODEL_NAME: Final = "llm.model_name"
LLM_REQUEST_MODEL_NAME: Final = "llm.request.model_name"
LLM_RESPONSE_MODEL_NAME: Final = "llm.response.model_name"
LLM_PROVIDER: Final = "llm.provider"
LLM_SYSTEM: Final = "llm.system"
LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
EMBEDDING_MODEL_NAME: Final = "embedding.model_name"
RERANKER_MODEL_NAME: Final = "reranker.model_name"
DECISION_MODEL_NAME: Final = "decision.model_name"
DECISION_REQUEST_MODEL_NAME: Final = "decision.request.model_name"
DECISION_RESPONSE_MODEL_NAME: Final = "decision.response.model_name"
DECISION_PROVIDER: Final = "decision.provider"
DECISION_SYSTEM: Final = "decision.system"
DECISION_TOKEN_COUNT_INPUT: Final = "decision.token_count.input"
DECISION_TOKEN_COUNT_OUTPUT: Final = "decision.token_count.output"
AGENT_NAME: Final = "agent.name"

# --- OpenLLMetry (Traceloop) --------------------------------------------------------
TRACELOOP_SPAN_KIND: Final = "traceloop.span.kind"
TRACELOOP_ENTITY_NAME: Final = "traceloop.entity.name"
"""The span's own entity: the decorated function, or the LangChain run."""
LLM_REQUEST_TYPE: Final = "llm.request.type"
"""OpenLLMetry's LLM spans before ``gen_ai.operation.name``; LiteLLM writes its call type."""
OPENLIT_SDK_NAME: Final = "telemetry.sdk.name"
"""OpenLIT stamps ``telemetry.sdk.name = "openlit"`` on each of its spans (a resource
attribute elsewhere): the mark of its convention."""
LLM_IS_STREAMING: Final = "llm.is_streaming"
"""OpenLLMetry's (and LiteLLM's) word on whether a call streamed: a boolean, or its text."""
GEN_AI_IS_STREAMING: Final = "gen_ai.is_streaming"
"""The same, as OpenLLMetry's newer instrumentations write it."""

# --- LangSmith, pydantic-ai and Logfire -----------------------------------------------
LANGSMITH_SPAN_KIND: Final = "langsmith.span.kind"
PYDANTIC_AI_AGENT_NAME: Final = "agent_name"
"""pydantic-ai's agent run span, instrumentation version 2 (``agent run``)."""
LOGFIRE_SPAN_TYPE: Final = "logfire.span_type"

# --- Pipecat (voice agents) ----------------------------------------------------------
PIPECAT_TURN_NUMBER: Final = "turn.number"
"""On Pipecat's ``turn`` span: one voice turn, a run."""
PIPECAT_TTFB: Final = "metrics.ttfb"
"""Seconds, on Pipecat's ``stt``, ``llm`` and ``tts`` spans: its time to first byte."""
PIPECAT_SERVICE_OPERATION: Final = "service.operation"
"""On the spans of Pipecat's realtime services (OpenAI Realtime, Gemini Live): the event
handled (``llm_setup``, ``llm_request``, ``llm_response``); their ``metrics.ttfb`` is the
service's last time to first byte, read when the span opened, not theirs."""
PIPECAT_USER_BOT_LATENCY: Final = "turn.user_bot_latency_seconds"
PIPECAT_WAS_INTERRUPTED: Final = "turn.was_interrupted"
PIPECAT_ENDED_BY_CONVERSATION_END: Final = "turn.ended_by_conversation_end"
PIPECAT_TURN_SPAN: Final = "turn"
PIPECAT_STT_SPAN: Final = "stt"
"""Pipecat's speech-to-text span: opened at the start of the caller's speech (backdated by
its VAD's ``start_secs``), ended on the final transcript."""

# --- LiveKit Agents (voice agents) ---------------------------------------------------
# livekit-agents==1.8.9 livekit/agents/telemetry/trace_types.py; units and spans from the
# places that set them (docs/voice.md, "LiveKit Agents").
LIVEKIT_RESPONSE_TTFT: Final = "lk.response.ttft"
"""Seconds, on ``llm_node``: its time to first token, from the node's start."""
LIVEKIT_RESPONSE_TTFB: Final = "lk.response.ttfb"
"""Seconds, on ``tts_node``: its first audio, after the TTS got its first text (not after
the node's start)."""
LIVEKIT_INTERRUPTED: Final = "lk.interrupted"
"""On ``agent_turn``: the speech was interrupted."""
LIVEKIT_E2E_LATENCY: Final = "lk.e2e_latency"
"""Seconds, on ``agent_turn``: from the user's end of speech to the agent starting to speak."""
LIVEKIT_AGENT_TURN_SPAN: Final = "agent_turn"
LIVEKIT_USER_SPEAKING_SPAN: Final = "user_speaking"
"""One stretch of the caller's speech, ended at the VAD's end of speech backdated by the
silence it waited on (voice/agent_session.py 2263-2284, voice/agent_activity.py 2469-2488)."""
LIVEKIT_EOU_WAIT_SPAN: Final = "eou_wait"
"""The end-of-turn wait: from the caller's last speech to the turn decision
(voice/audio_recognition.py 373, 2133-2180)."""

# --- the Vercel AI SDK (JavaScript), its ``ai.*`` spans ----------------------------------
# ai 3 to 6 by default, ``LegacyOpenTelemetry`` of @ai-sdk/otel in ai 7: one span per call
# of the SDK (``ai.generateText``), one per provider call under it
# (``ai.generateText.doGenerate``), one per tool call (``ai.toolCall``).
AI_OPERATION_ID: Final = "ai.operationId"
"""The span's operation (``ai.streamText.doStream``): what classifies an ``ai.*`` span."""
AI_TELEMETRY_FUNCTION_ID: Final = "ai.telemetry.functionId"
"""The ``functionId`` the application gave the call's telemetry: the run's name."""
AI_MODEL_ID: Final = "ai.model.id"
AI_MODEL_PROVIDER: Final = "ai.model.provider"
AI_USAGE_INPUT_TOKENS: Final = "ai.usage.inputTokens"
AI_USAGE_OUTPUT_TOKENS: Final = "ai.usage.outputTokens"
AI_USAGE_PROMPT_TOKENS: Final = "ai.usage.promptTokens"
"""ai 3 and 4's spelling of ``ai.usage.inputTokens``."""
AI_USAGE_COMPLETION_TOKENS: Final = "ai.usage.completionTokens"
AI_RESPONSE_MS_TO_FIRST_CHUNK: Final = "ai.response.msToFirstChunk"
"""Milliseconds from a ``doStream`` span's start to the stream's first chunk."""
AI_STREAM_MS_TO_FIRST_CHUNK: Final = "ai.stream.msToFirstChunk"
"""ai 3 and 4's spelling of ``ai.response.msToFirstChunk``."""
AI_RESPONSE_FINISH_REASON: Final = "ai.response.finishReason"
AI_RESPONSE_ID: Final = "ai.response.id"
AI_TOOL_CALL_NAME: Final = "ai.toolCall.name"

# --- Haystack, through its OpenTelemetry tracer ------------------------------------------
MASTRA_SPAN_TYPE: Final = "mastra.span.type"
"""Mastra's own type of a span it exports (``model_inference``, ``tool_call``): its mark."""
MASTRA_COMPLETION_START_TIME: Final = "mastra.completion_start_time"
"""The instant a Mastra model call's first chunk came, an ISO 8601 date (@mastra/otel-exporter
1.4.0), not a duration."""
GENKIT_SUBTYPE: Final = "genkit:metadata:subtype"
"""The type of the action a Genkit span ran (``model``, ``tool``, ``flow``, ``retriever``):
Genkit writes no ``gen_ai`` key (genkit 1.42.0, ``@genkit-ai/core`` ``action.ts``)."""
GENKIT_TYPE: Final = "genkit:type"
"""``action``, ``util`` (``generate``), on every span Genkit writes: its convention's mark."""
GENKIT_NAME: Final = "genkit:name"
"""The action's name; a model action's is its model (``openai/gpt-4o``, plugin first)."""
HAYSTACK_COMPONENT_TYPE: Final = "haystack.component.type"
"""The class of the component a ``haystack.component.run`` span ran (``OpenAIChatGenerator``)."""
HAYSTACK_COMPONENT_NAME: Final = "haystack.component.name"
HAYSTACK_TOOL_NAME: Final = "haystack.tool.name"
"""On an agent's tool step: the tool it ran."""
HAYSTACK_PIPELINE_NAME: Final = "haystack.pipeline.name"

# --- Langfuse's SDKs (Python and JS), which write OpenTelemetry spans ------------------------
LANGFUSE_OBSERVATION_TYPE: Final = "langfuse.observation.type"
"""What a Langfuse observation is (``generation``, ``retriever``, ``tool``, ``span``): its
mark (langfuse 5.0.4, ``_client/attributes.py``)."""
LANGFUSE_MODEL_NAME: Final = "langfuse.observation.model.name"
LANGFUSE_USAGE_DETAILS: Final = "langfuse.observation.usage_details"
"""A generation's token usage, a JSON object: the provider's own names (``prompt_tokens``,
``completion_tokens`` from its OpenAI client) or Langfuse's (``input``, ``output``)."""
LANGFUSE_COMPLETION_START_TIME: Final = "langfuse.observation.completion_start_time"
"""The instant a generation's first chunk came, an ISO 8601 date written as a JSON string
(quotes included), not a duration."""

# --- MLflow Tracing (mlflow-tracing), which writes OpenTelemetry spans ------------------
# MLflow writes every attribute value as JSON text: a string in its quotes (``"LLM"``).
MLFLOW_SPAN_TYPE: Final = "mlflow.spanType"
"""What an MLflow span is (``"CHAT_MODEL"``, ``"RETRIEVER"``, ``"TOOL"``, in quotes): its mark
(mlflow-tracing 3.17.2, ``mlflow/entities/span.py`` ``SpanType``)."""
MLFLOW_LLM_MODEL: Final = "mlflow.llm.model"
MLFLOW_CHAT_USAGE: Final = "mlflow.chat.tokenUsage"
"""A model call's token usage, a JSON object: ``input_tokens`` (cache reads included),
``output_tokens``, ``total_tokens``, ``cache_read_input_tokens``."""
MLFLOW_FIRST_CHUNK_EVENT: Final = "mlflow.chunk.item.0"
"""The span event of a streamed call's first chunk (its autologging's, one per chunk)."""

# --- HTTP client spans of any language (OpenTelemetry's HTTP conventions) ----------------
HTTP_METHOD: Final = "http.method"
"""The HTTP conventions' older spelling of ``http.request.method``."""
URL_FULL: Final = "url.full"
"""The request's whole URL, on a CLIENT span (a server span writes ``url.path``)."""
HTTP_URL: Final = "http.url"
"""The HTTP conventions' older spelling of ``url.full``."""

# --- metrics ----------------------------------------------------------------------
METRIC_OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_WORKFLOW_DURATION: Final = "gen_ai.workflow.duration"
METRIC_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"
METRIC_TIME_PER_OUTPUT_CHUNK: Final = "gen_ai.client.operation.time_per_output_chunk"
METRIC_WORKFLOW_FIRST_OUTPUT: Final = "gen_ai.workflow.time_to_first_output"

# Bucket boundaries the conventions recommend for each histogram.
DURATION_BUCKETS_S: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip
TOKEN_BUCKETS: Final = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)  # fmt: skip
WORKFLOW_BUCKETS_S: Final = (1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200)


def data_stage_attributes(kind: str | None, source: str | None) -> dict[str, str]:
    """A data stage's attributes: a retrieval (``kind="retrieval"``, or a stage with a source
    and no kind) is a GenAI ``retrieval`` operation; another kind keeps its own name in
    ``chainlat.data.kind``, with no ``gen_ai.*`` key."""
    found = {STEP_KIND: "data"}
    if kind == OP_RETRIEVAL or (kind is None and source is not None):
        found[GEN_AI_OPERATION_NAME] = OP_RETRIEVAL
        if source is not None:
            found[GEN_AI_DATA_SOURCE_ID] = source
        return found
    if kind is not None:
        found[DATA_KIND] = kind
    if source is not None:
        found[DATA_SOURCE] = source
    return found


def workflow_span_name(name: str) -> str:
    """``invoke_workflow {name}``."""
    return f"{OP_INVOKE_WORKFLOW} {name}"


def inference_span_name(operation: str, model: str) -> str:
    """``{operation} {model}``, for example ``chat gpt-4o``."""
    return f"{operation} {model}"


def data_span_name(name: str) -> str:
    """``data {name}``."""
    return f"data {name}"


def tool_span_name(name: str) -> str:
    """``execute_tool {name}``."""
    return f"{OP_EXECUTE_TOOL} {name}"
