"""Where the commands read traces from: trace files and Jaeger's HTTP API, the same for all.

The options are declared in :mod:`chainlat.cli.options`; this module turns them into
trace sources and reads the runs the run filter selects.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import TYPE_CHECKING

from chainlat._core.errors import InputError
from chainlat.cli.output import print_warnings

if TYPE_CHECKING:
    from chainlat._core.runs import WorkflowRun
    from chainlat.cli.options import RunFilter
    from chainlat.traces import ReadCounters, TraceSource


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


def read(
    sources: list[TraceSource],
    counters: ReadCounters,
    chosen: RunFilter,
    *,
    roots: bool,
    outcomes: bool = False,
) -> Iterator[WorkflowRun]:
    """The runs of the sources that ``chosen`` selects, streamed; ``counters`` filled in."""
    from chainlat.traces import read_runs

    return chosen.select(read_runs(sources, counters=counters, roots=roots, outcomes=outcomes))


def load(
    sources: list[TraceSource],
    counters: ReadCounters,
    chosen: RunFilter,
    *,
    roots: bool,
) -> list[WorkflowRun]:
    """The selected runs that are not steps of another, with their outcomes, each source's in
    start order: for the analyses that hold every run (what-if, compare)."""
    from chainlat.traces import read_runs

    runs: list[WorkflowRun] = []
    for source in sources:
        found = read_runs([source], counters=counters, roots=roots, outcomes=True)
        top = chosen.select(run for run in found if not run.nested)
        runs.extend(sorted(top, key=lambda r: (r.start_ns, r.span_id)))
    return runs


def nothing_read(
    sources: list[TraceSource], counters: ReadCounters, purpose: str = "judge"
) -> InputError:
    """The error for a read that found no run at all: ``nothing to {purpose}: ...``."""
    if counters.spans == 0:
        return InputError(f"nothing to {purpose}: no spans in {describe(sources)}")
    return InputError(
        f"nothing to {purpose}: {counters.spans} spans in {describe(sources)}, "
        "none of them a workflow span (gen_ai.operation.name=invoke_workflow)"
    )


def settle(
    sources: list[TraceSource],
    counters: ReadCounters,
    chosen: RunFilter,
    purpose: str = "judge",
) -> None:
    """After a read, the same for every command: a read that found no run at all is an error
    (`nothing_read`), so is a ``--workflow``/``--variant`` name no run has; then the read's
    warnings, one line each on stderr."""
    if counters.workflows == 0:
        raise nothing_read(sources, counters, purpose)
    chosen.check_names()
    print_warnings(counters, sources=sources, runs=chosen)
