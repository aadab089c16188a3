"""``chainlat serve`` and ``chainlat run -- CMD``: traces received over OTLP, judged as
``chainlat check`` judges a file.

Both write what they receive as OTLP/JSON lines (``--out FILE``, else a temporary file),
print one line per run on stderr as its trace completes, and end with what ``check`` prints
for everything received (or what ``report`` prints when there is no budget file), with
its exit codes. The receiver (:mod:`chainlat.receiver`; aiohttp and grpcio) is imported
when the command runs.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

from chainlat._core.errors import ChainlatError, InputError, shown
from chainlat._core.exits import EXIT_INPUT
from chainlat._core.redact import one_line
from chainlat.cli.budgets import check_sources, found_budgets, report_sources
from chainlat.cli.judging import add_allow
from chainlat.cli.options import add_budgets, add_command, add_format, add_run_filter
from chainlat.cli.output import warn

if TYPE_CHECKING:
    from chainlat._core.runs import WorkflowRun
    from chainlat.budgets import Budgets
    from chainlat.receiver import Receiver

_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")
_MOST_WAIT_S: Final = 10.0
"""``run`` waits for a CMD's last spans this long at most, however they keep coming."""
_SIGNALS: Final[tuple[signal.Signals, ...]] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""The signals that end ``serve`` (and ``run``'s wait) with the summary and the temporary
file removed: Ctrl-C, ``kill``, and SIGHUP, the terminal closed (Windows has none), whose
default ended chainlat at once and left the file of what was received behind."""
_TERMINAL_SIGNALS: Final[tuple[signal.Signals, ...]] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGHUP") if hasattr(signal, name)
)
"""What a terminal sends its foreground process group itself, CMD included."""


def add_commands(sub: Any) -> None:
    """Add ``serve`` and ``run`` to the ``chainlat`` parser's subparsers."""
    serve = add_command(
        sub,
        "serve",
        _serve,
        help="receive OTLP traces (HTTP and gRPC) and judge them when stopped",
        description="An OTLP receiver on 127.0.0.1: OTLP/HTTP (POST /v1/traces, protobuf or "
        "JSON) and OTLP/gRPC. One line per run as it completes; on Ctrl-C, SIGTERM or SIGHUP, "
        "what 'chainlat check' prints for everything received, and its exit code.",
    )
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="NAME",
        help="address to listen on (default 127.0.0.1; any other is warned of)",
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=4318,
        metavar="N",
        help="OTLP/HTTP port (default 4318; 0: a free one, printed)",
    )
    serve.add_argument(
        "--grpc-port",
        type=_port,
        default=4317,
        metavar="N",
        help="OTLP/gRPC port (default 4317; 0: a free one, printed)",
    )
    _add_judging(serve)

    run = add_command(
        sub,
        "run",
        _run,
        help="run a command exporting OTLP traces to chainlat, then judge them",
        description="Start a receiver on free ports, run CMD with OTEL_EXPORTER_OTLP_ENDPOINT "
        "pointing at it, and when it exits judge its runs as 'chainlat check' does (exit: "
        "CMD's own code when it failed, else check's).",
    )
    run.add_argument(
        "--wait",
        type=_seconds,
        default=2.0,
        metavar="SECONDS",
        help="after CMD exits, wait until no span has come for this long (default 2; 10 "
        "in all at most)",
    )
    _add_judging(run)
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]")


def _add_judging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="write what is received to FILE as OTLP JSON lines (replaced; default: a "
        "temporary file)",
    )
    add_budgets(parser, "judged per run live and in full at the end; without one, a report")
    add_format(parser, "check", "stats")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    add_allow(parser)
    add_run_filter(parser)
    parser.set_defaults(html=None, jaeger_ui=None)


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= _MOST_WAIT_S:
        raise argparse.ArgumentTypeError(f"expected seconds from 0 to 10, got {text!r}")
    return value


def _live(budgets: Budgets | None) -> Callable[[WorkflowRun], None]:
    """The line printed for each run as it completes (stderr: stdout is the summary's)."""
    from chainlat.receiver import run_line

    def show(run: WorkflowRun) -> None:
        sys.stderr.write(run_line(run, budgets) + "\n")
        sys.stderr.flush()

    return show


@contextmanager
def _received(
    args: argparse.Namespace, budgets: Budgets | None, **where: Any
) -> Iterator[Receiver]:
    """A started receiver writing to ``--out`` (else a temporary file, removed after)."""
    from chainlat.receiver import Receiver

    with tempfile.TemporaryDirectory(prefix="chainlat-") as directory:
        out = args.out or os.path.join(directory, "received.jsonl")
        receiver = Receiver(out, on_run=_live(budgets), **where)
        try:
            receiver.start()
        except OSError as exc:
            receiver.stop()
            reason = exc.strerror or str(exc)
            if exc.filename:  # --out cannot be written: name it
                reason = f"{shown(exc.filename)}: {reason}"
            elif isinstance(exc, socket.gaierror):  # --host is no address: name it
                reason = f"{shown(receiver.host)}: {reason}"
            raise InputError(f"cannot receive traces: {reason}") from None
        except ImportError as exc:
            receiver.stop()
            raise InputError(
                f"receiving traces needs {exc.name or 'aiohttp'}: pip install 'chainlat[serve]'"
            ) from None
        try:
            yield receiver
        finally:
            receiver.stop()


