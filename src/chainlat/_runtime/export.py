"""Export that never blocks or breaks the application: bounded shutdown, counted drops.

configure() puts every exporter behind :class:`GuardedExporter` and a batch (or
simple) processor from :func:`export_processor`. Together they:

* count every span handed to the processor and every span the exporter
  confirmed, so that spans lost on the way (failed exports, a full queue,
  spans still queued when shutdown gave up) are known, never silent;
* log the first failed export at once, and the total lost at shutdown, each
  one line; and add the losses to the ``chainlat.export.dropped_spans``
  counter when a meter provider is configured;
* bound shutdown: after the deadline the exporter is no longer called, and
  the caller stops waiting for an export that is still in flight;
* make a fork wait (at most `FORK_WAIT_S`) for an export in flight, and rebuild
  the exporter in the forked child (a prefork server), so that the child never
  shares the parent's connections or file lock, nor inherits a lock that the
  parent's export thread held at the fork (see `GuardedExporter`).

The export itself stays in the BatchSpanProcessor's thread: ending a span only
appends it to a queue.
"""

from __future__ import annotations

import math
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from opentelemetry.context import attach, detach, set_value
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)

from chainlat._core.errors import internal_errors, logger
from chainlat._runtime import deferred
from chainlat._runtime.otel_compat import SUPPRESS_INSTRUMENTATION_KEY, accepts_meter_provider
from chainlat._runtime.scrubbing import describe

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, MeterProvider
    from opentelemetry.sdk.trace import ReadableSpan

DEFAULT_EXPORT_TIMEOUT_S: Final = 5.0
"""Per export request (retries included) when ``OTEL_EXPORTER_OTLP[_TRACES]_TIMEOUT`` is unset."""
DEFAULT_SHUTDOWN_TIMEOUT_MS: Final = 5000
"""How long shutdown waits for the last spans when ``OTEL_BSP_EXPORT_TIMEOUT`` is unset."""
DROPPED_SPANS_METRIC: Final = "chainlat.export.dropped_spans"
"""Counter of spans that were not exported, by ``error.type``: ``export_failed`` or ``not_sent``."""

ExporterFactory = Callable[[], SpanExporter]

FORK_WAIT_S: Final = 10.0
"""How long ``os.fork()`` waits for an export in flight before it forks anyway."""


MAX_SHUTDOWN_TIMEOUT_MS: Final = 60_000
"""The longest shutdown waits, whatever ``OTEL_BSP_EXPORT_TIMEOUT`` or ``timeout_ms`` say."""

_DEFAULT_BATCH: Final = {
    "OTEL_BSP_MAX_QUEUE_SIZE": 2048,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512,
    "OTEL_BSP_SCHEDULE_DELAY": 5000,
}
_MAX_BATCH: Final = {
    "OTEL_BSP_MAX_QUEUE_SIZE": 10_000_000,
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 10_000_000,
    # The SDK's worker waits this long between exports: beyond a day, a typo.
    "OTEL_BSP_SCHEDULE_DELAY": 86_400_000,
}
_reported_env: set[str] = set()


def _invalid(name: str, raw: str, expected: str, using: float) -> None:
    # One line per variable and value: configure() may run many times (tests, reloads).
    key = f"{name}={raw}"
    if key not in _reported_env:
        _reported_env.add(key)
        logger.warning("chainlat: %s=%r: expected %s; using %g", name, raw, expected, using)


