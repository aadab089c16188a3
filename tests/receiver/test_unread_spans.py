"""The receiver tells an exporter what chainlat will not read, as OTLP says to: a request
whose spans the reader would skip whole (an id or a time that is none) is answered 400 with
where and why, and written nowhere; spans the reader drops one by one (they end before they
start) are kept in the file, as sent, and the answer is a ``partial_success`` with their
count and the first one's reason, in the request's encoding, over HTTP and gRPC alike. The
spans come from the real OpenTelemetry SDK (protobuf by its own encoder) or as OTLP/JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chainlat.receiver import Receiver
from chainlat.receiver.decoding import from_message
from chainlat.traces import BadSpan, ReadCounters, read_runs, unread_spans
from support import grpc_export, received_span_ids

T0 = 1_700_000_000_000_000_000
MS = 1_000_000
WORKFLOW = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support"}


def _spans(*, backwards_step: bool) -> Sequence[ReadableSpan]:
    """Two runs of one step each (real SDK spans, injected times); in the second run the
    step ends 5 ms before it starts when ``backwards_step``."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    for index in range(2):
        start = T0 + index * 1_000 * MS
        workflow = tracer.start_span(
            "invoke_workflow support", start_time=start, attributes=WORKFLOW
        )
        context = trace.set_span_in_context(workflow)
        step = tracer.start_span(
            "retrieve docs",
            context=context,
            start_time=start + 10 * MS,
            attributes={"chainlat.step.kind": "data"},
        )
        backwards = backwards_step and index == 1
        step.end(end_time=start + (5 if backwards else 40) * MS)
        workflow.end(end_time=start + 50 * MS)
    provider.shutdown()
    return exporter.get_finished_spans()


