"""What the commands print, printed one way: text fitted to the terminal, JSON from one
writer, Markdown, files, and the readers' warnings on stderr.

Only ``cli/`` prints; the renderers in :mod:`chainlat.report` return text or renderables.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chainlat._core import attributes as attr
from chainlat._core.errors import InputError
from chainlat._core.redact import one_line

if TYPE_CHECKING:
    from rich.console import RenderableType

    from chainlat.cli.options import RunFilter
    from chainlat.traces import ReadCounters, TraceSource

_UNBOUNDED_MIN = 120
"""The width of a table in a pipe without ``COLUMNS``: at least this, or the table's own."""


def emit(text: str) -> None:
    """``text`` on stdout, ending with one newline."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def emit_json(document: dict[str, Any]) -> None:
    """A document as JSON on stdout: the one JSON writer (non-finite numbers as null)."""
    from chainlat.report.jsondoc import to_json

    emit(to_json(document))


def write_file(path: str, text: str, what: str) -> None:
    """``text`` into ``path``; InputError naming the file when it cannot be written."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"{path}: cannot write the {what}: {exc.strerror or exc}") from None


def emit_or_write(path: str | None, text: str, what: str) -> None:
    """``text`` into ``path`` (``--output``) when given, else on stdout."""
    if path:
        write_file(path, text, what)
    else:
        emit(text)


def terminal_width() -> int | None:
    """The width tables are fitted to: ``COLUMNS`` when set, else the terminal's; None in a
    pipe (a CI log, a file), where a table keeps its own width."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError, AttributeError):  # captured, closed or not a real file
        pass
    return None


def text_width(items: Iterable[RenderableType | str]) -> int:
    """The width to render ``items`` at (:func:`terminal_width`, or wide enough for them)."""
    width = terminal_width()
    if width is not None:
        return width
    from rich.console import Console
    from rich.table import Table

    console = Console(width=100_000, color_system=None)
    widest = [console.measure(item).maximum for item in items if isinstance(item, Table)]
    return max([_UNBOUNDED_MIN, *widest])


def emit_renderables(items: list[RenderableType | str]) -> None:
    """Strings and rich renderables on stdout as text, tables fitted to :func:`text_width`
    (as Markdown they are text: :func:`chainlat.report.tables.renderables_markdown`)."""
    from chainlat.report import render_text
    from chainlat.report.tables import flattened

    items = flattened(items)
    sys.stdout.write(render_text(items, width=text_width(items)))


def print_warnings(
    *counters: ReadCounters,
    sources: Iterable[TraceSource] = (),
    runs: RunFilter | None = None,
) -> None:
    """Every warning about a read, on stderr, one line each: the readers' (skipped lines,
    traces judged early, late, skewed and orphan spans, NaN values), Jaeger reads that
    ``--limit`` cut, and sampled runs (weighted, or biased)."""
    from chainlat.traces import ReadCounters

    total = ReadCounters()
    for count in counters:
        total.add(count)
    for line in total.warnings():
        _warn(f"warning: {line}")
    _warn_limits(sources, total)
    if runs is not None:
        _warn_sampling(runs)


def warn(line: str) -> None:
    """One warning line on stderr: ``chainlat: warning: {line}``."""
    _warn(f"warning: {line}")


def _warn(line: str) -> None:
    # A warning may quote what a file holds (its first bad line's problem): a password in a
    # URL, a terminal escape.
    print(one_line(f"chainlat: {line}"), file=sys.stderr)


def _warn_limits(sources: Iterable[TraceSource], counters: ReadCounters) -> None:
    """A Jaeger read that ``--limit`` cut: Jaeger returned as many traces as it was asked
    for, so there may be more that were not read."""
    from chainlat.traces import JaegerSource

    for source in sources:
        if isinstance(source, JaegerSource) and source.limit_reached:
            _warn(
                f"warning: {source.name}: read {_count(source.returned, 'trace')}, "
                f"as many as --limit asks for, with {_count(counters.workflows, 'run')} in "
                "all; more traces may match that were not read: raise --limit or shorten "
                "--lookback"
            )


def _warn_sampling(runs: RunFilter) -> None:
    for name, sampled in runs.sampled.items():
        if sampled.biased:
            _warn(
                f"warning: {name}: {sampled.biased} of {sampled.runs} runs were kept "
                "by a tail sampler that recorded no sampling probability "
                f"({attr.SAMPLING_PROBABILITY}): percentiles are biased toward the traces it "
                "keeps (slow and failed ones); see collector/README.md"
            )
        elif sampled.weighted:
            _warn(
                f"{name}: percentiles weighted by 1/{attr.SAMPLING_PROBABILITY} "
                "(each sampled run stands for the runs the sampler dropped)"
            )
        dominant = sampled.dominant
        if dominant is not None:
            _warn(
                f"warning: {name}: run {dominant[0] or '(no trace id)'} stands for "
                f"{dominant[1]:.1%} of the runs by its {attr.SAMPLING_PROBABILITY}: it alone "
                "decides the percentiles"
            )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
