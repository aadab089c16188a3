"""How other instrumentations' spans become steps: one classifier, one versioned table.

chainlat reads traces written by many instrumentations. Each names the same things
differently, so every fact chainlat takes from a span goes through this module: the
step kind (:func:`classify`), whether the span makes a workflow run
(:func:`is_run_root`, :func:`is_container`), the run's name (:func:`workflow_name_of`),
and, through :mod:`chainlat._core.call_readings` (re-exported here), a model call's model,
provider, tokens and time to first token. :data:`KEYS` lists every attribute key read by
either, so a trace reader can drop the rest as it parses.

Which convention decides the kind, first match wins:

1. chainlat's own ``chainlat.step.kind``.
2. ``gen_ai.operation.name``, with the values of the GenAI conventions and of every
   instrumentation that extends them (OpenLLMetry, LiteLLM, pydantic-ai, util-genai).
   LangSmith writes ``chat`` on prompt spans and ``embeddings`` on retriever spans, so on
   those two values its ``langsmith.span.kind`` has the last word.
3. ``openinference.span.kind``, ``traceloop.span.kind``, ``langsmith.span.kind``,
   OpenLLMetry's older ``llm.request.type``, then the presence of ``db.system`` or
   ``db.system.name`` (databases and vector stores are data stages).
4. The Vercel AI SDK's ``ai.operationId``, Haystack's tool and component type (by the
   class name's suffix), then what the span carries (:func:`_by_shape`): an HTTP client
   span's POST to a model route, or a model with token usage, is a model call.
5. Anything else is transparent (None): framework glue, other HTTP spans, chains, unknown
   conventions. A few spans that carry no key that says what they are are known by their
   name, where a trace is read (:func:`kind_by_name`: Haystack's ``haystack.agent.step.llm``).

:data:`CONVENTIONS` is the table: per convention, the packages whose source it was read
in (name and version), the keys that classify a span with each value's kind, and the
other keys read. The classifier's value tables are built from it, so the table is what
runs. ``docs/integrations.md`` is the same table for people, with the caveats.

Decisions the packages leave open, taken here:

- ``invoke_agent``, OpenInference ``AGENT``, OpenLLMetry ``workflow`` and ``agent``
  make a run (``workflow``); a nested one is a run of its own inside the outer run.
- ``create_agent`` (building an agent object) and ``plan`` (a span around the model
  call that writes the plan) are transparent: the model call under ``plan`` is the step.
- OpenLLMetry ``task`` spans are transparent, whatever their name: retrieval under
  LangChain is its own ``vector_db_retrieve`` span, and guessing from names would need
  a pattern match on the hot path.
- Reranking (OpenInference ``RERANKER``, OpenLLMetry ``rerank``, LiteLLM ``rerank``) is
  a data stage: it is part of retrieval, even when a model serves it.
- ``fetch_response`` (fetching a background response) is inference: the wait is the
  model's.
- Logfire's pending spans (``logfire.span_type = pending_span``, a zero-length copy of a
  span taken at its start) never make a run; as steps they nest in the real span with
  the same kind, and the rollup counts such a pair once.
- Placeholder values ``unknown`` (OpenLLMetry writes ``gen_ai.response.model =
  "unknown"``, LiteLLM ``gen_ai.system = "Unknown"``) count as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from chainlat._core.attributes import (
    AGENT_NAME,
    AI_OPERATION_ID,
    AI_TELEMETRY_FUNCTION_ID,
    DB_SYSTEM,
    DB_SYSTEM_NAME,
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    GEN_AI_WORKFLOW_NAME,
    HAYSTACK_COMPONENT_TYPE,
    HAYSTACK_PIPELINE_NAME,
    HAYSTACK_TOOL_NAME,
    LANGSMITH_SPAN_KIND,
    LIVEKIT_RESPONSE_TTFB,
    LLM_REQUEST_TYPE,
    LOGFIRE_SPAN_TYPE,
    OPENINFERENCE_SPAN_KIND,
    PIPECAT_TURN_NUMBER,
    PYDANTIC_AI_AGENT_NAME,
    STEP_KIND,
    TRACELOOP_ENTITY_NAME,
    TRACELOOP_SPAN_KIND,
)
from chainlat._core.attributes import SpanKind as StepKind
from chainlat._core.call_readings import INPUT_TOKEN_KEYS, MODEL_KEYS, OUTPUT_TOKEN_KEYS, first_text
from chainlat._core.call_readings import CallPlan as CallPlan
from chainlat._core.call_readings import call_plan as call_plan
from chainlat._core.call_readings import call_readings as call_readings
from chainlat._core.call_readings import end_reason_of as end_reason_of
from chainlat._core.call_readings import first_count as first_count
from chainlat._core.call_readings import has_output as has_output
from chainlat._core.call_readings import input_tokens_of as input_tokens_of
from chainlat._core.call_readings import is_http_level as is_http_level
from chainlat._core.call_readings import model_of as model_of
from chainlat._core.call_readings import output_tokens_of as output_tokens_of
from chainlat._core.call_readings import provider_of as provider_of
from chainlat._core.call_readings import read_call as read_call
from chainlat._core.call_readings import speech_input_of as speech_input_of
from chainlat._core.call_readings import ttft_ms_of as ttft_ms_of
from chainlat._core.call_readings import user_bot_latency_ms_of as user_bot_latency_ms_of
from chainlat._core.convention_table import ANY_VALUE as ANY_VALUE
from chainlat._core.convention_table import CONVENTIONS as CONVENTIONS
from chainlat._core.convention_table import FIRST_TOKEN_EVENTS as FIRST_TOKEN_EVENTS
from chainlat._core.convention_table import Convention as Convention
from chainlat._core.model_routes import model_operation


def _values_of(key: str) -> dict[str, StepKind | None]:
    merged: dict[str, StepKind | None] = {}
    for convention in CONVENTIONS:
        merged.update(convention.kinds.get(key, {}))
    return merged


# Plain dicts, not the table's read-only views: a look-up in a dict is the cheapest there is.
_OWN_KINDS: Final = _values_of(STEP_KIND)
_OPERATION_KINDS: Final = _values_of(GEN_AI_OPERATION_NAME)
_LANGSMITH_KINDS: Final = _values_of(LANGSMITH_SPAN_KIND)
_OPENINFERENCE_KINDS: Final = _values_of(OPENINFERENCE_SPAN_KIND)
_TRACELOOP_KINDS: Final = _values_of(TRACELOOP_SPAN_KIND)
_REQUEST_TYPE_KINDS: Final = _values_of(LLM_REQUEST_TYPE)
_AI_SDK_KINDS: Final = _values_of(AI_OPERATION_ID)
_HAYSTACK_SUFFIXES: Final = tuple(
    pair
    for convention in CONVENTIONS
    for pair in convention.suffixes.get(HAYSTACK_COMPONENT_TYPE, ())
)
_LANGSMITH_RELABELLED: Final = frozenset({"chat", "embeddings"})
"""Operations LangSmith writes for more than one run type (``prompt`` is ``chat`` too)."""
_PENDING_SPAN: Final = "pending_span"

_WORKFLOW_NAME_KEYS: Final = (
    GEN_AI_WORKFLOW_NAME,
    TRACELOOP_ENTITY_NAME,
    GEN_AI_AGENT_NAME,
    AGENT_NAME,
    PYDANTIC_AI_AGENT_NAME,
    AI_TELEMETRY_FUNCTION_ID,
    HAYSTACK_PIPELINE_NAME,
)
"""The span's own name first: ``traceloop.workflow.name`` and ``chainlat.workflow.name``
are stamped on every span under a workflow, so they name the enclosing one, and are not
read."""
_WORKFLOW_PREFIXES: Final = ("invoke_workflow ", "invoke_agent ")

KEYS: Final[frozenset[str]] = frozenset(
    {
        key
        for convention in CONVENTIONS
        for key in (*convention.kinds, *convention.suffixes, *convention.reads)
    }
)
"""Every attribute key a function here reads: a trace reader may drop all others."""


def classify(attributes: Mapping[str, object]) -> StepKind | None:
    """The step kind of a span, from chainlat's attributes or another instrumentation's.

    Args:
        attributes: The span's attributes, values as OTLP or Jaeger JSON decode them.

    Returns:
        ``inference``, ``data``, ``tool``, ``workflow`` for a span that makes a run, or
        None for a transparent span (framework glue, HTTP, unknown conventions).

    Example:
        >>> classify({"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"})
        'inference'
    """
    # Called for every span read from a file: chainlat's own kind costs one look-up, a
    # GenAI operation two (three on chat and embeddings, which LangSmith also writes for
    # prompts and retrievers); the other conventions are asked only after both miss.
    own = attributes.get(STEP_KIND)
    if type(own) is str:
        kind = _OWN_KINDS.get(own)
        if kind is not None:
            return kind
    operation = attributes.get(GEN_AI_OPERATION_NAME)
    if type(operation) is str and operation in _OPERATION_KINDS:
        if operation in _LANGSMITH_RELABELLED:
            langsmith = attributes.get(LANGSMITH_SPAN_KIND)
            if type(langsmith) is str and langsmith in _LANGSMITH_KINDS:
                return _LANGSMITH_KINDS[langsmith]
        kind = _OPERATION_KINDS[operation]
        return kind if kind != "workflow" else _checked(kind, attributes)
    return _foreign(attributes)


def _checked(kind: StepKind | None, attributes: Mapping[str, object]) -> StepKind | None:
    """``kind``, unless it makes a run and the span is Logfire's placeholder for a running one."""
    if kind == "workflow" and attributes.get(LOGFIRE_SPAN_TYPE) == _PENDING_SPAN:
        return None
    return kind