def _protobuf(spans: Sequence[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def _post(receiver: Receiver, body: bytes, content_type: str) -> httpx.Response:
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    return httpx.post(url, content=body, headers={"Content-Type": content_type}, timeout=10)


def test_a_span_ending_before_it_starts_is_kept_and_reported_as_a_partial_success_in_protobuf(
    receiver: Receiver,
) -> None:
    answer = _post(receiver, _protobuf(_spans(backwards_step=True)), "application/x-protobuf")
    assert answer.status_code == 200
    assert answer.headers["Content-Type"] == "application/x-protobuf"
    partial = ExportTraceServiceResponse.FromString(answer.content).partial_success
    assert partial.rejected_spans == 1
    assert partial.error_message.startswith("1 span ends before it starts: kept, but chainlat")
    assert "span 'retrieve docs'" in partial.error_message
    assert "(end 1700000001005000000 < start 1700000001010000000 ns)" in partial.error_message
    receiver.stop()
    assert (receiver.counters.spans, receiver.counters.unread_spans) == (4, 1)
    assert len(received_span_ids(receiver.out)) == 4  # as sent: the reader drops it and says so
    counters = ReadCounters()
    runs = list(read_runs([receiver.out], counters=counters))
    assert counters.negative_spans == 1
    # Both runs are read; the second without its step, which the reader dropped.
    assert [[step.duration_ms for step in run.steps] for run in runs] == [[30.0], []]


def test_the_same_over_otlp_json_answers_in_json_with_the_count_as_a_string(
    receiver: Receiver,
) -> None:
    # As OTLP/JSON spells the SDK's request (ids in hex), by the receiver's own conversion.
    document = from_message(encode_spans(_spans(backwards_step=True)))
    answer = _post(receiver, json.dumps(document).encode(), "application/json")
    assert answer.status_code == 200
    partial = answer.json()["partialSuccess"]
    assert partial["rejectedSpans"] == "1"
    assert "span 'retrieve docs'" in partial["errorMessage"]


def test_a_request_every_span_of_which_is_read_gets_the_empty_answer_as_before(
    receiver: Receiver,
) -> None:
    answer = _post(receiver, _protobuf(_spans(backwards_step=False)), "application/x-protobuf")
    assert (answer.status_code, answer.content) == (200, b"")
    receiver.stop()
    assert (receiver.counters.spans, receiver.counters.unread_spans) == (4, 0)


def test_grpc_answers_the_partial_success_too(receiver: Receiver) -> None:
    with grpc_export(receiver.grpc_port) as export:
        answered = export(_protobuf(_spans(backwards_step=True)), timeout=10)
        clean = export(_protobuf(_spans(backwards_step=False)), timeout=10)
    partial = ExportTraceServiceResponse.FromString(answered).partial_success
    assert partial.rejected_spans == 1 and "span 'retrieve docs'" in partial.error_message
    assert clean == b""
    receiver.stop()
    assert (receiver.counters.spans, receiver.counters.unread_spans) == (8, 1)


def test_a_retried_request_counts_its_unread_spans_once(receiver: Receiver) -> None:
    """An exporter's retry of a request taken (the same spans) is told again, as it asks,
    but its spans are written once and so counted once; a batch holding one backwards span
    sent before and one new is counted for the new one only."""
    spans = _spans(backwards_step=True)
    body = _protobuf(spans)
    for _ in range(2):
        answer = _post(receiver, body, "application/x-protobuf")
        assert (
            ExportTraceServiceResponse.FromString(answer.content).partial_success.rejected_spans
            == 1
        )
    later = _spans(backwards_step=True)  # new ids: its backwards step is new too
    with grpc_export(receiver.grpc_port) as export:
        mixed = export(_protobuf([*spans, *later]), timeout=10)
    assert ExportTraceServiceResponse.FromString(mixed).partial_success.rejected_spans == 2
    receiver.stop()
    counters = receiver.counters
    assert (counters.spans, counters.resent_spans, counters.unread_spans) == (8, 8, 2)
    assert len(received_span_ids(receiver.out)) == 8


def _json_span(**fields: str) -> dict[str, object]:
    span: dict[str, object] = {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": "eee19b7ec3c1b174",
        "name": "invoke_workflow support",
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + MS),
    }
    span.update(fields)
    return span


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("spanId", "not-hex!", "spans[1].spanId: expected 16 hex digits"),
        ("traceId", "", "spans[1].traceId: expected a hex id"),
        ("endTimeUnixNano", "soon", "spans[1].endTimeUnixNano"),
    ],
)
def test_a_request_the_reader_would_skip_whole_is_refused_400_naming_where(
    receiver: Receiver, field: str, value: str, named: str
) -> None:
    good = _json_span()
    bad = _json_span(**{"spanId": "eee19b7ec3c1b175", field: value})
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [good, bad]}]}]}).encode()
    answer = _post(receiver, body, "application/json")
    assert answer.status_code == 400
    assert "spans chainlat cannot read: resourceSpans[0].scopeSpans[0]." + named in answer.text
    with pytest.raises(BadSpan):  # what the file's reader would have said of the line
        unread_spans(json.loads(body))
    receiver.stop()
    assert (receiver.counters.spans, receiver.counters.bad_requests) == (0, 1)
    assert "cannot read" in receiver.counters.first_problem
    assert Path(receiver.out).read_text() == ""


def test_unread_spans_counts_what_the_file_reader_drops_and_touches_no_tally(
    tmp_path: Path,
) -> None:
    document = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            _json_span(),
                            _json_span(spanId="eee19b7ec3c1b175", endTimeUnixNano=str(T0 - 1)),
                            _json_span(spanId="eee19b7ec3c1b176", endTimeUnixNano=str(T0 - 2)),
                        ]
                    }
                ]
            }
        ]
    }
    count, first = unread_spans(document)
    assert count == 2 and "(end 1699999999999999999 < start 1700000000000000000 ns)" in first
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(document) + "\n")
    counters = ReadCounters()
    list(read_runs([path], counters=counters))
    assert counters.negative_spans == 2  # the reader's own count: unread_spans added none