def _judge(args: argparse.Namespace, receiver: Receiver, budgets: Budgets | None) -> int:
    """What ``check`` (or ``report``, without budgets) prints for everything received."""
    from chainlat.traces import FileSource

    for line in receiver.counters.warnings():
        warn(line)
    source = FileSource(receiver.out)
    if not args.out:
        source.name = "the traces received"
    if budgets is None:
        return report_sources(args, [source])
    return check_sources(args, [source], budgets)


def _serve(args: argparse.Namespace) -> int:
    budgets = found_budgets(args.budgets)
    stop = threading.Event()
    where = {"host": args.host, "port": args.port, "grpc_port": args.grpc_port}
    with _signals(lambda signum: stop.set()), _received(args, budgets, **where) as receiver:
        if args.host not in _LOOPBACK:
            warn(f"listening on {args.host}: other machines can send traces (and read none)")
        host = f"[{args.host}]" if ":" in args.host else args.host
        sys.stderr.write(
            f"chainlat serve: OTLP/HTTP on http://{host}:{receiver.port}/v1/traces, OTLP/gRPC "
            f"on {host}:{receiver.grpc_port}; writing {receiver.out}; Ctrl-C to stop\n"
        )
        sys.stderr.flush()
        while not stop.wait(0.5):  # a timeout, so that the main thread runs signal handlers
            pass
        receiver.stop()
        return _judge(args, receiver, budgets)


def _run(args: argparse.Namespace) -> int:
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise InputError("run needs a command: chainlat run [OPTIONS] -- CMD [ARGS...]")
    budgets = found_budgets(args.budgets)
    with _received(args, budgets, port=0, grpc_port=0) as receiver:
        env = _environment(receiver)
        try:
            child = subprocess.Popen(command, env=env)
        except OSError as exc:
            raise InputError(f"cannot run {shown(command[0])}: {exc.strerror or exc}") from None
        with _signals(lambda signum: _forward(child, signum)):
            code = child.wait()
            # Still ours while the last spans are awaited: a signal's default would end
            # chainlat at once, leaving the temporary file of what was received behind.
            receiver.wait_quiet(args.wait, _MOST_WAIT_S)
        receiver.stop()
        failed = code != 0
        code = 128 - code if code < 0 else code  # killed by a signal: as a shell reports it
        if receiver.counters.spans == 0:
            sys.stderr.write(
                f"chainlat run: {shown(command[0])} sent no spans to "
                f"{env['OTEL_EXPORTER_OTLP_ENDPOINT']} (is it traced with OpenTelemetry and "
                "exporting over OTLP?)\n"
            )
            verdict = EXIT_INPUT
        else:
            try:
                verdict = _judge(args, receiver, budgets)
            except ChainlatError as exc:
                if not failed:
                    raise
                sys.stderr.write(one_line(f"chainlat: {exc}") + "\n")  # CMD's failure decides
                verdict = EXIT_INPUT
    if failed:
        sys.stderr.write(f"chainlat run: {shown(command[0])} exited with code {code}\n")
        return code
    return verdict


def _environment(receiver: Receiver) -> dict[str, str]:
    """The environment CMD runs in: the OTLP exporter pointed at the receiver, over gRPC when
    the environment asks for it (``OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL=grpc``), else HTTP."""
    env = dict(os.environ)
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", ""
    )
    if protocol.strip().lower() == "grpc":
        endpoint = traces = f"http://127.0.0.1:{receiver.grpc_port}"
    else:
        endpoint = f"http://127.0.0.1:{receiver.port}"
        traces = f"{endpoint}/v1/traces"
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = traces
    env["OTEL_TRACES_EXPORTER"] = "otlp"
    return env


def _forward(child: subprocess.Popen[bytes], signum: int) -> None:
    """A signal for CMD. A Ctrl-C at the terminal (or its SIGHUP, the terminal closed)
    already reached it (it is in the terminal's foreground process group with chainlat):
    sent once more only when chainlat is not in the foreground, so that a SIGINT sent to
    chainlat alone reaches CMD too. Once CMD has exited, the signal is for chainlat: it
    stops waiting, cleans up and exits 130."""
    if child.returncode is not None:
        raise KeyboardInterrupt
    if signum in _TERMINAL_SIGNALS and _in_foreground():
        return
    if child.poll() is None:
        child.send_signal(signum)


def _in_foreground() -> bool:
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


@contextmanager
def _signals(handler: Callable[[int], None]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP call ``handler`` (no KeyboardInterrupt) until the block
    ends."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only; a caller in another thread stops otherwise
        return
    previous = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    for signum in _SIGNALS:
        signal.signal(signum, lambda signum, frame: handler(signum))
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