def _foreign(attributes: Mapping[str, object]) -> StepKind | None:
    """The kind by the conventions that do not write ``gen_ai.operation.name``."""
    # Unrolled: most spans that get here are HTTP or framework spans that match nothing.
    value = attributes.get(OPENINFERENCE_SPAN_KIND)
    if type(value) is str and value in _OPENINFERENCE_KINDS:
        return _checked(_OPENINFERENCE_KINDS[value], attributes)
    value = attributes.get(TRACELOOP_SPAN_KIND)
    if type(value) is str and value in _TRACELOOP_KINDS:
        return _checked(_TRACELOOP_KINDS[value], attributes)
    value = attributes.get(LANGSMITH_SPAN_KIND)
    if type(value) is str and value in _LANGSMITH_KINDS:
        return _LANGSMITH_KINDS[value]
    value = attributes.get(LLM_REQUEST_TYPE)
    if type(value) is str and value in _REQUEST_TYPE_KINDS:
        return _REQUEST_TYPE_KINDS[value]
    value = attributes.get(AI_OPERATION_ID)
    if type(value) is str and value in _AI_SDK_KINDS:
        return _AI_SDK_KINDS[value]
    if DB_SYSTEM in attributes or DB_SYSTEM_NAME in attributes:
        return "data"
    if PIPECAT_TURN_NUMBER in attributes:
        return "workflow"
    if LIVEKIT_RESPONSE_TTFB in attributes:
        return "inference"
    if HAYSTACK_TOOL_NAME in attributes:
        return "tool"
    value = attributes.get(HAYSTACK_COMPONENT_TYPE)
    if type(value) is str:
        for suffix, kind in _HAYSTACK_SUFFIXES:
            if value.endswith(suffix):
                return kind
    return _by_shape(attributes)