def _env_positive(name: str, default: float, maximum: float, *, integer: bool) -> float:
    """A positive, finite number from the environment, clamped to ``maximum``; else ``default``."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    expected = "a whole number > 0" if integer else "a number > 0"
    try:
        value = float(raw)
    except ValueError:
        _invalid(name, raw, expected, default)
        return default
    if not (0 < value < math.inf) or (integer and not value.is_integer()):
        _invalid(name, raw, expected, default)
        return default
    if value > maximum:
        _invalid(name, raw, f"{expected}, at most {maximum:g}", maximum)
        return maximum
    return value


def clamp_shutdown_timeout_s(timeout_s: float) -> float:
    """A shutdown bound in seconds within [0, MAX_SHUTDOWN_TIMEOUT_MS]; NaN gives the default."""
    if math.isnan(timeout_s):
        return DEFAULT_SHUTDOWN_TIMEOUT_MS / 1000
    return min(max(timeout_s, 0.0), MAX_SHUTDOWN_TIMEOUT_MS / 1000)


def shutdown_timeout_s() -> float:
    """The shutdown bound: ``OTEL_BSP_EXPORT_TIMEOUT`` (milliseconds) or the default.

    Clamped to `MAX_SHUTDOWN_TIMEOUT_MS` (``inf`` or a huge value included, with one
    warning): a process never waits for its telemetry longer than that.
    """
    raw = os.environ.get("OTEL_BSP_EXPORT_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_SHUTDOWN_TIMEOUT_MS / 1000
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        _invalid("OTEL_BSP_EXPORT_TIMEOUT", raw, "milliseconds >= 0", DEFAULT_SHUTDOWN_TIMEOUT_MS)
        return DEFAULT_SHUTDOWN_TIMEOUT_MS / 1000
    if value > MAX_SHUTDOWN_TIMEOUT_MS:
        _invalid(
            "OTEL_BSP_EXPORT_TIMEOUT",
            raw,
            f"milliseconds, at most {MAX_SHUTDOWN_TIMEOUT_MS}",
            MAX_SHUTDOWN_TIMEOUT_MS,
        )
        return MAX_SHUTDOWN_TIMEOUT_MS / 1000
    return value / 1000


def batch_settings() -> dict[str, int]:
    """The BatchSpanProcessor's arguments from ``OTEL_BSP_*``, each valid or its default.

    The SDK raises on a negative size and logs a traceback on a non-integer; chainlat
    reads the variables itself, logs one line for a bad value and uses the default.
    """
    queue = int(
        _env_positive(
            "OTEL_BSP_MAX_QUEUE_SIZE",
            _DEFAULT_BATCH["OTEL_BSP_MAX_QUEUE_SIZE"],
            _MAX_BATCH["OTEL_BSP_MAX_QUEUE_SIZE"],
            integer=True,
        )
    )
    batch = int(
        _env_positive(
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
            _DEFAULT_BATCH["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"],
            _MAX_BATCH["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"],
            integer=True,
        )
    )
    if batch > queue:
        raw = os.environ.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", str(batch)).strip()
        _invalid("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", raw, f"at most the queue size {queue}", queue)
        batch = queue
    delay = _env_positive(
        "OTEL_BSP_SCHEDULE_DELAY",
        _DEFAULT_BATCH["OTEL_BSP_SCHEDULE_DELAY"],
        _MAX_BATCH["OTEL_BSP_SCHEDULE_DELAY"],
        integer=False,
    )
    return {
        "max_queue_size": queue,
        "max_export_batch_size": batch,
        "schedule_delay_millis": max(int(delay), 1),
        "export_timeout_millis": int(shutdown_timeout_s() * 1000),
    }


def wait_s(timeout_s: float) -> float:
    """A timeout that ``Event.wait`` accepts: NaN and negatives are 0, inf the platform's max."""
    if not timeout_s > 0:
        return 0.0
    return min(timeout_s, threading.TIMEOUT_MAX)


def start_in_thread(work: Callable[[], object], name: str) -> threading.Event:
    """Start ``work`` in a daemon thread; the event is set when it is done."""
    done = threading.Event()

    def target() -> None:
        try:
            with internal_errors(name):
                work()
        finally:
            done.set()

    try:
        threading.Thread(target=target, name=f"chainlat-{name}", daemon=True).start()
    except RuntimeError:  # no new threads at interpreter shutdown (3.12+): run it here
        target()
    return done


def run_bounded(work: Callable[[], object], timeout_s: float, name: str) -> bool:
    """Run ``work`` in a daemon thread and wait at most ``timeout_s``; True if it finished."""
    return start_in_thread(work, name).wait(wait_s(timeout_s))


