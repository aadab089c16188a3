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
2. Every other key of :data:`CONVENTIONS` that classifies (a row's ``kinds`` and
   ``suffixes``), in the table's order: ``gen_ai.operation.name`` (the GenAI conventions
   and every instrumentation that extends them), ``openinference.span.kind``,
   ``traceloop.span.kind``, ``langsmith.span.kind``, OpenLLMetry's older
   ``llm.request.type``, the Vercel AI SDK's ``ai.operationId``, ``db.system`` and
   ``db.system.name`` (databases and vector stores are data stages), Pipecat's turn,
   LiveKit's first audio, Haystack's tool and component type (by the class name's
   suffix). The first key the span holds with a value a row knows decides; a row's
   ``overrides`` relabel another key's values (LangSmith writes ``chat`` on prompt spans
   and ``embeddings`` on retriever spans, so on those two values its
   ``langsmith.span.kind`` has the last word), and a row's ``placeholders`` keep a
   placeholder span (Logfire's pending span) from making a run.
3. What the span carries (:func:`_by_shape`): an HTTP client span's POST to a model
   route, or a model with token usage, is a model call.
4. Anything else is transparent (None): framework glue, other HTTP spans, chains, unknown
   conventions. A few spans that carry no key that says what they are are known by their
   name, where a trace is read and in the live rollup (:func:`kind_by_name`, through
   ``records.named_record``: Haystack's ``haystack.agent.step.llm``).

:data:`CONVENTIONS` is the table: per convention, the packages whose source it was read
in (name and version), the keys that classify a span with each value's kind, and the
other keys read, the span names that make a run or hold runs, and the chains that are a
run at the top of their trace. Everything :func:`classify`, :func:`is_run_root`,
:func:`is_container`, :func:`kind_by_name` and :func:`source_of` decide is built from it,
so the table is what runs: a new instrumentation is a new row. ``docs/integrations.md`` is the same
table for people, with the caveats.

What is not a row, and why:

- chainlat's own kind is asked before the table, and no placeholder rule touches it:
  chainlat's span processor wrote it knowing the span.
- The shapes (:func:`_by_shape`) read a URL's path against the model routes
  (:mod:`chainlat._core.model_routes`) and keys of several conventions together (a model
  and a token count, by any convention): a rule over a span, not a value of one key.
  The ``shape`` row describes them and lists the keys they read.
- The order in which the readings take their keys across conventions: the workflow's
  name (``_WORKFLOW_NAME_KEYS``: a workflow's name before an entity's before an agent's)
  and a call's model, provider, tokens and time to first token
  (:mod:`chainlat._core.call_readings`: the response's model before the request's, the
  GenAI keys before the older ones). A row lists the keys it reads; their rank among
  other rows' keys is a decision across rows, so it is one tuple per reading. The rows'
  ``reads`` hold every such key (``tests/core/test_conventions_keys.py``).

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
from typing import Final, NamedTuple

from chainlat._core.attributes import (
    AGENT_NAME,
    AI_TELEMETRY_FUNCTION_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_WORKFLOW_NAME,
    HAYSTACK_PIPELINE_NAME,
    PYDANTIC_AI_AGENT_NAME,
    STEP_KIND,
    TRACELOOP_ENTITY_NAME,
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
from chainlat._core.call_readings import streamed_of as streamed_of
from chainlat._core.call_readings import ttft_ms_of as ttft_ms_of
from chainlat._core.call_readings import user_bot_latency_ms_of as user_bot_latency_ms_of
from chainlat._core.convention_table import ANY_VALUE as ANY_VALUE
from chainlat._core.convention_table import CONVENTIONS as CONVENTIONS
from chainlat._core.convention_table import FIRST_TOKEN_EVENTS as FIRST_TOKEN_EVENTS
from chainlat._core.convention_table import WIRE_RANK
from chainlat._core.convention_table import WIRE_SOURCE as WIRE_SOURCE
from chainlat._core.convention_table import Convention as Convention
from chainlat._core.model_routes import model_operation


def _marks(table: tuple[Convention, ...], after_wire: bool) -> tuple[tuple[str, str], ...]:
    """(key, source) of every row's ``marks``, by rank then table order: those tried
    before the wire, or (``after_wire``) after it."""
    ranked = sorted(
        (c.mark_rank, i, key, c.source or c.name) for i, c in enumerate(table) for key in c.marks
    )
    return tuple(
        (key, source) for rank, _, key, source in ranked if (rank > WIRE_RANK) is after_wire
    )


_MARKS_BEFORE_WIRE: Final = _marks(CONVENTIONS, after_wire=False)
_MARKS_AFTER_WIRE: Final = _marks(CONVENTIONS, after_wire=True)


def source_of(attributes: Mapping[str, object]) -> str:
    """The convention a span's kind came from: two instrumentations of one call differ here.

    The first of the rows' ``marks`` the span holds, in their ``mark_rank`` order; a model
    call that carries an HTTP request method was traced at the wire (`WIRE_SOURCE`), tried
    at `WIRE_RANK`. Another convention's marker wins over ``chainlat.step.kind``, which
    chainlat's span processor adds to the foreign steps of a workflow. ``other`` when none.
    """
    for key, source in _MARKS_BEFORE_WIRE:
        if key in attributes:
            return source
    if is_http_level(attributes):
        return WIRE_SOURCE
    for key, source in _MARKS_AFTER_WIRE:
        if key in attributes:
            return source
    return "other"


def _values_of(key: str) -> dict[str, StepKind | None]:
    merged: dict[str, StepKind | None] = {}
    for convention in CONVENTIONS:
        merged.update(convention.kinds.get(key, {}))
    return merged


_Kinds = dict[str, "StepKind | None"]


class _Rule(NamedTuple):
    """How one classifying key's value gives a kind, every row's values merged."""

    kinds: _Kinds
    suffixes: tuple[tuple[str, StepKind | None], ...]
    """(value suffix, kind) pairs, tried in order when the value is none of ``kinds``'."""
    overrides: dict[str, tuple[tuple[str, _Kinds], ...]]
    """Value -> the (key, kinds) of the conventions that relabel it."""


def _rules() -> tuple[tuple[str, _Rule], ...]:
    """The table's classifying keys in its order, each with every row's values merged."""
    keys: dict[str, None] = {}
    for convention in CONVENTIONS:
        keys.update(dict.fromkeys((*convention.kinds, *convention.suffixes)))
    del keys[STEP_KIND]  # chainlat's own kind is asked first, apart (see classify)
    rules: list[tuple[str, _Rule]] = []
    for key in keys:
        suffixes = tuple(
            pair for convention in CONVENTIONS for pair in convention.suffixes.get(key, ())
        )
        relabelled: dict[str, list[tuple[str, _Kinds]]] = {}
        for convention in CONVENTIONS:
            for value in convention.overrides.get(key, ()):
                relabelled.setdefault(value, []).extend(
                    (other, _values_of(other)) for other in convention.kinds
                )
        overrides = {value: tuple(found) for value, found in relabelled.items()}
        rules.append((key, _Rule(_values_of(key), suffixes, overrides)))
    return tuple(rules)


# Plain dicts, not the table's read-only views: a look-up in a dict is the cheapest there is.
_OWN_KINDS: Final = _values_of(STEP_KIND)
_RULES: Final = _rules()
_FIRST_KEY, (_FIRST_KINDS, _FIRST_SUFFIXES, _FIRST_OVERRIDES) = _RULES[0]  # gen_ai.operation.name
# The first rule is asked inline (see classify); the loop asks it again only if it has more
# than a value table to give.
_ASKED: Final = _RULES[1:] if not _FIRST_SUFFIXES and ANY_VALUE not in _FIRST_KINDS else _RULES
_ASKED_KEYS: Final = frozenset(key for key, _ in _ASKED)
_PLACEHOLDERS: Final = tuple(pair for c in CONVENTIONS for pair in c.placeholders)
_CHAIN_ROOTS: Final = tuple(
    (key, frozenset(values)) for c in CONVENTIONS for key, values in c.chain_roots.items()
)

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
    # prompts and retrievers); the other keys are asked only after both miss.
    own = attributes.get(STEP_KIND)
    if isinstance(own, str):
        kind = _OWN_KINDS.get(own)
        if kind is not None:
            return kind
    # The first key (the GenAI operation) inline: most model calls stop there.
    value = attributes.get(_FIRST_KEY)
    if isinstance(value, str) and value in _FIRST_KINDS:
        kind = _FIRST_KINDS[value]
        if value in _FIRST_OVERRIDES:
            kind = _relabelled(kind, _FIRST_OVERRIDES[value], attributes)
        return kind if kind != "workflow" else _checked(kind, attributes)
    if attributes.keys().isdisjoint(_ASKED_KEYS):
        return _by_shape(attributes)  # most spans that get here: HTTP or glue, in C
    get = attributes.get
    for key, rule in _ASKED:
        value = get(key)
        if value is None:
            continue
        kinds, suffixes, overrides = rule
        if isinstance(value, str):
            if value in kinds:
                kind = kinds[value]
                if overrides and value in overrides:
                    kind = _relabelled(kind, overrides[value], attributes)
                return kind if kind != "workflow" else _checked(kind, attributes)
            for suffix, kind in suffixes:
                if value.endswith(suffix):
                    return kind if kind != "workflow" else _checked(kind, attributes)
        if ANY_VALUE in kinds:
            kind = kinds[ANY_VALUE]
            return kind if kind != "workflow" else _checked(kind, attributes)
    return _by_shape(attributes)


def _relabelled(
    kind: StepKind | None,
    relabels: tuple[tuple[str, _Kinds], ...],
    attributes: Mapping[str, object],
) -> StepKind | None:
    """``kind``, unless a convention that relabels its value knows the span's own key."""
    for other, other_kinds in relabels:
        relabel = attributes.get(other)
        if isinstance(relabel, str) and relabel in other_kinds:
            return other_kinds[relabel]
    return kind


def _checked(kind: StepKind | None, attributes: Mapping[str, object]) -> StepKind | None:
    """``kind``, unless it makes a run and the span is a placeholder for a running one."""
    if kind == "workflow":
        for key, value in _PLACEHOLDERS:
            if attributes.get(key) == value:
                return None
    return kind


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
STREAM_ENDS: Final = frozenset(
    name for convention in CONVENTIONS for name in convention.stream_ends
)
"""Every row's :attr:`~chainlat._core.convention_table.Convention.stream_ends`: span names
of the record that ends a streamed call whose own span ended with the response's headers."""


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
    for key, values in _CHAIN_ROOTS:
        value = attributes.get(key)
        if isinstance(value, str) and value in values:
            return _checked("workflow", attributes) is not None
    return False


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