def _by_shape(attributes: Mapping[str, object]) -> StepKind | None:
    """The kind by what a span carries, when no convention named it: a POST to a model route
    on an HTTP client span (:func:`~chainlat._core.model_routes.model_operation`), or a model
    and token usage together, are a model call."""
    if model_operation(attributes) is not None:
        return "inference"
    if not attributes.keys().isdisjoint(MODEL_KEYS) and (
        not attributes.keys().isdisjoint(INPUT_TOKEN_KEYS)
        or not attributes.keys().isdisjoint(OUTPUT_TOKEN_KEYS)
    ):
        return "inference"
    return None


_KINDS_BY_NAME: Final[dict[str, tuple[StepKind | None, str]]] = {
    name: (kind, convention.name)
    for convention in CONVENTIONS
    for name, kind in convention.names.items()
}
_ROOT_NAMES: Final = frozenset(name for convention in CONVENTIONS for name in convention.roots)
_CONTAINER_NAMES: Final = frozenset(
    name for convention in CONVENTIONS for name in convention.containers
)


def kind_by_name(span_name: str) -> tuple[StepKind | None, str] | None:
    """The step kind and source of a span that no attribute classifies, by its name alone
    (Haystack's ``haystack.agent.step.llm``); None for every other name.

    Example:
        >>> kind_by_name("haystack.agent.step.llm")
        ('inference', 'haystack')
    """
    return _KINDS_BY_NAME.get(span_name)


def is_container(span_name: str) -> bool:
    """Whether a run-root span is a session that holds turns (LiveKit's ``agent_session``,
    Pipecat's ``conversation``): never a run itself; the turns inside it are.

    Example:
        >>> is_container("agent_session")
        True
    """
    return span_name in _CONTAINER_NAMES


def is_run_root(attributes: Mapping[str, object], span_name: str, *, top_level: bool) -> bool:
    """Whether a span makes a workflow run.

    A span classified ``workflow`` always does. A framework chain does when it is the
    top of its trace (OpenInference ``CHAIN``, LangSmith ``chain``): LangChain and
    LangGraph name no workflow, so the outermost chain is the run; so does a pipeline's
    run (Haystack's ``haystack.pipeline.run``) at the top of its trace.

    Args:
        attributes: The span's attributes.
        span_name: The span's name (a pipeline's run is known by it).
        top_level: The span has no parent in its trace.

    Example:
        >>> is_run_root({"openinference.span.kind": "CHAIN"}, "LangGraph", top_level=True)
        True
    """
    if classify(attributes) == "workflow":
        return True
    if not top_level:
        return False
    if span_name in _ROOT_NAMES:
        return True
    return (
        attributes.get(OPENINFERENCE_SPAN_KIND) == "CHAIN"
        or attributes.get(LANGSMITH_SPAN_KIND) == "chain"
    ) and attributes.get(LOGFIRE_SPAN_TYPE) != _PENDING_SPAN


def workflow_name_of(attributes: Mapping[str, object], span_name: str) -> str:
    """The name of the workflow a run-root span ran: one rule for every command.

    The span's own workflow or agent name, by whichever convention wrote one, else the
    span name without its ``invoke_workflow `` or ``invoke_agent `` prefix.

    Example:
        >>> workflow_name_of({}, "invoke_workflow support-chat")
        'support-chat'
    """
    name = first_text(attributes, _WORKFLOW_NAME_KEYS)
    if name is not None:
        return name
    for prefix in _WORKFLOW_PREFIXES:
        if span_name.startswith(prefix) and len(span_name) > len(prefix):
            return span_name[len(prefix) :]
    return span_name
