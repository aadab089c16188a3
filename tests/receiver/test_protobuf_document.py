"""A protobuf request read field by field (``chainlat.receiver.protobuf``) is the document
``MessageToDict`` makes of it, ids as hex: for every field of every message type, drawn by
hypothesis, and for the real OpenTelemetry SDK's requests; a newer opentelemetry-proto with
a field it does not know is left to ``MessageToDict``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from chainlat.receiver import protobuf
from chainlat.receiver.decoding import from_message, from_protobuf, reflected

UINT32 = st.integers(0, 2**32 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
UINT64 = st.integers(0, 2**64 - 1)
TEXT = st.text(max_size=8)
ID = st.sampled_from([b"", bytes(8), bytes(range(1, 9)), bytes(range(16))])


def _any_value(depth: int = 2) -> st.SearchStrategy[AnyValue]:
    leaves: list[st.SearchStrategy[dict[str, Any]]] = [
        st.just({}),
        TEXT.map(lambda v: {"string_value": v}),
        st.integers(-(2**63), 2**63 - 1).map(lambda v: {"int_value": v}),
        st.floats().map(lambda v: {"double_value": v}),
        st.booleans().map(lambda v: {"bool_value": v}),
        st.binary(max_size=6).map(lambda v: {"bytes_value": v}),
        INT32.map(lambda v: {"string_value_strindex": v}),
    ]
    if depth:
        leaves.append(
            st.lists(_any_value(depth - 1), max_size=2).map(
                lambda vs: {"array_value": {"values": vs}}
            )
        )
        leaves.append(
            st.lists(_key_value(depth - 1), max_size=2).map(
                lambda kvs: {"kvlist_value": {"values": kvs}}
            )
        )
    return st.one_of(leaves).map(lambda fields: AnyValue(**fields))


def _key_value(depth: int = 2) -> st.SearchStrategy[KeyValue]:
    return st.builds(
        lambda key, value, index: KeyValue(key=key, value=value, key_strindex=index),
        TEXT,
        st.none() | _any_value(depth),
        st.sampled_from([0, 0, 3]),
    )


ATTRIBUTES = st.lists(_key_value(), max_size=3)


@st.composite
def _span(draw: st.DrawFn) -> Span:
    span = Span(
        trace_id=draw(ID),
        span_id=draw(ID),
        trace_state=draw(TEXT),
        parent_span_id=draw(ID),
        flags=draw(UINT32),
        name=draw(TEXT),
        kind=Span.SpanKind.ValueType(draw(st.integers(0, 5))),
        start_time_unix_nano=draw(UINT64),
        end_time_unix_nano=draw(UINT64),
        attributes=draw(ATTRIBUTES),
        dropped_attributes_count=draw(UINT32),
        dropped_events_count=draw(UINT32),
        dropped_links_count=draw(UINT32),
    )
    for _ in range(draw(st.integers(0, 2))):
        event = span.events.add(time_unix_nano=draw(UINT64), name=draw(TEXT))
        event.attributes.extend(draw(ATTRIBUTES))
        event.dropped_attributes_count = draw(UINT32)
    for _ in range(draw(st.integers(0, 2))):
        link = span.links.add(
            trace_id=draw(ID),
            span_id=draw(ID),
            trace_state=draw(TEXT),
            dropped_attributes_count=draw(UINT32),
            flags=draw(UINT32),
        )
        link.attributes.extend(draw(ATTRIBUTES))
    if draw(st.booleans()):
        span.status.SetInParent()
        span.status.message = draw(TEXT)
        span.status.code = Status.StatusCode.ValueType(draw(st.integers(0, 2)))
    return span


@st.composite
def _request(draw: st.DrawFn) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_spans = request.resource_spans.add(schema_url=draw(TEXT))
        if draw(st.booleans()):
            resource = resource_spans.resource
            resource.SetInParent()
            resource.attributes.extend(draw(ATTRIBUTES))
            resource.dropped_attributes_count = draw(UINT32)
            for _ in range(draw(st.integers(0, 2))):
                resource.entity_refs.add(
                    schema_url=draw(TEXT),
                    type=draw(TEXT),
                    id_keys=draw(st.lists(TEXT, max_size=2)),
                    description_keys=draw(st.lists(TEXT, max_size=2)),
                )
        for _ in range(draw(st.integers(0, 2))):
            scope_spans = resource_spans.scope_spans.add(schema_url=draw(TEXT))
            if draw(st.booleans()):
                scope = scope_spans.scope
                scope.SetInParent()
                scope.name, scope.version = draw(TEXT), draw(TEXT)
                scope.attributes.extend(draw(ATTRIBUTES))
                scope.dropped_attributes_count = draw(UINT32)
            scope_spans.spans.extend(draw(st.lists(_span(), max_size=2)))
    return request


def test_the_installed_opentelemetry_proto_is_read_field_by_field() -> None:
    assert protobuf.readable


@settings(max_examples=300, deadline=None)
@given(_request())
def test_every_field_is_what_message_to_dict_makes_of_it(
    request: ExportTraceServiceRequest,
) -> None:
    assert protobuf.to_document(request) == reflected(request)


def test_the_sdks_own_request_is_the_same_document() -> None:
    """Spans of the real SDK, encoded by its OTLP exporter's encoder: events, links, a
    status, every kind of attribute value."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test", "1.0")
    with tracer.start_as_current_span("invoke_workflow w", attributes={"a": 1, "b": 0.5}) as root:
        link = trace.Link(root.get_span_context(), {"why": "retry"})
        with tracer.start_as_current_span("chat m", links=[link]) as call:
            call.set_attributes({"s": "x", "t": True, "l": [1, 2], "f": float("inf")})
            call.add_event("first_token", {"n": 3})
            call.set_status(trace.Status(trace.StatusCode.ERROR, "boom"))
    request = encode_spans(exporter.get_finished_spans())
    document = from_message(request)
    assert document == reflected(request)
    spans = [s for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]]
    assert [len(s["spanId"]) for s in spans] == [16, 16]  # hex, as OTLP/JSON spells ids
    assert from_protobuf(request.SerializeToString()) == document


def test_a_field_it_does_not_know_leaves_the_request_to_message_to_dict(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A newer opentelemetry-proto whose Span has a field not read here: the check says so,
    and nothing would be left out without a word."""
    known = {name: set(fields) for name, fields in protobuf.KNOWN_FIELDS.items()}
    known["opentelemetry.proto.trace.v1.Span"].discard("flags")
    monkeypatch.setattr(protobuf, "KNOWN_FIELDS", known)
    assert protobuf._installed() is None
