"""The live handles of steps and workflows: what ``with chainlat.tool(...) as step`` gives.

A handle ends its span (:meth:`StepHandle._finish`); a workflow's handle leaves its
rollup to the export (computed on the export worker, or when ``run.rollup`` is first
read), unless a workflow-end callback of :mod:`chainlat._runtime.hooks` needs it as the
span ends: then it computes it first and runs them.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final, ParamSpec, TypeVar

from opentelemetry import trace

from chainlat._core import attributes as attr
from chainlat._core.errors import internal_errors, shown, warn_once
from chainlat._core.rollup import Rollup, SpanRecord
from chainlat._runtime import hooks
from chainlat._runtime.deferred import DeferredRollup
from chainlat._runtime.otel_compat import move_start, span_lock, start_time
from chainlat._runtime.outcomes import emit_outcome, outcome_attributes
from chainlat._runtime.processor import ChainlatSpanProcessor
from chainlat._runtime.scrubbing import exception_type, record_error
from chainlat._runtime.span_attributes import set_attributes

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

P = ParamSpec("P")
R = TypeVar("R")

MAX_TOKENS: Final = 2**63 - 1
"""The largest token count OTLP can carry (a signed 64-bit integer)."""
_TOKEN_KEYS: Final = frozenset(
    (
        attr.GEN_AI_USAGE_INPUT_TOKENS,
        attr.GEN_AI_USAGE_OUTPUT_TOKENS,
        attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        attr.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
        attr.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    )
)

current: contextvars.ContextVar[StepHandle | None] = contextvars.ContextVar(
    "chainlat_current_step", default=None
)
"""The innermost step or workflow entered through ``with`` in this context."""


def token_count(value: object) -> int | None:
    """A token count as recorded: a whole number from 0 to :data:`MAX_TOKENS`, else None."""
    if type(value) is int:
        return value if 0 <= value <= MAX_TOKENS else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not (value.is_integer() and 0 <= value <= MAX_TOKENS):  # NaN, inf: False
            return None
        return int(value)
    if isinstance(value, int | str):
        try:
            count = int(value)
        except ValueError:
            return None
        return count if 0 <= count <= MAX_TOKENS else None
    return None


def _refuse_tokens(where: str, value: object) -> None:
    warn_once(
        where,
        "chainlat: %s: %s: expected a whole number of tokens from 0 to 2**63-1; not recorded "
        "(this warning is logged once)",
        where,
        shown(value),
    )


def outside_span_clock(
    where: str, at_ns: int, start_ns: int, now_ns: int, *, argument: str = "at_ns"
) -> bool:
    """Whether ``at_ns`` falls outside ``start_ns`` to ``now_ns`` (the step so far, or the
    earliest start a workflow may be given): a value from another clock, logged once as an
    error. Every instant an application hands in (``at_ns=``, ``started_at_ns=``) is checked
    here, so that none is exported as a time the span clock never read."""
    if start_ns <= at_ns <= now_ns:
        return False
    warn_once(
        f"{where}.clock",
        "chainlat: %s(%s=%d) lies outside the step (%d to %d ns): %s is read from the "
        "span clock, time.time_ns(), not time.monotonic_ns() or perf_counter_ns(); "
        "no mark recorded (this error is logged once)",
        where,
        argument,
        at_ns,
        start_ns,
        now_ns,
        argument,
        level=logging.ERROR,
    )
    return True


class StepHandle:
    """The live handle of one step; what ``with chainlat.tool(...) as step`` gives.

    A step is one traced unit of a workflow run: a model call, a data stage, a tool
    call, or a workflow nested in the run, which is why a workflow's handle is a
    ``StepHandle`` too. ``chainlat.step_name(...)`` names steps; it is not one.
    """

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
        """Set an attribute on the step's span.

        A token count (``gen_ai.usage.*_tokens``) that is not a whole number from 0 to
        2**63-1 is not recorded: a negative count would make the cost come out low.
        """
        if key in _TOKEN_KEYS:
            count = token_count(value)
            if count is None:
                _refuse_tokens(f"set_attribute({key!r})", value)
                return
            value = count
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

        A value that is not a whole number of tokens from 0 to 2**63-1 (``"abc"``, NaN,
        -1, 10**30) is not recorded; one warning per argument says so, and nothing is raised.
        """
        for key, name, value in (
            (attr.GEN_AI_USAGE_INPUT_TOKENS, "input_tokens", input_tokens),
            (attr.GEN_AI_USAGE_OUTPUT_TOKENS, "output_tokens", output_tokens),
            (attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, "cache_read_tokens", cache_read_tokens),
        ):
            if value is None:
                continue
            count = token_count(value)
            if count is None:
                warn_once(
                    f"record_usage.{name}",
                    "chainlat: record_usage(%s=%s): expected a whole number of tokens from 0 "
                    "to 2**63-1; not recorded (this warning is logged once)",
                    name,
                    shown(value),
                )
            else:
                self.set_attribute(key, count)

    def first_token(self, *, at_ns: int | None = None) -> None:
        """Mark now (or ``at_ns``) as the first content token.

        Sets ``gen_ai.response.time_to_first_chunk`` (seconds), ``chainlat.latency.ttft_ms``
        and a ``chainlat.first_token`` span event at this instant. Only the first call counts.
        ``at_ns`` is read from the span clock, ``time.time_ns()`` (or the clock given to
        ``configure(clock=...)``): an instant between the call's start and now. A value
        outside (one from ``time.monotonic_ns()``) is refused with a logged error, and a
        value that is not an int is logged once and replaced by now.
        """
        if at_ns is not None and type(at_ns) is not int:
            warn_once(
                "first_token.at_ns",
                "chainlat: first_token(at_ns=%s): expected integer nanoseconds; using now "
                "(this warning is logged once)",
                shown(at_ns),
            )
            at_ns = None
        with internal_errors("marking the first token"):
            if self._first_token_ns is not None:
                return
            if at_ns is None:
                now = self._now()
            elif outside_span_clock("first_token", at_ns, self.start_ns, self._now()):
                return
            else:
                now = at_ns
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
    """A workflow in progress; ``rollup`` is there once it ended (computed on first read)."""

    kind = "workflow"

    _rollup: Rollup | None = None
    _deferred: DeferredRollup | None = None

    @property
    def rollup(self) -> Rollup | None:
        """Chain latency of this run; None until the workflow ends (or without an SDK provider).

        Computed when first read, or by the export of the workflow span, whichever comes
        first: an application that never reads it does not wait for it.
        """
        if self._rollup is None and self._deferred is not None:
            try:
                self._rollup = self._deferred.rollup()
            except Exception:
                with internal_errors("computing the rollup"):
                    raise
        return self._rollup

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
            kind = str(exc).split(" ", 1)[0]
            warn_once(f"record_outcome:{kind}", "chainlat: record_outcome: %s; not recorded", exc)
            return
        if self.end_ns is None:
            with internal_errors("recording an outcome"):
                self.span.set_attributes(values)
            return
        context = self.span.get_span_context()
        if context.is_valid:
            emit_outcome(context.trace_id, context.span_id, values, self._provider)

    _first_output_ns: int | None = None

    def first_output(self, *, at_ns: int | None = None) -> None:
        """Mark now (or ``at_ns``) as the first output the user saw.

        Without a mark, the first output is inferred (see docs/attributes.md): the first
        token of a call made with ``user_facing=True``, else of the last streamed model
        call. Only the first call counts; it never raises.

        ``at_ns`` is read from the span clock, ``time.time_ns()`` (or the clock given to
        ``configure(clock=...)``): an instant between the workflow's start and now. A
        value outside (one from ``time.monotonic_ns()`` or ``perf_counter_ns()``) is
        refused with a logged error and no mark.

        Example::

            with chainlat.workflow("voice-turn") as run:
                speak(first_sentence)
                run.first_output()
        """
        if at_ns is not None and type(at_ns) is not int:
            warn_once(
                "first_output.at_ns",
                "chainlat: first_output(at_ns=%s): expected integer nanoseconds; using now "
                "(this warning is logged once)",
                shown(at_ns),
            )
            at_ns = None
        with internal_errors("marking the first output"):
            if self._first_output_ns is not None or self.end_ns is not None:
                return
            if at_ns is None:
                now = self._now()
            elif outside_span_clock("first_output", at_ns, self.start_ns, self._now()):
                return
            else:
                now = at_ns
            self._first_output_ns = now
            self.span.set_attribute(attr.WORKFLOW_FIRST_OUTPUT_MS, (now - self.start_ns) / 1e6)
            self.span.add_event(attr.FIRST_OUTPUT_EVENT, timestamp=now)

    _end_of_turn_ns: int | None = None
    """When the end of the caller's turn was detected (`interface.mark_end_of_turn`)."""

    _opened_ns: int | None = None
    """The start as opened (``started_at_ns`` or the ``with``), kept while marks move it."""

    def user_stopped_speaking(self, *, at_ns: int | None = None) -> None:
        """Mark now (or ``at_ns``) as the end of the caller's speech: the turn starts there.

        The mark becomes the workflow's start: for the rollup, the wait for the first
        output and the span as exported (as ``started_at_ns=`` does when the instant is
        known up front). Steps that began before it belong to the turn from the mark on
        (the rollup clips them to it); a step that ended before it counts as a step of
        no time. Called again, the last call wins: the caller spoke again after a pause
        the end-of-turn detector took for the end. After the workflow ended, or past a
        first output already marked, it is ignored (logged once); it never raises.

        ``at_ns`` is read from the span clock, ``time.time_ns()`` (or the clock given to
        ``configure(clock=...)``): an instant between the workflow's opening and now. A
        value outside (one from ``time.monotonic_ns()``) is refused with a logged error
        and no mark; an end of speech before the workflow opened goes to
        ``workflow(started_at_ns=...)``.

        Example::

            with chainlat.workflow("voice-turn") as turn:
                transcript = stt.finish(audio)  # streamed while the caller spoke
                turn.user_stopped_speaking()
        """
        if at_ns is not None and type(at_ns) is not int:
            warn_once(
                "user_stopped_speaking.at_ns",
                "chainlat: user_stopped_speaking(at_ns=%s): expected integer nanoseconds; "
                "using now (this warning is logged once)",
                shown(at_ns),
            )
            at_ns = None
        with internal_errors("marking the end of the caller's speech"):
            if self.end_ns is not None:
                warn_once(
                    "user_stopped_speaking.ended",
                    "chainlat: user_stopped_speaking() after workflow %r ended; ignored "
                    "(this warning is logged once)",
                    self.name,
                )
                return
            opened = self._opened_ns if self._opened_ns is not None else self.start_ns
            if at_ns is None:
                mark = self._now()
            elif outside_span_clock("user_stopped_speaking", at_ns, opened, self._now()):
                return
            else:
                mark = at_ns
            if self._first_output_ns is not None and mark > self._first_output_ns:
                warn_once(
                    "user_stopped_speaking.after_output",
                    "chainlat: user_stopped_speaking() after the first output of workflow %r "
                    "was marked; ignored (this warning is logged once)",
                    self.name,
                )
                return
            self._opened_ns = opened
            self.start_ns = mark
            _move_start(self.span, mark)
            if self._first_output_ns is not None:
                self.span.set_attribute(
                    attr.WORKFLOW_FIRST_OUTPUT_MS, (self._first_output_ns - mark) / 1e6
                )

    def end_reason(self, reason: str) -> None:
        """Record how a voice turn ended: ``completed``, ``interrupted`` (the caller spoke
        over the answer) or ``session_closed`` (``gen_ai.agent.invocation.end_reason``).

        Interrupted turns are counted, and left out of latency percentiles unless asked
        for (docs/voice.md). Another value is logged once and ignored; it never raises.

        Example::

            with chainlat.workflow("voice-turn", started_at_ns=end_of_speech) as turn:
                if barge_in.is_set():
                    turn.end_reason("interrupted")
        """
        if reason not in attr.END_REASONS:
            warn_once(
                "end_reason",
                "chainlat: end_reason(%s): expected one of %s; not recorded",
                shown(reason),
                ", ".join(attr.END_REASONS),
            )
            return
        self.set_attribute(attr.GEN_AI_AGENT_INVOCATION_END_REASON, reason)

    def _before_end(self, end_ns: int, exc: BaseException | None) -> None:
        processor = self._processor
        context = self.span.get_span_context()
        if processor is None or not self.span.is_recording():
            _no_rollup(self.name, self._provider, processor is None)
            return
        root = SpanRecord(context.span_id, None, self.name, self.start_ns, end_ns, "workflow")
        deferred = processor.deferred_rollup(root, self._first_output_ns, self._end_of_turn_ns)
        # Nothing reads the rollup now: the export computes it, off the application's thread.
        if not hooks.any_callbacks() and processor.defer_rollup(
            self.span, deferred, self._provider
        ):
            self._deferred = deferred
            return
        rollup = deferred.rollup()
        self._rollup = rollup
        set_attributes(self.span, rollup.to_attributes())
        hooks.run_end(self)

    def _after_end(self, exc: BaseException | None) -> None:
        hooks.run_after(self, exc)


