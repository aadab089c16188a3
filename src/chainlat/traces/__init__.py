"""Reading traces, streaming: whole traces, and the workflow runs in them.

Sources:

- **OTLP/JSON lines**: one ``ExportTraceServiceRequest`` per line, as chainlat's
  file exporter and a Collector's ``file`` exporter write them; gzip-compressed
  files are recognised by their first bytes, whatever their name.
- **Jaeger JSON**: a trace downloaded from Jaeger's UI or ``/api/traces``
  (``{"data": [trace, ...]}``); also a saved ``api/v3`` response
  (``{"result": {"resourceSpans": ...}}``). A file holding one pretty-printed JSON
  document (rather than one per line) is read whole.
- **Jaeger's HTTP API** (:class:`JaegerSource`): ``/api/v3/traces`` (OTLP/JSON),
  falling back to ``/api/traces`` on a Jaeger without api/v3.

:func:`read_traces` hands out each :class:`Trace` once it is complete: every span
of it, each with the attributes chainlat's analyses read (:data:`KEPT_ATTRIBUTES`),
not all of them, since a trace's attributes can hold whole prompts.
:func:`read_runs` is built on it: each workflow span becomes a
:class:`~chainlat.WorkflowRun`, whose rollup is read from the ``chainlat.chain.*``
attributes when present and rebuilt from the spans otherwise (traces written by
another instrumentation). The trade-off analysis reads the same runs, through
:func:`read_runs`.

**When is a trace complete?** Spans of one trace arrive spread over many lines
(each exporter batch is a line), children before their parent since they end
first. The reader keeps the spans of each *open* trace and judges a trace once

1. a *local root* of it has been read (a span without a parent, or whose parent
   is remote: OTLP ``flags`` bit 0x200) and ``settle_lines`` further lines have
   passed (default 8), which leaves room for children that ended after the root
   and were exported in a later batch; or
2. the input ends.

A trace whose root has not come is never judged on a line count alone (a slow run
written span by span ends with its root, thousands of lines after its first step),
unless ``idle_lines`` is given. Memory is bounded instead: past ``max_open_traces``
open traces or ``max_open_bytes`` bytes of their spans' JSON, the least recently
extended traces are judged early, counted in ``ReadCounters.evicted_traces``; spans
that come for one later (a slow run's root) make a trace again, judged apart
(``reopened_traces``), so that the run is still judged by its recorded rollup. A
span that arrives for a trace already judged is counted in
``ReadCounters.late_spans`` and otherwise ignored; raise ``settle_lines`` when that
happens. Memory therefore grows with the spans of the traces open at once (about
``settle_lines`` lines' worth for chainlat's own files) and one line (at most
``max_line_bytes``), not with the size of the file.

A line that is not JSON or not spans is skipped and counted
(``ReadCounters.bad_lines``); a file where no line is spans raises
:class:`~chainlat.TraceSourceError`.

The exception is outcomes: a ``record_outcome`` span is written when the run is
graded, often long after the run. :func:`read_traces` first scans a file for
them (a byte search, parsing only the lines that hold one), keeps them by trace
id, and gives each trace the outcome spans of its file wherever they are.
Memory for that grows with the outcome spans only. :func:`read_runs` has no use
for outcomes and skips the scan.

Example::

    from chainlat.traces import read_runs
    for run in read_runs(["chainlat-traces.jsonl"]):
        print(run.workflow, run.rollup.total_ms)
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import cast

from chainlat._core.runs import WorkflowRun
from chainlat.traces._assemble import (
    DEFAULT_IDLE_LINES,
    DEFAULT_SETTLE_LINES,
    ReadCounters,
    Trace,
    TraceSource,
    runs_of,
)
from chainlat.traces._files import FileSource, unread_spans
from chainlat.traces._jaeger import JaegerSource, parse_lookback
from chainlat.traces._parse import KEPT_ATTRIBUTES, BadSpan

__all__ = [
    "KEPT_ATTRIBUTES",
    "BadSpan",
    "FileSource",
    "JaegerSource",
    "ReadCounters",
    "Trace",
    "TraceSource",
    "load_runs",
    "open_source",
    "parse_lookback",
    "read_runs",
    "read_traces",
    "source_name",
    "unread_spans",
]

# --- entry points ---------------------------------------------------------------------------------


Source = str | os.PathLike[str] | TraceSource
"""One place to read from: a trace file's path, or a source such as :class:`JaegerSource`."""
Sources = Source | Iterable[Source]
"""One place to read from, or several (a list of paths, say)."""


