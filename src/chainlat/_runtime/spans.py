"""workflow, inference, data_stage and tool: each one object, context manager and decorator.

Every step is one OpenTelemetry span. The object returned by ``chainlat.inference(...)``
works as ``with``, ``async with``, ``@decorator`` on a function and on an
``async def``; a decorated coroutine function gets a fresh span per call that
covers the whole awaited body (a plain ContextDecorator would end it when the
coroutine object is created).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar, overload

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from chainlat._core import attributes as attr
from chainlat._core.errors import internal_errors, logger, shown
from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup
from chainlat._runtime.processor import (
    ChainlatSpanProcessor,
    default_provider,
    processor_for,
    set_attributes,
    step_naming,
)
from chainlat._runtime.scrubbing import exception_type, record_error

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

P = ParamSpec("P")
R = TypeVar("R")
H = TypeVar("H", bound="StepHandle")

_current: contextvars.ContextVar[StepHandle | None] = contextvars.ContextVar(
    "chainlat_current_step", default=None
)

_tracers: dict[int, tuple[object, trace.Tracer]] = {}


def _tracer(provider: trace.TracerProvider) -> trace.Tracer:
    # get_tracer builds a new Tracer object on every call; keep one per provider.
    key = id(provider)
    cached = _tracers.get(key)
    if cached is not None and cached[0] is provider:
        return cached[1]
    tracer = provider.get_tracer(attr.TRACER_NAME)
    _tracers[key] = (provider, tracer)
    return tracer


_warned: set[str] = set()
"""The invalid-argument warnings already logged: one line per kind, not one per call."""


def _warn_once(key: str, message: str, *args: object) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


def _token_count(value: object) -> int | None:
    """A token count as recorded: a whole number >= 0, else None."""
    if type(value) is int:
        return value if value >= 0 else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None  # NaN, inf: False
    if isinstance(value, int | str):
        try:
            count = int(value)
        except ValueError:
            return None
        return count if count >= 0 else None
    return None


class StepHandle:
    """The live handle of one step; what ``with chainlat.tool(...) as step`` gives."""

    kind: str = ""
    _provider: trace.TracerProvider | None = None
    _opened_by: object = None
    """The step spec whose ``with`` block opened this handle; found again on exit."""
    _identity: Mapping[str, AttributeValue] | None = None
    """The attributes the step was started with, kept to restore them (see _finish)."""

    def __init__(
        self,
        name: str,
        span: trace.Span,
        processor: ChainlatSpanProcessor | None,
        start_ns: int,
    ) -> None:
        self.name = name
        """The span name."""
        self.span = span
        """The underlying OpenTelemetry span."""
        self.start_ns = start_ns
        self.end_ns: int | None = None
        self._processor = processor
        self._token: object = None
        self._step_token: contextvars.Token[StepHandle | None] | None = None
        self._parent_step: StepHandle | None = None

    @property
    def duration_ms(self) -> float | None:
        """Duration once the step has ended, else None."""
        return None if self.end_ns is None else (self.end_ns - self.start_ns) / 1e6

    def _now(self) -> int:
        return self._processor.clock() if self._processor is not None else time.time_ns()

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set an attribute on the step's span."""
        try:
            self.span.set_attribute(key, value)
        except Exception:
            with internal_errors("setting an attribute"):
                raise

    def cache_hit(self) -> None:
        """Mark that the result came from a cache (``chainlat.cache.hit=true``)."""
        self.set_attribute(attr.CACHE_HIT, True)

    def _finish(self, exc: BaseException | None, end_ns: int | None = None) -> None:
        end_ns = self._now() if end_ns is None else end_ns
        self.end_ns = end_ns
        # Only Exception is an error: GeneratorExit, KeyboardInterrupt and
        # task cancellation end the span without marking it failed.
        if isinstance(exc, Exception):
            # Scrubbed: an exception's text may hold a key (a header value, a URL's query).
            with internal_errors("recording an exception"):
                record_error(self.span, exc, end_ns)
                self.span.set_attribute(attr.ERROR_TYPE, exception_type(exc))
        # The guards on the hot path are try/except, free when nothing fails; the
        # internal_errors context manager is entered only to report a failure.
        try:
            self._before_end(end_ns, exc)
        except Exception:
            with internal_errors("computing the rollup"):
                raise
        if self._identity is not None:
            try:
                if getattr(self.span, "dropped_attributes", 0):
                    self._restore_identity()
            except Exception:
                with internal_errors("restoring a step's attributes"):
                    raise
        # A failure above must not leave the span open: it would never be exported.
        try:
            self.span.end(end_time=end_ns)
        except Exception:
            with internal_errors("ending a span"):
                raise
        self._after_end(exc)

    def _restore_identity(self) -> None:
        # Past its attribute count limit the SDK evicts the oldest attributes: chainlat's,
        # set first, would go before the application's, and offline tools would no longer
        # recognise the step. Set them again, last, so that they are the ones kept.
        assert self._identity is not None
        restored = dict(self._identity)
        if self._processor is not None:
            restored.update(self._processor.tags_of(self.span.get_span_context().span_id))
        self.span.set_attributes(restored)

    def _before_end(self, end_ns: int, exc: BaseException | None) -> None:
        """Hook for workflows: runs before the span ends."""

    def _after_end(self, exc: BaseException | None) -> None:
        """Hook for workflows: runs after the span ended, outside the error guard."""


