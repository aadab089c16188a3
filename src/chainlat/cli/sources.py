"""Where the commands read traces from: trace files and Jaeger's HTTP API, the same for all.

``chainlat check``, ``report``, ``profile``, ``whatif`` and ``compare`` take::

    SOURCE ... [--jaeger URL --service NAME [--lookback 1h] [--limit 100] [--timeout 60]
    [--max-response-bytes N]] [--settle-lines N] [--max-line-bytes N] [--max-open-traces N]
    [--max-open-bytes N] [--no-progress]
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from chainlat._core.errors import InputError

if TYPE_CHECKING:
    from chainlat.traces import ReadCounters, TraceSource


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """Trace files, Jaeger's API and the reader options."""
    parser.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="OTLP JSON lines file (chainlat's or a Collector's, .gz too) or Jaeger JSON",
    )
    jaeger = parser.add_argument_group("Jaeger's HTTP API")
    jaeger.add_argument("--jaeger", metavar="URL", help="Jaeger query URL, e.g. http://host:16686")
    jaeger.add_argument("--service", metavar="NAME", help="service to read traces of")
    jaeger.add_argument("--lookback", default="1h", help="how far back (default 1h)")
    jaeger.add_argument("--limit", type=int, default=100, help="most traces (default 100)")
    jaeger.add_argument(
        "--timeout",
        type=_positive_float,
        default=60.0,
        metavar="SECONDS",
        help="longest the whole read of Jaeger may take, every request and byte (default 60)",
    )
    jaeger.add_argument(
        "--max-response-bytes",
        type=_positive_int,
        default=256 * 1024 * 1024,
        metavar="N",
        help="largest answer read, decompressed (default 256 MiB)",
    )
    add_reader_options(parser)


def add_reader_options(parser: argparse.ArgumentParser) -> None:
    """``--settle-lines``, the memory bounds of a read, and ``--no-progress``."""
    parser.add_argument(
        "--settle-lines",
        type=int,
        default=8,
        metavar="N",
        help="lines to wait after a trace's root before judging it (default 8)",
    )
    parser.add_argument(
        "--max-line-bytes",
        type=_positive_int,
        default=128 * 1024 * 1024,
        metavar="N",
        help="longest line of a trace file (default 128 MiB)",
    )
    parser.add_argument(
        "--max-open-traces",
        type=_positive_int,
        default=100_000,
        metavar="N",
        help="traces held open at once while reading a file (default 100000)",
    )
    parser.add_argument(
        "--max-open-bytes",
        type=_positive_int,
        default=512 * 1024 * 1024,
        metavar="N",
        help="bytes of spans held open at once while reading a file (default 512 MiB)",
    )
    parser.add_argument(
        "--roots",
        action="store_true",
        help="also make a run of every trace's root span that is not a workflow or agent "
        "(named by its span name, e.g. 'POST /chat'), for traces of plain services",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < 1e9:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def file_source(path: str, args: argparse.Namespace) -> TraceSource:
    """A trace file read with the bounds the arguments set."""
    from chainlat.traces import FileSource

    return FileSource(
        path,
        settle_lines=args.settle_lines,
        progress=not args.no_progress,
        max_line_bytes=args.max_line_bytes,
        max_open_traces=args.max_open_traces,
        max_open_bytes=args.max_open_bytes,
    )


def sources_from(args: argparse.Namespace) -> list[TraceSource]:
    """The sources the arguments name; InputError when none or ``--jaeger`` lacks ``--service``."""
    from chainlat.traces import JaegerSource

    found: list[TraceSource] = [file_source(s, args) for s in args.sources]
    if args.jaeger:
        if not args.service:
            raise InputError("--jaeger needs --service NAME")
        found.append(
            JaegerSource(
                args.jaeger,
                args.service,
                lookback=args.lookback,
                limit=args.limit,
                timeout_s=args.timeout,
                max_response_bytes=args.max_response_bytes,
            )
        )
    elif args.service:
        raise InputError("--service needs --jaeger URL")
    if not found:
        raise InputError("no traces to read: give trace files or --jaeger URL --service NAME")
    return found


def describe(sources: list[TraceSource]) -> str:
    """The sources' names, for messages and titles."""
    return ", ".join(s.name for s in sources)


def warn(*counters: ReadCounters) -> None:
    """One line on stderr per kind of oddity the reads saw (skipped lines, traces judged early,
    late, skewed and orphan spans, NaN values)."""
    from chainlat.traces import ReadCounters

    total = ReadCounters()
    for count in counters:
        total.add(count)
    for line in total.warnings():
        print(f"chainlat: warning: {line}", file=sys.stderr)
