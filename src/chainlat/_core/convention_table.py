"""The table of every convention chainlat reads: per instrumentation, the packages whose
source it was read in (name and version), the keys that classify a span with each value's
kind, and the other keys read. :mod:`chainlat._core.conventions` builds its classifier
from it, so the table is what runs; ``docs/integrations.md`` is the same table for people.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final

from chainlat._core.attributes import (
    AGENT_NAME,
    AI_MODEL_ID,
    AI_MODEL_PROVIDER,
    AI_OPERATION_ID,
    AI_RESPONSE_FINISH_REASON,
    AI_RESPONSE_ID,
    AI_RESPONSE_MS_TO_FIRST_CHUNK,
    AI_STREAM_MS_TO_FIRST_CHUNK,
    AI_TELEMETRY_FUNCTION_ID,
    AI_USAGE_COMPLETION_TOKENS,
    AI_USAGE_INPUT_TOKENS,
    AI_USAGE_OUTPUT_TOKENS,
    AI_USAGE_PROMPT_TOKENS,
    AUDIO_INPUT_SECONDS,
    DB_SYSTEM,
    DB_SYSTEM_NAME,
    DECISION_MODEL_NAME,
    DECISION_PROVIDER,
    DECISION_REQUEST_MODEL_NAME,
    DECISION_RESPONSE_MODEL_NAME,
    DECISION_SYSTEM,
    DECISION_TOKEN_COUNT_INPUT,
    DECISION_TOKEN_COUNT_OUTPUT,
    EMBEDDING_MODEL_NAME,
    FIRST_TOKEN_EVENT,
    GEN_AI_AGENT_INVOCATION_END_REASON,
    GEN_AI_AGENT_NAME,
    GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
    GEN_AI_COMPLETION_FINISH_REASON,
    GEN_AI_COMPLETION_ROLE,
    GEN_AI_IS_STREAMING,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_REQUEST_STREAM,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,
    GEN_AI_SYSTEM,
    GEN_AI_USAGE_COMPLETION_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_PROMPT_TOKENS,
    GEN_AI_WORKFLOW_NAME,
    GENKIT_NAME,
    GENKIT_SUBTYPE,
    GENKIT_TYPE,
    HAYSTACK_COMPONENT_TYPE,
    HAYSTACK_PIPELINE_NAME,
    HAYSTACK_TOOL_NAME,
    HTTP_REQUEST_METHOD,
    LANGFUSE_COMPLETION_START_TIME,
    LANGFUSE_MODEL_NAME,
    LANGFUSE_OBSERVATION_TYPE,
    LANGFUSE_USAGE_DETAILS,
    LANGSMITH_SPAN_KIND,
    LATENCY_TTFT_MS,
    LIVEKIT_E2E_LATENCY,
    LIVEKIT_INTERRUPTED,
    LIVEKIT_RESPONSE_TTFB,
    LIVEKIT_RESPONSE_TTFT,
    LLM_IS_STREAMING,
    LLM_MODEL_NAME,
    LLM_OUTPUT_MESSAGE_ROLE,
    LLM_PROVIDER,
    LLM_REQUEST_MODEL_NAME,
    LLM_REQUEST_TYPE,
    LLM_RESPONSE_MODEL_NAME,
    LLM_SYSTEM,
    LLM_TOKEN_COUNT_COMPLETION,
    LLM_TOKEN_COUNT_PROMPT,
    LOGFIRE_SPAN_TYPE,
    MASTRA_COMPLETION_START_TIME,
    MASTRA_SPAN_TYPE,
    MLFLOW_CHAT_USAGE,
    MLFLOW_FIRST_CHUNK_EVENT,
    MLFLOW_LLM_MODEL,
    MLFLOW_SPAN_TYPE,
    OPENINFERENCE_FIRST_TOKEN_EVENT,
    OPENINFERENCE_SPAN_KIND,
    OPENLIT_SDK_NAME,
    OPENLLMETRY_CHUNK_EVENT,
    PIPECAT_ENDED_BY_CONVERSATION_END,
    PIPECAT_SERVICE_OPERATION,
    PIPECAT_TTFB,
    PIPECAT_TURN_NUMBER,
    PIPECAT_USER_BOT_LATENCY,
    PIPECAT_WAS_INTERRUPTED,
    PYDANTIC_AI_AGENT_NAME,
    RERANKER_MODEL_NAME,
    SPEECH_INPUT_CHARACTERS,
    STEP_KIND,
    TRACELOOP_ENTITY_NAME,
    TRACELOOP_SPAN_KIND,
)
from chainlat._core.attributes import SpanKind as StepKind
from chainlat._core.model_routes import METHOD_KEYS, URL_KEYS

WIRE_SOURCE: Final = "http"
"""The source of a model call traced at the wire (it carries an HTTP request method)."""
WIRE_RANK: Final = 3
"""Where the wire is tried among the conventions' ``marks`` (:attr:`Convention.mark_rank`):
after the vendors' own keys, before chainlat's, LiveKit's and the generic ones."""