class InferenceHandle(StepHandle):
    """A model call in progress: record usage, the first token, cache hits."""

    kind = "inference"

    def record_usage(
        self,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
    ) -> None:
        """Record token usage (``gen_ai.usage.*``).

        A value that is not a whole number of tokens >= 0 (``"abc"``, NaN, -1) is not
        recorded; one warning per argument says so, and nothing is raised.
        """
        for key, name, value in (
            (attr.GEN_AI_USAGE_INPUT_TOKENS, "input_tokens", input_tokens),
            (attr.GEN_AI_USAGE_OUTPUT_TOKENS, "output_tokens", output_tokens),
            (attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "cache_read_tokens", cache_read_tokens),
        ):
            if value is None:
                continue
            count = _token_count(value)
            if count is None:
                _warn_once(
                    f"record_usage.{name}",
                    "chainlat: record_usage(%s=%s): expected a whole number of tokens >= 0; "
                    "not recorded (this warning is logged once)",
                    name,
                    shown(value),
                )
            else:
                self.set_attribute(key, count)

    def first_token(self, *, at_ns: int | None = None) -> None:
        """Mark now (or ``at_ns``, read from the same clock) as the first content token.

        Sets ``gen_ai.response.time_to_first_chunk`` (seconds), ``chainlat.latency.ttft_ms``
        and a ``chainlat.first_token`` span event at this instant. Only the first call counts.
        An ``at_ns`` that is not an int is logged once and replaced by now.
        """
        if at_ns is not None and type(at_ns) is not int:
            _warn_once(
                "first_token.at_ns",
                "chainlat: first_token(at_ns=%s): expected integer nanoseconds; using now "
                "(this warning is logged once)",
                shown(at_ns),
            )
            at_ns = None
        with internal_errors("marking the first token"):
            if self._first_token_ns is not None:
                return
            now = self._now() if at_ns is None else at_ns
            self._first_token_ns = now
            elapsed = now - self.start_ns
            set_attributes(
                self.span,
                {
                    attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: elapsed / 1e9,
                    attr.LATENCY_TTFT_MS: elapsed / 1e6,
                },
            )
            self.span.add_event(attr.FIRST_TOKEN_EVENT, timestamp=now)

    def response_model(self, name: str) -> None:
        """Record the model that actually answered (``gen_ai.response.model``)."""
        self.set_attribute(attr.GEN_AI_RESPONSE_MODEL, name)

    _first_token_ns: int | None = None


