"""workflow, inference, data_stage and tool: each one object, context manager and decorator.

Every step is one OpenTelemetry span. The object returned by ``chainlat.inference(...)``
works as ``with``, ``async with``, ``@decorator`` on a function and on an
``async def``; a decorated coroutine function gets a fresh span per call that
covers the whole awaited body (a plain ContextDecorator would end it when the
coroutine object is created).

A block exited in another context than it was entered in (a streaming generator
consumed after its workflow block, a generator closed from another thread, steps exited
out of order) still ends its step, there: the span gets ``chainlat.step.out_of_context``,
the processor counts it (``chainlat.step.out_of_context`` metric) and a warning names
it, every time. Which step that is, when a step object shared by several threads or
tasks has more than one open, is the one entered longest ago.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Final, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from chainlat._core import attributes as attr
from chainlat._core.errors import internal_errors, logger, shown, warn_once
from chainlat._runtime.decorator import EnterExit
from chainlat._runtime.handles import (
    InferenceHandle,
    StepHandle,
    WorkflowHandle,
    current,
    outside_span_clock,
)
from chainlat._runtime.processor import (
    OUT_OF_CONTEXT,
    default_provider,
    route_for,
)

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

H = TypeVar("H", bound=StepHandle)

MAX_EARLIER_START_NS: Final = 86_400 * 1_000_000_000
"""How long before now a run may be said to have started (``started_at_ns``): a day. An
earlier instant is no end of speech but a reading of another clock (``time.monotonic_ns()``
counts from boot: a turn of decades), or no instant at all (``-1``)."""


def start_step(
    handle_type: type[H],
    name: str,
    span_kind: SpanKind,
    attributes: Mapping[str, AttributeValue],
    tracer_provider: trace.TracerProvider | None,
    *,
    start_at_ns: int | None = None,
) -> H:
    """Start a step's span without making it current; ``attributes`` are kept, not copied.
    ``start_at_ns``: an earlier start than now, from the same clock (a voice turn that began
    when the caller stopped speaking); one more than :data:`MAX_EARLIER_START_NS` before now
    (below zero, or read from ``time.monotonic_ns()``) is from another clock: logged as
    ``at_ns`` is, and the step starts now."""
    provider = tracer_provider or default_provider()
    processor, tracer = route_for(provider)
    start_ns = processor.clock() if processor is not None else time.time_ns()
    if (
        start_at_ns is not None
        and start_at_ns < start_ns
        and not outside_span_clock(
            "workflow",
            start_at_ns,
            max(start_ns - MAX_EARLIER_START_NS, 0),
            start_ns,
            argument="started_at_ns",
        )
    ):
        start_ns = start_at_ns
    span: trace.Span
    handover = processor.handover(tracer) if processor is not None else None
    try:
        if handover is None:
            span = tracer.start_span(
                name, kind=span_kind, attributes=attributes, start_time=start_ns
            )
        else:
            # The processor's on_start writes them, unchecked: they are chainlat's own.
            handover.values = attributes
            try:
                span = tracer.start_span(name, kind=span_kind, start_time=start_ns)
            finally:
                handover.values = None  # not taken: the span was not sampled
    except Exception:
        span = trace.INVALID_SPAN
        with internal_errors("starting a span"):
            raise
    handle = handle_type(name, span, processor, start_ns)
    handle._provider = provider
    handle._identity = attributes
    return handle


class StepSpec(EnterExit[H, H]):
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
        self._entered: list[H] = []
        """Handles entered through ``with`` and not exited yet, oldest first."""

    _start_at: int | None = None
    """An earlier start than now, from the same clock (``workflow(started_at_ns=...)``)."""

    def start(self, at_ns: int | None = None) -> H:
        """Start the span without making it current (see ``interface.start_detached_step``),
        at ``at_ns`` of the span clock when given, else at the spec's own earlier start."""
        return start_step(
            self._handle_type,
            self._name,
            self._span_kind,
            self._attributes,
            self._provider,
            start_at_ns=self._start_at if at_ns is None else at_ns,
        )

    def _open(self) -> H:
        handle = self.start()
        try:
            handle._token = otel_context.attach(trace.set_span_in_context(handle.span))
        except Exception:
            with internal_errors("activating a span"):
                raise
        handle._parent_step = current.get()
        handle._step_token = current.set(handle)
        return handle

    @staticmethod
    def _close(handle: H, exc: BaseException | None) -> None:
        if handle._step_token is not None:
            try:
                current.reset(handle._step_token)
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
    # Nothing about an activation is kept on this object but the list of handles open:
    # a module-level step shared by concurrent tasks or threads would hand one's handle to
    # the other's exit. Each handle is found again through the context it was entered
    # in (the current step, a per-context stack), so that each exit closes its own.
    def __enter__(self) -> H:
        handle = self._open()
        handle._opened_by = self
        self._entered.append(handle)
        return handle

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        handle = current.get()
        while handle is not None and (handle._opened_by is not self or handle.end_ns is not None):
            handle = handle._parent_step  # an inner step left open, or one ended elsewhere
        if handle is None:
            self._exit_elsewhere(exc)
            return
        try:
            self._entered.remove(handle)  # type: ignore[arg-type]  # opened by self: an H
        except ValueError:
            return  # ended meanwhile from another context
        self._close(handle, exc)  # type: ignore[arg-type]

    def _exit_elsewhere(self, exc: BaseException | None) -> None:
        """End the step entered longest ago, from a context where it is not current.

        The context it was entered in cannot be restored from here (a context variable is
        reset only in its own context), so only the span is ended, and marked.
        """
        while True:
            try:
                handle = self._entered.pop(0)
            except IndexError:
                warn_once(
                    "exit-without-enter",
                    "chainlat: %s exited but was never entered (or already exited); nothing to end",
                    self._name,
                )
                return
            if handle.end_ns is None:
                break
        logger.warning(
            "chainlat: step %r exited in another context than it was entered in (another "
            "thread or task, a generator finished after its workflow, or steps exited out "
            "of order); ended there and marked %s",
            self._name,
            OUT_OF_CONTEXT,
        )
        try:
            handle.span.set_attribute(OUT_OF_CONTEXT, True)
            if handle._processor is not None:
                kind = (getattr(handle.span, "attributes", None) or {}).get(attr.STEP_KIND)
                handle._processor.count_out_of_context(kind if isinstance(kind, str) else "step")
        except Exception:
            with internal_errors("marking a step ended out of context"):
                raise
        handle._finish(exc)

    # ``async with`` and the decorator (sync and async) come from EnterExit.


