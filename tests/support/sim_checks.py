"""What the chainlat.sim tests share: the test profile and the latencies it injects, the
client-side timing samples checked against them, and readers of what the server reports.

Timing assertions compare client-side measurements with the injected latencies. The
tolerance is asymmetric: the server must never be early by more than `EARLY_MS`, and
the fastest of a few runs must not be later than `LATE_MS`, which leaves room for a
noisy two-core machine while still catching a phase that is missing or doubled.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chainlat.sim import ModelProfile, SimServer

EARLY_MS = 2.0
"""The server may look early by this much: clock reads on both sides of a socket."""
LATE_MS = 40.0
"""The fastest of a few measurements may be this much late (noisy 2-core machine)."""
MIN_RUNS = 3
MAX_RUNS = 60
RETRY_S = 20.0
"""While a fastest sample is still late, measure again for up to this long (at most
`MAX_RUNS` runs): a burst of load on a shared machine outlasts a fixed few retries."""

NETWORK_MS = 40.0
PROFILE = ModelProfile(
    "sim-test", ttft_base_ms=120.0, decode_ms_per_token=15.0, output_tokens=20, slots=2
)
EXPECTED_TTFT_MS = NETWORK_MS + 120.0  # 160
EXPECTED_TOTAL_MS = EXPECTED_TTFT_MS + 19 * 15.0  # 445
MESSAGES: list[Any] = [{"role": "user", "content": "Say something."}]


def anthropic_client(sim: SimServer) -> anthropic.Anthropic:
    """An Anthropic client of ``sim``, without retries."""
    return anthropic.Anthropic(base_url=sim.base_url, api_key="sk-ant-test", max_retries=0)


def server_timing(header: str) -> dict[str, float]:
    """Parse a Server-Timing style header into {name: ms}."""
    result: dict[str, float] = {}
    for entry in header.split(","):
        name, _, dur = entry.strip().partition(";dur=")
        result[name] = float(dur)
    return result


class Timings:
    """Client-side latency samples, checked against the injected latencies.

    Every sample must be at most `EARLY_MS` early and the fastest of each metric at most
    `LATE_MS` late. `runs` measures `MIN_RUNS` times, then again (for up to `RETRY_S`, at
    most `MAX_RUNS` runs) only while a metric's fastest sample is still late, so that a
    burst of load on a shared machine costs retries rather than a failure.
    """

    def __init__(self, **expected_ms: float) -> None:
        self.expected_ms = expected_ms
        self.samples: dict[str, list[float]] = {name: [] for name in expected_ms}

    def runs(self) -> Iterator[int]:
        deadline = time.monotonic() + RETRY_S
        for run in range(MAX_RUNS):
            if run >= MIN_RUNS and (
                time.monotonic() > deadline
                or all(
                    min(samples) <= self.expected_ms[name] + LATE_MS
                    for name, samples in self.samples.items()
                )
            ):
                return
            yield run

    def add(self, name: str, measured_ms: float) -> None:
        self.samples[name].append(measured_ms)

    def check(self) -> None:
        for name, samples in self.samples.items():
            expected = self.expected_ms[name]
            assert min(samples) >= expected - EARLY_MS, f"{name} early: {samples} vs {expected}"
            assert min(samples) <= expected + LATE_MS, f"{name} late: {samples} vs {expected}"


def ms_since(start: float) -> float:
    """Milliseconds since ``start``, a ``time.perf_counter()`` reading."""
    return (time.perf_counter() - start) * 1000


def memory_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A fresh tracer provider exporting to memory, and its exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


FITTED_WITH_VOICES = """\
[models.fast]
ttft_base_ms = 20
decode_ms_per_token = 1

[models.my-tts]
speech_input = "characters"
ttft_base_ms = 150
ttft_per_speech_input_ms = 0.5
ms_per_speech_input = 10.8333

[models.my-stt]
speech_input = "audio_seconds"
ttft_base_ms = 120
ttft_per_speech_input_ms = 15
ms_per_speech_input = 37.5
"""
"""A profile file as ``chainlat profile -o`` writes it from voice runs: a chat model and
two speech models (``speech_input``), served back by ``chainlat sim --profiles``."""