class WorkflowHandle(StepHandle):
    """A workflow in progress; ``rollup`` is filled when it ends."""

    kind = "workflow"

    rollup: Rollup | None = None
    """Chain latency of this run; None until the workflow ends (or without an SDK provider)."""

    def record_outcome(self, *, success: bool | None = None, score: float | None = None) -> None:
        """Record how the run went (``chainlat.outcome.success`` / ``chainlat.outcome.score``).

        Inside the ``with`` block the attributes go on the workflow span; after it
        ended (the usual place to grade an answer) a small ``record_outcome`` span
        carrying them is added to the run's trace, as a child of the workflow span.

        Example::

            with chainlat.workflow("support-chat", variant="small-planner") as run:
                reply = respond(question)
            run.record_outcome(success=grade(reply) >= 0.5, score=grade(reply))

        Called from the application, it never raises: a call that records nothing, or a
        value that is not a bool / a number (NaN included), is logged once and ignored.
        """
        try:
            values = outcome_attributes(success, score)
        except ValueError as exc:
            _warn_once(f"record_outcome:{exc}", "chainlat: record_outcome: %s; not recorded", exc)
            return
        if self.end_ns is None:
            with internal_errors("recording an outcome"):
                self.span.set_attributes(values)
            return
        context = self.span.get_span_context()
        if context.is_valid:
            _emit_outcome(context.trace_id, context.span_id, values, self._provider)

    _first_output_ns: int | None = None

    def first_output(self, *, at_ns: int | None = None) -> None:
        """Mark now (or ``at_ns``, from the same clock) as the first output the user saw.

        Without a mark, the first output is inferred (see docs/attributes.md): the first
        token of a call made with ``user_facing=True``, else of the last streamed model
        call. Only the first call counts; it never raises.

        Example::

            with chainlat.workflow("voice-turn") as run:
                speak(first_sentence)
                run.first_output()
        """
        if at_ns is not None and type(at_ns) is not int:
            _warn_once(
                "first_output.at_ns",
                "chainlat: first_output(at_ns=%s): expected integer nanoseconds; using now "
                "(this warning is logged once)",
                shown(at_ns),
            )
            at_ns = None
        with internal_errors("marking the first output"):
            if self._first_output_ns is not None or self.end_ns is not None:
                return
            now = self._now() if at_ns is None else at_ns
            self._first_output_ns = now
            self.span.set_attribute(attr.WORKFLOW_FIRST_OUTPUT_MS, (now - self.start_ns) / 1e6)
            self.span.add_event(attr.FIRST_OUTPUT_EVENT, timestamp=now)

    def _before_end(self, end_ns: int, exc: BaseException | None) -> None:
        processor = self._processor
        context = self.span.get_span_context()
        if processor is None or not self.span.is_recording():
            _no_rollup(self.name, self._provider, processor is None)
            return
        root = SpanRecord(context.span_id, None, self.name, self.start_ns, end_ns, "workflow")
        rollup = compute_rollup(
            root,
            list(processor.records_of(context.span_id)),
            first_output_ns=self._first_output_ns,
            prices=processor.prices,
        )
        self.rollup = rollup
        set_attributes(self.span, rollup.to_attributes())
        for hook in _workflow_end_hooks:
            hook(self)

    def _after_end(self, exc: BaseException | None) -> None:
        for hook in _workflow_after_hooks:
            hook(self, exc)


def _no_rollup(name: str, provider: object, no_processor: bool) -> None:
    """One warning per reason: a workflow whose rollup stays None says why, once."""
    if no_processor:
        _warn_once(
            "no-rollup:processor",
            "chainlat: workflow %r has no rollup: its TracerProvider (%s) takes no span "
            "processor, so chainlat cannot see its steps; call chainlat.configure() or pass "
            "tracer_provider= an SDK TracerProvider",
            name,
            type(provider).__name__,
        )
    else:
        _warn_once(
            "no-rollup:sampled",
            "chainlat: workflow %r has no rollup: its span is not recording (sampled out "
            "or a no-op tracer)",
            name,
        )


_workflow_end_hooks: list[Callable[[WorkflowHandle], None]] = []
"""Called with the rollup set, before the workflow span ends (budgets use it)."""
_workflow_after_hooks: list[Callable[[WorkflowHandle, BaseException | None], None]] = []
"""Called after the workflow span ended, outside the error guard: may raise into user code."""


