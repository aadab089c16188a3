"""Two readings of traces OpenLIT writes (openlit 1.45.0, run against the sim): its
``gen_ai.server.time_to_first_token`` is in seconds where strands-agents writes the same
key in milliseconds, and the HTTP client spans of OpenTelemetry's httpx instrumentation
(which OpenLIT turns on) end at a streamed response's headers, so they never time a stream
(docs/attributes.md, rules 12 and 18). Spans written by the real OpenTelemetry SDK on an
injected clock, in the shapes OpenLIT and the httpx instrumentation give them."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from chainlat._core.conventions import ttft_ms_of
from chainlat._core.runs import WorkflowRun
from chainlat.traces import read_runs
from support.sdk_traces import MS, T0, sdk_tracer, workflow_span, written

OPENLIT: dict[str, AttributeValue] = {
    "telemetry.sdk.name": "openlit",
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "sim-answer",
}
"""What OpenLIT's openai instrumentation writes on every chat span (abridged)."""

HTTPX: dict[str, AttributeValue] = {
    "http.method": "POST",
    "http.url": "http://127.0.0.1:8766/v1/chat/completions",
    "http.status_code": 200,
}
"""What opentelemetry-instrumentation-httpx writes on its client span (the older HTTP
conventions, as OpenLIT's run gave them)."""


def _run(tmp_path: Path, call: dict[str, AttributeValue], wire_ms: tuple[int, int]) -> WorkflowRun:
    """A workflow 0-300 ms: the call 100-250 ms with ``call``'s attributes, and inside it
    the HTTP client span from ``wire_ms[0]`` to ``wire_ms[1]``."""
    tracer, exporter = sdk_tracer()
    root = workflow_span(tracer, "agent")
    span = tracer.start_span(
        "chat sim-answer",
        context=trace.set_span_in_context(root),
        start_time=T0 + 100 * MS,
        attributes=call,
    )
    wire = tracer.start_span(
        "POST",
        context=trace.set_span_in_context(span),
        kind=trace.SpanKind.CLIENT,
        start_time=T0 + wire_ms[0] * MS,
        attributes=HTTPX,
    )
    wire.end(end_time=T0 + wire_ms[1] * MS)
    span.end(end_time=T0 + 250 * MS)
    root.end(end_time=T0 + 300 * MS)
    [run] = read_runs([written(tmp_path / "run.jsonl", exporter)])
    return run


@pytest.mark.parametrize(
    ("attributes", "ms"),
    [
        ({**OPENLIT, "gen_ai.server.time_to_first_token": 0.04386}, 43.86),
        ({"gen_ai.server.time_to_first_token": 43.86}, 43.86),  # strands-agents: ms
        ({"telemetry.sdk.name": "openlit", "chainlat.latency.ttft_ms": 12.5}, 12.5),
    ],
)
def test_openlits_time_to_first_token_is_read_in_seconds(
    attributes: dict[str, object], ms: float
) -> None:
    assert ttft_ms_of(attributes) == pytest.approx(ms)


def test_openlits_streamed_answer_is_timed_to_its_first_token_in_seconds(
    tmp_path: Path,
) -> None:
    """0.044 s after the call's start (100 ms): the first output at 144 ms. Read in ms, the
    key put it 0.044 ms after the start."""
    call = {**OPENLIT, "gen_ai.request.stream": True, "gen_ai.server.time_to_first_token": 0.044}
    run = _run(tmp_path, call, (102, 104))
    assert run.rollup.first_output_ms == pytest.approx(144.0)
    [step] = [s for s in run.steps if s.kind == "inference"]
    assert step.ttft_ms == pytest.approx(44.0)


def test_an_http_span_that_saw_only_a_streams_headers_does_not_time_the_call(
    tmp_path: Path,
) -> None:
    """The POST ended at 104 ms, the response headers; the call's first token came at
    144 ms and the stream ran to 250. The call is the model's time, 150 ms, not the
    POST's 2 ms with the rest as overhead."""
    call = {**OPENLIT, "gen_ai.request.stream": True, "gen_ai.server.time_to_first_token": 0.044}
    run = _run(tmp_path, call, (102, 104))
    assert run.rollup.inference_ms == pytest.approx(150.0)
    assert run.rollup.overhead_ms == pytest.approx(150.0)


@pytest.mark.parametrize(
    "call",
    [
        # the first token came before the POST ended: it saw the stream
        {**OPENLIT, "gen_ai.request.stream": True, "gen_ai.server.time_to_first_token": 0.044},
        # a call that says it did not stream: its body came with the headers
        {**OPENLIT, "gen_ai.request.stream": False, "gen_ai.server.time_to_first_token": 0.15},
        # the AI SDK's call that did not stream, said by its operation id
        {"ai.operationId": "ai.generateText.doGenerate", "ai.model.id": "sim-plan"},
    ],
    ids=["after-first-token", "not-streamed", "ai-sdk-generate"],
)
def test_an_http_span_times_the_call_otherwise(
    tmp_path: Path, call: dict[str, AttributeValue]
) -> None:
    """The POST, 102-245 ms, times the call: 143 ms of inference, the framework's time
    around it overhead."""
    run = _run(tmp_path, call, (102, 245))
    assert run.rollup.inference_ms == pytest.approx(143.0)
    assert run.rollup.overhead_ms == pytest.approx(157.0)


@pytest.mark.parametrize(
    "call",
    [
        # opentelemetry-instrumentation-openai-v2 2.4b0 says nothing of streaming
        {"gen_ai.operation.name": "chat", "gen_ai.request.model": "sim-answer"},
        # the AI SDK's streamed call, said by its operation id, with no first chunk marked
        {"ai.operationId": "ai.streamText.doStream", "ai.model.id": "sim-answer"},
    ],
    ids=["says-nothing", "ai-sdk-stream"],
)
def test_an_http_span_that_may_have_missed_the_stream_does_not_time_the_call(
    tmp_path: Path, call: dict[str, AttributeValue]
) -> None:
    """A call that says nothing of streaming and marks no first token, or says it streamed:
    the POST, which ended at 104 ms, may have seen only its headers (openai-v2's streamed
    answer with the httpx instrumentation: 121.3 ms, the POST 1.2 ms). The call's own span
    times it, as it would without the POST: 150 ms, not 2 with the stream as overhead. Its
    first output is a bound at its start (rule 17)."""
    run = _run(tmp_path, call, (102, 104))
    assert run.rollup.inference_ms == pytest.approx(150.0)
    assert run.rollup.overhead_ms == pytest.approx(150.0)
    assert run.rollup.first_output_ms == pytest.approx(100.0)
    assert run.first_output_bound