class ExportCounts:
    """What happened to the spans of one export pipeline; thread-safe and fork-aware."""

    def __init__(self, target: str, meter_provider: MeterProvider | None = None) -> None:
        self.target = target
        self._lock = threading.Lock()
        self.offered = 0
        """Spans handed to the processor."""
        self.exported = 0
        """Spans the exporter confirmed."""
        self.failed = 0
        """Spans in exports that failed, raised, or were refused after the shutdown deadline."""
        self._warned = False
        self._reported = False
        self._pid = os.getpid()
        self._dropped: Counter | None = None
        if meter_provider is not None:
            with internal_errors("creating the dropped-spans counter"):
                self._dropped = meter_provider.get_meter("chainlat").create_counter(
                    DROPPED_SPANS_METRIC,
                    unit="{span}",
                    description="Spans that chainlat could not export.",
                )
        _at_fork(self, after_in_child=ExportCounts._reset_in_child)

    def _reset_in_child(self) -> None:
        # The child starts with an empty queue: the parent's spans are the parent's to report.
        self._lock = threading.Lock()
        self.offered = self.exported = self.failed = 0
        self._warned = self._reported = False
        self._pid = os.getpid()

    def offer(self) -> None:
        with self._lock:
            self.offered += 1

    def confirm(self, count: int) -> None:
        with self._lock:
            self.exported += count

    def fail(self, count: int, reason: str) -> None:
        with self._lock:
            self.failed += count
            first = not self._warned
            self._warned = True
        self._count_dropped(count, "export_failed")
        if first:
            logger.warning(
                "chainlat: could not export %d spans to %s (%s); spans that cannot be "
                "exported are dropped and counted: the total is logged at shutdown and "
                "counted in the %s metric",
                count,
                self.target,
                reason,
                DROPPED_SPANS_METRIC,
            )

    @property
    def lost(self) -> int:
        """Spans offered and not confirmed: failed, dropped from a full queue, or still queued."""
        with self._lock:
            return max(self.offered - self.exported, 0)

    def report(self, *, gave_up_after_s: float | None = None) -> int:
        """Log the total lost, once; returns it."""
        with self._lock:
            if self._reported:
                return max(self.offered - self.exported, 0)
            self._reported = True
            offered, exported, failed = self.offered, self.exported, self.failed
        lost = max(offered - exported, 0)
        not_sent = max(lost - failed, 0)
        self._count_dropped(not_sent, "not_sent")
        if lost:
            stopped = (
                f"; shutdown stopped waiting after {gave_up_after_s:g} s"
                if gave_up_after_s is not None
                else ""
            )
            logger.warning(
                "chainlat: %d of %d spans were not exported to %s: %d in failed exports, "
                "%d dropped from a full queue or still queued or in flight at shutdown%s",
                lost,
                offered,
                self.target,
                failed,
                not_sent,
                stopped,
            )
        return lost

    def _count_dropped(self, count: int, error_type: str) -> None:
        if self._dropped is not None and count > 0:
            with internal_errors("counting dropped spans"):
                self._dropped.add(count, {"error.type": error_type})


