"""``chainlat sim`` on the command line: arguments, start, Ctrl-C or SIGTERM to stop."""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from chainlat._core.error_lines import Parser
from chainlat._core.exits import EXIT_CODES_HELP, EXIT_INPUT, EXIT_OK
from chainlat._core.redact import one_line
from chainlat.sim._profiles import read_profiles

if TYPE_CHECKING:
    from chainlat.sim import SimServer


class _UsageError(Exception):
    pass


class _Parser(Parser):
    def error(self, message: str) -> NoReturn:
        # Raised, not exited: serve returns its exit code (as a library call too).
        raise _UsageError(message)


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port 0..65535, got {text!r}")
    return int(text)


def _build_parser() -> _Parser:
    parser = _Parser(
        prog="chainlat sim",
        description="Serve OpenAI/Anthropic-compatible endpoints with simulated latency.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8000, help="port, 0 for any (default 8000)")
    parser.add_argument(
        "--profiles",
        metavar="FILE",
        help=(
            "model profiles, .toml or .json (as `chainlat profile -o` writes); speech models'"
            " profiles are served as voices; the defaults stand for a kind the file has none of"
        ),
    )
    parser.add_argument("--network-delay-ms", type=_non_negative, default=0.0, metavar="MS")
    parser.add_argument("--network-jitter-ms", type=_non_negative, default=0.0, metavar="MS")
    parser.add_argument("--seed", type=int, default=0, help="seed for all random draws")
    parser.add_argument("--otlp-endpoint", metavar="URL", help="export server spans (OTLP/HTTP)")
    return parser


def serve(argv: list[str] | None, server: type[SimServer]) -> int:
    """``chainlat sim`` with the arguments ``argv``, serving a ``server`` (`chainlat.sim.main`)."""
    prog = "chainlat sim"
    try:
        args = _build_parser().parse_args(argv)
        chat, voices = ([], []) if args.profiles is None else read_profiles(args.profiles)
        sim = server(
            chat or None,
            voices=voices or None,
            host=args.host,
            port=args.port,
            network_delay_ms=args.network_delay_ms,
            network_jitter_ms=args.network_jitter_ms,
            seed=args.seed,
            otlp_endpoint=args.otlp_endpoint,
        )
        sim.start()
    except (_UsageError, ValueError) as exc:
        print(one_line(f"{prog}: error: {exc}"), file=sys.stderr)
        return EXIT_INPUT
    except OSError as exc:
        print(
            one_line(
                f"{prog}: error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
            ),
            file=sys.stderr,
        )
        return EXIT_INPUT
    models = ", ".join([p.name for p in sim.profiles] + [v.name for v in sim.voices])
    print(f"{prog}: serving {sim.base_url} ({models}); Ctrl-C to stop", flush=True)
    restore = _sigterm_as_interrupt()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        restore()
        sim.stop()
    return EXIT_OK


def _sigterm_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM stop the server like Ctrl-C; returns a function that undoes it."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)

    def restore() -> None:
        signal.signal(signal.SIGTERM, previous)

    return restore
