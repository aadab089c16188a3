"""The ``chainlat`` command: thin subcommands over the library's modules.

Every command takes its common options from :mod:`chainlat.cli.options` and prints
through :mod:`chainlat.cli.output`. Exit codes (:mod:`chainlat._core.exits`): 0 ok, 1 a
latency budget was broken (or a regression found), 2 bad input, an unreachable source or
a limit that could not be judged, 3 a bug in chainlat, 141 the reader of the output went
away (``chainlat report ... | head``: quietly, as a process killed by SIGPIPE, like other
Unix tools). Every
error is one line on stderr, passed through the credential scrubber, and no
traceback: :func:`main`'s handler is the safety net for an input a reader or
loader did not expect (nesting that exhausts the stack, an undecodable string, a
number out of range), which it reports naming the command and its inputs.
"""

from __future__ import annotations

import argparse
import errno
import gc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from chainlat._core import errors as _errors
from chainlat._core.error_lines import Parser
from chainlat._core.errors import ChainlatError, shorten
from chainlat._core.exits import (
    EXIT_BROKEN_PIPE,
    EXIT_CODES_HELP,
    EXIT_HANGUP,
    EXIT_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
)
from chainlat._core.redact import one_line
from chainlat.cli import budgets as _cli_budgets
from chainlat.cli import serve as _cli_serve
from chainlat.cli import tradeoff as _cli_tradeoff
from chainlat.cli.options import Command, add_command

# Exceptions a parser raises on input it did not expect: the input's fault, so exit 2,
# even in chainlat's own test suite. (pydantic's ValidationError is a ValueError.)
_INPUT_FAILURES: tuple[type[BaseException], ...] = (
    RecursionError,
    UnicodeError,
    OverflowError,
    ValueError,
)
_INPUT_ARGUMENTS = ("sources", "budgets", "outcomes", "profiles", "baseline", "current", "file")


def _inputs(args: argparse.Namespace) -> str:
    """The files and sources a command was given, for an error that cannot name one."""
    found: list[str] = []
    for name in _INPUT_ARGUMENTS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(str(v) for v in value)
    jaeger = getattr(args, "jaeger", None)
    if jaeger:
        found.append(str(jaeger))
    return ", ".join(found) or "its arguments"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":
        # pydantic: the first problem, by its location, as a one-liner.
        try:
            first = errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            return shorten(f"{where + ': ' if where else ''}{first['msg']}", 200)
        except Exception:  # a message, at worst a plainer one
            pass
    return shorten(f"{type(exc).__name__}: {exc}", 200)


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked for (reading package metadata takes time)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        try:
            sys.stdout.write(f"{parser.prog} {_version()}\n")
            sys.stdout.flush()
        except BrokenPipeError:
            _silence_stdout()
            parser.exit(EXIT_BROKEN_PIPE)
        parser.exit(EXIT_OK)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("chainlat")
    except PackageNotFoundError:  # run from a source tree that was never installed
        from chainlat import __version__

        return __version__


def _demo(args: argparse.Namespace) -> int:
    from chainlat import demo

    code: int = demo.main(args.rest)
    return code


def _sim(args: argparse.Namespace) -> int:
    from chainlat import sim

    code: int = sim.main(args.rest)
    return code


_PASSTHROUGH: dict[str, Command] = {"demo": _demo, "sim": _sim}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``chainlat`` command."""
    parser = Parser(
        prog="chainlat",
        description="Latency of multi-step AI workflows: traced, rolled up, budgeted.",
        epilog=EXIT_CODES_HELP,
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    # Listed here for the overview; they parse their own options (see _PASSTHROUGH).
    demo = add_command(
        sub, "demo", _demo, help="run the demo agent against the local model simulator"
    )
    demo.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    sim = add_command(sub, "sim", _sim, help="start the OpenAI-compatible latency simulator")
    sim.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)

    _cli_budgets.add_commands(sub)  # check, report, diff, budgets
    _cli_tradeoff.add_commands(sub)  # profile, whatif, compare
    _cli_serve.add_commands(sub)  # serve, run
    return parser


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush at exit, of what is
    still buffered for a reader that went away, does not fail and print a traceback."""
    _silence(sys.stdout)


def _silence(stream: Any) -> None:
    """Point ``stream``'s file descriptor at /dev/null (see :func:`_silence_stdout`)."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no file descriptor (captured output)
        pass


@contextmanager
def _few_collections() -> Iterator[None]:
    """Run the cyclic garbage collector rarely while a command runs.

    Reading traces makes millions of short-lived, acyclic containers (parsed JSON,
    span records) that reference counting frees; with the default thresholds the
    collector still walks them thousands of times, a fifth of ``chainlat check``'s
    time. The objects of the imports are frozen out of its walks as well.
    """
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(100_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``chainlat`` command; returns the exit code.

    Example::

        from chainlat.cli import main
        code = main(["check", "chainlat-traces.jsonl", "--budgets", "chainlat.toml"])
    """
    try:
        return _main(argv)
    except OSError as exc:
        if exc.errno != errno.EIO:
            raise
        # Writing failed, the error line included: the terminal closed (a SIGHUP that
        # `serve` took to stop, its summary then written to no one).
        _silence_stdout()
        _silence(sys.stderr)
        return EXIT_HANGUP


def _main(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if arguments and arguments[0] in _PASSTHROUGH:
        # These subcommands parse their own options.
        args = argparse.Namespace(func=_PASSTHROUGH[arguments[0]], rest=arguments[1:])
    else:
        args = parser.parse_args(arguments)
    func: Command = args.func
    command = getattr(args, "command", None) or (arguments[0] if arguments else "chainlat")
    try:
        with _few_collections():
            code = func(args)
        # Flushed here, not at exit, so that a reader gone away is caught below.
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except ChainlatError as exc:
        # InputError and its kinds name the file and the place themselves.
        print(one_line(f"chainlat: {exc}"), file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except _INPUT_FAILURES as exc:
        print(
            one_line(f"chainlat {command}: cannot use {_inputs(args)}: {_reason(exc)}"),
            file=sys.stderr,
        )
        return EXIT_INPUT
    except Exception as exc:
        if _errors.RAISE_INTERNAL_ERRORS:
            raise  # chainlat's own tests: a bug stays a traceback
        print(
            one_line(
                f"chainlat {command}: internal error ({_reason(exc)}) while reading "
                f"{_inputs(args)}; please report it"
            ),
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def run() -> int:
    """The ``chainlat`` command's process (its console script and ``python -m chainlat.cli``):
    :func:`main`, then every object left frozen out of the garbage collector, so that the
    interpreter's exit does not walk them all again (about a twentieth of a short
    ``chainlat check``: BENCHMARKS.md); the process's end frees them. Exit handlers still run.
    """
    code = main()
    gc.freeze()
    return code
