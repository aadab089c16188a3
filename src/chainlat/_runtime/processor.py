"""The span processor that ties steps to their workflow and collects what the rollup needs.

It sees every span on the provider, chainlat's and other instrumentations'
alike: on start it finds the workflow a span belongs to (through its parent),
numbers the steps and tags them; on end it keeps a small record for the
workflow's rollup. State lives only while a workflow is open, so memory grows
with the number of open workflows, never with the number run.
"""

from __future__ import annotations

import itertools
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace
from opentelemetry.sdk.trace import (
    ReadableSpan,
    Span,
    SpanProcessor,
    SynchronousMultiSpanProcessor,
    Tracer,
    TracerProvider,
)
from opentelemetry.trace import StatusCode

from chainlat._core import attributes as attr
from chainlat._core import conventions
from chainlat._core.conventions import classify
from chainlat._core.errors import internal_errors, logger
from chainlat._core.prices import Prices
from chainlat._core.rollup import SpanRecord, same_model
from chainlat._runtime.deferred import ROLLUP_KEYS, DeferredRollup, resolves
from chainlat._runtime.handover import Handover, first_to_start, sampler_is_blind
from chainlat._runtime.naming import current_step_name, step_naming
from chainlat._runtime.otel_compat import (
    attribute_dict,
    bounded_attributes,
    multi_processors,
    provider_processors,
)
from chainlat._runtime.span_attributes import attributes_of, set_attributes
from chainlat._runtime.span_records import to_records

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.metrics import Counter, Histogram, MeterProvider

Clock = Callable[[], int]
"""Returns the current time in integer nanoseconds since the epoch."""

_STEP_KINDS: Final = frozenset(attr.STEP_KINDS)
STEP_TWIN: Final = "chainlat.step.twin"
"""``true`` on a span that is a model call already counted by another span (its SDK-level
span around or beside it): the Collector tier's span metrics leave it out."""

OUT_OF_CONTEXT: Final = "chainlat.step.out_of_context"
"""``true`` on a step (or workflow) whose block exited in another context than it was
entered in: ended there, when its block exited, and counted in :data:`OUT_OF_CONTEXT_METRIC`."""
OUT_OF_CONTEXT_METRIC: Final = "chainlat.step.out_of_context"
"""Counter of steps ended from another context, by ``chainlat.step.kind``."""


class _WorkflowState:
    __slots__ = ("calls", "counter", "ended", "name", "parent", "records", "root_id")

    def __init__(self, root_id: int, name: str, parent: _WorkflowState | None) -> None:
        self.root_id = root_id
        self.name = name
        self.parent = parent
        self.records: list[ReadableSpan] = []
        """Its ended descendants (their rollup records are made when it is computed)."""
        self.ended: list[int] = []
        """Their span ids: still owned until the workflow ends (see ``_on_end``)."""
        self.counter = itertools.count()
        # Open model calls: span id -> (source convention, model), to spot a twin at its start;
        # or the call's attributes as they were at its start, until another call asks.
        self.calls: dict[int, tuple[str, str | None] | dict[str, object]] = {}


class _Metrics:
    def __init__(self, meter_provider: MeterProvider) -> None:
        meter = meter_provider.get_meter(attr.TRACER_NAME)
        self.operation_duration: Histogram = meter.create_histogram(
            attr.METRIC_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(attr.DURATION_BUCKETS_S),
        )
        self.token_usage: Histogram = meter.create_histogram(
            attr.METRIC_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(attr.TOKEN_BUCKETS),
        )
        self.time_to_first_chunk: Histogram = meter.create_histogram(
            attr.METRIC_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="Time to receive the first chunk in a streaming operation.",
            explicit_bucket_boundaries_advisory=list(attr.DURATION_BUCKETS_S),
        )
        self.time_per_output_chunk: Histogram = meter.create_histogram(
            attr.METRIC_TIME_PER_OUTPUT_CHUNK,
            unit="s",
            description="Time per output chunk after the first, in a streaming operation.",
            explicit_bucket_boundaries_advisory=list(attr.DURATION_BUCKETS_S),
        )
        self.workflow_duration: Histogram = meter.create_histogram(
            attr.METRIC_WORKFLOW_DURATION,
            unit="s",
            description="GenAI workflow duration.",
            explicit_bucket_boundaries_advisory=list(attr.WORKFLOW_BUCKETS_S),
        )
        self.first_output: Histogram = meter.create_histogram(
            attr.METRIC_WORKFLOW_FIRST_OUTPUT,
            unit="s",
            description="Time from a workflow's start to the first output the user saw.",
            explicit_bucket_boundaries_advisory=list(attr.DURATION_BUCKETS_S),
        )
        self.out_of_context: Counter = meter.create_counter(
            OUT_OF_CONTEXT_METRIC,
            unit="{step}",
            description="Steps whose block exited in another context than it was entered in.",
        )


