"""Jaeger's API is read within one deadline, headers included: a server that drips its
headers a byte a second is stopped at ``--timeout`` (each byte used to restart the timeout)."""

from __future__ import annotations

import time

import pytest

from chainlat._core.errors import TraceSourceError
from chainlat.traces import JaegerSource
from support.hostile_http import drip_headers, hostile_server


def test_a_jaeger_that_drips_its_headers_is_stopped_at_the_deadline() -> None:
    with hostile_server(drip_headers) as url:
        source = JaegerSource(url, "s", timeout_s=2)
        started = time.monotonic()
        with pytest.raises(TraceSourceError, match=r"within 2 s; raise --timeout"):
            list(source.runs())
        elapsed = time.monotonic() - started
    assert elapsed < 2 + 2.5
