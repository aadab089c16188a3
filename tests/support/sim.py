"""The types of the ``sim``, ``sim_options`` and ``start_sim`` fixtures (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypedDict, Unpack

from opentelemetry.sdk.trace import TracerProvider

from chainlat.sim import ModelProfile, SimServer, VoiceProfile


class SimOptions(TypedDict, total=False):
    """`SimServer`'s arguments (the port is always a free one)."""

    profiles: Sequence[ModelProfile]
    voices: Sequence[VoiceProfile]
    network_delay_ms: float
    network_jitter_ms: float
    seed: int
    tracer_provider: TracerProvider
    otlp_endpoint: str


class StartSim(Protocol):
    """``start_sim(profiles=[...], network_delay_ms=40)``: a running server."""

    def __call__(self, **options: Unpack[SimOptions]) -> SimServer: ...
