"""A request body as the OTLP/JSON document chainlat's files hold, or why it cannot be one.

The one ``{"resourceSpans": [...]}`` object per line of
:mod:`chainlat._runtime.otlp_json`: protobuf is converted as
``google.protobuf.json_format.MessageToDict`` converts it (lowerCamelCase keys, 64-bit
integers as strings, enums as integers), with its trace and span ids as hex, as OTLP/JSON
spells them (protobuf's own JSON mapping writes bytes as base64): field by field
(:mod:`chainlat.receiver.protobuf`), or by ``MessageToDict`` itself when the installed
opentelemetry-proto has a field that module does not know. A JSON body is checked for the
shape of an ``ExportTraceServiceRequest`` and kept as sent. A body is decompressed with a
cap on its decompressed size, so that a small gzip bomb is refused without being inflated.
"""

from __future__ import annotations

import base64
import json
import math
import zlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

Json = dict[str, Any]

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
_ID_KEYS: Final = ("traceId", "spanId", "parentSpanId")
_CHUNK: Final = 64 * 1024


class BadBody(Exception):
    """A body that is not an OTLP trace request: ``status`` is the HTTP answer (400 bad,
    413 too large, 415 an unknown content type)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def decompress(body: bytes, encoding: str, max_bytes: int) -> bytes:
    """``body`` decoded from its ``Content-Encoding`` (``gzip``, ``deflate`` or none), at
    most ``max_bytes`` of it: BadBody 413 past that, 400 when it is not what it says (data
    after a deflate stream's end, or after a gzip member's that is not another member)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        if len(body) > max_bytes:
            raise BadBody(413, f"body over {max_bytes} bytes")
        return body
    if encoding == "gzip":
        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    elif encoding == "deflate":
        decoder = zlib.decompressobj()
    else:
        raise BadBody(415, f"unsupported Content-Encoding {encoding!r}")
    out = bytearray()
    data = body
    try:
        while True:
            # Inflated a chunk at a time and never past the cap: a bomb costs max_bytes at most.
            while data:
                out += decoder.decompress(data, max_bytes + 1 - len(out))
                if len(out) > max_bytes:
                    raise BadBody(413, f"body over {max_bytes} bytes decompressed")
                data = decoder.unconsumed_tail
            if not decoder.eof:
                raise BadBody(400, f"truncated {encoding} body")
            data = decoder.unused_data
            if not data:
                break
            if encoding != "gzip":
                raise BadBody(400, f"data after the end of the {encoding} body")
            # A gzip body may be several members one after another (RFC 1952), as Go's and
            # Python's readers take it: each is inflated, none dropped.
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    except zlib.error as exc:
        raise BadBody(400, f"bad {encoding} body: {exc}") from None
    return bytes(out)


def from_protobuf(body: bytes) -> Json:
    """An ``ExportTraceServiceRequest`` in protobuf as an OTLP/JSON document."""
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except (DecodeError, ValueError, RecursionError) as exc:
        raise BadBody(400, f"not an OTLP protobuf trace request: {exc}") from None
    return from_message(request)


def from_message(request: ExportTraceServiceRequest) -> Json:
    """A parsed request (OTLP/gRPC's, or a protobuf body's) as an OTLP/JSON document."""
    from chainlat.receiver import protobuf

    if protobuf.readable:
        return protobuf.to_document(request)
    return reflected(request)


def reflected(request: ExportTraceServiceRequest) -> Json:
    """``request`` as an OTLP/JSON document by ``MessageToDict``: every field, whatever
    the installed opentelemetry-proto holds."""
    from google.protobuf.json_format import MessageToDict

    document: Json = MessageToDict(request, use_integers_for_enums=True)
    for span in _spans(document):
        _hex_ids(span)
        for link in span.get("links", ()):
            _hex_ids(link)
    document.setdefault("resourceSpans", [])
    return document


def _hex_ids(item: Json) -> None:
    for key in _ID_KEYS:
        value = item.get(key)
        if isinstance(value, str):
            item[key] = base64.b64decode(value).hex()


