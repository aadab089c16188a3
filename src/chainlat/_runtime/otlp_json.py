"""OTLP JSON encoding of finished spans, and the exporter of the embedded default.

The file is what the OpenTelemetry Collector's file exporter writes: one
``ExportTraceServiceRequest`` per line in the OTLP/JSON encoding (protobuf's JSON
mapping with lowerCamelCase keys, trace and span ids as hex, 64-bit integers as
strings, enums as integers, default values left out). A Collector's
``otlpjsonfile`` receiver, Jaeger's upload and chainlat's own readers all take it.
"""

from __future__ import annotations

import base64
import errno
import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, StatusCode

from chainlat._core.errors import logger
from chainlat._runtime.scrubbing import describe

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import SpanContext

Json = dict[str, Any]

_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}
_HAS_IS_REMOTE = 0x100
_IS_REMOTE = 0x200
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1


def any_value(value: object) -> Json:
    """An attribute value as an OTLP ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        if _INT64_MIN <= value <= _INT64_MAX:
            return {"intValue": str(value)}
        # OTLP integers are int64: a Collector would reject the whole line; keep it as text.
        return {"stringValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        # JSON has no NaN or Infinity; protobuf's JSON mapping spells them as strings.
        if math.isnan(value):
            return {"doubleValue": "NaN"}
        return {"doubleValue": "Infinity" if value > 0 else "-Infinity"}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode("ascii")}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": key_values(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    return {"stringValue": str(value)}


def key_values(attributes: Mapping[str, object] | None) -> list[Json]:
    """Attributes as a list of OTLP ``KeyValue``."""
    if not attributes:
        return []
    return [{"key": key, "value": any_value(value)} for key, value in attributes.items()]


def _flags(parent: SpanContext | None) -> int:
    if parent is not None and parent.is_remote:
        return _HAS_IS_REMOTE | _IS_REMOTE
    return _HAS_IS_REMOTE


def _put(target: Json, key: str, value: object) -> None:
    # protobuf's JSON mapping leaves out fields that hold their default value
    if value:
        target[key] = value


def encode_span(span: ReadableSpan) -> Json:
    """One span as an OTLP/JSON ``Span``."""
    context = span.get_span_context()
    assert context is not None  # finished SDK spans always have one
    out: Json = {
        "traceId": f"{context.trace_id:032x}",
        "spanId": f"{context.span_id:016x}",
    }
    if context.trace_state:
        out["traceState"] = context.trace_state.to_header()
    if span.parent is not None:
        out["parentSpanId"] = f"{span.parent.span_id:016x}"
    out["flags"] = _flags(span.parent)
    _put(out, "name", span.name)
    out["kind"] = _KIND[span.kind]
    _put(out, "startTimeUnixNano", str(span.start_time or 0) if span.start_time else "")
    _put(out, "endTimeUnixNano", str(span.end_time or 0) if span.end_time else "")
    _put(out, "attributes", key_values(span.attributes))
    _put(out, "droppedAttributesCount", span.dropped_attributes)
    events = []
    for event in span.events:
        encoded: Json = {"timeUnixNano": str(event.timestamp), "name": event.name}
        _put(encoded, "attributes", key_values(event.attributes))
        _put(encoded, "droppedAttributesCount", event.dropped_attributes)
        events.append(encoded)
    _put(out, "events", events)
    _put(out, "droppedEventsCount", span.dropped_events)
    links = []
    for link in span.links:
        encoded = {
            "traceId": f"{link.context.trace_id:032x}",
            "spanId": f"{link.context.span_id:016x}",
            "flags": _flags(link.context),
        }
        if link.context.trace_state:
            encoded["traceState"] = link.context.trace_state.to_header()
        _put(encoded, "attributes", key_values(link.attributes))
        _put(encoded, "droppedAttributesCount", link.dropped_attributes)
        links.append(encoded)
    _put(out, "links", links)
    _put(out, "droppedLinksCount", span.dropped_links)
    status: Json = {}
    _put(status, "message", span.status.description or "")
    _put(status, "code", _STATUS[span.status.status_code])
    out["status"] = status
    return out


def _scope(scope: InstrumentationScope | None) -> Json:
    out: Json = {}
    if scope is not None:
        _put(out, "name", scope.name)
        _put(out, "version", scope.version or "")
        _put(out, "attributes", key_values(scope.attributes))
    return out


def _resource(resource: Resource) -> Json:
    out: Json = {}
    _put(out, "attributes", key_values(resource.attributes))
    return out


def encode_request(spans: Sequence[ReadableSpan]) -> Json:
    """Spans grouped by resource and scope as one OTLP/JSON ``ExportTraceServiceRequest``."""
    grouped: dict[
        int, tuple[Resource, dict[object, tuple[InstrumentationScope | None, list[Json]]]]
    ]
    grouped = {}
    for span in spans:
        resource = span.resource
        scopes = grouped.setdefault(id(resource), (resource, {}))[1]
        scope = span.instrumentation_scope
        key = (scope.name, scope.version, scope.schema_url) if scope is not None else None
        scopes.setdefault(key, (scope, []))[1].append(encode_span(span))
    resource_spans = []
    for resource, scopes in grouped.values():
        scope_spans = []
        for scope, encoded in scopes.values():
            item: Json = {"scope": _scope(scope), "spans": encoded}
            _put(item, "schemaUrl", scope.schema_url if scope is not None else "")
            scope_spans.append(item)
        entry: Json = {"resource": _resource(resource), "scopeSpans": scope_spans}
        _put(entry, "schemaUrl", resource.schema_url)
        resource_spans.append(entry)
    return {"resourceSpans": resource_spans}


class JsonLinesSpanExporter(SpanExporter):
    """Appends each batch as one OTLP/JSON line to a file (the embedded default).

    A line is written whole or counts as lost: the file is unbuffered, so that no span
    reported as failed sits in a buffer to be written later, and after a failed write
    (a full disk) or on opening a file whose last line was cut, the next line starts
    with a newline, so that a reader loses at most the line that was cut. The first
    failure of an episode is logged, once; the recovery too.

    Example::

        exporter = chainlat.JsonLinesSpanExporter("chainlat-traces.jsonl")
        provider.add_span_processor(BatchSpanProcessor(exporter))
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._closed = False
        self._cut = False
        """The file may end in the middle of a line: start the next one on a new line."""
        self._failing = False
        self._lost_batches = 0

    def _open(self) -> IO[bytes]:
        """The file, opened for appending without a buffer (tests replace it)."""
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        return open(self.path, "ab", buffering=0)

    def _ends_cut(self, file: IO[bytes]) -> bool:
        # A run killed mid-write, or a full disk, may have left a line without its end.
        try:
            size = os.fstat(file.fileno()).st_size
            if size == 0:
                return False
            with open(self.path, "rb") as reader:
                reader.seek(size - 1)
                return reader.read(1) != b"\n"
        except (OSError, ValueError):
            return False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        line = json.dumps(
            encode_request(spans), separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        # As the Collector's encoder does: U+2028 and U+2029 end a line for many text tools.
        line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        data = (line + "\n").encode("utf-8", errors="replace")
        with self._lock:
            if self._closed:  # checked under the lock: shutdown may run in another thread
                return SpanExportResult.FAILURE
            try:
                if self._file is None:
                    self._file = self._open()
                    self._cut = self._ends_cut(self._file)
                if self._cut:
                    data = b"\n" + data
                self._write_all(self._file, data)
            except OSError as exc:
                # Some of the line may be in the file: the next one starts on a new line.
                self._cut = True
                self._lost_batches += 1
                if not self._failing:
                    self._failing = True
                    logger.warning(
                        "chainlat: cannot write traces to %s: %s; spans that cannot be "
                        "written are dropped and counted (logged once until writing works again)",
                        self.path,
                        describe(exc),
                    )
                return SpanExportResult.FAILURE
            self._cut = False
            if self._failing:
                logger.warning(
                    "chainlat: writing traces to %s again, after %d batches could not be written",
                    self.path,
                    self._lost_batches,
                )
                self._failing = False
                self._lost_batches = 0
        return SpanExportResult.SUCCESS

    @staticmethod
    def _write_all(file: IO[bytes], data: bytes) -> None:
        # An unbuffered write may write part of the data (a disk filling up) and return.
        view = memoryview(data)
        while view:
            written = file.write(view)
            if not written:  # nothing taken and no error: do not spin
                raise OSError(errno.EIO, "the traces file accepted no bytes")
            view = view[written:]

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True  # nothing is buffered

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except OSError as exc:
                logger.warning("chainlat: cannot close %s: %s", self.path, describe(exc))
