"""Helpers shared by the test files: one of each fake server, one free-port helper.

Test files import them by name (``from support import FakeCollector``): tests/ is on
``sys.path`` because the rootdir conftest lives there (pytest's default ``prepend``
import mode), for tests/integration too. The fixtures built on them (``sim``,
``start_sim``, ``fake_jaeger``) are in tests/conftest.py; the fixtures of one package's
tests in that package's conftest.py. Test files never import from one another: what two of
them share lives in a module of this package, one concern each (``tracegen`` writes trace
files, ``sim_checks`` times the simulator, ``credentials`` holds fake keys, ...).
"""

from __future__ import annotations

from .budgets import MISTAKES
from .jaeger import FakeJaeger, StartFakeJaeger
from .net import free_block, free_port, free_ports
from .otlp import HANG_S, FakeCollector, Mode, Received
from .polling import until
from .receiver import EXPORT_METHOD, grpc_export, grpc_stream_export, received_span_ids
from .sim import SimOptions, StartSim

__all__ = [
    "EXPORT_METHOD",
    "HANG_S",
    "MISTAKES",
    "FakeCollector",
    "FakeJaeger",
    "Mode",
    "Received",
    "SimOptions",
    "StartFakeJaeger",
    "StartSim",
    "free_block",
    "free_port",
    "free_ports",
    "grpc_export",
    "grpc_stream_export",
    "received_span_ids",
    "until",
]
