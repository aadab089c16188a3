"""Helpers for testing code instrumented with chainlat: an in-memory pipeline and a fake clock.

Example::

    from chainlat.testing import capture

    with capture(fake_clock=True) as cap:
        with chainlat.workflow("answer", tracer_provider=cap.provider) as run:
            cap.clock.advance(ms=5)
    assert run.rollup.total_ms == 5
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from types import TracebackType

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from chainlat._core import attributes as attr
from chainlat._core.rollup import Rollup
from chainlat._runtime.processor import ChainlatSpanProcessor, register

__all__ = ["Capture", "FakeClock", "SequentialIdGenerator", "capture"]


class FakeClock:
    """A nanosecond clock that moves only when told to."""

    def __init__(self, start_ns: int = 1_700_000_000_000_000_000) -> None:
        self.now_ns = start_ns

    def __call__(self) -> int:
        return self.now_ns

    def advance(self, ms: float = 0.0, *, ns: int = 0) -> int:
        """Move forward by ``ms`` milliseconds plus ``ns`` nanoseconds; returns the new time."""
        self.now_ns += round(ms * 1_000_000) + ns
        return self.now_ns


class SequentialIdGenerator(IdGenerator):
    """Trace ids 1, 2, 3, ... and span ids 1, 2, 3, ..., for readable, repeatable tests."""

    def __init__(self) -> None:
        self._spans = itertools.count(1)
        self._traces = itertools.count(1)

    def generate_span_id(self) -> int:
        return next(self._spans)

    def generate_trace_id(self) -> int:
        return next(self._traces)


@dataclass
class Capture:
    """An SDK pipeline that keeps every finished span in memory."""

    provider: TracerProvider
    exporter: InMemorySpanExporter
    processor: ChainlatSpanProcessor
    metric_reader: InMemoryMetricReader
    clock: FakeClock = field(default_factory=FakeClock)

    def spans(self) -> tuple[ReadableSpan, ...]:
        """Every finished span, in the order they ended."""
        return self.exporter.get_finished_spans()

    def span(self, name: str) -> ReadableSpan:
        """The one finished span called ``name``."""
        found = [s for s in self.spans() if s.name == name]
        if len(found) != 1:
            raise AssertionError(f"expected one span named {name!r}, found {len(found)}")
        return found[0]

    def workflows(self) -> list[ReadableSpan]:
        """The finished workflow spans."""
        return [s for s in self.spans() if (s.attributes or {}).get(attr.STEP_KIND) == "workflow"]

    def rollups(self) -> list[Rollup]:
        """The rollups read back from the finished workflow spans."""
        found = (Rollup.from_attributes(s.attributes or {}) for s in self.workflows())
        return [r for r in found if r is not None]

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()

    def close(self) -> None:
        """Shut the pipeline down."""
        self.provider.shutdown()

    def __enter__(self) -> Capture:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def capture(*, fake_clock: bool = False, sequential_ids: bool = False) -> Capture:
    """A fresh in-memory pipeline with chainlat's processor; pass ``cap.provider`` explicitly.

    Args:
        fake_clock: Time chainlat's own spans with ``cap.clock``, which moves only
            when advanced, so durations are exact.
        sequential_ids: Use span ids 1, 2, 3, ...
    """
    clock = FakeClock()
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    provider = TracerProvider(
        resource=Resource.create({"service.name": "chainlat-test"}),
        id_generator=SequentialIdGenerator() if sequential_ids else None,
        shutdown_on_exit=False,
    )
    processor = ChainlatSpanProcessor(
        clock=clock if fake_clock else None, meter_provider=meter_provider
    )
    provider.add_span_processor(processor)
    register(provider, processor)
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Capture(provider, exporter, processor, reader, clock)