def from_json(body: bytes) -> Json:
    """An OTLP/JSON body, checked for the shape of a trace request. ``NaN``, ``Infinity``
    and a number past a double's range are refused: Python's parser takes them, but they
    are not JSON (OTLP/JSON writes such a double as the string ``"NaN"``), and one such
    line written to the file would make every reader refuse the whole file."""
    try:
        document = json.loads(body, parse_constant=_not_json, parse_float=_finite)
    except (ValueError, RecursionError) as exc:
        raise BadBody(400, f"not JSON: {exc}") from None
    if not isinstance(document, dict):
        raise BadBody(400, "not an OTLP/JSON trace request: expected an object")
    resource_spans = document.setdefault("resourceSpans", [])
    if not isinstance(resource_spans, list):
        raise BadBody(400, "not an OTLP/JSON trace request: resourceSpans is not a list")
    for resource in resource_spans:
        scopes = resource.get("scopeSpans", []) if isinstance(resource, dict) else None
        if not isinstance(scopes, list) or not all(
            isinstance(s, dict) and isinstance(s.get("spans", []), list) for s in scopes
        ):
            raise BadBody(400, "not an OTLP/JSON trace request: resourceSpans[].scopeSpans")
        for scope in scopes:
            if not all(isinstance(span, dict) for span in scope.get("spans", [])):
                raise BadBody(400, "not an OTLP/JSON trace request: a span is not an object")
    return document


def _not_json(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is past a double's range")
    return value


def decode(body: bytes, content_type: str, encoding: str, max_bytes: int) -> Json:
    """A request body, by its content type and encoding, as an OTLP/JSON document."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in (PROTOBUF, JSON):
        raise BadBody(415, f"unsupported Content-Type {kind or '(none)'!r}")
    data = decompress(body, encoding, max_bytes)
    return from_protobuf(data) if kind == PROTOBUF else from_json(data)


def unread(document: Json) -> tuple[int, str]:
    """The spans of a checked document that chainlat's reader would leave out (they end
    before they start: it drops each alone), and the partial success's ``error_message``
    saying so ("" when none is); BadBody 400 when it would read none of it (an id or a
    time that is none): the exporter is told at once, rather than the line being written
    and skipped when the file is read."""
    from chainlat.traces import BadSpan, unread_spans

    try:
        count, first = unread_spans(document)
    except BadSpan as exc:
        raise BadBody(400, f"spans chainlat cannot read: {exc}") from None
    return count, _rejection(count, first) if count else ""


def export_response(content_type: str, rejected: int = 0, message: str = "") -> bytes:
    """The ``ExportTraceServiceResponse`` for a request taken, in its encoding (JSON, else
    protobuf): empty when every span is read; with ``partial_success`` (``rejected_spans``
    and ``error_message``, which OTLP exporters log) when ``rejected`` of them are not."""
    if content_type == JSON:
        if not rejected:
            return b"{}"
        # OTLP/JSON writes a 64-bit integer as a string (protobuf's JSON mapping).
        partial = {"rejectedSpans": str(rejected), "errorMessage": message}
        return json.dumps({"partialSuccess": partial}).encode()
    if not rejected:
        return b""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTracePartialSuccess,
        ExportTraceServiceResponse,
    )

    partial_success = ExportTracePartialSuccess(rejected_spans=rejected, error_message=message)
    return ExportTraceServiceResponse(partial_success=partial_success).SerializeToString()


def _rejection(count: int, first: str) -> str:
    """The ``error_message`` of a partial success: why ``count`` spans are not read."""
    if count == 1:
        return f"1 span ends before it starts: kept, but chainlat's reader leaves it out ({first})"
    return (
        f"{count} spans end before they start: kept, but chainlat's reader leaves them out "
        f"(the first: {first})"
    )


def _spans(document: Json) -> Iterator[Json]:
    for resource in document.get("resourceSpans", ()):
        for scope in resource.get("scopeSpans", ()):
            yield from scope.get("spans", ())


def span_count(document: Json) -> int:
    """The spans a checked document holds."""
    return sum(1 for _ in _spans(document))
