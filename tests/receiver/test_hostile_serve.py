"""``chainlat serve`` where it cannot start: a port in use, an address that is none, an
``--out`` that cannot be written. One line naming what is wrong, exit 2, nothing of grpcio's
own on the terminal."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
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


CHILD = textwrap.dedent(
    """
    import os, sys
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
    attributes = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support"}
    provider.get_tracer("app").start_span("invoke_workflow support", attributes=attributes).end()
    provider.shutdown()
    with open(sys.argv[1], "w") as file:
        file.write(str(os.getpid()))
    """
)


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_run_awaits_the_last_spans_cleans_up_and_exits_130(
    tmp_path: Path, signum: int
) -> None:
    """CMD has exited and run waits (--wait 10) for its last spans: a signal then ended
    chainlat by its default (SIGTERM: killed, the temporary file of the traces received
    left in TMPDIR)."""
    temp, app, pid_file = tmp_path / "tmp", tmp_path / "app.py", tmp_path / "pid"
    temp.mkdir()
    app.write_text(CHILD)
    env = {**os.environ, "TMPDIR": str(temp)}
    command = ["run", "--wait", "10", "--", sys.executable, str(app), str(pid_file)]
    run = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from chainlat.cli import main; sys.exit(main())",
            *command,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a measure
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        while not _gone(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(temp.glob("chainlat-*")), "run has its temporary file while it waits"
        run.send_signal(signum)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err
    assert b"Traceback" not in err
    assert list(temp.glob("chainlat-*")) == []
