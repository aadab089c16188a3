"""configure(): exporters, environment variables, the embedded default file, metrics."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chainlat
from chainlat._runtime import config as _config
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.testing import Capture, FakeClock
from support import FakeCollector


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in (
        "OTEL_SERVICE_NAME",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_HEADERS",
        "OTEL_TRACES_EXPORTER",
        "OTEL_RESOURCE_ATTRIBUTES",
        "CHAINLAT_TRACES_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    yield
    chainlat.shutdown()


def _exporters(provider: TracerProvider) -> list[object]:
    installed = _config._installed
    assert installed is not None and installed.provider is provider
    found: list[object] = []
    for processor in installed.processors:
        assert isinstance(processor, (BatchSpanProcessor, SimpleSpanProcessor))
        found.append(processor.span_exporter)
    return found


def _to_protobuf_json(line: str) -> ExportTraceServiceRequest:
    """Parse an OTLP/JSON line with protobuf's JSON mapping (ids are hex there, base64 here)."""
    doc = json.loads(line)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return json_format.ParseDict(doc, ExportTraceServiceRequest())


def test_default_is_the_traces_file_and_it_round_trips_every_span(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    provider = chainlat.configure("svc", traces_file=path, set_global=False, batch=False)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    assert [type(e) for e in _exporters(provider)] == [JsonLinesSpanExporter]

    with chainlat.workflow("w", tracer_provider=provider, tags=("a", "b")) as run:
        with chainlat.inference("m", tracer_provider=provider) as call:
            call.first_token()
            call.record_usage(3, 4)
        with pytest.raises(ValueError, match="bad"), chainlat.tool("t", tracer_provider=provider):
            raise ValueError("bad")
    assert run.rollup is not None
    assert chainlat.shutdown()

    lines = path.read_text().splitlines()
    assert len(lines) == 3  # one request per batch; SimpleSpanProcessor: one span each
    parsed = ExportTraceServiceRequest()
    for line in lines:
        parsed.MergeFrom(_to_protobuf_json(line))
    expected = ExportTraceServiceRequest()
    for span in memory.get_finished_spans():
        expected.MergeFrom(encode_spans([span]))
    assert parsed == expected
    resource = {a.key: a.value.string_value for a in parsed.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "svc"


def test_traces_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHAINLAT_TRACES_FILE", str(tmp_path / "env.jsonl"))
    provider = chainlat.configure(set_global=False)
    (exporter,) = _exporters(provider)
    assert isinstance(exporter, JsonLinesSpanExporter)
    assert exporter.path == str(tmp_path / "env.jsonl")


def test_otlp_endpoint_sends_protobuf_with_the_configured_headers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real OTLP/HTTP round trip to a receiver on 127.0.0.1."""
    with FakeCollector("ok") as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team=latency")
        provider = chainlat.configure(set_global=False, metric_readers=[])
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        assert [type(e) for e in _exporters(provider)] == [OTLPSpanExporter]
        with chainlat.workflow("over-the-wire", tracer_provider=provider):
            pass
        assert chainlat.shutdown()
    [received] = receiver.received
    assert (received.path, received.headers["x-team"]) == ("/v1/traces", "latency")
    request = ExportTraceServiceRequest.FromString(received.body)
    assert request.resource_spans[0].scope_spans[0].spans[0].name == "invoke_workflow over-the-wire"


def test_traces_endpoint_and_grpc_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4317")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    provider = chainlat.configure(set_global=False, metric_readers=[])
    (exporter,) = _exporters(provider)
    assert isinstance(exporter, OTLPSpanExporter)


@pytest.mark.parametrize(
    ("variable", "value"),
    [("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon"), ("OTEL_TRACES_EXPORTER", "zipkin")],
)
def test_bad_environment_is_a_config_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv(variable, value)
    with pytest.raises(chainlat.ConfigError, match=variable):
        chainlat.configure(set_global=False)


def test_traces_exporter_none_and_console(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert _exporters(chainlat.configure(set_global=False)) == []
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    (exporter,) = _exporters(chainlat.configure(exporter="console", set_global=False))
    assert isinstance(exporter, ConsoleSpanExporter)


def test_resource_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=ci,team=lat")
    provider = chainlat.configure(exporter="none", set_global=False)
    attributes = provider.resource.attributes
    assert attributes["service.name"] == "from-env"
    assert attributes["team"] == "lat"
    explicit = chainlat.configure("explicit", exporter="none", set_global=False)
    assert explicit.resource.attributes["service.name"] == "explicit"


def test_existing_provider_gets_chainlat_added_not_replaced() -> None:
    provider = TracerProvider(shutdown_on_exit=False)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    returned = chainlat.configure(tracer_provider=provider, exporter="none", clock=FakeClock())
    assert returned is provider
    with chainlat.workflow("w", tracer_provider=provider) as run:
        pass
    assert run.rollup is not None and run.rollup.total_ms == 0
    assert [s.name for s in memory.get_finished_spans()] == ["invoke_workflow w"]
    # configuring again does not stack a second chainlat processor
    chainlat.configure(tracer_provider=provider, exporter="none")
    with (
        chainlat.workflow("w", tracer_provider=provider),
        chainlat.tool("t", tracer_provider=provider),
    ):
        pass
    assert memory.get_finished_spans()[-2].attributes["chainlat.step.index"] == 0  # type: ignore[index]


def test_global_configuration_is_reused_across_calls(tmp_path: Path) -> None:
    first = chainlat.configure(traces_file=tmp_path / "a.jsonl")
    second = chainlat.configure(traces_file=tmp_path / "b.jsonl")
    assert first is second
    with chainlat.workflow("global"):
        pass
    chainlat.shutdown()
    assert not (tmp_path / "a.jsonl").exists()
    assert "invoke_workflow global" in (tmp_path / "b.jsonl").read_text()


def test_semconv_metrics_with_their_bucket_boundaries(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("w", tracer_provider=p):
        with chainlat.inference("m", provider="openai", tracer_provider=p) as call:
            clock.advance(150)
            call.first_token()
            clock.advance(50)
            call.record_usage(input_tokens=10, output_tokens=5)
    data = cap.metric_reader.get_metrics_data()
    assert data is not None
    points: dict[str, Any] = {
        m.name: m.data.data_points
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
    }
    duration = points["gen_ai.client.operation.duration"][0]
    assert duration.sum == pytest.approx(0.2)
    assert list(duration.explicit_bounds)[:3] == [0.01, 0.02, 0.04]
    assert dict(duration.attributes) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
    }
    tokens = points["gen_ai.client.token.usage"]
    assert sorted((dict(t.attributes)["gen_ai.token.type"], t.sum) for t in tokens) == [
        ("input", 10),
        ("output", 5),
    ]
    assert points["gen_ai.client.operation.time_to_first_chunk"][0].sum == pytest.approx(0.15)
    workflow = points["gen_ai.workflow.duration"][0]
    assert list(workflow.explicit_bounds)[:3] == [1, 5, 10]


def test_metric_readers_are_wired_by_configure() -> None:
    reader = InMemoryMetricReader()
    provider = chainlat.configure(exporter="none", metric_readers=[reader], set_global=False)
    with chainlat.inference("m", tracer_provider=provider):
        pass
    data = reader.get_metrics_data()
    assert data is not None
    names = [m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
    assert names == ["gen_ai.client.operation.duration"]


def test_unwritable_traces_file_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    provider = chainlat.configure(traces_file=blocker / "x.jsonl", set_global=False, batch=False)
    with chainlat.workflow("w", tracer_provider=provider):
        pass
    assert "cannot write traces" in caplog.text


def test_a_call_seen_twice_records_its_duration_metric_once(cap: Capture) -> None:
    """A hand-written inference around a wire-level one: one data point, the inner span's."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("w", tracer_provider=p):
        with chainlat.inference("m", tracer_provider=p):
            clock.advance(5)
            with chainlat.inference("m", tracer_provider=p):
                clock.advance(20)
            clock.advance(5)
    data = cap.metric_reader.get_metrics_data()
    assert data is not None
    [duration] = [
        m.data.data_points
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == "gen_ai.client.operation.duration"
    ]
    [point] = list(duration)
    assert isinstance(point, HistogramDataPoint)
    assert point.count == 1
    assert point.sum == pytest.approx(0.020)
    assert cap.processor._seen_twice == set()
