"""Spans of other instrumentations, made with the OpenTelemetry SDK alone: the live rollup and
the trace reader give them the same numbers chainlat's own spans would get.

Attribute sets are those the instrumentations write (see tests/support/convention_samples.py for
their sources); the spans are started as callback-based instrumentations start them, without
making them current, so the wire-level span lands beside the framework span.
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry import trace
from opentelemetry.util.types import Attributes

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.testing import Capture
from chainlat.traces import read_runs

OPENINFERENCE_LLM: Attributes = {
    "openinference.span.kind": "LLM",
    "llm.model_name": "gpt-4o-mini",
    "llm.token_count.prompt": 120,
    "llm.token_count.completion": 30,
}


def _agent(cap: Capture, *, http: bool = False) -> None:
    """retrieval 10 ms, a model call seen twice (framework 40 ms, wire 36 ms), a tool 5 ms,
    all under a LangGraph chain span that ends last. ``http``: the second span of the call
    carries the HTTP request method, as chainlat.httpx writes it (else it is a model call
    span of another instrumentation)."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.langchain")
    wire = p.get_tracer("chainlat")
    graph = oi.start_span(
        "LangGraph", attributes={"openinference.span.kind": "CHAIN"}, start_time=clock()
    )
    in_graph = trace.set_span_in_context(graph)
    clock.advance(1)
    retriever = oi.start_span(
        "retrieve",
        context=in_graph,
        attributes={"openinference.span.kind": "RETRIEVER"},
        start_time=clock(),
    )
    retriever.end(end_time=clock.advance(10))
    llm = oi.start_span(
        "ChatOpenAI", context=in_graph, attributes=OPENINFERENCE_LLM, start_time=clock()
    )
    # The HTTP-level span: current context is not the LLM span, so it is a sibling of graph.
    call = wire.start_span(
        "chat gpt-4o-mini",
        attributes={
            "chainlat.step.kind": "inference",
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
            **({"http.request.method": "POST"} if http else {}),
        },
        start_time=clock.advance(2),
    )
    call.end(end_time=clock.advance(36))
    llm.end(end_time=clock.advance(2))
    tool = oi.start_span(
        "lookup",
        context=in_graph,
        attributes={"openinference.span.kind": "TOOL", "tool.name": "lookup"},
        start_time=clock(),
    )
    tool.end(end_time=clock.advance(5))
    graph.end(end_time=clock.advance(3))


def test_openinference_spans_and_the_wire_span_roll_up_inside_a_workflow(cap: Capture) -> None:
    with chainlat.workflow("agent", tracer_provider=cap.provider) as run:
        _agent(cap)
        cap.clock.advance(1)
    r = run.rollup
    assert r is not None
    assert (r.inference_count, r.data_count, r.tool_count) == (1, 1, 1)
    assert (r.input_tokens, r.output_tokens) == (120, 30)
    assert (r.data_ms, r.inference_ms, r.tool_ms) == (10, 40, 5)
    assert r.overhead_ms == r.total_ms - 55
    assert r.critical_path == ("retrieve", "ChatOpenAI", "lookup")


def test_the_wire_span_beside_a_callback_span_times_the_call_live_and_read_back(
    cap: Capture, tmp_path: Path
) -> None:
    """The framework's 4 ms around the HTTP call are overhead, as for the plain SDK."""
    with chainlat.workflow("agent", tracer_provider=cap.provider) as run:
        _agent(cap, http=True)
        cap.clock.advance(1)
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    [read] = read_runs([path])
    assert run.rollup is not None
    for r in (run.rollup, read.recomputed_rollup()):
        assert (r.inference_count, r.data_count, r.tool_count) == (1, 1, 1)
        assert (r.input_tokens, r.output_tokens) == (120, 30)
        assert (r.data_ms, r.inference_ms, r.tool_ms) == (10, 36, 5)
        assert r.overhead_ms == r.total_ms - 51
        assert r.critical_path == ("retrieve", "ChatOpenAI", "lookup")


def test_the_same_trace_read_back_without_a_workflow_is_a_run_of_its_chain(
    cap: Capture, tmp_path: Path
) -> None:
    _agent(cap)
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    [run] = read_runs([path])
    assert run.workflow == "LangGraph"
    r = run.rollup
    assert (r.inference_count, r.data_count, r.tool_count) == (1, 1, 1)
    assert (r.input_tokens, r.output_tokens) == (120, 30)
    assert (r.data_ms, r.inference_ms, r.tool_ms) == (10, 40, 5)
    assert [s.name for s in run.steps] == ["retrieve", "ChatOpenAI", "lookup"]


def test_an_invoke_agent_span_is_a_run_named_by_its_agent(cap: Capture, tmp_path: Path) -> None:
    p, clock = cap.provider, cap.clock
    tracer = p.get_tracer("pydantic-ai")
    agent = tracer.start_span(
        "invoke_agent support",
        attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
        start_time=clock(),
    )
    chat = tracer.start_span(
        "chat gpt-4o",
        context=trace.set_span_in_context(agent),
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 5,
            "gen_ai.client.operation.time_to_first_chunk": 0.25,
        },
        start_time=clock.advance(1),
    )
    chat.end(end_time=clock.advance(400))
    agent.end(end_time=clock.advance(1))
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    [run] = read_runs([path])
    assert (run.workflow, run.rollup.inference_ms, run.rollup.input_tokens) == ("support", 400, 5)
    [step] = run.steps
    assert step.ttft_ms == 250.0


def test_a_call_written_after_its_workflow_ended_is_read_from_the_trace(
    cap: Capture, tmp_path: Path
) -> None:
    """LiteLLM writes a streamed call's span from a worker thread once the stream is done,
    with the call's own times: the workflow has ended, so its live rollup missed the call;
    the reader, finding more steps in the trace than the recorded rollup counted,
    recomputes the run from the spans."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("agent", tracer_provider=p) as run:
        workflow_span = trace.get_current_span()
        start = clock()
        clock.advance(50)
    late = p.get_tracer("litellm").start_span(
        "litellm_request",
        context=trace.set_span_in_context(workflow_span),
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.usage.input_tokens": 53,
        },
        start_time=start + 5_000_000,
    )
    late.end(end_time=start + 45_000_000)
    assert run.rollup is not None
    assert run.rollup.inference_count == 0  # the live rollup could not see it
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    [read] = read_runs([path])
    assert (read.rollup.inference_count, read.rollup.input_tokens) == (1, 53)
    assert read.rollup.inference_ms == 40
