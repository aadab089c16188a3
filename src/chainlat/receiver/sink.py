"""Where every request received goes: one OTLP/JSON line in the output file, counted.

The file is chainlat's own format (:class:`chainlat.JsonLinesSpanExporter`'s): one
``{"resourceSpans": [...]}`` object per line, readable by every command. Both servers (HTTP
and gRPC, in their own threads) write through one :class:`Sink`, a line at a time under
its lock, so that lines never interleave.

An exporter resends a batch the receiver already took when its request timed out on its
side, or after a 503: the same spans, twice. A span is identified by its trace id and span
id, and :class:`RecentSpans` remembers those of the last spans written, so that a span sent
again is left out of the file, the counters and the live view (counted as
``resent_spans``), and the runs read back from the file are each read once.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

from chainlat.receiver.credentials import remove_credentials
from chainlat.receiver.limits import RECENT_SPANS

Json = dict[str, Any]


@dataclass
class ReceiverCounters:
    """What the receiver saw; read while it runs and after it stopped."""

    requests: int = 0
    """Requests written to the file (an empty one too; not one whose spans had all come
    before)."""
    spans: int = 0
    """Spans written, each once."""
    resent_spans: int = 0
    """Spans received again (the same trace and span id), left out: an exporter's retry."""
    bad_requests: int = 0
    """Bodies refused as not a trace request (HTTP 400, or 415 for a content type)."""
    too_large: int = 0
    """Bodies refused past the size cap, compressed or decompressed (HTTP 413, gRPC
    RESOURCE_EXHAUSTED; with gRPC, a call that ended without its message too)."""
    timed_out: int = 0
    """Requests whose body did not arrive within the deadline."""
    refused_connections: int = 0
    """Connections closed at once because the most allowed were open."""
    busy_calls: int = 0
    """gRPC calls refused because ``max_grpc_calls`` were in progress (RESOURCE_EXHAUSTED,
    answered by grpcio): each is counted when the next call arrives, or the receiver stops."""
    first_problem: str = ""
    """What was wrong with the first request refused, for the warning."""
    unwritten: int = 0
    """Requests taken but not written: the file could not be (a full disk); answered 503
    (gRPC UNAVAILABLE), which an exporter retries."""
    first_unwritten: str = ""
    """Why the first of them could not be written."""
    failed: int = 0
    """Requests the receiver failed to handle (HTTP 500, gRPC INTERNAL): chainlat's fault."""
    first_failure: str = ""
    """What went wrong in the first of them, for the warning."""
    last_request_s: float = field(default_factory=time.monotonic)
    """When the last request (good or bad) ended, on the monotonic clock."""
    in_flight: int = 0
    """Requests being received now."""
    unread_spans: int = 0
    """Spans written that end before they start: the reader leaves each out (and warns when
    the file is judged); the exporter was told (OTLP ``partial_success``)."""

    def warnings(self) -> list[str]:
        """One line per kind of bad input seen, as the readers word theirs."""
        lines = []
        if self.bad_requests:
            lines.append(
                f"{_count(self.bad_requests, 'request')} refused as not OTLP trace data "
                f"(HTTP 400/415; the first: {self.first_problem})"
            )
        if self.too_large:
            lines.append(
                f"{_count(self.too_large, 'request')} refused as too large (HTTP 413, gRPC "
                "RESOURCE_EXHAUSTED)"
            )
        if self.timed_out:
            lines.append(
                f"{_count(self.timed_out, 'request')} timed out before the whole body arrived"
            )
        if self.unwritten:
            lines.append(
                f"{_count(self.unwritten, 'request')} not written ({self.first_unwritten}): "
                "their spans are not judged"
            )
        if self.failed:
            lines.append(
                f"{_count(self.failed, 'request')} failed in the receiver (HTTP 500 or gRPC "
                f"INTERNAL; the first: {self.first_failure}): a chainlat bug"
            )
        if self.refused_connections:
            lines.append(
                f"{_count(self.refused_connections, 'connection')} refused: too many open at once"
            )
        if self.busy_calls:
            lines.append(
                f"{_count(self.busy_calls, 'gRPC call')} refused: too many in progress at once "
                "(RESOURCE_EXHAUSTED)"
            )
        if self.resent_spans:
            lines.append(
                f"{_count(self.resent_spans, 'span')} received again (an exporter's retry, "
                "the same trace and span id): counted once"
            )
        return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


class Unwritten(Exception):
    """A request the file could not take (counted already): the server answers 503."""


