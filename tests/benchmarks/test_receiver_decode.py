"""benchmarks/receiver_decode.py times what it says: its request, as JSON and as protobuf,
decodes to the same document by each path (it checks so before it times anything)."""

from __future__ import annotations

import pytest

from support.bench_scripts import bench_script


def test_the_receivers_decode_benchmark_times_one_document_every_way(
    capsys: pytest.CaptureFixture[str],
) -> None:
    receiver_decode = bench_script("receiver_decode")
    assert receiver_decode.main(["--workflows", "2", "--rounds", "1", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("20 spans a request, 1 rounds of the best of 1:")
    names = [line.split()[0] for line in out.splitlines()[1:]]
    assert names == ["json", "protobuf", "protobuf-reflected", "unread", "unread-walked"]
