"""Fixtures of the chainlat.httpx tests; plain helpers live in tests/support/.

sim_options  SimOptions  PROFILE behind a NETWORK_MS network delay, its spans into
                         ``live`` (tests/support/httpx_sim.py): what ``sim`` serves
                         here (a module that wants another server overrides it)
"""

from __future__ import annotations

import pytest

from chainlat.testing import Capture
from support import SimOptions
from support.httpx_sim import NETWORK_MS, PROFILE


@pytest.fixture
def sim_options(live: Capture) -> SimOptions:
    """PROFILE behind a NETWORK_MS network delay, the server's spans into ``live``."""
    return SimOptions(
        profiles=[PROFILE], network_delay_ms=NETWORK_MS, tracer_provider=live.provider
    )
