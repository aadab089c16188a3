"""When a model call ends and gives its first token (the general rules behind the misses of
issue 23, on spans made with the OpenTelemetry SDK alone, live and read back from a trace
file): a span is timed to its last event or child, every first-token key is read
(strands-agents' ``gen_ai.server.time_to_first_token`` in ms, OpenLLMetry's
"llm.content.completion.chunk"), and explicit marks win over derived ones."""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace

import chainlat
from chainlat._core.rollup import SpanRecord, compute_rollup
from chainlat._core.runs import steps_of
from chainlat.report.waterfall import waterfall
from chainlat.testing import Capture
from support.readback import both_ways, openinference_llm
from support.records import MS

# --- a span is timed to its last event or child ------------------------------------------


def test_a_span_whose_first_token_event_comes_after_its_end_is_timed_to_it(
    cap: Capture, tmp_path: Path
) -> None:
    """LlamaIndex through OpenInference ends ``OpenAI.stream_chat`` when the stream is handed
    back (2 ms) and records its first token at +207 ms: the call lasted 207 ms."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.llama_index")
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        span = oi.start_span("OpenAI.stream_chat", attributes=openinference_llm("gpt-4o-mini"),
                             start_time=start)  # fmt: skip
        span.add_event("First Token Stream Event", timestamp=start + 207 * MS)
        span.end(end_time=start + 2 * MS)
        clock.advance(210)
    assert run.rollup is not None
    assert (run.rollup.inference_ms, run.rollup.inference_count) == (207, 1)
    for read in both_ways(cap, tmp_path):
        assert read.recomputed_rollup().inference_ms == 207
        [step] = read.steps
        assert (step.duration_ms, step.ttft_ms, step.extended) == (207, 207, True)
        assert "ended before its own events: took at least this" in waterfall(read)


def test_a_step_whose_child_ends_after_it_is_timed_to_the_child() -> None:
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100 * MS, "workflow")
    spans = [
        SpanRecord(2, 1, "retrieve", 10 * MS, 12 * MS, "data"),
        SpanRecord(3, 2, "db query", 11 * MS, 60 * MS),  # the stage handed back a lazy cursor
    ]
    r = compute_rollup(root, spans)
    assert (r.data_ms, r.data_sum_ms) == (50, 50)
    [step] = steps_of(root, spans)
    assert (step.end_ns, step.extended) == (60 * MS, True)


# --- every TTFT key ----------------------------------------------------------------------


def test_strands_time_to_first_token_in_ms_is_read(cap: Capture, tmp_path: Path) -> None:
    p, clock = cap.provider, cap.clock
    tracer = p.get_tracer("strands.telemetry.tracer")
    agent = tracer.start_span("invoke_agent helper", start_time=clock(), attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"})  # fmt: skip
    chat = tracer.start_span(
        "chat",
        context=trace.set_span_in_context(agent),
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.server.time_to_first_token": 150,
        },
        start_time=clock.advance(1),
    )
    chat.end(end_time=clock.advance(400))
    agent.end(end_time=clock.advance(1))
    for read in both_ways(cap, tmp_path):
        [step] = read.steps
        assert step.ttft_ms == 150
        assert read.rollup.first_output_ms == 151


def test_openllmetry_first_chunk_event_gives_the_first_token(cap: Capture, tmp_path: Path) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        span = p.get_tracer("opentelemetry.instrumentation.openai").start_span(
            "openai.chat",
            attributes={"llm.request.type": "chat", "gen_ai.request.model": "m"},
            start_time=start,
        )
        span.add_event("llm.content.completion.chunk", timestamp=start + 80 * MS)
        span.add_event("llm.content.completion.chunk", timestamp=start + 90 * MS)
        span.end(end_time=start + 100 * MS)
        clock.advance(101)
    assert run.rollup is not None
    assert run.rollup.first_output_ms == 81
    for read in both_ways(cap, tmp_path):
        assert [s.ttft_ms for s in read.steps] == [80]


# --- explicit marks win over derived ones ------------------------------------------------


def test_an_explicit_first_token_on_the_user_facing_call_wins_over_the_wire_chunk(
    cap: Capture, tmp_path: Path
) -> None:
    """The HTTP-level span inside saw its first chunk at +25 ms; the application marked its
    first token at +30 ms (after parsing it): the mark is the first output."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("chat", tracer_provider=p) as run:
        with chainlat.inference("m", user_facing=True, tracer_provider=p) as call:
            start = clock.advance(5)
            wire = p.get_tracer("chainlat").start_span(
                "chat m",
                attributes={
                    "chainlat.step.kind": "inference",
                    "gen_ai.request.model": "m",
                    "gen_ai.response.time_to_first_chunk": 0.02,
                    "http.request.method": "POST",
                },
                start_time=start,
            )
            clock.advance(25)
            call.first_token()
            wire.end(end_time=clock.advance(50))
            clock.advance(2)
        clock.advance(3)
    assert run.rollup is not None
    assert run.rollup.first_output_ms == 30
    for read in both_ways(cap, tmp_path):
        assert read.recomputed_rollup().first_output_ms == 30