class GuardedExporter(SpanExporter):
    """Counts what the wrapped exporter confirms or fails; never raises; honours a deadline."""

    def __init__(
        self,
        inner: SpanExporter,
        counts: ExportCounts,
        *,
        factory: ExporterFactory | None = None,
    ) -> None:
        self.inner = inner
        self.counts = counts
        self._factory = factory
        self._deadline: float | None = None
        self._pid = os.getpid()
        # Held while an export is in flight, and by os.fork() while it forks (see
        # _before_fork). Reentrant: an exporter that forks or exports from inside its
        # own export must not wait for itself.
        self._in_flight = threading.RLock()
        self._forking: set[int] = set()
        """Threads in os.fork() that hold ``_in_flight`` (two threads may fork at once)."""
        _at_fork(
            self,
            before=GuardedExporter._before_fork,
            after_in_parent=GuardedExporter._after_fork_in_parent,
            after_in_child=GuardedExporter._after_fork_in_child,
        )

    def set_deadline(self, deadline: float) -> None:
        """After ``deadline`` (``time.monotonic()``), refuse batches instead of exporting them."""
        self._deadline = deadline

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        with self._in_flight:
            return self._export(spans)

    def _export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        count = len(spans)
        if self._pid != os.getpid():
            self._rebuild_in_child()
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.counts.fail(count, "shutdown deadline passed")
            return SpanExportResult.FAILURE
        try:
            deferred.resolve_rollups(spans)  # chain attributes, off the app's thread
            result = self.inner.export(spans)
        except Exception as exc:
            self.counts.fail(count, describe(exc))
            return SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            self.counts.confirm(count)
        else:
            self.counts.fail(count, "the exporter reported a failure; see its log above")
        return result

    def _before_fork(self) -> None:
        # A fork copies every lock as it is at that instant, and the child has none of
        # the parent's other threads to release one. An export in flight holds some: a
        # connection pool's, and the import lock of a module its first request imports
        # lazily (requests imports netrc there). A child forked then hangs on the first
        # import of that module, in its own export thread and its metrics thread, and
        # loses every span it makes. So the fork waits for the export to end, and no
        # export starts until it is done. An export is bounded by its timeout; should
        # one outlast FORK_WAIT_S, the fork goes ahead rather than stall the application.
        if self._in_flight.acquire(timeout=FORK_WAIT_S):
            self._forking.add(threading.get_ident())

    def _after_fork_in_parent(self) -> None:
        me = threading.get_ident()
        if me in self._forking:
            self._forking.discard(me)
            self._in_flight.release()

    def _after_fork_in_child(self) -> None:
        # The child's only thread is the one that forked, with the parent's thread id.
        forked_mid_export = threading.get_ident() not in self._forking
        self._in_flight = threading.RLock()
        self._forking = set()
        if forked_mid_export:
            logger.warning(
                "chainlat: forked while an export to %s was still in flight after %g s; "
                "this process may be unable to export its spans",
                self.counts.target,
                FORK_WAIT_S,
            )

    def _rebuild_in_child(self) -> None:
        # A forked child must not write through the parent's connection pool or file lock.
        self._pid = os.getpid()
        self._deadline = None
        if self._factory is not None:
            with internal_errors("rebuilding the exporter after fork"):
                self.inner = self._factory()

    def shutdown(self) -> None:
        with internal_errors("shutting down the exporter"):
            self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        flushed = False
        with internal_errors("flushing the exporter"):
            flushed = self.inner.force_flush(timeout_millis)
        return flushed