def _move_start(span: trace.Span, start_ns: int) -> None:
    """Move an open SDK span's start: the API has no setter; the SDK keeps it in
    ``_start_time``, read by every exporter once the span ended."""
    if not span.is_recording():
        return  # nothing exported: nothing to move
    lock = span_lock(span)
    if lock is None or not isinstance(start_time(span), int):
        warn_once(
            "user_stopped_speaking.span",
            "chainlat: user_stopped_speaking(): the span (%s) is not an SDK span; its start "
            "is not moved (this warning is logged once)",
            type(span).__name__,
        )
        return
    with lock:
        move_start(span, start_ns)


def _no_rollup(name: str, provider: object, no_processor: bool) -> None:
    """One warning per reason: a workflow whose rollup stays None says why, once."""
    if no_processor:
        warn_once(
            "no-rollup:processor",
            "chainlat: workflow %r has no rollup: its TracerProvider (%s) takes no span "
            "processor, so chainlat cannot see its steps; call chainlat.configure() or pass "
            "tracer_provider= an SDK TracerProvider",
            name,
            type(provider).__name__,
        )
    else:
        warn_once(
            "no-rollup:sampled",
            "chainlat: workflow %r has no rollup: its span is not recording (sampled out "
            "or a no-op tracer)",
            name,
        )


def current_step() -> StepHandle | None:
    """The innermost chainlat step or workflow open in this context, or None."""
    step = current.get()
    # A step ended from another context (a thread, a generator) is still in this one's.
    while step is not None and step.end_ns is not None:
        step = step._parent_step
    return step


def current_workflow() -> WorkflowHandle | None:
    """The innermost workflow open in this context, or None."""
    step = current.get()
    while step is not None and (not isinstance(step, WorkflowHandle) or step.end_ns is not None):
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
