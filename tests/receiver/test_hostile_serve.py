"""``chainlat serve`` where it cannot start: a port in use, an address that is none, an
``--out`` that cannot be written. One line naming what is wrong, exit 2, nothing of grpcio's
own on the terminal."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chainlat.cli import main
from chainlat.traces import read_runs


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


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=["SIGTERM", "SIGINT", "SIGHUP"]
)
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


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_serve_ended_by_a_signal_judges_and_removes_its_temporary_file(
    tmp_path: Path, signum: int
) -> None:
    """SIGHUP (the terminal closed) ends serve as SIGTERM does: what was received judged, the
    temporary file of it removed. SIGHUP's default killed serve, leaving the file in
    TMPDIR."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    serve = subprocess.Popen(
        [sys.executable, "-m", "chainlat.cli", "serve", "--port", "0", "--grpc-port", "0"],
        cwd=tmp_path,  # no budget file found: report's summary
        env={**os.environ, "TMPDIR": str(temp)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert serve.stderr is not None
        banner = serve.stderr.readline()  # printed once the receiver serves
        port = re.search(r"http://127\.0\.0\.1:(\d+)/v1/traces", banner)
        assert port, banner
        url = f"http://127.0.0.1:{port.group(1)}/v1/traces"
        assert httpx.post(url, json=_run_request(), timeout=10).status_code == 200
        assert list(temp.glob("chainlat-*")), "serve has its temporary file while it runs"
        serve.send_signal(signum)
        out, err = serve.communicate(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    assert serve.returncode == 0, err  # report's code: no budget file
    assert "1 run of 1 workflow from the traces received" in out, out
    assert "Traceback" not in err
    assert list(temp.glob("chainlat-*")) == []


def _run_request() -> dict[str, object]:
    """One run of workflow ``support``: its root span alone, 30 ms."""
    attributes = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
        {"key": "gen_ai.workflow.name", "value": {"stringValue": "support"}},
    ]
    span = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "invoke_workflow support",
        "kind": 1,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000030000000",
        "attributes": attributes,
    }
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": [span]}]}]}


TERMINAL = textwrap.dedent(
    """
    import json, os, pty, re, sys, time, urllib.request
    command = sys.argv[1:]
    pid, terminal = pty.fork()
    if pid == 0:  # serve, with the pseudo-terminal as its controlling terminal
        try:
            os.execv(command[0], command)
        finally:
            os._exit(127)
    banner, deadline = b"", time.monotonic() + 60
    try:
        while b"Ctrl-C to stop" not in banner and time.monotonic() < deadline:
            banner += os.read(terminal, 4096)
    except OSError:  # serve ended: the terminal has no other end
        pass
    files = sorted(os.listdir(os.environ["TMPDIR"]))
    if os.environ.get("POST"):  # a run received first: its summary has no one to go to
        port = re.search(rb"http://127\\.0\\.0\\.1:(\\d+)/v1/traces", banner).group(1).decode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/traces", data=os.environ["POST"].encode(),
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=30).read()
    os.close(terminal)  # the terminal closes
    deadline = time.monotonic() + 60  # its own bound, whatever the start-up took
    while (done := os.waitpid(pid, os.WNOHANG)) == (0, 0) and time.monotonic() < deadline:
        time.sleep(0.05)
    if done == (0, 0):
        os.kill(pid, 9)
        done = os.waitpid(pid, 0)
    print(json.dumps({"banner": banner.decode(errors="replace"), "files": files,
                      "signal": os.WTERMSIG(done[1]) if os.WIFSIGNALED(done[1]) else 0,
                      "code": os.WEXITSTATUS(done[1]) if os.WIFEXITED(done[1]) else None}))
    """
)