class BoundedBatchSpanProcessor(BatchSpanProcessor):
    """A BatchSpanProcessor whose shutdown is bounded and whose losses are counted.

    ``span_exporter`` is the exporter it was given, as with the SDK's processor.
    """

    def __init__(
        self,
        guard: GuardedExporter,
        *,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        # chainlat reads the OTEL_BSP_* variables itself: a bad value is logged and
        # replaced by its default, where the SDK would raise or log a traceback.
        s = batch_settings()
        args = (
            s["max_queue_size"],
            s["schedule_delay_millis"],
            s["max_export_batch_size"],
            s["export_timeout_millis"],
        )
        if meter_provider is not None and accepts_meter_provider(BatchSpanProcessor):
            super().__init__(guard, *args, meter_provider=meter_provider)
        else:
            super().__init__(guard, *args)
        self._guard = guard
        self._closing = threading.Lock()
        self._closed: bool | None = None
        _at_fork(self, after_in_child=BoundedBatchSpanProcessor._reset_in_child)

    def _reset_in_child(self) -> None:
        self._closing = threading.Lock()

    @property
    def span_exporter(self) -> SpanExporter:
        return self._guard.inner

    @property
    def counts(self) -> ExportCounts:
        """What happened to the spans so far."""
        return self._guard.counts

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is not None and context.trace_flags.sampled and self._closed is None:
            self._guard.counts.offer()
        super().on_end(span)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        timeout_s = (timeout_millis if timeout_millis is not None else 30000) / 1000
        return run_bounded(lambda: BatchSpanProcessor.force_flush(self), timeout_s, "flush")

    def shutdown(self) -> None:
        self.shutdown_by(time.monotonic() + shutdown_timeout_s())

    def _shutdown_batch(self) -> None:
        super().shutdown()  # type: ignore[no-untyped-call]  # untyped in the SDK

    def shutdown_by(self, deadline: float) -> bool:
        """Export what is queued until ``deadline`` (``time.monotonic()``), then report.

        Returns True when every span was exported.
        """
        with self._closing:
            if self._closed is not None:
                return self._closed
            self._closed = False
        started = time.monotonic()
        self._guard.set_deadline(deadline)
        # The worker exports what is queued, then the exporter is shut down; an export
        # in flight may outlast the deadline (a hanging collector): stop waiting for it.
        finished = run_bounded(self._shutdown_batch, deadline - started, "export-shutdown")
        lost = self._guard.counts.report(
            gave_up_after_s=None if finished else round(time.monotonic() - started, 3)
        )
        self._closed = finished and lost == 0
        return self._closed


class CountingSimpleSpanProcessor(SimpleSpanProcessor):
    """A SimpleSpanProcessor (export in the caller's thread) whose losses are counted."""

    def __init__(
        self,
        guard: GuardedExporter,
        *,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        if meter_provider is not None and accepts_meter_provider(SimpleSpanProcessor):
            super().__init__(guard.inner, meter_provider=meter_provider)
        else:
            super().__init__(guard.inner)
        self._guard = guard
        self._stopped = False  # its own flag: the SDK's processor has one only from 1.45

    @property
    def counts(self) -> ExportCounts:
        """What happened to the spans so far."""
        return self._guard.counts

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if not (context is not None and context.trace_flags.sampled) or self._stopped:
            return
        self._guard.counts.offer()
        token = attach(set_value(SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            self._guard.export((span,))
        finally:
            detach(token)

    def shutdown(self) -> None:
        self.shutdown_by(time.monotonic() + shutdown_timeout_s())

    def shutdown_by(self, deadline: float) -> bool:
        """Shut the exporter down (nothing is queued here) and report; True if nothing was lost."""
        if self._stopped:
            return self._guard.counts.lost == 0
        self._stopped = True
        self._guard.set_deadline(deadline)
        run_bounded(self._guard.shutdown, deadline - time.monotonic(), "export-shutdown")
        return self._guard.counts.report() == 0


ExportProcessor = BoundedBatchSpanProcessor | CountingSimpleSpanProcessor
deferred.register(BoundedBatchSpanProcessor, CountingSimpleSpanProcessor)


def export_processor(
    exporter: SpanExporter,
    *,
    target: str,
    batch: bool = True,
    factory: ExporterFactory | None = None,
    meter_provider: MeterProvider | None = None,
) -> ExportProcessor:
    """The processor configure() installs for ``exporter``.

    Args:
        exporter: Where spans go.
        target: How log lines name the destination (an endpoint, a file).
        batch: Batch in a background thread (default) or export in the caller's thread.
        factory: Builds a fresh exporter like ``exporter``; used in a forked child.
        meter_provider: For the dropped-spans counter and the SDK's own processor metrics.
    """
    guard = GuardedExporter(exporter, ExportCounts(target, meter_provider), factory=factory)
    if batch:
        return BoundedBatchSpanProcessor(guard, meter_provider=meter_provider)
    return CountingSimpleSpanProcessor(guard, meter_provider=meter_provider)


def _at_fork(
    obj: object,
    *,
    before: Callable[..., None] | None = None,
    after_in_parent: Callable[..., None] | None = None,
    after_in_child: Callable[..., None] | None = None,
) -> None:
    # Weak references, as the SDK's processors do: the hooks must not keep obj alive.
    if not hasattr(os, "register_at_fork"):
        return
    ref = weakref.ref(obj)

    def hook(method: Callable[..., None] | None) -> Callable[[], None] | None:
        if method is None:
            return None

        def call() -> None:
            target = ref()
            if target is not None:
                with internal_errors("handling a fork"):
                    method(target)

        return call

    hooks = {
        "before": hook(before),
        "after_in_parent": hook(after_in_parent),
        "after_in_child": hook(after_in_child),
    }
    os.register_at_fork(**{when: call for when, call in hooks.items() if call is not None})
