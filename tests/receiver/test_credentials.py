"""What an application sends with credentials in it (recorded request headers, a URL with a
password or a key) is written by the receiver without them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter
from opentelemetry.util.types import AttributeValue

from chainlat.receiver import Receiver
from chainlat.receiver.credentials import remove_credentials

SECRETS = ("sk-live-abcdefghijklmnopqrstuvwx", "hunter2", "session=s3cr3t")
ATTRIBUTES: dict[str, AttributeValue] = {
    "http.request.method": "POST",
    "url.full": "https://user:hunter2@api.example.com/v1/chat/completions?key=hunter2",
    "http.request.header.authorization": ("Bearer sk-live-abcdefghijklmnopqrstuvwx",),
    "http.request.header.cookie": ("session=s3cr3t",),
    "http.request.header.content-type": ("application/json",),
    "llm.token_count.prompt": 12,
}


def _export(exporter: SpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    span = provider.get_tracer("test").start_span("POST", attributes=ATTRIBUTES)
    span.add_event("retry", attributes={"http.response.header.set-cookie": ("session=s3cr3t",)})
    span.end()
    provider.shutdown()


@pytest.mark.parametrize("transport", ["http", "grpc"])
def test_credentials_sent_by_an_exporter_never_reach_the_file(
    receiver: Receiver, transport: str
) -> None:
    if transport == "http":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        _export(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{receiver.port}/v1/traces"))
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcExporter,
        )

        _export(GrpcExporter(endpoint=f"127.0.0.1:{receiver.grpc_port}", insecure=True))
    receiver.stop()
    text = Path(receiver.out).read_text()
    assert receiver.counters.spans == 1
    assert not [secret for secret in SECRETS if secret in text]
    span = json.loads(text)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    values = {a["key"]: a["value"] for a in span["attributes"]}
    # What is no credential is kept as sent: the route, the content type, the count.
    assert "api.example.com/v1/chat/completions" in values["url.full"]["stringValue"]
    content_type = values["http.request.header.content-type"]["arrayValue"]["values"]
    assert content_type == [{"stringValue": "application/json"}]
    assert values["llm.token_count.prompt"] in ({"intValue": "12"}, {"intValue": 12})
    assert values["http.request.header.authorization"] == {"stringValue": "[REDACTED]"}


def test_a_document_of_the_wrong_shape_is_left_as_it_is() -> None:
    odd: dict[str, Any] = {
        "resourceSpans": [None, {"scopeSpans": "x"}, {"scopeSpans": [{"spans": [1, {}]}]}]
    }
    before = json.dumps(odd)
    remove_credentials(odd)
    assert json.dumps(odd) == before