class _Step(Generic[H]):
    """One step spec: a context manager (sync and async) and a decorator (sync and async)."""

    def __init__(
        self,
        handle_type: type[H],
        name: str,
        span_kind: SpanKind,
        attributes: Mapping[str, AttributeValue],
        tracer_provider: trace.TracerProvider | None,
    ) -> None:
        self._handle_type = handle_type
        self._name = name
        self._span_kind = span_kind
        self._attributes = dict(attributes)
        self._provider = tracer_provider

    def _start_detached(self) -> H:
        """Start the span without making it current, for a step that outlives the call starting it.

        The HTTP transports use it: their span ends when the response body has been read,
        maybe in another thread or task, with ``handle._finish(exc, end_ns=...)``.
        """
        provider = self._provider or default_provider()
        processor = processor_for(provider)
        start_ns = processor.clock() if processor is not None else time.time_ns()
        span: trace.Span
        try:
            span = _tracer(provider).start_span(
                self._name, kind=self._span_kind, attributes=self._attributes, start_time=start_ns
            )
        except Exception:
            span = trace.INVALID_SPAN
            with internal_errors("starting a span"):
                raise
        return self._handle_type(self._name, span, processor, start_ns)

    def _open(self) -> H:
        provider = self._provider or default_provider()
        processor = processor_for(provider)
        start_ns = processor.clock() if processor is not None else time.time_ns()
        span: trace.Span
        try:
            span = _tracer(provider).start_span(
                self._name,
                kind=self._span_kind,
                attributes=self._attributes,
                start_time=start_ns,
            )
        except Exception:
            span = trace.INVALID_SPAN
            with internal_errors("starting a span"):
                raise
        handle = self._handle_type(self._name, span, processor, start_ns)
        handle._provider = provider
        handle._identity = self._attributes
        try:
            handle._token = otel_context.attach(trace.set_span_in_context(span))
        except Exception:
            with internal_errors("activating a span"):
                raise
        handle._parent_step = _current.get()
        handle._step_token = _current.set(handle)
        return handle

    @staticmethod
    def _close(handle: H, exc: BaseException | None) -> None:
        if handle._step_token is not None:
            try:
                _current.reset(handle._step_token)
            except Exception:
                with internal_errors("restoring the current step"):
                    raise
        if handle._token is not None:
            try:
                otel_context.detach(handle._token)  # type: ignore[arg-type]
            except Exception:
                with internal_errors("restoring the context"):
                    raise
        handle._finish(exc)

    # -- context manager ------------------------------------------------------------
    # Nothing about an activation is kept on this object: a module-level step shared by
    # concurrent tasks or threads would hand one's handle to the other's exit. Each
    # handle is found again through the context it was entered in (the current step,
    # a per-context stack), so that each exit closes its own.
    def __enter__(self) -> H:
        handle = self._open()
        handle._opened_by = self
        return handle

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        handle = _current.get()
        while handle is not None and handle._opened_by is not self:
            handle = handle._parent_step  # an inner step left open: skip it
        if handle is None:
            _warn_once(
                "exit-without-enter",
                "chainlat: %s exited in a context where it was not entered; nothing to end",
                self._name,
            )
            return
        self._close(handle, exc)  # type: ignore[arg-type]  # opened by self: an H

    async def __aenter__(self) -> H:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    # -- decorator ------------------------------------------------------------------
    @overload
    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]: ...
    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R]: ...
    def __call__(self, func: Callable[P, Any]) -> Callable[P, Any]:
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                handle = self._open()
                try:
                    result = await func(*args, **kwargs)
                except BaseException as exc:
                    self._close(handle, exc)
                    raise
                self._close(handle, None)
                return result

            return run_async

        @functools.wraps(func)
        def run(*args: P.args, **kwargs: P.kwargs) -> Any:
            handle = self._open()
            try:
                result = func(*args, **kwargs)
            except BaseException as exc:
                self._close(handle, exc)
                raise
            self._close(handle, None)
            return result

        return run


class Workflow(_Step[WorkflowHandle]):
    """Returned by :func:`chainlat.workflow`."""


class Inference(_Step[InferenceHandle]):
    """Returned by :func:`chainlat.inference`."""


class DataStage(_Step[StepHandle]):
    """Returned by :func:`chainlat.data_stage`."""


class Tool(_Step[StepHandle]):
    """Returned by :func:`chainlat.tool`."""


def workflow(
    name: str,
    *,
    variant: str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    **attributes: AttributeValue,
) -> Workflow:
    """Trace one run of a workflow; its handle's ``rollup`` says where the time went.

    Example::

        with chainlat.workflow("support-chat") as run:
            answer = respond(question)
        print(run.rollup.total_ms, run.rollup.inference_ms)
    """
    attributes[attr.GEN_AI_OPERATION_NAME] = attr.OP_INVOKE_WORKFLOW
    attributes[attr.GEN_AI_WORKFLOW_NAME] = name
    attributes[attr.GEN_AI_AGENT_NAME] = name  # where semantic-conventions-genai reads it
    attributes[attr.STEP_KIND] = attr.WORKFLOW_KIND_VALUE
    if variant is not None:
        attributes[attr.VARIANT] = variant
    return Workflow(
        WorkflowHandle,
        attr.workflow_span_name(name),
        SpanKind.INTERNAL,
        attributes,
        tracer_provider,
    )