ANY_VALUE: Final = "*"
"""In :attr:`Convention.kinds`: the key's presence decides, whatever its value."""


@dataclass(frozen=True, slots=True)
class UsageObject:
    """How a JSON object of token counts gives a call's input and output tokens: by its own
    top-level counts, or a nested one where a name is a dotted path.

    Attributes:
        input: The names of its input tokens, tried in order.
        output: The names of its output tokens, tried in order.
        parts: Name -> the prefix of its parts' names: that name counts the tokens none of
            its parts does, so its parts are added to it (Langfuse's ``input`` leaves out
            ``input_cached_tokens``, which OpenAI's ``prompt_tokens`` holds).
        not_parts: Prefixes of names that begin as a part's but are none (Langfuse's
            ``input_priority``: the tier some tokens were served at, not a share of them).
        cache_read: The names of its input tokens read from a prompt cache, tried in order
            (a part of its input, priced apart); a dotted name is a path into a nested
            object (``prompt_tokens_details.cached_tokens``).
    """

    input: tuple[str, ...]
    output: tuple[str, ...]
    parts: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    not_parts: tuple[str, ...] = ()
    cache_read: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Convention:
    """One instrumentation's vocabulary, as read in the source of the packages named.

    Attributes:
        name: Short name of the convention.
        checked: ``distribution==version`` of each package read, or a repository path.
        kinds: Attribute key -> value -> step kind; None marks a value known to be
            transparent, so it is not mistaken for one nobody has checked.
        reads: The other keys read from its spans: model, provider, tokens, TTFT, names.
        suffixes: Attribute key -> (value suffix, step kind) pairs, tried in order when
            the value is none of ``kinds``' (a class name, ``OpenAIChatGenerator``).
        names: Span name -> step kind, for spans with no attribute that says.
        roots: Span names that make a run at the top of their trace.
        containers: Span names of sessions: never a run, the turns inside are.
        shapes: What is classified by code, not by a key's value (described, for people).
        overrides: Values of another convention's key that this one's kinds relabel.
        placeholders: (key, value) pairs of a placeholder span, which never makes a run.
        chain_roots: Key -> values of a chain that is a run at the top of its trace.
        untimed: Keys whose presence says a span's time to first token is not its own.
        stream_ends: Span names of the record written when a streamed answer was read to
            its end, apart from the call's span (which ended with the response's headers).
    """

    name: str
    checked: tuple[str, ...]
    kinds: Mapping[str, Mapping[str, StepKind | None]]
    reads: tuple[str, ...] = ()
    suffixes: Mapping[str, tuple[tuple[str, StepKind | None], ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )
    names: Mapping[str, StepKind | None] = field(default_factory=lambda: MappingProxyType({}))
    """Span name -> step kind, for spans that carry no attribute saying what they are."""
    roots: tuple[str, ...] = ()
    """Span names that make a run when they are the top of their trace (a pipeline's run)."""
    containers: tuple[str, ...] = ()
    """Span names of sessions and conversations: never a run, their turns are."""
    shapes: tuple[str, ...] = ()
    """Rules that classify by what a span carries rather than by one key's value, as
    :func:`chainlat._core.conventions.classify` applies them last."""
    overrides: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Another convention's key -> its values on which this convention's ``kinds`` have the
    last word (LangSmith writes ``gen_ai.operation.name = chat`` on prompt spans too)."""
    placeholders: tuple[tuple[str, str], ...] = ()
    """(key, value) pairs that mark a placeholder of a span (Logfire's pending span): it
    never makes a run, whichever convention classified it."""
    chain_roots: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))
    """Key -> values of a chain that makes a run at the top of its trace (LangChain and
    LangGraph name no workflow: the outermost chain is the run)."""
    marks: tuple[str, ...] = ()
    """Keys whose presence says this convention wrote the span: the source a model call's
    record carries (:func:`chainlat._core.conventions.source_of`), which tells two
    instrumentations of one call apart."""
    mark_rank: int = 0
    """Where its ``marks`` are tried among every convention's, lowest first (ties in table
    order; the wire, a shape, at `WIRE_RANK`): a vendor's own key before the generic
    ``gen_ai`` ones others write too, and before ``chainlat.step.kind``, which chainlat's
    span processor adds to the foreign steps of a workflow."""
    source: str = ""
    """The source a span it marks is said to come from: its ``name`` when empty (two rows
    of one instrumentation share one)."""
    untimed: tuple[str, ...] = ()
    """Keys whose presence says the span's time-to-first-token keys describe another
    instant than its own first token (Pipecat's realtime services' ``service.operation``:
    their ``metrics.ttfb`` is the service's last): none of them is read on such a span
    (docs/attributes.md, rule 15)."""
    seconds: tuple[str, ...] = ()
    """Time-to-first-token keys this instrumentation writes in seconds where another row's
    reads them in milliseconds: on a span that carries one of its ``marks``, they are read
    in seconds (OpenLIT's ``gen_ai.server.time_to_first_token``; strands-agents writes the
    same key in ms)."""
    instants: tuple[str, ...] = ()
    """Keys that give a model call's first token as an instant (an ISO 8601 date), not a
    duration: read as the time from the span's start when it lies within the span, else
    as a first token that is no time (Mastra's ``mastra.completion_start_time``)."""
    streamed: Mapping[str, Mapping[str, bool]] = field(default_factory=lambda: MappingProxyType({}))
    """Key -> value -> whether the call streamed, where the value of a key says it rather
    than a key of its own (the AI SDK's ``ai.operationId``: ``ai.generateText.doGenerate``
    did not stream, ``ai.streamText.doStream`` did; docs/attributes.md, rules 17 and 18)."""
    usage: Mapping[str, UsageObject] = field(default_factory=lambda: MappingProxyType({}))
    """Key -> how its value reads, for a key whose value is a JSON object of token counts
    rather than one count (Langfuse's ``langfuse.observation.usage_details``). Read after
    every key that holds one count."""
    stream_ends: tuple[str, ...] = ()
    """Span names of a zero-length record an instrumentation writes when a streamed answer
    has been read to its end, beside the call's own span, which it ended when the response's
    headers came (Logfire's ``streaming response from ...``): the call lasted until that
    record, which is the same call, not another (docs/attributes.md, rule 20)."""


def _all(kind: StepKind | None, *values: str) -> dict[str, StepKind | None]:
    return dict.fromkeys(values, kind)


def _quoted(kind: StepKind | None, *values: str) -> dict[str, StepKind | None]:
    """`_all` of the values as JSON text writes them, in their quotes (MLflow's)."""
    return dict.fromkeys((f'"{value}"' for value in values), kind)


def _frozen(
    kinds: Mapping[str, Mapping[str, StepKind | None]],
) -> Mapping[str, Mapping[str, StepKind | None]]:
    return MappingProxyType({key: MappingProxyType(dict(v)) for key, v in kinds.items()})


_GEN_AI_MODEL_CALL: Final = (
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
)

OUTPUT_KEYS: Final = (
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_FINISH_REASONS,
    LLM_OUTPUT_MESSAGE_ROLE,
    GEN_AI_COMPLETION_ROLE,
    GEN_AI_COMPLETION_FINISH_REASON,
    AI_RESPONSE_ID,
    AI_RESPONSE_FINISH_REASON,
)
"""Any of these on a model call span says the call answered (see :func:`has_output`)."""

FIRST_TOKEN_EVENTS: Final = frozenset(
    {
        FIRST_TOKEN_EVENT,
        OPENINFERENCE_FIRST_TOKEN_EVENT,
        OPENLLMETRY_CHUNK_EVENT,
        MLFLOW_FIRST_CHUNK_EVENT,
    }
)
"""Span events at a streamed call's first token (or first chunk), by any convention."""

CONVENTIONS: Final[tuple[Convention, ...]] = (
    Convention(
        name="chainlat",
        marks=(STEP_KIND,),
        mark_rank=4,
        checked=("chainlat (this package)",),
        kinds=_frozen(
            {
                STEP_KIND: {
                    "inference": "inference",
                    "data": "data",
                    "tool": "tool",
                    "workflow": "workflow",
                },
            }
        ),
        reads=(LATENCY_TTFT_MS, HTTP_REQUEST_METHOD, SPEECH_INPUT_CHARACTERS, AUDIO_INPUT_SECONDS),
    ),
    Convention(
        name="gen_ai",
        marks=(GEN_AI_OPERATION_NAME,),
        mark_rank=6,
        checked=(
            "opentelemetry-semantic-conventions==0.66b2",
            "open-telemetry/semantic-conventions-genai model/gen-ai/registry.yaml, spans.yaml",
            "opentelemetry-util-genai==1.3b0",
            "opentelemetry-instrumentation-openai-v2==2.4b0",
        ),
        kinds=_frozen(
            {
                GEN_AI_OPERATION_NAME: {
                    "chat": "inference",
                    "text_completion": "inference",
                    "generate_content": "inference",
                    "embeddings": "inference",
                    "fetch_response": "inference",
                    "speech_to_text": "inference",
                    "text_to_speech": "inference",
                    "retrieval": "data",
                    "create_memory_store": "data",
                    "search_memory": "data",
                    "create_memory": "data",
                    "update_memory": "data",
                    "upsert_memory": "data",
                    "delete_memory": "data",
                    "delete_memory_store": "data",
                    "execute_tool": "tool",
                    "invoke_agent": "workflow",
                    "invoke_workflow": "workflow",
                    "create_agent": None,
                    "plan": None,
                },
            }
        ),
        reads=(
            *_GEN_AI_MODEL_CALL,
            GEN_AI_SYSTEM,
            GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
            GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,
            GEN_AI_WORKFLOW_NAME,
            GEN_AI_AGENT_NAME,
            GEN_AI_AGENT_INVOCATION_END_REASON,
            GEN_AI_REQUEST_STREAM,
            *OUTPUT_KEYS,
        ),
    ),
    Convention(
        name="openinference",
        marks=(OPENINFERENCE_SPAN_KIND,),
        mark_rank=0,
        checked=(
            "openinference-semantic-conventions==0.1.42",
            "openinference-instrumentation-langchain==0.1.80",
        ),
        kinds=_frozen(
            {
                OPENINFERENCE_SPAN_KIND: {
                    "LLM": "inference",
                    "EMBEDDING": "inference",
                    "DECISION": "inference",
                    "RETRIEVER": "data",
                    "RERANKER": "data",
                    "TOOL": "tool",
                    "AGENT": "workflow",
                    "CHAIN": None,
                    "PROMPT": None,
                    "GUARDRAIL": None,
                    "EVALUATOR": None,
                    "UNKNOWN": None,
                },
            }
        ),
        reads=(
            LLM_RESPONSE_MODEL_NAME,
            LLM_REQUEST_MODEL_NAME,
            LLM_MODEL_NAME,
            EMBEDDING_MODEL_NAME,
            RERANKER_MODEL_NAME,
            DECISION_RESPONSE_MODEL_NAME,
            DECISION_REQUEST_MODEL_NAME,
            DECISION_MODEL_NAME,
            LLM_PROVIDER,
            LLM_SYSTEM,
            DECISION_PROVIDER,
            DECISION_SYSTEM,
            LLM_TOKEN_COUNT_PROMPT,
            LLM_TOKEN_COUNT_COMPLETION,
            DECISION_TOKEN_COUNT_INPUT,
            DECISION_TOKEN_COUNT_OUTPUT,
            AGENT_NAME,
        ),
        # LangChain and LangGraph name no workflow: the outermost chain is the run.
        chain_roots=MappingProxyType({OPENINFERENCE_SPAN_KIND: ("CHAIN",)}),
    ),
    Convention(
        name="openllmetry",
        marks=(TRACELOOP_SPAN_KIND,),
        mark_rank=2,
        source="traceloop",
        checked=(
            "opentelemetry-semantic-conventions-ai==0.5.1",
            "traceloop-sdk==0.62.4",
            "opentelemetry-instrumentation-langchain==0.62.4",
            "opentelemetry-instrumentation-openai==0.62.4",
            "opentelemetry-instrumentation-chromadb==0.62.4",
            "opentelemetry-instrumentation-pinecone==0.62.4",
            "opentelemetry-instrumentation-qdrant==0.62.4",
            "opentelemetry-instrumentation-lancedb==0.62.4",
        ),
        kinds=_frozen(
            {
                GEN_AI_OPERATION_NAME: {
                    "llm_request": "inference",
                    "vector_db_retrieve": "data",
                    "execute_task": None,
                    "guardrail.run": None,
                    "guard": None,
                },
                TRACELOOP_SPAN_KIND: {
                    "workflow": "workflow",
                    "agent": "workflow",
                    "tool": "tool",
                    "task": None,
                    "unknown": None,
                },
            }
        ),
        reads=(
            *_GEN_AI_MODEL_CALL,
            GEN_AI_SYSTEM,
            GEN_AI_USAGE_PROMPT_TOKENS,
            GEN_AI_USAGE_COMPLETION_TOKENS,
            GEN_AI_AGENT_NAME,
            TRACELOOP_ENTITY_NAME,
            LLM_IS_STREAMING,
            GEN_AI_IS_STREAMING,
        ),
    ),
    Convention(
        name="langsmith",
        marks=(LANGSMITH_SPAN_KIND,),
        mark_rank=1,
        checked=("langsmith==0.15.1",),
        kinds=_frozen(
            {
                LANGSMITH_SPAN_KIND: {
                    "llm": "inference",
                    "embedding": "inference",
                    "retriever": "data",
                    "tool": "tool",
                    "chain": None,
                    "prompt": None,
                    "parser": None,
                },
            }
        ),
        reads=(GEN_AI_SYSTEM, GEN_AI_REQUEST_MODEL, GEN_AI_RESPONSE_MODEL),
        # LangSmith writes ``chat`` on prompt spans and ``embeddings`` on retriever spans:
        # on those two values its own span kind has the last word.
        overrides=MappingProxyType({GEN_AI_OPERATION_NAME: ("chat", "embeddings")}),
        chain_roots=MappingProxyType({LANGSMITH_SPAN_KIND: ("chain",)}),
    ),
    Convention(
        name="openllmetry-legacy",
        marks=(LLM_REQUEST_TYPE,),
        mark_rank=2,
        source="traceloop",
        checked=("opentelemetry-semantic-conventions-ai==0.5.1", "traceloop-sdk==0.62.4"),
        # OpenLLMetry's older key, asked after LangSmith's span kind.
        kinds=_frozen(
            {
                LLM_REQUEST_TYPE: {
                    "chat": "inference",
                    "completion": "inference",
                    "embedding": "inference",
                    "rerank": "data",
                    "unknown": None,
                },
            }
        ),
    ),
    Convention(
        name="ai-sdk",
        marks=(AI_OPERATION_ID,),
        mark_rank=7,
        checked=(
            "ai==7.0.185 with @ai-sdk/otel==1.0.185 (LegacyOpenTelemetry), "
            "packages/ai/src/telemetry, docs/ai-sdk-core/telemetry: collected data",
        ),
        kinds=_frozen(
            {
                # The SDK's call (``ai.generateText``) holds its provider calls and tools, as
                # ``invoke_agent`` does in the SDK's GenAI format: a run; the provider calls
                # are the model calls. ``ai.embed`` holds ``ai.embed.doEmbed``, the call.
                AI_OPERATION_ID: {
                    **_all(
                        "workflow",
                        "ai.generateText",
                        "ai.streamText",
                        "ai.generateObject",
                        "ai.streamObject",
                    ),
                    **_all(
                        "inference",
                        "ai.generateText.doGenerate",
                        "ai.streamText.doStream",
                        "ai.generateObject.doGenerate",
                        "ai.streamObject.doStream",
                        "ai.embed.doEmbed",
                        "ai.embedMany.doEmbed",
                    ),
                    "ai.toolCall": "tool",
                    "ai.embed": None,
                    "ai.embedMany": None,
                },
            }
        ),
        streamed=MappingProxyType(
            {
                AI_OPERATION_ID: MappingProxyType(
                    {
                        "ai.generateText.doGenerate": False,
                        "ai.generateObject.doGenerate": False,
                        "ai.streamText.doStream": True,
                        "ai.streamObject.doStream": True,
                    }
                )
            }
        ),
        reads=(
            AI_TELEMETRY_FUNCTION_ID,
            AI_MODEL_ID,
            AI_MODEL_PROVIDER,
            AI_USAGE_INPUT_TOKENS,
            AI_USAGE_OUTPUT_TOKENS,
            AI_USAGE_PROMPT_TOKENS,
            AI_USAGE_COMPLETION_TOKENS,
            AI_RESPONSE_MS_TO_FIRST_CHUNK,
            AI_STREAM_MS_TO_FIRST_CHUNK,
            *_GEN_AI_MODEL_CALL,
            GEN_AI_SYSTEM,
        ),
    ),
    Convention(
        name="db",
        checked=(
            "opentelemetry-semantic-conventions==0.66b2",
            "opentelemetry-instrumentation-chromadb==0.62.4 and the other vector stores above",
        ),
        kinds=_frozen({DB_SYSTEM: {ANY_VALUE: "data"}, DB_SYSTEM_NAME: {ANY_VALUE: "data"}}),
    ),
    Convention(
        name="pipecat",
        checked=(
            "pipecat-ai==1.14.0 pipecat/utils/tracing/service_attributes.py, "
            "service_decorators.py, turn_trace_observer.py",
        ),
        kinds=_frozen(
            {
                # Pipecat's own operation names on its service spans (chat is the LLM's).
                GEN_AI_OPERATION_NAME: {"stt": "inference", "tts": "inference"},
                PIPECAT_TURN_NUMBER: {ANY_VALUE: "workflow"},
            }
        ),
        # The conversation span (turn_trace_observer.py) holds every turn of the call.
        containers=("conversation",),
        reads=(
            PIPECAT_TTFB,
            PIPECAT_USER_BOT_LATENCY,
            PIPECAT_WAS_INTERRUPTED,
            PIPECAT_ENDED_BY_CONVERSATION_END,
            PIPECAT_SERVICE_OPERATION,
        ),
        # A realtime service's span is its handling of one server event (llm_response:
        # response.done, 0.3-0.7 ms), and the metrics.ttfb on it is the service's last time
        # to first byte, from its response.create to that response's first audio delta
        # (service_decorators.py 1631-1635, services/openai/realtime/llm.py 979-982,
        # 1315-1317): another response's, or none yet (302-312 ms on 0.3-0.4 ms spans of
        # answers that called a function, in the interop case pipecat-realtime).
        untimed=(PIPECAT_SERVICE_OPERATION,),
    ),
    Convention(
        name="livekit",
        marks=(LIVEKIT_RESPONSE_TTFB,),
        mark_rank=5,
        checked=(
            "livekit-agents==1.8.9 livekit/agents/telemetry/trace_types.py, "
            "voice/generation.py, voice/agent_activity.py, tts/tts.py, llm/llm.py",
        ),
        kinds=_frozen(
            {
                # agent_turn is invoke_agent and llm_request chat (the GenAI values above);
                # tts_node writes no operation: its first audio marks it.
                LIVEKIT_RESPONSE_TTFB: {ANY_VALUE: "inference"},
            }
        ),
        # agent_session (an invoke_workflow, voice/agent_session.py 988-1012) spans the
        # whole call, the wait for the caller included: a container of turns.
        containers=("agent_session",),
        reads=(
            LIVEKIT_RESPONSE_TTFT,
            LIVEKIT_INTERRUPTED,
            LIVEKIT_E2E_LATENCY,
        ),
    ),
    Convention(
        name="haystack",
        marks=(HAYSTACK_COMPONENT_TYPE,),
        mark_rank=8,
        checked=(
            "haystack-ai==3.4.1 haystack/tracing/tracer.py, haystack/core/pipeline, "
            "haystack/components/agents/agent.py",
            "opentelemetry-haystack==2.0.0",
        ),
        kinds=_frozen({HAYSTACK_TOOL_NAME: {ANY_VALUE: "tool"}}),
        # A component run is classified by its component's class: Haystack's own and the
        # integrations' follow these names (InMemoryBM25Retriever, OpenAIChatGenerator,
        # SentenceTransformersDocumentEmbedder, ToolInvoker).
        suffixes=MappingProxyType(
            {
                HAYSTACK_COMPONENT_TYPE: (
                    ("Retriever", "data"),
                    ("Ranker", "data"),
                    ("ChatGenerator", "inference"),
                    ("Generator", "inference"),
                    ("TextEmbedder", "inference"),
                    ("DocumentEmbedder", "inference"),
                    ("ToolInvoker", "tool"),
                ),
            }
        ),
        # An agent's model call is a span with no key but its content (written only with
        # HAYSTACK_CONTENT_TRACING_ENABLED): its name says what it is.
        names=MappingProxyType({"haystack.agent.step.llm": "inference"}),
        roots=("haystack.pipeline.run", "haystack.async_pipeline.run", "haystack.agent.run"),
        reads=(HAYSTACK_PIPELINE_NAME,),
    ),
    Convention(
        name="genkit",
        marks=(GENKIT_TYPE,),
        mark_rank=8,
        checked=(
            "genkit==1.42.0 (@genkit-ai/core lib/action.js, lib/registry: ACTION_TYPES; "
            "lib/tracing/instrumentation.js)",
            "@genkit-ai/compat-oai==1.42.0",
        ),
        kinds=_frozen(
            {
                # Every action runs in a span of its own, its type in the subtype key; the
                # ``generate`` helper (``genkit:type = util``, no subtype) is glue.
                GENKIT_SUBTYPE: {
                    **_all("inference", "model", "background-model", "embedder"),
                    **_all("data", "retriever", "indexer", "reranker"),
                    **_all("tool", "tool", "tool.v2"),
                    **_all("workflow", "flow", "agent"),
                    **_all(
                        None,
                        "custom",
                        "dynamic-action-provider",
                        "evaluator",
                        "executable-prompt",
                        "prompt",
                        "util",
                        "resource",
                        "check-operation",
                        "cancel-operation",
                        "agent-snapshot",
                        "agent-abort",
                    ),
                },
            }
        ),
        # A model action is named after its model; its usage is only inside genkit:output,
        # the response's JSON (content), which is not read.
        reads=(GENKIT_NAME,),
    ),
    Convention(
        name="mastra",
        marks=(MASTRA_SPAN_TYPE,),
        mark_rank=5,
        checked=(
            "@mastra/otel-exporter==1.4.0 (its span converter), @mastra/observability==1.17.9, "
            "@mastra/core==1.71.0",
        ),
        kinds=_frozen({}),
        shapes=(
            "its spans classify by the gen_ai row's gen_ai.operation.name (chat, "
            "execute_tool, invoke_agent); this row says who wrote them (mastra.span.type) "
            "and where its first token is: an instant, mastra.completion_start_time",
        ),
        reads=(MASTRA_COMPLETION_START_TIME,),
        instants=(MASTRA_COMPLETION_START_TIME,),
    ),
    Convention(
        name="langfuse",
        marks=(LANGFUSE_OBSERVATION_TYPE,),
        mark_rank=1,
        checked=(
            "langfuse==5.0.4 (_client/attributes.py, _client/constants.py, _client/observe.py, "
            "openai.py)",
        ),
        kinds=_frozen(
            {
                # @observe(as_type=...) and start_observation(as_type=...); its OpenAI
                # client writes each call as a generation. An agent observation is the
                # application's function around the loop, as OpenInference's AGENT is.
                LANGFUSE_OBSERVATION_TYPE: {
                    "generation": "inference",
                    "embedding": "inference",
                    "retriever": "data",
                    "tool": "tool",
                    "agent": "workflow",
                    **_all(None, "span", "chain", "event", "evaluator", "guardrail"),
                },
            }
        ),
        reads=(LANGFUSE_MODEL_NAME, LANGFUSE_USAGE_DETAILS, LANGFUSE_COMPLETION_START_TIME),
        # Langfuse's names, ``input`` and ``output``, are what its JavaScript OpenAI client,
        # its LangChain handler and an application reporting usage itself write: each
        # without its parts, written beside it (``input_cached_tokens``,
        # ``output_reasoning_tokens``; priority tiers are not subtracted). Its Python OpenAI
        # client passes on the response's usage as it came: ``prompt_tokens`` from Chat
        # Completions, ``input_tokens`` from the Responses API (its parts nested: only
        # the cached tokens are read, by their path).
        usage=MappingProxyType(
            {
                LANGFUSE_USAGE_DETAILS: UsageObject(
                    input=("input", "prompt_tokens", "input_tokens"),
                    output=("output", "completion_tokens", "output_tokens"),
                    parts=MappingProxyType({"input": "input_", "output": "output_"}),
                    not_parts=("input_priority", "output_priority"),
                    # OpenAI's cached tokens from its JavaScript client, LangChain's
                    # cache_read from its handler, and OpenAI's own usage as its Python
                    # client passes it on (Chat Completions, then the Responses API)
                    cache_read=(
                        "input_cached_tokens",
                        "input_cache_read",
                        "prompt_tokens_details.cached_tokens",
                        "input_tokens_details.cached_tokens",
                    ),
                )
            }
        ),
        instants=(LANGFUSE_COMPLETION_START_TIME,),
    ),
    Convention(
        name="mlflow",
        marks=(MLFLOW_SPAN_TYPE,),
        # Last: writing through the application's provider, MLflow's span processor puts
        # its key on every span, ``null`` on those not its own (the wire's, chainlat's):
        # any other mark says better who wrote a span. Ranked first, the wire's spans of
        # its calls read as MLflow's, and no call had its twin (10 calls of 5).
        mark_rank=9,
        checked=(
            "mlflow-tracing==3.17.2 (mlflow/entities/span.py SpanType, "
            "mlflow/tracing/constant.py SpanAttributeKey, mlflow/openai/autolog.py)",
        ),
        kinds=_frozen(
            {
                # @mlflow.trace(span_type=...) and its autologging (CHAT_MODEL for a chat
                # call of the openai SDK), each value as JSON text. ``null`` (another
                # instrumentation's span) is no value of its: the keys after it decide.
                MLFLOW_SPAN_TYPE: {
                    **_quoted("inference", "LLM", "CHAT_MODEL", "EMBEDDING"),
                    **_quoted("data", "RETRIEVER", "RERANKER", "MEMORY"),
                    **_quoted("tool", "TOOL"),
                    **_quoted("workflow", "AGENT"),
                    **_quoted(
                        None,
                        "CHAIN",
                        "PARSER",
                        "UNKNOWN",
                        "WORKFLOW",
                        "TASK",
                        "GUARDRAIL",
                        "EVALUATOR",
                    ),
                },
            }
        ),
        # The model as JSON text too (read without its quotes, as every model key is);
        # its first chunk is a span event of its own (FIRST_TOKEN_EVENTS).
        reads=(MLFLOW_LLM_MODEL, MLFLOW_CHAT_USAGE),
        usage=MappingProxyType(
            {
                MLFLOW_CHAT_USAGE: UsageObject(
                    input=("input_tokens",),
                    output=("output_tokens",),
                    cache_read=("cache_read_input_tokens",),
                )
            }
        ),
    ),
    Convention(
        name="pydantic-ai",
        checked=("pydantic-ai-slim==2.68.0", "logfire==5.4.0 (logfire-sdk==5.4.0)"),
        kinds=_frozen(
            {
                GEN_AI_OPERATION_NAME: {
                    "decide": "inference",
                    "image_generation": "inference",
                },
            }
        ),
        reads=(
            *_GEN_AI_MODEL_CALL,
            GEN_AI_SYSTEM,
            GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
            GEN_AI_AGENT_NAME,
            PYDANTIC_AI_AGENT_NAME,
            LOGFIRE_SPAN_TYPE,
        ),
        # Logfire exports a zero-length copy of a span at its start, then the span.
        placeholders=((LOGFIRE_SPAN_TYPE, "pending_span"),),
    ),
    Convention(
        name="logfire",
        checked=(
            "logfire==5.4.0 (llm_provider.py record_streaming, for OpenAI and Anthropic)",
            "logfire==5.4.0 (openai_agents.py, instrument_openai_agents(); openai-agents==0.24.0)",
        ),
        kinds=_frozen({}),
        shapes=(
            "its model calls classify by the gen_ai row's gen_ai.operation.name, or as a model "
            "with token usage; this row says how a streamed call of instrument_openai() and "
            "instrument_anthropic() ends, and names the OpenAI Agents SDK's function spans",
        ),
        # instrument_openai_agents() names each span by its message template and writes no
        # key that says its kind: a function tool's call is `Function: {name}` (the tool's
        # name in `name`). Its agent runs, turns and tasks stay transparent: the request
        # around them is the run, as for the SDK's other spans under a request.
        names=MappingProxyType({"Function: {name}": "tool"}),
        # The call's CLIENT span ends when the SDK hands the stream back; the stream, read to
        # its end, is a log record (logfire.span_type = log, its time the end, `duration` in
        # seconds the reading), under the call's parent, with the answer's attributes.
        stream_ends=("streaming response from {request_data[model]!r} took {duration:.2f}s",),
    ),
    Convention(
        name="litellm",
        checked=("litellm==1.110.2",),
        kinds=_frozen(
            {
                # Without OTEL_SEMCONV_STABILITY_OPT_IN the operation is LiteLLM's call
                # type as called (``acompletion``), ``chat`` only for ``completion``; the
                # opt-in and LITELLM_OTEL_V2 write the conventions' values, V2 also its own
                # ``litellm.*`` ones.
                GEN_AI_OPERATION_NAME: {
                    **_all(
                        "inference",
                        "acompletion",
                        "completion_with_retries",
                        "atext_completion",
                        "embedding",
                        "aembedding",
                        "responses",
                        "aresponses",
                        "anthropic_messages",
                        "aanthropic_messages",
                        "agenerate_content",
                        "generate_content_stream",
                        "agenerate_content_stream",
                        "aimage_generation",
                        "image_edit",
                        "aimage_edit",
                        "transcription",
                        "atranscription",
                        "speech",
                        "aspeech",
                        "ocr",
                        "aocr",
                        "moderation",
                        "amoderation",
                        "decisions",
                        "adecisions",
                        "litellm.moderation",
                    ),
                    **_all(
                        "data",
                        "rerank",
                        "arerank",
                        "search",
                        "asearch",
                        "vector_store_search",
                        "avector_store_search",
                        "query",
                        "aquery",
                        "litellm.vector_store_management",
                        "litellm.vector_store_file_management",
                    ),
                    "call_mcp_tool": "tool",
                    "litellm.responses_management": None,
                    "litellm.passthrough": None,
                },
            }
        ),
        reads=(*_GEN_AI_MODEL_CALL, GEN_AI_SYSTEM),
    ),
    Convention(
        name="openlit",
        marks=(OPENLIT_SDK_NAME,),
        mark_rank=5,
        checked=(
            "openlit==1.45.0 (__helpers.py common_span_attributes, its openai instrumentation)",
        ),
        kinds=_frozen({}),
        shapes=(
            "its spans classify by the gen_ai row's gen_ai.operation.name; this row says "
            "who wrote them (telemetry.sdk.name = openlit on each span) and how a value reads",
        ),
        reads=(OPENLIT_SDK_NAME,),
        # OpenLIT writes the time from the request to the first chunk, in seconds (a
        # non-streamed call's whole duration), and gen_ai.request.stream (rule 17).
        seconds=(GEN_AI_SERVER_TIME_TO_FIRST_TOKEN,),
    ),
    Convention(
        name="shape",
        checked=(
            "opentelemetry-semantic-conventions==0.66b2 (HTTP client spans, stable and older)",
            "@opentelemetry/instrumentation-undici==0.33.0 (Node.js)",
        ),
        kinds=_frozen({}),
        shapes=(
            "an HTTP client span (http.request.method or http.method, url.full or http.url) "
            "of a POST to a model route (chainlat._core.model_routes): a model call at the wire",
            "a request or response model and token usage, with nothing else that classifies "
            "the span: a model call",
        ),
        reads=(*METHOD_KEYS, *URL_KEYS),
    ),
)
"""Every convention understood, the versions checked, and how its spans classify.

The order is the classifier's: a span's kind comes from the first key, in the order the
rows name them (chainlat's own kind, then ``gen_ai.operation.name``, ...), whose value a
row knows; a row added at the end is asked after every key before it."""

UNTIMED_KEYS: Final = frozenset(key for c in CONVENTIONS for key in c.untimed)
"""Every row's :attr:`Convention.untimed`: a span with any of them has no time to first
token of its own."""
SECONDS_WHEN_MARKED: Final = tuple(
    (frozenset(c.marks), frozenset(c.seconds)) for c in CONVENTIONS if c.seconds
)
"""Every row's :attr:`Convention.seconds`: (its marks, the keys read in seconds on a span
that carries one of them)."""
