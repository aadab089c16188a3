"""Reading Prometheus is bounded: one deadline for the whole request (a server that drips its
headers or its body a byte a second is stopped at it) and a cap on the answer once
decompressed, read as it streams (a huge body, a gzip bomb). Real servers on 127.0.0.1."""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest

from chainlat._core.errors import TraceSourceError
from chainlat.cli import main
from chainlat.prometheus import PrometheusReader
from support.hostile_http import (
    drip_body,
    drip_headers,
    flood,
    gzip_bomb,
    hostile_server,
    send_gzip,
)

CAP = 16 * 1024 * 1024


@pytest.mark.parametrize("respond", [drip_headers, drip_body], ids=["headers", "body"])
def test_a_server_that_drips_is_stopped_at_the_deadline(
    respond: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows.chat]\ntotal = "800ms"\n')
    with hostile_server(respond) as url:  # type: ignore[arg-type]
        started = time.monotonic()
        code = main(["check", "--prometheus", url, "--budgets", str(budgets), "--timeout", "3"])
        elapsed = time.monotonic() - started
    err = capsys.readouterr().err
    assert code == 2
    assert "did not answer in full within 3 s; raise --timeout" in err
    assert len(err.strip().splitlines()) == 1
    assert elapsed < 3 + 2.5  # the deadline and a watchdog's wake-up, not 45 s


def test_a_huge_body_is_refused_at_the_cap_as_it_streams() -> None:
    with hostile_server(flood) as url:
        reader = PrometheusReader(url, timeout_s=60, max_response_bytes=CAP)
        tracemalloc.start()
        try:
            with pytest.raises(TraceSourceError, match=r"over 16777216 bytes \(decompressed\)"):
                reader.query("up")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 3 * CAP, peak


def test_a_gzip_bomb_is_refused_at_the_cap_in_bounded_memory() -> None:
    bomb = gzip_bomb(1024)
    assert len(bomb) < 2 * 1024 * 1024  # 1 GiB inflated from about 1 MB
    with hostile_server(send_gzip(bomb)) as url:
        reader = PrometheusReader(url, timeout_s=60, max_response_bytes=CAP)
        tracemalloc.start()
        try:
            with pytest.raises(TraceSourceError, match=r"over 16777216 bytes \(decompressed\)"):
                reader.query("up")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 3 * CAP, peak


def test_a_gzip_answer_within_the_cap_is_read() -> None:
    import gzip
    import json

    answer = {"status": "success", "data": {"resultType": "vector", "result": []}}
    with hostile_server(send_gzip(gzip.compress(json.dumps(answer).encode()))) as url:
        assert PrometheusReader(url, timeout_s=10).query("up") == []
