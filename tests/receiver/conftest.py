"""Fixtures of the receiver's tests.

receiver  Receiver  chainlat's receiver on free 127.0.0.1 ports (HTTP and gRPC), writing
                    ``received.jsonl`` in the test's folder; stopped when the test ends
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chainlat.receiver import Receiver


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    with Receiver(tmp_path / "received.jsonl", port=0, grpc_port=0) as started:
        yield started
