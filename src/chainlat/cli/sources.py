"""Where the commands read traces from: trace files and Jaeger's HTTP API, the same for all.

``chainlat check``, ``report``, ``profile``, ``whatif`` and ``compare`` take::

    SOURCE ... [--jaeger URL --service NAME [--lookback 1h] [--limit 100] [--timeout 60]
    [--max-response-bytes N]] [--settle-lines N] [--max-line-bytes N] [--max-open-traces N]
    [--max-open-bytes N] [--no-progress]

``check`` and ``report`` also take ``--workflow NAME`` and ``--variant NAME`` (`RunFilter`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from chainlat._core import attributes as attr
from chainlat._core.errors import InputError, shown

if TYPE_CHECKING:
    from chainlat._core.runs import WorkflowRun
    from chainlat._core.stats import Stats
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


def warn_sampling(stats: Stats) -> None:
    """A line on stderr per workflow whose runs were sampled: weighted, or biased."""
    for name, workflow in stats.workflows.items():
        if workflow.biased:
            print(
                f"chainlat: warning: {name}: {workflow.biased} of {workflow.runs} runs were kept "
                "by a tail sampler that recorded no sampling probability "
                f"({attr.SAMPLING_PROBABILITY}): percentiles are biased toward the traces it "
                "keeps (slow and failed ones); see collector/README.md",
                file=sys.stderr,
            )
        elif workflow.quantities["total"].weighted:
            print(
                f"chainlat: {name}: percentiles weighted by 1/{attr.SAMPLING_PROBABILITY} "
                "(each sampled run stands for the runs the sampler dropped)",
                file=sys.stderr,
            )
        dominant = workflow.dominant
        if dominant is not None:
            print(
                f"chainlat: warning: {name}: run {dominant[0] or '(no trace id)'} stands for "
                f"{dominant[1]:.1%} of the runs by its {attr.SAMPLING_PROBABILITY}: it alone "
                "decides the percentiles",
                file=sys.stderr,
            )


def warn_limits(sources: list[TraceSource], counters: ReadCounters) -> None:
    """One line on stderr per Jaeger read that ``--limit`` cut: Jaeger returned as many
    traces as it was asked for, so there may be more that were not read."""
    from chainlat.traces import JaegerSource

    for source in sources:
        if isinstance(source, JaegerSource) and source.limit_reached:
            print(
                f"chainlat: warning: {source.name}: read {_count(source.returned, 'trace')}, "
                f"as many as --limit asks for, with {_count(counters.workflows, 'run')} in "
                "all; more traces may match that were not read: raise --limit or shorten "
                "--lookback",
                file=sys.stderr,
            )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """``--workflow`` and ``--variant``, each repeatable or a comma-separated list."""
    group = parser.add_argument_group("which runs")
    group.add_argument(
        "--workflow",
        action="append",
        default=[],
        metavar="NAME",
        help="only the runs of this workflow (repeat, or NAME,NAME; default: all)",
    )
    group.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME",
        help="only the runs made with this variant (chainlat.variant; repeat, or NAME,NAME)",
    )


def _names(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(n.strip() for v in values for n in v.split(",") if n.strip()))


class RunFilter:
    """The runs ``--workflow`` and ``--variant`` select, and the names the read saw.

    A name that no run read has is an error naming the names seen (`check_names`), once
    the read is over.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.workflows = _names(getattr(args, "workflow", None) or ())
        self.variants = _names(getattr(args, "variant", None) or ())
        self.seen_workflows: dict[str, None] = {}
        self.seen_variants: dict[str, None] = {}
        self.read = 0
        """Runs read, before filtering."""
        self.kept = 0
        """Runs selected."""

    @property
    def active(self) -> bool:
        return bool(self.workflows or self.variants)

    def matches(self, run: WorkflowRun) -> bool:
        """Whether ``run`` is one of those asked for."""
        if self.workflows and run.workflow not in self.workflows:
            return False
        return not self.variants or run.variant in self.variants

    def select(self, runs: Iterable[WorkflowRun]) -> Iterator[WorkflowRun]:
        """The selected runs; every run is counted and its names noted on the way."""
        for run in runs:
            self.read += 1
            self.seen_workflows[run.workflow] = None
            if run.variant is not None:
                self.seen_variants[run.variant] = None
            if self.matches(run):
                self.kept += 1
                yield run

    def check_names(self) -> None:
        """InputError when a name asked for is not one a run had, or no run has all asked."""
        for option, asked, seen in (
            ("--workflow", self.workflows, self.seen_workflows),
            ("--variant", self.variants, self.seen_variants),
        ):
            unknown = [name for name in asked if name not in seen]
            if unknown:
                names = ", ".join(shown(n) for n in unknown)
                what = option.removeprefix("--")
                listed = ", ".join(shown(n) for n in sorted(seen)) or f"no run has a {what}"
                raise InputError(
                    f"{option} {names}: no run read has this {what} ({what}s seen: {listed})"
                )
        if self.active and self.read and not self.kept:
            raise InputError(
                f"no run read is of {self.described()} ({_count(self.read, 'run')} read)"
            )

    def described(self) -> str:
        """What was selected, for a report's title: ``workflow a, variant b``."""
        parts = []
        if self.workflows:
            parts.append("workflow " + ", ".join(self.workflows))
        if self.variants:
            parts.append("variant " + ", ".join(self.variants))
        return "; ".join(parts)
