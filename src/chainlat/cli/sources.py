"""Where the commands read traces from: trace files and Jaeger's HTTP API, the same for all.

``chainlat check``, ``report``, ``profile``, ``whatif`` and ``compare`` take::

    SOURCE ... [--jaeger URL --service NAME [--lookback 1h] [--limit 100]]
    [--settle-lines N] [--no-progress]
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
    add_reader_options(parser)


def add_reader_options(parser: argparse.ArgumentParser) -> None:
    """``--settle-lines`` and ``--no-progress``."""
    parser.add_argument(
        "--settle-lines",
        type=int,
        default=8,
        metavar="N",
        help="lines to wait after a trace's root before judging it (default 8)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def sources_from(args: argparse.Namespace) -> list[TraceSource]:
    """The sources the arguments name; InputError when none or ``--jaeger`` lacks ``--service``."""
    from chainlat.traces import FileSource, JaegerSource

    progress = not args.no_progress
    found: list[TraceSource] = [
        FileSource(s, settle_lines=args.settle_lines, progress=progress) for s in args.sources
    ]
    if args.jaeger:
        if not args.service:
            raise InputError("--jaeger needs --service NAME")
        found.append(
            JaegerSource(args.jaeger, args.service, lookback=args.lookback, limit=args.limit)
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
    """One line on stderr per kind of oddity the reads saw (late, skewed, orphan spans)."""
    from chainlat.traces import ReadCounters

    total = ReadCounters()
    for count in counters:
        total.late_spans += count.late_spans
        total.skewed_spans += count.skewed_spans
        total.orphan_spans += count.orphan_spans
    for line in total.warnings():
        print(f"chainlat: warning: {line}", file=sys.stderr)
