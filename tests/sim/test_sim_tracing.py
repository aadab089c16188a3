"""chainlat.sim's own spans: server spans join the client's trace with queue, prefill and
decode children, faults are errors, and an OTLP endpoint receives them."""

from __future__ import annotations

import httpx
import openai
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from chainlat.sim import SimServer
from support import FakeCollector, StartSim
from support.sim_checks import EARLY_MS, MESSAGES, NETWORK_MS, PROFILE, memory_provider


def _by_name(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = [s for s in spans if s.name == name]
    return span


def test_server_spans_join_the_client_trace_with_phase_children(start_sim: StartSim) -> None:
    client_provider, client_spans = memory_provider()
    server_provider, server_spans = memory_provider()
    s = start_sim(profiles=[PROFILE], network_delay_ms=NETWORK_MS, tracer_provider=server_provider)
    with openai.OpenAI(base_url=s.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        tracer = client_provider.get_tracer("test")
        with tracer.start_as_current_span("client call") as client_span:
            carrier: dict[str, str] = {}
            TraceContextTextMapPropagator().inject(carrier)
            c.chat.completions.create(model="sim-test", messages=MESSAGES, extra_headers=carrier)
        # Spans end before the response's last bytes leave: no waiting needed.
        spans = server_spans.get_finished_spans()
    assert len(spans) == 4
    server = _by_name(spans, "POST /v1/chat/completions")
    caller = client_span.get_span_context()
    assert server.kind is trace.SpanKind.SERVER
    assert server.parent is not None
    assert server.parent.span_id == caller.span_id
    assert server.context is not None
    assert server.context.trace_id == caller.trace_id
    assert server.instrumentation_scope is not None
    assert server.instrumentation_scope.name == "chainlat.sim"
    assert server.attributes is not None
    assert server.attributes["gen_ai.request.model"] == "sim-test"
    assert server.attributes["gen_ai.usage.input_tokens"] == 4
    assert server.attributes["gen_ai.usage.output_tokens"] == 20
    assert server.attributes["http.response.status_code"] == 200
    queue, prefill, decode = (_by_name(spans, n) for n in ("queue", "prefill", "decode"))
    for child in (queue, prefill, decode):
        assert child.parent is not None
        assert child.parent.span_id == server.context.span_id
    assert server.start_time is not None and server.end_time is not None
    assert queue.start_time is not None and queue.end_time is not None
    assert prefill.start_time is not None and prefill.end_time is not None
    assert decode.start_time is not None and decode.end_time is not None
    assert server.start_time <= queue.start_time
    assert queue.end_time == prefill.start_time
    assert prefill.end_time == decode.start_time
    assert decode.end_time <= server.end_time
    assert (prefill.end_time - prefill.start_time) / 1e6 >= 120.0 - 0.1
    assert (decode.end_time - prefill.start_time) / 1e6 >= 120.0 + 285.0 - 0.1
    # The simulated network transit lies between the client's start and the server's.
    (client_finished,) = client_spans.get_finished_spans()
    assert client_finished.start_time is not None
    assert (server.start_time - client_finished.start_time) / 1e6 >= NETWORK_MS - EARLY_MS


def test_fault_spans_are_errors(start_sim: StartSim) -> None:
    provider, exporter = memory_provider()
    s = start_sim(profiles=[PROFILE], tracer_provider=provider)
    with (
        openai.OpenAI(base_url=s.base_url + "/v1", api_key="sk-test", max_retries=0) as c,
        pytest.raises(openai.InternalServerError),
    ):
        c.chat.completions.create(
            model="sim-test", messages=MESSAGES, extra_headers={"x-sim-status": "500"}
        )
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is trace.StatusCode.ERROR
    assert span.attributes is not None
    assert span.attributes["error.type"] == "500"


def test_otlp_endpoint_exports_with_service_name_chainlat_sim() -> None:
    with FakeCollector("ok") as collector:
        with SimServer([PROFILE], otlp_endpoint=collector.endpoint) as s, httpx.Client() as http:
            http.get(s.base_url + "/health")
        # stop() flushed the server's own provider.
        names = [
            (
                {a.key: a.value.string_value for a in rs.resource.attributes}["service.name"],
                span.name,
            )
            for request in collector.traces
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]
    assert names == [("chainlat-sim", "GET /health")]
