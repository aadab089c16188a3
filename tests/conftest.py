from __future__ import annotations

from collections.abc import Iterator

import pytest

import chainlat._core.errors
from chainlat.testing import Capture, capture

# chainlat swallows its own errors in applications; in its own test suite they
# must stay loud.
chainlat._core.errors.RAISE_INTERNAL_ERRORS = True


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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