class Workflow(StepSpec[WorkflowHandle]):
    """Returned by :func:`chainlat.workflow`."""


class Inference(StepSpec[InferenceHandle]):
    """Returned by :func:`chainlat.inference`."""


class DataStage(StepSpec[StepHandle]):
    """Returned by :func:`chainlat.data_stage`."""


class Tool(StepSpec[StepHandle]):
    """Returned by :func:`chainlat.tool`."""


def workflow(
    name: str,
    *,
    variant: str | None = None,
    started_at_ns: int | None = None,
    tracer_provider: trace.TracerProvider | None = None,
    **attributes: AttributeValue,
) -> Workflow:
    """Trace one run of a workflow; its handle's ``rollup`` says where the time went.

    Args:
        name: The workflow's name (``gen_ai.workflow.name``).
        variant: A configuration label, for comparing runs (``chainlat.variant``).
        started_at_ns: The run began earlier, at this instant of the processor's clock
            (``time.time_ns()`` by default): a voice turn starts when the caller stopped
            speaking, which the end-of-turn detector knows only after the fact
            (docs/voice.md). A later instant than now, or not an int, is ignored; one
            more than a day before now, or below zero (read from another clock, such as
            ``time.monotonic_ns()``), is logged as an error and the run starts now.
        tracer_provider: Default: the one ``configure()`` set up.
        **attributes: More span attributes.

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
    spec = Workflow(
        WorkflowHandle,
        attr.workflow_span_name(name),
        SpanKind.INTERNAL,
        attributes,
        tracer_provider,
    )
    if started_at_ns is not None:
        if type(started_at_ns) is int:
            spec._start_at = started_at_ns
        else:
            warn_once(
                "workflow.started_at_ns",
                "chainlat: workflow(started_at_ns=%s): expected integer nanoseconds; "
                "starting now (this warning is logged once)",
                shown(started_at_ns),
            )
    return spec


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
        operation: ``gen_ai.operation.name``: ``chat``, ``text_completion``, ``embeddings``,
            ``speech_to_text``, ``text_to_speech`` (``call.first_token()`` then marks the
            first transcript word or the first audio byte; docs/voice.md).
        step: The step's name (``plan``, ``answer``): budgets and reports key the call by
            it, so two calls of one model are two rows. Default: the enclosing
            ``chainlat.step_name(...)`` block's, else none (keyed by span name).
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
    if operation == attr.OP_TEXT_TO_SPEECH:
        attributes.setdefault(attr.GEN_AI_OUTPUT_TYPE, "speech")
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
