"""Fixtures for the whole suite; plain helpers live in tests/support/ (``from support import``).

    cap          Capture          in-memory pipeline on a fake clock, span ids 1, 2, 3, ...
    live         Capture          in-memory pipeline on the real clock
    sim          SimServer        a chainlat.sim server as ``sim_options`` describes
    sim_options  SimOptions       what ``sim`` serves; a test module or package conftest
                                  overrides it
    start_sim    StartSim         start more servers (``start_sim(profiles=[...], ...)``)
    fake_jaeger  StartFakeJaeger  start fake Jaeger query services (``fake_jaeger(v3=True)``)
    fresh_warnings  None          one-time warnings logged again, as in a fresh process
    clean_runtime_environment  None  no OTEL_*/CHAINLAT_* variables, fresh warnings, chainlat
                                     shut down after (``pytest.mark.usefixtures``)

Every server a fixture starts listens on a free 127.0.0.1 port and is stopped when the
test ends, whatever the test did.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack
from typing import Any, Unpack

import pytest

import chainlat
import chainlat._core.errors
from chainlat._runtime import export as _export
from chainlat.sim import SimServer
from chainlat.testing import Capture, capture
from support import FakeJaeger, SimOptions, StartFakeJaeger, StartSim

# chainlat swallows its own errors in applications; in its own test suite they
# must stay loud.
chainlat._core.errors.RAISE_INTERNAL_ERRORS = True


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _nothing_left_configured() -> Iterator[None]:
    """Shut down what a test configure()d and left up: its exporter threads (retrying a
    collector that is gone, with random back-off) must not run into the next test."""
    yield
    from chainlat._runtime import config

    if config._installed is not None:
        chainlat.shutdown(timeout_ms=2000)


@pytest.fixture
def fresh_warnings() -> Iterator[None]:
    """chainlat's one-time warnings are logged again in this test, whichever test used
    them first, and again after it."""
    chainlat._core.errors.forget_warnings()
    yield
    chainlat._core.errors.forget_warnings()


@pytest.fixture
def clean_runtime_environment(
    monkeypatch: pytest.MonkeyPatch, fresh_warnings: None
) -> Iterator[None]:
    """Each test sees its own environment and one-time warnings."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "CHAINLAT_")):
            monkeypatch.delenv(name)
    monkeypatch.setattr(_export, "_reported_env", set())
    yield
    chainlat.shutdown()


@pytest.fixture(autouse=True)
def _no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI fits its tables to ``COLUMNS``: every test starts as in a pipe without it,
    whatever terminal ran the suite (a test that wants a width sets it)."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def cap() -> Iterator[Capture]:
    """An in-memory pipeline on a fake clock, with span ids 1, 2, 3, ..."""
    with capture(fake_clock=True, sequential_ids=True) as c:
        yield c


@pytest.fixture
def live() -> Iterator[Capture]:
    """An in-memory pipeline on the real clock."""
    with capture() as c:
        yield c


# --- chainlat.sim -----------------------------------------------------------------------------


@pytest.fixture
def start_sim() -> Iterator[StartSim]:
    """Start chainlat.sim servers (in background threads); all stop when the test ends."""
    with ExitStack() as servers:

        def start(**options: Unpack[SimOptions]) -> SimServer:
            return servers.enter_context(SimServer(**options))

        yield start


@pytest.fixture
def sim_options() -> SimOptions:
    """What `sim` serves: the default profiles, no network delay. Override per module."""
    return SimOptions()


@pytest.fixture
def sim(start_sim: StartSim, sim_options: SimOptions) -> SimServer:
    """A chainlat.sim server as `sim_options` describes, stopped when the test ends."""
    return start_sim(**sim_options)


# --- a fake Jaeger ----------------------------------------------------------------------------


@pytest.fixture
def fake_jaeger() -> Iterator[StartFakeJaeger]:
    """Start fake Jaeger query services (see `support.FakeJaeger`); all stop with the test."""
    with ExitStack() as servers:

        def start(
            *, v3: bool, otlp: dict[str, Any] | None = None, service: str = "support-api"
        ) -> FakeJaeger:
            return servers.enter_context(FakeJaeger(v3=v3, otlp=otlp, service=service))

        yield start


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Hostile-input and fuzzing tests live beside the code they attack; their file names
    mark them, so ``-m hostile`` or ``-m fuzz`` runs them across the packages."""
    for item in items:
        name = item.path.name
        if name.startswith("test_hostile_"):
            item.add_marker(pytest.mark.hostile)
        elif name.startswith("test_fuzz_"):
            item.add_marker(pytest.mark.fuzz)
