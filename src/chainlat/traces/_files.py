"""Trace files: OTLP/JSON lines (plain or gzip), a Jaeger JSON download, one OTLP/JSON document."""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, Final

from chainlat._core import attributes as attr
from chainlat._core.errors import TraceSourceError
from chainlat._core.runs import TracedSpan, WorkflowRun, is_outcome
from chainlat.traces._assemble import (
    DEFAULT_IDLE_LINES,
    DEFAULT_SETTLE_LINES,
    Assembler,
    ReadCounters,
    Trace,
    runs_of,
)
from chainlat.traces._parse import (
    BadSpan,
    Parsed,
    jaeger_trace,
    jaeger_traces,
    loads,
    names,
    otlp_spans,
)

_PROGRESS_MIN_BYTES: Final = 4 * 1024 * 1024
_OUTCOME_MARK: Final = f'"{attr.OUTCOME_SPAN_NAME}"'.encode()


# --- files ---------------------------------------------------------------------------------


class _Progress:
    """A progress bar over bytes on a terminal; nothing otherwise."""

    def __init__(self, label: str, total: int, enabled: bool) -> None:
        self._bar: Any = None
        if enabled and total >= _PROGRESS_MIN_BYTES:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                transient=True,
            )
            self._task = self._bar.add_task(label, total=total)
            self._bar.start()

    def update(self, position: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=position)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class FileSource:
    """A trace file: OTLP/JSON lines (plain or gzip), a Jaeger JSON download, or one
    OTLP/JSON document.

    Example::

        source = FileSource("chainlat-traces.jsonl")
        runs = list(source.runs())
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        settle_lines: int = DEFAULT_SETTLE_LINES,
        idle_lines: int = DEFAULT_IDLE_LINES,
        progress: bool = False,
    ) -> None:
        self.path = Path(path)
        self.name = str(path)
        self.settle_lines = settle_lines
        self.idle_lines = idle_lines
        self.progress = progress

    def runs(self, counters: ReadCounters | None = None) -> Iterator[WorkflowRun]:
        """The runs in the file, each as soon as its trace is complete."""
        counters = counters if counters is not None else ReadCounters()
        yield from runs_of(self._traces(counters, outcomes=False), counters)

    def traces(self, counters: ReadCounters | None = None) -> Iterator[Trace]:
        """The traces in the file, each as soon as it is complete, with the file's outcomes."""
        counters = counters if counters is not None else ReadCounters()
        yield from self._traces(counters, outcomes=True)

    def _traces(self, counters: ReadCounters, *, outcomes: bool) -> Iterator[Trace]:
        found = self._outcome_spans() if outcomes else None
        with self._open() as raw:
            size = os.fstat(raw.fileno()).st_size
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            stream: Iterable[bytes] = gzip.GzipFile(fileobj=raw) if compressed else raw
            progress = _Progress(self.path.name, size, self.progress and sys.stderr.isatty())
            assembler = Assembler(counters, self.settle_lines, self.idle_lines, found)
            try:
                yield from self._read(stream, raw, progress, assembler, counters, compressed)
            finally:
                progress.close()

    def _open(self) -> IO[bytes]:
        try:
            return open(self.path, "rb")
        except FileNotFoundError:
            raise TraceSourceError(f"{self.name}: no such file") from None
        except IsADirectoryError:
            raise TraceSourceError(f"{self.name}: is a directory, not a trace file") from None
        except OSError as exc:
            raise TraceSourceError(f"{self.name}: cannot read: {exc.strerror or exc}") from None

    def _outcome_spans(self) -> dict[str, list[TracedSpan]]:
        """The file's outcome spans by trace id, from the lines that mention one.

        A line that cannot be read is skipped: the read proper names the problem.
        """
        found: dict[str, list[TracedSpan]] = {}
        with self._open() as raw:
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            stream: Iterable[bytes] = gzip.GzipFile(fileobj=raw) if compressed else raw
            try:
                for line_no, line in enumerate(stream, 1):
                    if _OUTCOME_MARK not in line:
                        continue
                    try:
                        doc = loads(line)
                        spans = self._named(doc, f"{self.name}:{line_no}", attr.OUTCOME_SPAN_NAME)
                    except (ValueError, BadSpan):
                        continue
                    for trace_id, _, span in spans:
                        if is_outcome(span):
                            found.setdefault(trace_id, []).append(span)
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError):
                pass
        return found

    def _named(self, doc: object, origin: str, name: str) -> list[Parsed]:
        if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
            doc = doc["result"]
        if isinstance(doc, dict) and "resourceSpans" in doc:
            return list(otlp_spans(doc, origin, only=name))
        found = []
        for index, trace in enumerate(jaeger_traces(doc) or ()):
            found.extend(jaeger_trace(trace, f"data[{index}]", origin, only=name))
        return found

    def _read(
        self,
        stream: Iterable[bytes],
        raw: IO[bytes],
        progress: _Progress,
        assembler: Assembler,
        counters: ReadCounters,
        compressed: bool,
    ) -> Iterator[Trace]:
        line_no = 0
        seen_content = False
        lines = iter(stream)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                break
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
                raise TraceSourceError(
                    f"{self.name}:{line_no + 1}: truncated or corrupt gzip data "
                    f"({' '.join(str(exc).split()) or type(exc).__name__})"
                ) from None
            line_no += 1
            counters.lines += 1
            if not line.strip():
                yield from assembler.complete(line_no)
                continue
            try:
                doc = loads(line)
            except ValueError as exc:
                if not line.endswith(b"\n"):
                    raise TraceSourceError(
                        f"{self.name}:{line_no}: truncated: the file ends in the middle of a "
                        "record (was it still being written?)"
                    ) from None
                if not seen_content and line.lstrip()[:1] in (b"{", b"["):
                    # Perhaps one pretty-printed document rather than JSON lines.
                    yield from self._read_document(assembler, compressed)
                    return
                raise TraceSourceError(
                    f"{self.name}:{line_no}: not valid JSON ({_json_problem(exc)})"
                ) from None
            seen_content = True
            origin = f"{self.name}:{line_no}"
            try:
                yield from self._document(doc, assembler, line_no, origin)
            except BadSpan as exc:
                raise TraceSourceError(f"{self.name}:{line_no}: {exc}") from None
            yield from assembler.complete(line_no)
            if line_no % 64 == 0:
                if len(names) > 100_000:
                    names.clear()  # names made of ids: keep memory flat
                progress.update(raw.tell())
        if not seen_content:
            raise TraceSourceError(f"{self.name}: empty file: no spans to read")
        yield from assembler.drain()

    def _read_document(self, assembler: Assembler, compressed: bool) -> Iterator[Trace]:
        with open(self.path, "rb") as raw:
            data = gzip.GzipFile(fileobj=raw).read() if compressed else raw.read()
        try:
            doc = json.loads(data)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(data.rstrip()):
                raise TraceSourceError(
                    f"{self.name}:{exc.lineno}: truncated: the document ends early"
                ) from None
            raise TraceSourceError(
                f"{self.name}:{exc.lineno}: not valid JSON ({_json_problem(exc)})"
            ) from None
        except ValueError as exc:
            raise TraceSourceError(f"{self.name}: not valid JSON ({exc})") from None
        documents = doc if isinstance(doc, list) else [doc]
        try:
            for doc in documents:
                yield from self._document(doc, assembler, 1, f"{self.name}:1")
        except BadSpan as exc:
            raise TraceSourceError(f"{self.name}: {exc}") from None
        yield from assembler.drain()

    def _document(
        self, doc: object, assembler: Assembler, line: int, origin: str
    ) -> Iterator[Trace]:
        if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
            doc = doc["result"]  # a saved api/v3 response
        if isinstance(doc, dict) and "resourceSpans" in doc:
            for span in otlp_spans(doc, origin):
                assembler.add(span, line)
            return
        traces = jaeger_traces(doc)
        if traces is None:
            keys = ", ".join(sorted(doc)[:5]) if isinstance(doc, dict) else type(doc).__name__
            raise BadSpan(
                "expected an OTLP/JSON request (resourceSpans) or a Jaeger trace "
                "(data, traceID/spans)",
                f"got {keys or 'an empty object'}",
            )
        for index, trace in enumerate(traces):
            yield from assembler.add_whole(jaeger_trace(trace, f"data[{index}]", origin))


def _json_problem(exc: ValueError) -> str:
    message = getattr(exc, "msg", None) or str(exc)
    column = getattr(exc, "colno", None)
    message = re.sub(r":? line \d+ column \d+ \(char \d+\)$", "", message)
    return f"{message} at column {column}" if column is not None else message
