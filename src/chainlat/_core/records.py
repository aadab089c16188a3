"""Span records: each span of a workflow reduced to what the rollup needs.

The span processor (live) and every trace reader (offline) turn spans into
:class:`SpanRecord` through :func:`call_record`, so a workflow gets the same numbers
either way. Which convention wrote a model call (:func:`source_of`) tells two
instrumentations of one call apart (see :mod:`chainlat._core.twins`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from chainlat._core import attributes as attr
from chainlat._core import conventions
from chainlat._core.attributes import SpanKind

SpanKindLabel = SpanKind
"""The kind of a span in a workflow: a step kind, or ``workflow`` (kept name)."""


@dataclass(slots=True)
class SpanRecord:
    """One span of a workflow, reduced to what the rollup needs.

    Treated as immutable, but not frozen: a frozen dataclass costs a microsecond
    more per instance, and the trace readers make one per span read.
    """

    span_id: int
    parent_id: int | None
    name: str
    start_ns: int
    end_ns: int
    kind: SpanKindLabel | None = None
    """The step kind, ``workflow`` for a (nested) workflow, None if transparent."""
    cache_hit: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None
    ttft_ms: float | None = None
    """Time to first token of a model call; not used by the rollup, kept for budgets."""
    model: str | None = None
    """The model of a model call, when known: tells the same call seen twice from two."""
    source: str | None = None
    """The convention that classified the span (``chainlat``, ``gen_ai``, ``openinference``...):
    two instrumentations seeing one call write two spans of different sources."""
    step_name: str | None = None
    """``chainlat.step.name``: the name the application gave the step, when it gave one."""
    user_facing: bool = False
    """``chainlat.step.user_facing``: this call's first token is the workflow's first output."""
    cache_read_tokens: int | None = None
    """Input tokens read from the provider's prompt cache (priced apart)."""

    @property
    def label(self) -> str:
        """The step's key in budgets and reports: its step name, else its span name."""
        return self.step_name or self.name


classify: Final = conventions.classify
"""The step kind of a span from its attributes, chainlat's own or another instrumentation's
(see :mod:`chainlat._core.conventions` and docs/integrations.md)."""


WIRE: Final = "http"
"""The source of a model call traced at the HTTP level (``chainlat.instrument_httpx()``):
the span that times the call as the server answered it (see `compute_rollup`)."""


def source_of(attributes: Mapping[str, object]) -> str:
    """The convention a span's kind came from: two instrumentations of one call differ here.

    Another convention's marker wins over ``chainlat.step.kind``, which chainlat's span
    processor adds to the foreign steps of a workflow. A model call that carries an HTTP
    request method was traced at the wire: its source is `WIRE`.
    """
    if attr.OPENINFERENCE_SPAN_KIND in attributes:
        return "openinference"
    if attr.LANGSMITH_SPAN_KIND in attributes:
        return "langsmith"
    if attr.TRACELOOP_SPAN_KIND in attributes or attr.LLM_REQUEST_TYPE in attributes:
        return "traceloop"
    if conventions.is_http_level(attributes):
        return WIRE
    if attr.STEP_KIND in attributes:
        return "chainlat"
    if attr.GEN_AI_OPERATION_NAME in attributes:
        return "gen_ai"
    return "other"


def call_details(
    attributes: Mapping[str, object],
) -> tuple[int | None, int | None, float | None, str | None, str]:
    """What any convention says of a model call: input and output tokens, time to first
    token (ms), model and the source convention."""
    return (
        conventions.input_tokens_of(attributes),
        conventions.output_tokens_of(attributes),
        conventions.ttft_ms_of(attributes),
        conventions.model_of(attributes),
        source_of(attributes),
    )


def call_record(
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    kind: SpanKindLabel | None,
    attributes: Mapping[str, object],
    ttft_ms: float | None = None,
) -> SpanRecord:
    """A span's record, with :func:`call_details` for a model call."""
    cache_hit = attributes.get(attr.CACHE_HIT) is True
    step_name = step_name_of(attributes)
    if kind != "inference":
        record = SpanRecord(span_id, parent_id, name, start_ns, end_ns, kind, cache_hit)
        if step_name is not None:
            record.step_name = step_name
        return record
    tokens_in, tokens_out, ttft, model, source = call_details(attributes)
    return SpanRecord(
        span_id,
        parent_id,
        name,
        start_ns,
        end_ns,
        kind,
        cache_hit,
        tokens_in,
        tokens_out,
        ttft_ms if ttft_ms is not None else ttft,
        model,
        source,
        step_name,
        attributes.get(attr.USER_FACING) is True,
        cache_read_tokens_of(attributes),
    )


CACHE_READ_KEYS: Final = (
    attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    "gen_ai.usage.cache_read_input_tokens",
    "llm.token_count.prompt_details.cache_read",
)


def step_name_of(attributes: Mapping[str, object]) -> str | None:
    """``chainlat.step.name``, when it is a non-blank string."""
    name = attributes.get(attr.STEP_NAME)
    return name if type(name) is str and name.strip() else None


def cache_read_tokens_of(attributes: Mapping[str, object]) -> int | None:
    """Input tokens read from a prompt cache, as any convention writes them."""
    return conventions._first_count(attributes, CACHE_READ_KEYS)