_METRIC_KEYS: Final = (
    attr.GEN_AI_OPERATION_NAME,
    attr.GEN_AI_PROVIDER_NAME,
    attr.GEN_AI_REQUEST_MODEL,
    attr.GEN_AI_RESPONSE_MODEL,
    "server.address",
    "server.port",
    attr.ERROR_TYPE,
)


class ChainlatSpanProcessor(SpanProcessor):
    """Numbers steps, tags them with their workflow, and gathers records for the rollup.

    Add it to a TracerProvider before the exporting processors (configure()
    does), so that exporters see the step attributes it sets on start.
    """

    def __init__(self, *, clock: Clock | None = None, meter_provider: MeterProvider | None = None):
        self.clock: Clock = clock or time.time_ns
        # span id -> (its workflow, the kind its time counts as, the step it belongs to)
        self._owner: dict[int, tuple[_WorkflowState, str, int]] = {}
        self._seen_twice: set[int] = set()
        self._tags: dict[int, dict[str, str | int]] = {}
        self._states: dict[int, _WorkflowState] = {}
        self._metrics = _Metrics(meter_provider) if meter_provider is not None else None
        # Workflow span id -> its rollup left to the export, until the span's on_end.
        self._deferred: dict[int, DeferredRollup] = {}
        self._exports_resolve: tuple[object, bool] = ((), False)
        self._handover = Handover()
        self._hands_over: tuple[object, object, bool] = (None, None, False)
        self.out_of_context = 0
        """Steps ended from another context than the one they were entered in."""
        self.prices: Prices | None = None
        """Model prices: workflows on this provider get ``chainlat.chain.cost_usd``."""

    def use_meter_provider(self, meter_provider: MeterProvider | None) -> None:
        """Record the GenAI metrics through this meter provider (None: none)."""
        self._metrics = _Metrics(meter_provider) if meter_provider is not None else None

    # -- SpanProcessor ------------------------------------------------------------
    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # try/except rather than the internal_errors context manager: free when nothing fails.
        try:
            handed = self._handover.values
            if handed is not None:
                self._handover.values = None
                set_attributes(span, handed)
            self._on_start(span)
        except Exception:
            with internal_errors("tracking a span start"):
                raise

    def _on_start(self, span: Span) -> None:
        parent = span.parent
        entry = self._owner.get(parent.span_id) if parent is not None else None
        attributes = attributes_of(span)
        kind = classify(attributes)
        span_id = span.context.span_id
        if kind == "workflow":
            outer = entry[0] if entry is not None else None
            name = conventions.workflow_name_of(attributes, span.name)
            state = _WorkflowState(span_id, name, outer)
            self._states[span_id] = state
            if entry is not None:
                self._tag_step(span, span_id, entry[0], "workflow", attributes)
            around = entry[1] if entry is not None else "overhead"
            self._owner[span_id] = (state, around, span_id)
            return
        if entry is None:
            return
        state, around, step_id = entry
        if kind in _STEP_KINDS:
            assert kind is not None
            if step_naming.get() is not None and attr.STEP_NAME not in attributes:
                step_name = current_step_name()
                if step_name is not None:
                    span.set_attribute(attr.STEP_NAME, step_name)
            if around != kind:  # the same kind nested in itself is one step, not two
                self._tag_step(span, span_id, state, kind, attributes)
                step_id = span_id
                if kind == "inference" and self._beside_twin(span_id, state, attributes):
                    span.set_attribute(STEP_TWIN, True)
            else:
                if attr.STEP_KIND not in attributes:
                    span.set_attribute(attr.STEP_KIND, kind)
                # The outer span of a call seen twice records no metrics: the
                # inner, wire-level one does. Span metrics count the outer one, as the
                # rollup does, and leave out the inner one, which says it is a twin.
                self._seen_twice.add(step_id)
                span.set_attribute(STEP_TWIN, True)
            around = kind
        self._owner[span_id] = (state, around, step_id)

    def _beside_twin(
        self, span_id: int, state: _WorkflowState, attributes: Mapping[str, object]
    ) -> bool:
        """Whether this model call is one already open, seen by another instrumentation
        (a framework's callback span is not made current, so the wire-level span of its
        call starts beside it, not inside): an open call of another source and the same
        model. The earlier span counts, as in the rollup's ``find_twins``.

        A call that starts with no other open (one after another, the common case) keeps a
        copy of its attributes as they are now, and its source and model are read from it
        only if another call starts while it is open."""
        calls = state.calls
        twin = False
        if calls:
            source = conventions.source_of(attributes)
            model = conventions.model_of(attributes)
            for open_id, seen in calls.items():
                if isinstance(seen, dict):
                    seen = calls[open_id] = (
                        conventions.source_of(seen),
                        conventions.model_of(seen),
                    )
                if seen[0] != source and same_model(seen[1], model):
                    twin = True
                    break
        calls[span_id] = dict(attributes)
        return twin

    def _tag_step(
        self,
        span: Span,
        span_id: int,
        state: _WorkflowState,
        kind: str,
        attributes: Mapping[str, object],
    ) -> None:
        tags: dict[str, str | int] = {
            attr.STEP_INDEX: next(state.counter),
            attr.WORKFLOW_NAME: state.name,
        }
        if kind != "workflow" and attributes.get(attr.STEP_KIND) != kind:
            tags[attr.STEP_KIND] = kind
            tags[attr.STEP_FOREIGN] = True  # so that no reader takes it for chainlat's own
        bounded = bounded_attributes(span)
        if (
            type(attributes) is dict  # the span's own dict (attributes_of)
            and bounded is not None
            and bounded.max_value_len is None
            and (bounded.maxlen is None or len(attributes) + len(tags) <= bounded.maxlen)
        ):
            # The span is starting, in this thread: no other holds it yet, so no lock, and
            # the tags are a string and ints, already what the SDK would keep.
            if not attributes.keys().isdisjoint(tags):
                for key in tags:
                    attributes.pop(key, None)  # replaced values move to the end, as the SDK does
            attributes.update(tags)
        else:
            set_attributes(span, tags)
        self._tags[span_id] = tags

    def on_end(self, span: ReadableSpan) -> None:
        try:
            self._on_end(span)
        except Exception:
            with internal_errors("recording a span end"):
                raise

    def _on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is None:
            return
        span_id = context.span_id  # a Python property: read once
        # An ended span stays owned until its workflow ends: a span built after the fact
        # from another tracer's records can start after its parent ended (LangSmith's
        # OpenTelemetry export writes a run's span, start to end, before its children's).
        entry = self._owner.get(span_id)
        if entry is not None:
            self._tags.pop(span_id, None)
        duplicate = bool(self._seen_twice) and span_id in self._seen_twice
        if duplicate:
            self._seen_twice.discard(span_id)
        if self._metrics is not None and not duplicate:
            scope = span.instrumentation_scope
            if scope is not None and scope.name == attr.TRACER_NAME:
                self._record_metrics(span, attributes_of(span))
        if entry is None:
            return
        state = entry[0]
        if state.calls:
            state.calls.pop(span_id, None)
        # The span itself is kept: its rollup record is made when the rollup is computed
        # (by the export, mostly), not here on the application's thread.
        if span_id == state.root_id:
            owned = self._owner
            owned.pop(span_id, None)
            for ended in state.ended:
                owned.pop(ended, None)
            self._states.pop(span_id, None)
            if self._deferred:
                deferred = self._deferred.pop(span_id, None)
                if deferred is not None:
                    span._chainlat_rollup = deferred  # type: ignore[attr-defined]
            if state.parent is not None:
                state.parent.records.extend(state.records)
                state.parent.records.append(span)
        else:
            state.records.append(span)
            state.ended.append(span_id)

    def shutdown(self) -> None:
        self._owner.clear()
        self._seen_twice.clear()
        self._tags.clear()
        self._states.clear()
        self._deferred.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    # -- for workflow handles -----------------------------------------------------------
    def records_of(self, workflow_span_id: int) -> list[SpanRecord]:
        """The rollup records of the ended descendants of an open workflow (a new list)."""
        state = self._states.get(workflow_span_id)
        return to_records(state.records) if state is not None else []

    def deferred_rollup(
        self, root: SpanRecord, first_output_ns: int | None, end_of_turn_ns: int | None = None
    ) -> DeferredRollup:
        """The rollup of an ending workflow, computed when first asked for."""
        state = self._states.get(root.span_id)
        spans = state.records if state is not None else []
        return DeferredRollup(root, spans, to_records, first_output_ns, self.prices, end_of_turn_ns)

    def defer_rollup(self, span: trace.Span, deferred: DeferredRollup, provider: object) -> bool:
        """Leave a workflow's rollup to the export when nothing needs it before: True if so.

        The export resolves it (:func:`resolve_rollups`) only behind chainlat's own export
        processors; any other processor on the provider (an application's own
        BatchSpanProcessor, an in-memory exporter) would see the span without its
        ``chainlat.chain.*`` attributes, so then the rollup is computed here, as the span
        ends. So it is too when chainlat's metrics read it at the span's end, for a
        workflow nested in another (its record goes to the outer one), and for a span
        without room for the attributes (its attribute limit, a value-length limit).
        """
        if self._metrics is not None:
            return False
        span_id = deferred.root.span_id
        state = self._states.get(span_id)
        if state is None or state.parent is not None:
            return False
        if not self._exports_resolve_on(provider):
            return False
        bounded = bounded_attributes(span)
        inner = attribute_dict(bounded)
        if (
            bounded is None
            or inner is None
            or bounded.max_value_len is not None
            or (bounded.maxlen is not None and len(inner) + ROLLUP_KEYS > bounded.maxlen)
        ):
            return False
        self._deferred[span_id] = deferred
        return True

    def handover(self, tracer: object) -> Handover | None:
        """Where a step starting on ``tracer`` leaves its attributes for this processor's
        ``on_start`` to write (see ``handover.py``); None: pass them to ``start_span``."""
        multi = getattr(tracer, "span_processor", None)
        processors = multi_processors(multi)
        seen_tracer, seen, result = self._hands_over
        if seen is processors and seen_tracer is tracer:
            return self._handover if result else None
        result = (
            type(tracer) is Tracer
            and type(multi) is SynchronousMultiSpanProcessor
            and type(processors) is tuple
            and sampler_is_blind(getattr(tracer, "sampler", None))
            and first_to_start(processors, self)
        )
        self._hands_over = (tracer, processors, result)
        return self._handover if result else None

    def _exports_resolve_on(self, provider: object) -> bool:
        # The SDK replaces its tuple of processors when one is added: one check per tuple.
        processors = provider_processors(provider)
        if type(processors) is not tuple:
            return False
        seen, result = self._exports_resolve
        if seen is processors:
            return result
        # Each exporting processor after this one, which marks the span in its on_end.
        result = False
        for processor in processors:
            if processor is self:
                result = True
            elif not (result and resolves(processor)):
                result = False
                break
        self._exports_resolve = (processors, result)
        return result

    def tags_of(self, span_id: int) -> Mapping[str, str | int]:
        """The step attributes this processor set on an open span (index, workflow name)."""
        return self._tags.get(span_id, {})

    def open_workflows(self) -> int:
        """How many workflows are being tracked; for leak checks."""
        return len(self._states)

    def count_out_of_context(self, kind: str) -> None:
        """Count a step of ``kind`` ended from another context (:data:`OUT_OF_CONTEXT_METRIC`)."""
        self.out_of_context += 1
        if self._metrics is not None:
            self._metrics.out_of_context.add(1, {attr.STEP_KIND: kind})

    def record_output_chunks(self, span: ReadableSpan, gaps_s: Iterable[float]) -> None:
        """Record ``gen_ai.client.operation.time_per_output_chunk`` for an ended streamed call.

        One sample per output chunk after the first: the seconds since the previous one.
        Chunk times are not span attributes, so the caller (the httpx transports) passes them.
        """
        if self._metrics is None:
            return
        with internal_errors("recording chunk metrics"):
            get = (span.attributes or {}).get
            labels = {k: get(k) for k in _METRIC_KEYS if k != attr.ERROR_TYPE}
            labels = {k: v for k, v in labels.items() if v is not None}
            for seconds in gaps_s:
                self._metrics.time_per_output_chunk.record(seconds, labels)

    def _record_metrics(self, span: ReadableSpan, attributes: Mapping[str, Any]) -> None:
        assert self._metrics is not None
        get = attributes.get
        kind = get(attr.STEP_KIND)
        if span.end_time is None or span.start_time is None:
            return
        seconds = (span.end_time - span.start_time) / 1e9
        error = span.status.status_code is StatusCode.ERROR
        if kind == "inference":
            labels = {k: get(k) for k in _METRIC_KEYS if get(k) is not None}
            if error and attr.ERROR_TYPE not in labels:
                labels[attr.ERROR_TYPE] = "_OTHER"
            self._metrics.operation_duration.record(seconds, labels)
            for token_type, key in (
                ("input", attr.GEN_AI_USAGE_INPUT_TOKENS),
                ("output", attr.GEN_AI_USAGE_OUTPUT_TOKENS),
            ):
                value = get(key)
                if isinstance(value, int):
                    token_labels = {k: v for k, v in labels.items() if k != attr.ERROR_TYPE}
                    token_labels[attr.GEN_AI_TOKEN_TYPE] = token_type
                    self._metrics.token_usage.record(value, token_labels)
            ttft = get(attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
            if isinstance(ttft, (int, float)):
                self._metrics.time_to_first_chunk.record(float(ttft), labels)
        elif kind == "workflow":
            labels = {attr.GEN_AI_WORKFLOW_NAME: get(attr.GEN_AI_WORKFLOW_NAME, span.name)}
            if error:
                labels[attr.ERROR_TYPE] = get(attr.ERROR_TYPE, "_OTHER")
            self._metrics.workflow_duration.record(seconds, labels)
            first_output = get(attr.CHAIN_FIRST_OUTPUT_MS)
            if isinstance(first_output, float):
                self._metrics.first_output.record(first_output / 1e3, labels)


_registry: dict[int, tuple[Callable[[], object], ChainlatSpanProcessor]] = {}
"""id(provider) -> (a reference to the provider, the chainlat processor on it).

Keyed by identity, not by the provider's hash: a provider need not be hashable (Logfire's
``ProxyTracerProvider`` is a dataclass with ``__eq__``, so it is not). The reference is weak
where the provider allows one, and the entry goes with the provider."""


def _registered(provider: object) -> ChainlatSpanProcessor | None:
    entry = _registry.get(id(provider))
    if entry is not None and entry[0]() is provider:
        return entry[1]
    return None


def _remember(provider: object, processor: ChainlatSpanProcessor) -> None:
    key = id(provider)

    def forget(gone: object) -> None:
        entry = _registry.get(key)
        if entry is not None and entry[0] is gone:  # not a later provider at the same address
            del _registry[key]

    ref: Callable[[], object]
    try:
        ref = weakref.ref(provider, forget)
    except TypeError:  # not weak-referenceable: held, as the application holds its provider
        ref = partial(_itself, provider)
    _registry[key] = (ref, processor)


def _itself(provider: object) -> object:
    return provider


def processor_for(provider: object, *, install: bool = True) -> ChainlatSpanProcessor | None:
    """The chainlat processor on a provider, added on first use; None for providers that take
    no span processor (the API's no-op and proxy providers).

    An SDK ``TracerProvider`` takes one; so does a provider that wraps one and offers
    ``add_span_processor`` (Logfire's), which is the provider the application's spans go to.
    """
    if not isinstance(provider, TracerProvider) and not callable(
        getattr(provider, "add_span_processor", None)
    ):
        return None
    found = _registered(provider)
    if found is None and install:
        found = ChainlatSpanProcessor()
        add: Callable[[ChainlatSpanProcessor], object] = provider.add_span_processor  # type: ignore[attr-defined]
        add(found)
        _remember(provider, found)
        logger.debug("chainlat: added its span processor to %r", provider)
    return found


_tracers: dict[int, tuple[object, trace.Tracer]] = {}


def tracer_for(provider: trace.TracerProvider) -> trace.Tracer:
    """chainlat's tracer on ``provider`` (scope ``chainlat``), one per provider."""
    # get_tracer builds a new Tracer object on every call; keep one per provider.
    key = id(provider)
    cached = _tracers.get(key)
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer = provider.get_tracer(attr.TRACER_NAME)
    _tracers[key] = (provider, tracer)
    return tracer


_routes: dict[int, tuple[object, ChainlatSpanProcessor, trace.Tracer]] = {}


def route_for(provider: trace.TracerProvider) -> tuple[ChainlatSpanProcessor | None, trace.Tracer]:
    """:func:`processor_for` and :func:`tracer_for` of ``provider``, as every step start asks
    them: one dict look-up once the processor is found (the registry's weak-key look-up is
    Python code)."""
    cached = _routes.get(id(provider))
    if cached is not None and cached[0] is provider:
        return cached[1], cached[2]
    processor = processor_for(provider)
    tracer = tracer_for(provider)
    if processor is not None:  # kept alive with the provider, as its tracer already is
        _routes[id(provider)] = (provider, processor, tracer)
    return processor, tracer


_default_provider: trace.TracerProvider | None = None


def set_default_provider(provider: trace.TracerProvider | None) -> None:
    """The provider chainlat's spans go to when a step names none (configure() sets it)."""
    global _default_provider
    _default_provider = provider


def default_provider() -> trace.TracerProvider:
    """The provider configure() chose, global or not; else the global one."""
    return _default_provider if _default_provider is not None else trace.get_tracer_provider()


def register(provider: TracerProvider, processor: ChainlatSpanProcessor) -> None:
    """Record that ``processor`` is already on ``provider``."""
    _remember(provider, processor)
    _routes.pop(id(provider), None)