def _each(sources: Sources) -> Iterable[Source]:
    """``sources`` as places one after the other: a lone path is one place, not its letters."""
    if isinstance(sources, (str, os.PathLike)) or hasattr(sources, "traces"):
        return [cast("Source", sources)]
    return sources


def open_source(
    spec: str | os.PathLike[str] | TraceSource,
    *,
    settle_lines: int = DEFAULT_SETTLE_LINES,
    idle_lines: int | None = DEFAULT_IDLE_LINES,
    progress: bool = False,
) -> TraceSource:
    """A source from a file path (or a source, returned as is)."""
    if isinstance(spec, (str, os.PathLike)):
        return FileSource(spec, settle_lines=settle_lines, idle_lines=idle_lines, progress=progress)
    return spec


def read_traces(
    sources: Sources,
    *,
    settle_lines: int = DEFAULT_SETTLE_LINES,
    idle_lines: int | None = DEFAULT_IDLE_LINES,
    progress: bool = False,
    counters: ReadCounters | None = None,
) -> Iterator[Trace]:
    """The traces of every source, each once it is complete, streamed.

    Each trace has every span read for it, with the attributes in
    :data:`KEPT_ATTRIBUTES`, and the ``record_outcome`` spans of its source
    wherever they are in it (see the module docstring).

    Example::

        for trace in read_traces(["chainlat-traces.jsonl"]):
            print(trace.trace_id, len(trace.spans))

    Args:
        sources: A trace file path, a :class:`JaegerSource` or any TraceSource, or a list
            of them.
        settle_lines: Lines to wait after a trace's root before judging it complete.
        idle_lines: Lines after which a trace without a root is judged anyway (default:
            never; the open-trace bounds of :class:`FileSource` keep memory bounded).
        progress: Show a progress bar on a terminal for files over 4 MiB.
        counters: Filled in with what was read.

    Raises:
        TraceSourceError: a file is missing, empty, truncated or has a corrupt line;
            Jaeger cannot be reached. The message names the file and line.
    """
    counters = counters if counters is not None else ReadCounters()
    for source in _opened(sources, settle_lines, idle_lines, progress):
        yield from source.traces(counters)


def _opened(
    sources: Sources,
    settle_lines: int,
    idle_lines: int | None,
    progress: bool,
) -> Iterator[TraceSource]:
    """Each source opened in turn, as it is reached (a later one is not opened early)."""
    for spec in _each(sources):
        yield open_source(spec, settle_lines=settle_lines, idle_lines=idle_lines, progress=progress)


def read_runs(
    sources: Sources,
    *,
    settle_lines: int = DEFAULT_SETTLE_LINES,
    idle_lines: int | None = DEFAULT_IDLE_LINES,
    progress: bool = False,
    counters: ReadCounters | None = None,
    outcomes: bool = False,
    roots: bool = False,
) -> Iterator[WorkflowRun]:
    """The workflow runs of every source, streamed: a run per workflow span of each trace
    :func:`read_traces` hands out, nested workflows included (``run.nested``).

    Args:
        sources: A trace file path, a :class:`JaegerSource` or any TraceSource, or a list
            of them.
        settle_lines: Lines to wait after a trace's root before judging it complete.
        idle_lines: Lines after which a trace without a root is judged anyway (default:
            never; the open-trace bounds of :class:`FileSource` keep memory bounded).
        progress: Show a progress bar on a terminal for files over 4 MiB.
        counters: Filled in with what was read.
        outcomes: Also merge the ``record_outcome`` spans written after the runs, wherever
            they are in their file (a scan of the file first); the trade-off analysis needs
            them, budgets do not.
        roots: Also make a run of every trace's local root that is not a workflow
            (``POST /chat``), named by its span name: traces without any workflow or agent
            span can then be judged.

    Raises:
        TraceSourceError: a file is missing, empty, truncated or has a corrupt line;
            Jaeger cannot be reached. The message names the file and line.
    """
    counters = counters if counters is not None else ReadCounters()
    for source in _opened(sources, settle_lines, idle_lines, progress):
        if outcomes or roots:
            yield from runs_of(source.traces(counters), counters, roots=roots)
        else:
            yield from source.runs(counters)


def load_runs(
    sources: Sources,
    *,
    outcomes: bool = True,
    roots: bool = False,
) -> list[WorkflowRun]:
    """Every run of the sources, one source after the other, each source's in start order."""
    runs: list[WorkflowRun] = []
    for source in _each(sources):
        found = read_runs([source], outcomes=outcomes, roots=roots)
        runs.extend(sorted(found, key=lambda r: (r.start_ns, r.span_id)))
    return runs


def source_name(source: str | os.PathLike[str] | TraceSource) -> str:
    """A trace file's path or a source's name, for messages."""
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else source.name
