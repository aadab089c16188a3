"""An ``ExportTraceServiceRequest`` as the OTLP/JSON document chainlat's files hold, read
field by field.

The document is what ``MessageToDict(request, use_integers_for_enums=True)`` makes of the
request (lowerCamelCase keys; a field at its default left out, a message field set or a
``oneof`` member chosen kept; 64-bit integers as strings; enums as integers; bytes as
base64; a double that is not finite as ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``), with
the trace and span ids of spans and links as hex, as OTLP/JSON spells them.
``MessageToDict`` finds every field by reflection: 44.9 µs a span of a request of
chainlat's own ten-span runs, against 15.5 µs here, the parse included
(``python benchmarks/receiver_decode.py``: 500 spans, the median of 7 rounds).

It knows the fields of opentelemetry-proto from 1.38 to 1.45 (``KeyValue.key_strindex``,
``AnyValue.string_value_strindex`` and ``Resource.entity_refs`` came in between: each is
read only where the installed one has it). A message type with a field it does not know,
from a newer opentelemetry-proto, would be left out without a word: `readable` is then
False, and the caller converts with ``MessageToDict`` as before.
"""

from __future__ import annotations

import base64
import math
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from google.protobuf.descriptor import Descriptor
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

Json = dict[str, Any]

KNOWN_FIELDS: Final = {
    "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest": {"resource_spans"},
    "opentelemetry.proto.trace.v1.ResourceSpans": {"resource", "scope_spans", "schema_url"},
    "opentelemetry.proto.resource.v1.Resource": {
        "attributes",
        "dropped_attributes_count",
        "entity_refs",
    },
    "opentelemetry.proto.common.v1.EntityRef": {
        "schema_url",
        "type",
        "id_keys",
        "description_keys",
    },
    "opentelemetry.proto.common.v1.KeyValue": {"key", "value", "key_strindex"},
    "opentelemetry.proto.common.v1.AnyValue": {
        "string_value",
        "bool_value",
        "int_value",
        "double_value",
        "array_value",
        "kvlist_value",
        "bytes_value",
        "string_value_strindex",
    },
    "opentelemetry.proto.common.v1.ArrayValue": {"values"},
    "opentelemetry.proto.common.v1.KeyValueList": {"values"},
    "opentelemetry.proto.trace.v1.ScopeSpans": {"scope", "spans", "schema_url"},
    "opentelemetry.proto.common.v1.InstrumentationScope": {
        "name",
        "version",
        "attributes",
        "dropped_attributes_count",
    },
    "opentelemetry.proto.trace.v1.Span": {
        "trace_id",
        "span_id",
        "trace_state",
        "parent_span_id",
        "flags",
        "name",
        "kind",
        "start_time_unix_nano",
        "end_time_unix_nano",
        "attributes",
        "dropped_attributes_count",
        "events",
        "dropped_events_count",
        "links",
        "dropped_links_count",
        "status",
    },
    "opentelemetry.proto.trace.v1.Span.Event": {
        "time_unix_nano",
        "name",
        "attributes",
        "dropped_attributes_count",
    },
    "opentelemetry.proto.trace.v1.Span.Link": {
        "trace_id",
        "span_id",
        "trace_state",
        "attributes",
        "dropped_attributes_count",
        "flags",
    },
    "opentelemetry.proto.trace.v1.Status": {"message", "code"},
}
"""The fields read, by message type (every field the types have in opentelemetry-proto
1.45)."""


def _installed() -> dict[str, set[str]] | None:
    """The installed message types' fields, from the request's down; None when one has a
    field, or is a type, that `KNOWN_FIELDS` does not hold."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    found: dict[str, set[str]] = {}
    waiting: list[Descriptor] = [ExportTraceServiceRequest.DESCRIPTOR]
    while waiting:
        descriptor = waiting.pop()
        if descriptor.full_name in found:
            continue
        names = {field.name for field in descriptor.fields}
        if not names <= KNOWN_FIELDS.get(descriptor.full_name, set()):
            return None
        found[descriptor.full_name] = names
        waiting.extend(f.message_type for f in descriptor.fields if f.message_type is not None)
    return found


_FIELDS: Final = _installed()
readable: Final = _FIELDS is not None
"""Whether every field of the installed opentelemetry-proto's request is one read here."""
_ENTITY_REFS: Final = _FIELDS is not None and "entity_refs" in _FIELDS.get(
    "opentelemetry.proto.resource.v1.Resource", set()
)
_KEY_STRINDEX: Final = _FIELDS is not None and "key_strindex" in _FIELDS.get(
    "opentelemetry.proto.common.v1.KeyValue", set()
)


def to_document(request: ExportTraceServiceRequest) -> Json:
    """``request`` as an OTLP/JSON document (only when `readable`)."""
    found = []
    for resource_spans in request.resource_spans:
        item: Json = {}
        if resource_spans.HasField("resource"):
            item["resource"] = _resource(resource_spans.resource)
        if resource_spans.scope_spans:
            item["scopeSpans"] = [_scope_spans(s) for s in resource_spans.scope_spans]
        if resource_spans.schema_url:
            item["schemaUrl"] = resource_spans.schema_url
        found.append(item)
    return {"resourceSpans": found}