def inference(
    model: str,
    *,
    provider: str | None = None,
    operation: str = "chat",
    step: str | None = None,
    user_facing: bool = False,
    tracer_provider: trace.TracerProvider | None = None,
    **attributes: AttributeValue,
) -> Inference:
    """Trace one model call: everything from sending the request to the complete response.

    Args:
        model: The model asked (``gen_ai.request.model``).
        provider: ``gen_ai.provider.name``.
        operation: ``gen_ai.operation.name``: ``chat``, ``text_completion``, ``embeddings``.
        step: The step's name (``plan``, ``answer``): budgets and reports key the call by
            it, so two calls of one model are two rows. Default: the enclosing
            ``chainlat.step(...)`` block's, else none (keyed by span name).
        user_facing: This call's first token is the workflow's first output.
        tracer_provider: Default: the one ``configure()`` set up.
        **attributes: More span attributes.

    Example::

        with chainlat.inference("gpt-4o", provider="openai", step="answer") as call:
            reply = client.chat.completions.create(model="gpt-4o", messages=messages)
            call.record_usage(reply.usage.prompt_tokens, reply.usage.completion_tokens)
    """
    attributes[attr.GEN_AI_OPERATION_NAME] = operation
    attributes[attr.GEN_AI_REQUEST_MODEL] = model
    attributes[attr.STEP_KIND] = "inference"
    if provider is not None:
        attributes[attr.GEN_AI_PROVIDER_NAME] = provider
    if step is not None:
        attributes[attr.STEP_NAME] = step
    if user_facing:
        attributes[attr.USER_FACING] = True
    return Inference(
        InferenceHandle,
        attr.inference_span_name(operation, model),
        SpanKind.CLIENT,
        attributes,
        tracer_provider,
    )


def data_stage(
    name: str,
    *,
    source: str | None = None,
    kind: str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    **attributes: AttributeValue,
) -> DataStage:
    """Trace a data-latency stage (retrieval, feature fetch, ETL, loading), apart from inference.

    A retrieval (``kind="retrieval"``, or any stage with a ``source``) is a GenAI
    ``retrieval`` operation; another kind (``"feature-fetch"``) is recorded as
    ``chainlat.data.kind`` (see docs/attributes.md).

    Example::

        with chainlat.data_stage("retrieve-docs", source="faq-index"):
            docs = index.search(question, k=5)
    """
    attributes.update(attr.data_stage_attributes(kind, source))
    return DataStage(
        StepHandle, attr.data_span_name(name), SpanKind.INTERNAL, attributes, tracer_provider
    )


def tool(
    name: str,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    **attributes: AttributeValue,
) -> Tool:
    """Trace one tool call.

    Example::

        @chainlat.tool("get-weather")
        def get_weather(city: str) -> str: ...
    """
    attributes[attr.GEN_AI_OPERATION_NAME] = attr.OP_EXECUTE_TOOL
    attributes[attr.GEN_AI_TOOL_NAME] = name
    attributes[attr.STEP_KIND] = "tool"
    return Tool(
        StepHandle, attr.tool_span_name(name), SpanKind.INTERNAL, attributes, tracer_provider
    )


class StepName:
    """Returned by :func:`chainlat.step`: names every step begun inside it."""

    def __init__(self, name: str) -> None:
        self.name = name

    # As for steps, nothing about an activation is kept on this object: one shared by
    # concurrent tasks finds its own block again through the context it was entered in.
    def __enter__(self) -> StepName:
        step_naming.set((self.name, step_naming.get(), self))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        found = step_naming.get()
        while found is not None and found[2] is not self:
            found = found[1]
        if found is not None:
            step_naming.set(found[1])

    async def __aenter__(self) -> StepName:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.__exit__(exc_type, exc, tb)

    @overload
    def __call__(self, func: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]: ...
    @overload
    def __call__(self, func: Callable[P, R]) -> Callable[P, R]: ...
    def __call__(self, func: Callable[P, Any]) -> Callable[P, Any]:
        name = self.name
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                token = step_naming.set((name, step_naming.get(), None))
                try:
                    return await func(*args, **kwargs)
                finally:
                    step_naming.reset(token)

            return run_async

        @functools.wraps(func)
        def run(*args: P.args, **kwargs: P.kwargs) -> Any:
            token = step_naming.set((name, step_naming.get(), None))
            try:
                return func(*args, **kwargs)
            finally:
                step_naming.reset(token)

        return run


