"""``chainlat serve`` where it cannot start: a port in use, an address that is none, an
``--out`` that cannot be written. One line naming what is wrong, exit 2, nothing of grpcio's
own on the terminal."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from chainlat.cli import main


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def _serve(capfd: pytest.CaptureFixture[str], *options: str) -> tuple[int, list[str]]:
    """The exit code and the lines on the stderr file descriptor (grpcio's C core writes
    there itself, past sys.stderr)."""
    code = main(["serve", *options])
    return code, capfd.readouterr().err.splitlines()


def test_a_grpc_port_in_use_is_one_line_naming_it(
    capfd: pytest.CaptureFixture[str], busy_port: int
) -> None:
    code, lines = _serve(capfd, "--port", "0", "--grpc-port", str(busy_port))
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        f"chainlat: cannot receive traces: cannot listen on 127.0.0.1:{busy_port}: "
        "Address already in use"
    )


def test_an_http_port_in_use_is_one_line_naming_it(
    capfd: pytest.CaptureFixture[str], busy_port: int
) -> None:
    code, lines = _serve(capfd, "--port", str(busy_port), "--grpc-port", "0")
    assert code == 2
    assert len(lines) == 1 and f"127.0.0.1', {busy_port}" in lines[0], lines


def test_an_out_file_that_cannot_be_written_is_named(
    capfd: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a-file").write_text("")
    code, lines = _serve(capfd, "--port", "0", "--grpc-port", "0", "--out", "a-file/r.jsonl")
    assert code == 2
    assert lines == ["chainlat: cannot receive traces: 'a-file': File exists"]


def test_a_host_that_is_no_address_is_named(capfd: pytest.CaptureFixture[str]) -> None:
    code, lines = _serve(capfd, "--host", "256.1.1.1", "--port", "0", "--grpc-port", "0")
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("chainlat: cannot receive traces: '256.1.1.1': ")