class RecentSpans:
    """The trace and span ids of the last ``size`` spans taken, oldest forgotten first.

    Bounded by count, whatever the spans weigh: about 100 bytes an id (measured with
    tracemalloc: 25 MB for the default 262,144). A retry comes within its exporter's retry
    schedule (the Go SDK's gives up after a minute, Python's within its 10 s export
    timeout), and a batch span processor sends no other batch while it retries one, so the
    window needs to hold what other exporters send meanwhile: 512 full batches (the SDKs'
    default batch is 512 spans). A span sent again after that is written again.

    Example::

        recent = RecentSpans(1000)
        taken, resent = recent.take(document)  # document's spans seen before: removed
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._ids: set[bytes | str] = set()
        self._order: deque[bytes | str] = deque()

    def take(self, document: Json) -> tuple[list[bytes | str], int]:
        """Remove from ``document`` (in place) the spans taken before, or twice in it; the
        ids of those left, now remembered, and how many were removed. A span without both
        ids is kept and not remembered."""
        taken: list[bytes | str] = []
        resent = 0
        resources = document.get("resourceSpans", ())
        for resource in resources:
            scopes = resource.get("scopeSpans", ())
            cut = False
            for scope in scopes:
                spans = scope.get("spans", ())
                kept = [span for span in spans if self._new(span, taken)]
                if len(kept) != len(spans):
                    resent += len(spans) - len(kept)
                    scope["spans"] = kept
                    cut = True
            if cut:  # a resource or scope left with no span goes too
                resource["scopeSpans"] = [scope for scope in scopes if scope.get("spans")]
        if resent:
            document["resourceSpans"] = [r for r in resources if r.get("scopeSpans")]
        while len(self._order) > self._size:
            self._ids.discard(self._order.popleft())
        return taken, resent

    def _new(self, span: Json, taken: list[bytes | str]) -> bool:
        key = _span_key(span)
        if key is None:
            return True
        if key in self._ids:
            return False
        self._ids.add(key)
        self._order.append(key)
        taken.append(key)
        return True

    def forget(self, keys: list[bytes | str]) -> None:
        """Spans taken but not written (the file refused them): their resend is taken. The
        window is walked once (about 10 ms at its default size), only when a write
        failed."""
        if keys:
            gone = set(keys)
            self._ids -= gone
            self._order = deque(key for key in self._order if key not in gone)


def _span_key(span: Json) -> bytes | str | None:
    """A span's trace and span id: 24 bytes for ids of 32 and 16 hex digits (as OTLP/JSON
    writes them and protobuf's are converted), else the text as sent, lower-cased."""
    trace_id, span_id = span.get("traceId"), span.get("spanId")
    if not (trace_id and span_id and isinstance(trace_id, str) and isinstance(span_id, str)):
        return None
    if len(trace_id) == 32 and len(span_id) == 16:
        try:
            return bytes.fromhex(trace_id + span_id)
        except ValueError:
            pass
    return f"{trace_id}/{span_id}".lower()


class Sink:
    """The output file and the counters; ``on_document`` sees every document written, with
    the size of its line in bytes. A span taken before (``recent_spans`` of them are
    remembered) is left out of what is written.

    Example::

        sink = Sink("received.jsonl")
        sink.write({"resourceSpans": []}, spans=0)
        sink.close()
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        on_document: Callable[[Json, int], None] | None = None,
        *,
        recent_spans: int = RECENT_SPANS,
    ) -> None:
        self.path = os.fspath(path)
        self.counters = ReceiverCounters()
        self._on_document = on_document
        self._recent = RecentSpans(recent_spans)
        self._lock = threading.Lock()
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        # Written anew: the summary judges what this receiver received, nothing older.
        self._file: IO[bytes] | None = open(self.path, "wb", buffering=0)  # noqa: SIM115

    def write(self, document: Json, spans: int, unread: int = 0) -> None:
        """One request as one line of the file, its credentials taken out (``credentials``)
        and the spans taken before left out (no line when they all were). ``unread``: its
        spans the reader leaves out (``decoding.unread``), counted in ``unread_spans`` as
        far as they are written: a retry's are counted once."""
        with self._lock:
            taken, resent = self._recent.take(document)
            self.counters.resent_spans += resent
        if resent:
            spans -= resent
            if not spans:
                return
            if unread:  # some of them may have been left out with the resent spans
                from chainlat.traces import unread_spans

                unread = unread_spans(document)[0]
        remove_credentials(document)
        line = json.dumps(document, separators=(",", ":"), ensure_ascii=False)
        # As chainlat's exporter and the Collector's encoder do: U+2028/9 end a line elsewhere.
        line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        data = (line + "\n").encode("utf-8", errors="replace")
        with self._lock:
            if self._file is None:
                raise RuntimeError("the receiver's file is closed")
            try:
                self._file.write(data)
            except OSError as exc:
                self._recent.forget(taken)  # the exporter resends them after the 503
                reason = f"cannot write {self.path}: {exc.strerror or exc}"
                self.counters.unwritten += 1
                self.counters.first_unwritten = self.counters.first_unwritten or reason
                raise Unwritten(reason) from None
            self.counters.requests += 1
            self.counters.spans += spans
            self.counters.unread_spans += unread
        if self._on_document is not None and spans:
            self._on_document(document, len(data))

    def refused(self, status: int, reason: str) -> None:
        """One request refused (HTTP ``status``), counted by kind."""
        with self._lock:
            if status >= 500:
                self.counters.failed += 1
                self.counters.first_failure = self.counters.first_failure or reason[:200]
                return
            if status == 413:
                self.counters.too_large += 1
            elif status == 408:
                self.counters.timed_out += 1
            else:
                self.counters.bad_requests += 1
            if not self.counters.first_problem:
                self.counters.first_problem = reason[:200]

    def connection_refused(self) -> None:
        with self._lock:
            self.counters.refused_connections += 1

    def busy(self, calls: int) -> None:
        """``calls`` gRPC calls were refused: too many in progress."""
        with self._lock:
            self.counters.busy_calls += calls

    def started(self) -> None:
        """A request began arriving."""
        with self._lock:
            self.counters.in_flight += 1

    def ended(self) -> None:
        """A request was answered (or abandoned)."""
        with self._lock:
            self.counters.in_flight -= 1
            self.counters.last_request_s = time.monotonic()

    def close(self) -> None:
        """Close the file; the lines are already on disk (it is unbuffered)."""
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