def _resource(resource: Any) -> Json:
    item: Json = {}
    if resource.attributes:
        item["attributes"] = _key_values(resource.attributes)
    if resource.dropped_attributes_count:
        item["droppedAttributesCount"] = resource.dropped_attributes_count
    if _ENTITY_REFS and resource.entity_refs:
        item["entityRefs"] = [_entity_ref(ref) for ref in resource.entity_refs]
    return item


def _entity_ref(ref: Any) -> Json:
    item: Json = {}
    if ref.schema_url:
        item["schemaUrl"] = ref.schema_url
    if ref.type:
        item["type"] = ref.type
    if ref.id_keys:
        item["idKeys"] = list(ref.id_keys)
    if ref.description_keys:
        item["descriptionKeys"] = list(ref.description_keys)
    return item


def _scope_spans(scope_spans: Any) -> Json:
    item: Json = {}
    if scope_spans.HasField("scope"):
        scope = scope_spans.scope
        named: Json = {}
        if scope.name:
            named["name"] = scope.name
        if scope.version:
            named["version"] = scope.version
        if scope.attributes:
            named["attributes"] = _key_values(scope.attributes)
        if scope.dropped_attributes_count:
            named["droppedAttributesCount"] = scope.dropped_attributes_count
        item["scope"] = named
    if scope_spans.spans:
        item["spans"] = [_span(span) for span in scope_spans.spans]
    if scope_spans.schema_url:
        item["schemaUrl"] = scope_spans.schema_url
    return item


def _span(span: Any) -> Json:
    item: Json = {}
    if span.trace_id:
        item["traceId"] = span.trace_id.hex()
    if span.span_id:
        item["spanId"] = span.span_id.hex()
    if span.trace_state:
        item["traceState"] = span.trace_state
    if span.parent_span_id:
        item["parentSpanId"] = span.parent_span_id.hex()
    if span.flags:
        item["flags"] = span.flags
    if span.name:
        item["name"] = span.name
    if span.kind:
        item["kind"] = span.kind
    if span.start_time_unix_nano:
        item["startTimeUnixNano"] = str(span.start_time_unix_nano)
    if span.end_time_unix_nano:
        item["endTimeUnixNano"] = str(span.end_time_unix_nano)
    if span.attributes:
        item["attributes"] = _key_values(span.attributes)
    if span.dropped_attributes_count:
        item["droppedAttributesCount"] = span.dropped_attributes_count
    if span.events:
        item["events"] = [_event(event) for event in span.events]
    if span.dropped_events_count:
        item["droppedEventsCount"] = span.dropped_events_count
    if span.links:
        item["links"] = [_link(link) for link in span.links]
    if span.dropped_links_count:
        item["droppedLinksCount"] = span.dropped_links_count
    if span.HasField("status"):
        status: Json = {}
        if span.status.message:
            status["message"] = span.status.message
        if span.status.code:
            status["code"] = span.status.code
        item["status"] = status
    return item


def _event(event: Any) -> Json:
    item: Json = {}
    if event.time_unix_nano:
        item["timeUnixNano"] = str(event.time_unix_nano)
    if event.name:
        item["name"] = event.name
    if event.attributes:
        item["attributes"] = _key_values(event.attributes)
    if event.dropped_attributes_count:
        item["droppedAttributesCount"] = event.dropped_attributes_count
    return item


def _link(link: Any) -> Json:
    item: Json = {}
    if link.trace_id:
        item["traceId"] = link.trace_id.hex()
    if link.span_id:
        item["spanId"] = link.span_id.hex()
    if link.trace_state:
        item["traceState"] = link.trace_state
    if link.attributes:
        item["attributes"] = _key_values(link.attributes)
    if link.dropped_attributes_count:
        item["droppedAttributesCount"] = link.dropped_attributes_count
    if link.flags:
        item["flags"] = link.flags
    return item


def _key_values(key_values: Any) -> list[Json]:
    found = []
    for key_value in key_values:
        item: Json = {}
        if key_value.key:
            item["key"] = key_value.key
        if key_value.HasField("value"):
            item["value"] = _any_value(key_value.value)
        if _KEY_STRINDEX and key_value.key_strindex:
            item["keyStrindex"] = key_value.key_strindex
        found.append(item)
    return found


def _any_value(value: Any) -> Json:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return {"stringValue": value.string_value}
    if kind == "int_value":
        return {"intValue": str(value.int_value)}
    if kind == "double_value":
        return {"doubleValue": _double(value.double_value)}
    if kind == "bool_value":
        return {"boolValue": value.bool_value}
    if kind == "array_value":
        values = value.array_value.values
        return {"arrayValue": {"values": [_any_value(v) for v in values]} if values else {}}
    if kind == "kvlist_value":
        pairs = value.kvlist_value.values
        return {"kvlistValue": {"values": _key_values(pairs)} if pairs else {}}
    if kind == "bytes_value":
        return {"bytesValue": base64.b64encode(value.bytes_value).decode("ascii")}
    if kind == "string_value_strindex":
        return {"stringValueStrindex": value.string_value_strindex}
    return {}


def _double(value: float) -> float | str:
    """A double as protobuf's JSON mapping writes it: not finite, by name."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"