def _in_a_terminal_that_closes(serve: list[str], cwd: Path, **env: str) -> dict[str, Any]:
    """``serve`` run by `TERMINAL` (its own process: forking pytest's, with its threads, is
    not safe) with ``env`` added: the banner, TMPDIR's files, and how serve ended."""
    found = subprocess.run(
        [sys.executable, "-c", TERMINAL, *serve],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen: dict[str, Any] = json.loads(found.stdout)
    return seen


@pytest.mark.skipif(sys.platform == "win32", reason="no terminals to hang up on Windows")
def test_serve_in_a_terminal_that_closes_removes_its_temporary_file(tmp_path: Path) -> None:
    """The terminal serve runs in goes away (its pseudo-terminal's other end closed): the
    kernel sends it SIGHUP, and serve ends as for SIGTERM, its temporary file removed (the
    summary has nowhere left to be printed). It was killed by the SIGHUP, the file left.
    The pseudo-terminal is made in a process of its own: forking pytest's, with its threads,
    is not safe."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    serve = [sys.executable, "-m", "chainlat.cli", "serve", "--port", "0", "--grpc-port", "0"]
    seen = _in_a_terminal_that_closes(serve, tmp_path, TMPDIR=str(temp))
    assert "Ctrl-C to stop" in seen["banner"], seen
    assert any(name.startswith("chainlat-") for name in seen["files"]), seen
    assert seen["signal"] == 0, seen  # ended by itself, not killed
    # Its error line (nothing received) had no terminal left: 129, as for a SIGHUP, not a 1
    # that says a budget broke.
    assert seen["code"] == 129, seen
    assert list(temp.glob("chainlat-*")) == []


@pytest.mark.skipif(sys.platform == "win32", reason="no terminals to hang up on Windows")
def test_serve_in_a_terminal_that_closes_keeps_what_it_received_and_exits_129(
    tmp_path: Path,
) -> None:
    """A run received, then the terminal closes: the summary is written to no one, the
    process ends 129 (a hang-up) with no traceback anywhere, and the ``--out`` file holds
    the run for ``chainlat check`` later."""
    serve = [sys.executable, "-m", "chainlat.cli", "serve", "--port", "0", "--grpc-port", "0",
             "--out", str(tmp_path / "received.jsonl")]  # fmt: skip
    seen = _in_a_terminal_that_closes(
        serve, tmp_path, TMPDIR=str(tmp_path), POST=json.dumps(_run_request())
    )
    assert (seen["signal"], seen["code"]) == (0, 129), seen
    (run,) = read_runs([tmp_path / "received.jsonl"])
    assert run.total_ms == pytest.approx(30.0)


WAITING_CMD = textwrap.dedent(
    """
    import signal, sys, time
    def ended(signum, frame):
        open(sys.argv[1], "w").write(signal.Signals(signum).name)
        sys.exit(0)
    signal.signal(signal.SIGHUP, ended)
    signal.signal(signal.SIGTERM, ended)
    open(sys.argv[2], "w").write("ready")
    time.sleep(60)
    """
)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_run_alone_is_forwarded_to_cmd(tmp_path: Path, signum: int) -> None:
    """chainlat not in a terminal's foreground (no terminal here): a SIGTERM or SIGHUP sent
    to it reaches CMD, which ends; then run cleans up as usual."""
    temp, app = tmp_path / "tmp", tmp_path / "app.py"
    got, ready = tmp_path / "got", tmp_path / "ready"
    temp.mkdir()
    app.write_text(WAITING_CMD)
    command = ["run", "--wait", "0", "--", sys.executable, str(app), str(got), str(ready)]
    run = subprocess.Popen(
        [sys.executable, "-c", "import sys; from chainlat.cli import main; sys.exit(main())",
         *command],
        cwd=tmp_path, env={**os.environ, "TMPDIR": str(temp)},
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a measure
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        run.send_signal(signum)
        _, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert got.read_text() == signal.Signals(signum).name
    assert run.returncode == 2 and b"sent no spans" in err, err  # CMD exited 0, sent none
    assert list(temp.glob("chainlat-*")) == []
