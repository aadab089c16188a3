"""The ``chainlat`` command: thin subcommands over the library's modules.

Exit codes: 0 ok, 1 a latency budget was broken (or a regression found),
2 bad input, an unreachable source or nothing to judge. User errors print one
line on stderr and no traceback.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from chainlat._core.errors import ChainlatError, InputError
from chainlat.cli import budgets as _cli_budgets
from chainlat.cli import tradeoff as _cli_tradeoff

EXIT_OK = 0
EXIT_BUDGET = 1
EXIT_INPUT = 2

Command = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # argparse's own usage errors are bad input too: one line, exit 2.
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


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
    parser = _Parser(
        prog="chainlat",
        description="Latency of multi-step AI workflows: traced, rolled up, budgeted.",
        epilog="exit codes: 0 ok, 1 a budget broken or a regression, 2 bad input",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    demo = sub.add_parser("demo", help="run the demo agent against the local model simulator")
    demo.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    demo.set_defaults(func=_demo)

    sim = sub.add_parser("sim", help="start the OpenAI-compatible latency simulator")
    sim.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    sim.set_defaults(func=_sim)

    _cli_budgets.add_commands(sub)  # check, report, diff, budgets
    _cli_tradeoff.add_commands(sub)  # profile, whatif, compare
    return parser


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
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if arguments and arguments[0] in _PASSTHROUGH:
        # These subcommands parse their own options.
        args = argparse.Namespace(func=_PASSTHROUGH[arguments[0]], rest=arguments[1:])
    else:
        args = parser.parse_args(arguments)
    func: Command = args.func
    try:
        with _few_collections():
            return func(args)
    except InputError as exc:
        print(f"chainlat: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except ChainlatError as exc:
        print(f"chainlat: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        return 130