def step(name: str) -> StepName:
    """Name every step begun inside: a model call an SDK instrumentation traces gets
    ``chainlat.step.name``, so budgets and reports tell the planner from the answer.

    No span of its own; the innermost block wins, and a name given to the step itself
    (``chainlat.inference(..., step=...)``) wins over both.

    Example::

        with chainlat.step("plan"):
            plan = client.chat.completions.create(model="gpt-4o-mini", messages=ask)
    """
    return StepName(name)


def outcome_attributes(success: bool | None, score: float | None) -> dict[str, AttributeValue]:
    """The ``chainlat.outcome.*`` attributes; ValueError on a call that records nothing or NaN."""
    if success is None and score is None:
        raise ValueError("record_outcome needs success=..., score=... or both")
    values: dict[str, AttributeValue] = {}
    if success is not None:
        if not isinstance(success, bool):
            raise ValueError(f"success must be True or False, got {success!r}")
        values[attr.OUTCOME_SUCCESS] = success
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != score:
            raise ValueError(f"score must be a number, got {score!r}")
        values[attr.OUTCOME_SCORE] = float(score)
    return values


def _parse_id(value: int | str, bits: int, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = int(value, 16)
        except ValueError:
            raise ValueError(f"{what} must be hex or an int, got {value!r}") from None
    else:
        raise ValueError(f"{what} must be hex or an int, got {value!r}")
    if not 0 < number < 1 << bits:
        raise ValueError(f"{what} out of range: {value!r}")
    return number


def _emit_outcome(
    trace_id: int,
    parent_span_id: int,
    values: Mapping[str, AttributeValue],
    tracer_provider: trace.TracerProvider | None,
) -> None:
    with internal_errors("recording an outcome"):
        parent = trace.SpanContext(
            trace_id,
            parent_span_id,
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        provider = tracer_provider or default_provider()
        context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        span = _tracer(provider).start_span(
            attr.OUTCOME_SPAN_NAME, context=context, kind=SpanKind.INTERNAL, attributes=values
        )
        span.end()


def record_outcome(
    trace_id: int | str,
    *,
    success: bool | None = None,
    score: float | None = None,
    span_id: int | str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> None:
    """Attach an outcome to a finished run, by trace id: for offline evaluation.

    Adds a ``record_outcome`` span carrying ``chainlat.outcome.success`` and
    ``chainlat.outcome.score`` to the trace. chainlat's readers give it to the
    workflow span it is a child of (pass the workflow's ``span_id`` for that),
    or else to the trace's only top-level workflow. Without ``span_id`` the
    span's parent is a placeholder id, which some trace viewers flag as missing.

    Example::

        for trace_id, answer in graded_answers:
            chainlat.record_outcome(trace_id, success=answer.correct, score=answer.score)

    Args:
        trace_id: The run's trace id, 32 hex digits or an int.
        success: Whether the run did its job.
        score: A quality score, higher is better.
        span_id: The workflow span's id (16 hex digits or an int), when known.
        tracer_provider: Where to send the span; the global provider when None.

    Raises:
        ValueError: Neither ``success`` nor ``score`` given, or an id or value is malformed.
    """
    values = outcome_attributes(success, score)
    trace_number = _parse_id(trace_id, 128, "trace_id")
    if span_id is None:
        import random

        parent = random.getrandbits(64) or 1
    else:
        parent = _parse_id(span_id, 64, "span_id")
    _emit_outcome(trace_number, parent, values, tracer_provider)


def current_step() -> StepHandle | None:
    """The innermost chainlat step or workflow open in this context, or None."""
    return _current.get()


def current_workflow() -> WorkflowHandle | None:
    """The innermost workflow open in this context, or None."""
    step = _current.get()
    while step is not None and not isinstance(step, WorkflowHandle):
        step = step._parent_step
    return step


def bind_context(func: Callable[P, R]) -> Callable[P, R]:
    """Carry the current workflow and step into another thread.

    Threads do not inherit context variables, so a step started in a
    ``ThreadPoolExecutor`` would otherwise belong to no workflow.

    Example::

        with chainlat.workflow("fan-out"):
            results = list(pool.map(chainlat.bind_context(fetch), urls))
    """
    captured = contextvars.copy_context()

    @functools.wraps(func)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        # A Context can be entered by one thread at a time: run in a fresh copy.
        return captured.copy().run(func, *args, **kwargs)

    return run
