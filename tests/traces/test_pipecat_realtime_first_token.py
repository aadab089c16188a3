"""Rule 15 of docs/attributes.md, from the far side: a first token after the end of its
call is no time either. Read without the Pipecat row's ``untimed`` (its ``service.operation``
taken off every span), the recorded realtime tool turns
(tests/data/foreign/pipecat/realtime-tool-observer.jsonl) give each answer that called a
function Pipecat's ``metrics.ttfb``, the service's last, past the answer's end: the call's
first token is then not known, and never used as an instant."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chainlat import WorkflowRun
from chainlat.traces import read_runs
from chainlat.traces.sdk import runs_from_spans
from support.tracegen import DATA_DIR, Spans, spans_rewritten

TRACES = DATA_DIR / "foreign" / "pipecat" / "realtime-tool-observer.jsonl"
MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def _without_service_operation(tmp_path: Path) -> Path:
    def edit(spans: Spans) -> Spans:
        for span in spans:
            span["attributes"] = [
                kv for kv in span.get("attributes", []) if kv["key"] != "service.operation"
            ]
        return spans

    return spans_rewritten(TRACES, tmp_path / "no-service-operation.jsonl", edit)


def test_a_realtime_answers_first_token_past_its_end_is_not_known(tmp_path: Path) -> None:
    runs = sorted(read_runs([_without_service_operation(tmp_path)]), key=lambda r: r.start_ns)
    assert [(r.rollup.unusable, r.rollup.unusable_values) for r in runs] == [
        (("realtime sim-realtime",), ("a first token 317.447 ms after its end",)),
        (("realtime sim-realtime",), ("a first token 306.396 ms after its end",)),
        (("realtime sim-realtime",), ("a first token 305.948 ms after its end",)),
    ]
    # The observer's mark gives the first output, measured; the split is the same as
    # with the row (tests/traces/test_pipecat_realtime_tool.py).
    assert [r.rollup.unusable_parts for r in runs] == [(), (), ()]
    assert [r.first_output_ms for r in runs] == [1610.350842, 1233.981952, 1154.529415]
    assert [r.rollup.first_output_inference_ms for r in runs] == [
        942.086085,
        647.678111,
        625.360884,
    ]


def _run(ttft_ms: float) -> WorkflowRun:
    """A workflow 0-1000 ms with one call 100-600 ms, its first token ``ttft_ms`` after its
    start, on an injected clock."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    root = tracer.start_span(
        "invoke_workflow chat",
        start_time=T0,
        attributes={"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "chat"},
    )
    call = tracer.start_span(
        "chat gpt-4o",
        context=trace.set_span_in_context(root),
        start_time=T0 + 100 * MS,
        attributes={
            "chainlat.step.kind": "inference",
            "gen_ai.request.model": "gpt-4o",
            "chainlat.latency.ttft_ms": ttft_ms,
        },
    )
    call.end(end_time=T0 + 600 * MS)
    root.end(end_time=T0 + 1000 * MS)
    (run,) = runs_from_spans(exporter.get_finished_spans())
    return run


def test_a_first_token_after_its_call_ended_is_not_used() -> None:
    """The first token 700 ms after a 500 ms call's start: 200 ms past its end. The first
    output is then a lower bound, the call's start."""
    run = _run(700.0)
    assert run.first_output_ms == 100.0
    assert run.rollup.unusable == ("chat gpt-4o",)
    assert run.rollup.unusable_values == ("a first token 200 ms after its end",)
    assert run.rollup.unusable_parts == ("first_output", "first_output_split")


def test_a_first_token_at_its_calls_end_is_a_measurement() -> None:
    run = _run(500.0)
    assert run.first_output_ms == 600.0
    assert run.rollup.unusable == ()
