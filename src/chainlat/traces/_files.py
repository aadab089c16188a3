"""Trace files: OTLP/JSON lines (plain or gzip), a Jaeger JSON download, one OTLP/JSON document."""

from __future__ import annotations

import gzip
import json
import os
import re
import sys
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final

import msgspec

from chainlat._core import attributes as attr
from chainlat._core.errors import TraceSourceError, reading, shown, undecodable
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat._core.trace_runs import is_outcome
from chainlat.traces._assemble import (
    DEFAULT_IDLE_LINES,
    DEFAULT_MAX_OPEN_BYTES,
    DEFAULT_MAX_OPEN_TRACES,
    DEFAULT_SETTLE_LINES,
    Assembler,
    ReadCounters,
    Trace,
    runs_of,
)
from chainlat.traces._fast import quick_spans
from chainlat.traces._jaeger_json import jaeger_trace, jaeger_traces
from chainlat.traces._parse import (
    BadSpan,
    Parsed,
    loads_lenient,
    names,
    otlp_spans,
    tally,
    walked_unread_spans,
)

_PROGRESS_MIN_BYTES: Final = 4 * 1024 * 1024
DEFAULT_MAX_LINE_BYTES: Final = 128 * 1024 * 1024
"""The longest line read (``--max-line-bytes``): a line is held whole while it is parsed."""
MAX_DOCUMENT_BYTES: Final = 256 * 1024 * 1024
"""The largest file read as one JSON document (rather than as JSON lines): a document is
held whole, with every object parsed from it."""
_SKIP_CHUNK: Final = 1024 * 1024
_GZIP_ERRORS: Final = (EOFError, gzip.BadGzipFile, zlib.error, OSError)
_Stream = gzip.GzipFile | IO[bytes]
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

    Memory is bounded whatever the file: a line is read up to ``max_line_bytes`` (a
    longer one is an error), and at most ``max_open_traces`` traces or ``max_open_bytes``
    bytes of their spans are held (past that the oldest are judged early and counted).
    A line that is not spans is skipped and counted (``ReadCounters.bad_lines``).

    Example::

        source = FileSource("chainlat-traces.jsonl")
        runs = list(source.runs())
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        settle_lines: int = DEFAULT_SETTLE_LINES,
        idle_lines: int | None = DEFAULT_IDLE_LINES,
        progress: bool = False,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_open_traces: int = DEFAULT_MAX_OPEN_TRACES,
        max_open_bytes: int = DEFAULT_MAX_OPEN_BYTES,
    ) -> None:
        self.path = Path(path)
        self.name = str(path)
        self.settle_lines = settle_lines
        self.idle_lines = idle_lines
        self.progress = progress
        self.max_line_bytes = max(max_line_bytes, 1)
        self.max_open_traces = max_open_traces
        self.max_open_bytes = max_open_bytes

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
        nonfinite, negative = tally.nonfinite_values, tally.negative_spans
        with self._open() as raw:
            size = os.fstat(raw.fileno()).st_size
            compressed = _is_gzip(raw)
            stream: _Stream = gzip.GzipFile(fileobj=raw) if compressed else raw
            progress = _Progress(self.path.name, size, self.progress and sys.stderr.isatty())
            assembler = Assembler(
                counters,
                self.settle_lines,
                self.idle_lines,
                found,
                max_open_traces=self.max_open_traces,
                max_open_bytes=self.max_open_bytes,
            )
            try:
                yield from self._read(stream, raw, progress, assembler, counters, compressed)
            finally:
                progress.close()
                counters.nonfinite_values += tally.nonfinite_values - nonfinite
                tally.dropped_since(counters, negative)

    def _open(self) -> IO[bytes]:
        with reading(
            self.name, TraceSourceError, "no such file", "is a directory, not a trace file"
        ):
            return open(self.path, "rb")

    def _outcome_spans(self) -> dict[str, list[TracedSpan]]:
        """The file's outcome spans by trace id, from the lines that mention one.

        A line that cannot be read is skipped: the read proper names the problem.
        """
        found: dict[str, list[TracedSpan]] = {}
        with self._open() as raw:
            compressed = _is_gzip(raw)
            stream: _Stream = gzip.GzipFile(fileobj=raw) if compressed else raw
            try:
                line_no = 0
                for line in _lines(stream, self.max_line_bytes):
                    if isinstance(line, int):
                        line_no += line
                        continue
                    line_no += 1
                    if line is None:
                        break  # the read proper reports it
                    if _OUTCOME_MARK not in line:
                        continue
                    try:
                        doc = loads_lenient(line)
                        spans = self._named(doc, f"{self.name}:{line_no}", attr.OUTCOME_SPAN_NAME)
                    except (ValueError, BadSpan, RecursionError):
                        continue
                    for trace_id, _, span in spans:
                        if is_outcome(span):
                            found.setdefault(trace_id, []).append(span)
            except _GZIP_ERRORS:
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
        stream: _Stream,
        raw: IO[bytes],
        progress: _Progress,
        assembler: Assembler,
        counters: ReadCounters,
        compressed: bool,
    ) -> Iterator[Trace]:
        seen_content = False
        first_problem = self._document_problem = ""
        tried_document = False
        for line_no, line in self._numbered_lines(stream, counters):
            if not line.strip():
                yield from assembler.complete(line_no)
                continue
            origin = f"{self.name}:{line_no}"
            problem = ""
            try:
                spans, whole = self._line_spans(line, origin)
            except ValueError as exc:
                if not line.endswith(b"\n"):
                    if first_problem and not seen_content:
                        raise TraceSourceError(self._document_problem or first_problem) from None
                    raise TraceSourceError(
                        f"{self.name}:{line_no}: truncated: the file ends in the middle of a "
                        "record (was it still being written?)"
                    ) from None
                if not seen_content and not tried_document and line.lstrip()[:1] in (b"{", b"["):
                    # Perhaps one pretty-printed document rather than JSON lines.
                    tried_document = True
                    document = self._read_document(assembler, compressed)
                    if document is not None:
                        yield from document
                        return
                problem = f"{origin}: not valid JSON ({_json_problem(exc)})"
            except BadSpan as exc:
                problem = f"{origin}: {exc}"
            if problem:
                # One bad line (a record half-written when the disk filled up) costs its own
                # spans, not the file: skipped, counted and reported once.
                counters.bad_lines += 1
                counters.first_bad_line = counters.first_bad_line or problem
                first_problem = first_problem or problem
                continue
            seen_content = True
            if whole:
                yield from assembler.add_whole(spans)
            else:
                assembler.add_line(spans, line_no, len(line) // (len(spans) or 1))
            yield from assembler.complete(line_no)
            if line_no % 64 == 0:
                if len(names) > 100_000:
                    names.clear()  # names made of ids: keep memory flat
                progress.update(raw.tell())
        if not seen_content:
            if first_problem:
                raise TraceSourceError(self._document_problem or first_problem)
            raise TraceSourceError(f"{self.name}: empty file: no spans to read")
        yield from assembler.drain()

    def _numbered_lines(
        self, stream: _Stream, counters: ReadCounters
    ) -> Iterator[tuple[int, bytes]]:
        """The file's lines, counted, each with its number; a run of blank lines comes as one
        empty line numbered as its last. A line too long or a broken gzip stream ends the read."""
        line_no = 0
        lines = _lines(stream, self.max_line_bytes)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                return
            except _GZIP_ERRORS as exc:
                raise TraceSourceError(
                    f"{self.name}:{line_no + 1}: truncated or corrupt gzip data "
                    f"({' '.join(str(exc).split()) or type(exc).__name__})"
                ) from None
            if isinstance(line, int):  # a run of blank lines
                line_no += line
                counters.lines += line
                yield line_no, b""
                continue
            line_no += 1
            counters.lines += 1
            if line is None:
                raise TraceSourceError(
                    f"{self.name}:{line_no}: a line longer than {_size(self.max_line_bytes)}: "
                    "not a trace file, or raise --max-line-bytes"
                )
            yield line_no, line

    def _line_spans(self, line: bytes, origin: str) -> tuple[list[Parsed], bool]:
        """The spans of one line, and whether they are whole traces (a document's, rather
        than a line of a batch). Raises ValueError for a line that is not JSON."""
        try:
            quick = quick_spans(line, origin)
            if quick is not None:
                return quick, False
            return self._spans(loads_lenient(line), origin)
        except RecursionError:
            raise ValueError("nested too deep") from None

    _document_problem: str = ""

    def _read_document(self, assembler: Assembler, compressed: bool) -> Iterator[Trace] | None:
        """The file read as one JSON document; None when it is none (too big, or not JSON)."""
        with open(self.path, "rb") as raw:
            if not compressed and os.fstat(raw.fileno()).st_size > MAX_DOCUMENT_BYTES:
                return None  # known too big without reading it
            reader: _Stream = gzip.GzipFile(fileobj=raw) if compressed else raw
            try:
                data = reader.read(MAX_DOCUMENT_BYTES + 1)
            except _GZIP_ERRORS:
                return None
        if len(data) > MAX_DOCUMENT_BYTES:
            return None
        try:
            doc = loads_lenient(data)
        except (ValueError, RecursionError) as exc:
            self._document_problem = self._json_error(data, exc)
            return None
        del data
        return self._whole_document(doc, assembler)

    def _json_error(self, data: bytes, ours: Exception) -> str:
        """Where the document is not JSON, from the standard library's better message, or
        from ``ours``, orjson's, when the standard library reads it (NaN, say)."""
        try:
            json.loads(data)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(data.rstrip()):
                return f"{self.name}:{exc.lineno}: truncated: the document ends early"
            return f"{self.name}:{exc.lineno}: not valid JSON ({_json_problem(exc)})"
        except UnicodeDecodeError as exc:
            line, why = undecodable(exc)
            return f"{self.name}:{line}: not valid JSON ({why})"
        except ValueError as exc:
            return f"{self.name}: not valid JSON ({_json_problem(exc)})"
        except RecursionError:
            if isinstance(ours, json.JSONDecodeError):
                return f"{self.name}:{ours.lineno}: not valid JSON (nested too deep)"
            return f"{self.name}: not valid JSON (nested too deep)"
        if isinstance(ours, json.JSONDecodeError):
            return f"{self.name}:{ours.lineno}: not valid JSON ({_json_problem(ours)})"
        return ""

    def _whole_document(self, doc: object, assembler: Assembler) -> Iterator[Trace]:
        documents = doc if isinstance(doc, list) else [doc]
        for index, item in enumerate(documents):
            origin = f"{self.name}:1"
            try:
                spans, whole = self._spans(item, origin)
            except BadSpan as exc:
                where = f"[{index}]." if isinstance(doc, list) else ""
                raise TraceSourceError(f"{self.name}: {where}{exc}") from None
            if whole:
                yield from assembler.add_whole(spans)
            else:
                for span in spans:
                    assembler.add(span, 1)
        yield from assembler.drain()

    def _spans(self, doc: object, origin: str) -> tuple[list[Parsed], bool]:
        """Every span of one document (read whole before any is used, so that a bad span
        skips its line, not half of it); True when the traces are whole (Jaeger)."""
        if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
            doc = doc["result"]  # a saved api/v3 response
        if isinstance(doc, dict) and "resourceSpans" in doc:
            return list(otlp_spans(doc, origin)), False
        traces = jaeger_traces(doc)
        if traces is None:
            keys = ", ".join(sorted(doc)[:5]) if isinstance(doc, dict) else type(doc).__name__
            raise BadSpan(
                "expected an OTLP/JSON request (resourceSpans) or a Jaeger trace "
                "(data, traceID/spans)",
                f"got {shown(keys) if keys else 'an empty object'}",
            )
        spans: list[Parsed] = []
        for index, trace in enumerate(traces):
            spans.extend(jaeger_trace(trace, f"data[{index}]", origin))
        return spans, True


def _is_gzip(raw: IO[bytes]) -> bool:
    compressed = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    return compressed


_BLANK_RUN: Final = re.compile(rb"[ \t\r\f\v\n]*\n")


def _lines(stream: _Stream, limit: int) -> Iterator[bytes | int | None]:
    """The lines of ``stream``, read a chunk at a time: each line (with its newline) as
    bytes, a run of blank lines as how many there are (a gzip of 50 MiB of newlines is
    counted in C, not looped over line by line: 44 s before), and None for a line longer
    than ``limit``, skipped without holding it (so that /dev/zero or one 4 GiB line never
    fills memory)."""
    parts: list[bytes] = []  # the start of a line begun in an earlier chunk
    held = 0
    skipping = False  # inside a line over the limit, until its newline
    while chunk := stream.read(_SKIP_CHUNK):
        pos = 0
        if skipping or parts:
            nl = chunk.find(b"\n")
            if nl < 0:
                if not skipping:
                    held += len(chunk)
                    if held > limit:
                        parts, held, skipping = [], 0, True
                        yield None
                    else:
                        parts.append(chunk)
                continue
            if not skipping:
                if held + nl > limit:
                    yield None
                else:
                    yield b"".join(parts) + chunk[: nl + 1]
            parts, held, skipping = [], 0, False
            pos = nl + 1
        end = len(chunk)
        while pos < end:
            blank = _BLANK_RUN.match(chunk, pos)
            if blank is not None:
                yield chunk.count(b"\n", pos, blank.end())
                pos = blank.end()
                continue
            nl = chunk.find(b"\n", pos)
            if nl < 0:
                held = end - pos
                if held > limit:
                    held, skipping = 0, True
                    yield None
                else:
                    parts = [chunk[pos:]]
                break
            if nl - pos > limit:
                yield None
            else:
                yield chunk[pos : nl + 1]
            pos = nl + 1
    if parts:
        yield b"".join(parts)  # a last line without its newline


def _size(n_bytes: int) -> str:
    mib = n_bytes / (1024 * 1024)
    return f"{mib:g} MiB" if mib >= 1 else f"{n_bytes} bytes"


def _json_problem(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return undecodable(exc)[1]
    message = getattr(exc, "msg", None) or str(exc)
    column = getattr(exc, "colno", None)
    message = re.sub(r":? line \d+ column \d+ \(char \d+\)$", "", message)
    return f"{message} at column {column}" if column is not None else message


_encode: Final = msgspec.json.Encoder().encode


def unread_spans(doc: Mapping[str, Any]) -> tuple[int, str]:
    """What reading ``doc`` as a line of a file would leave out: the spans that end before
    they start (their count, and what the first says); :class:`BadSpan` when the whole
    line would not be read (an id or a time that is none, a list that is not one).

    Read as a line is read: by the quick path first, which reads a line whole or not at
    all (a span ending before it starts included), so that a line it reads leaves nothing
    out; any other line by the validating reader's walk. Nothing is counted in the
    reader's tally. A request of 500 spans as chainlat writes them: 3.8 µs a span, the
    encoding included, against 11.1 µs for the walk alone
    (``python benchmarks/receiver_decode.py``)."""
    try:
        if quick_spans(_encode(doc), "") is not None:
            return 0, ""
    except (msgspec.EncodeError, TypeError, ValueError, OverflowError, RecursionError):
        pass  # not a document the quick path could read: the walk says what it is
    return walked_unread_spans(doc)
