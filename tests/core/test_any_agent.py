"""Traces nobody here wrote, read by what every trace has (docs/attributes.md, rule 14).

Each trace is built with the OpenTelemetry SDK on an injected clock (whole milliseconds from
T0, or nanoseconds where the test says so), exported and read as chainlat reads any spans:
the Vercel AI SDK's ``ai.*`` spans, Haystack's ``haystack.*`` spans, a model call known only
by its model and tokens, an HTTP client span of any language to a model route, starts
rounded to the millisecond as OpenTelemetry JS writes them, and the run rules (one request,
one run; sessions are containers).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from chainlat._core import clock
from chainlat._core.model_routes import MODEL_ROUTES, model_operation
from chainlat._core.runs import WorkflowRun
from chainlat._core.trace_runs import runs_of_trace
from chainlat.httpx._routes import DEFAULT_ROUTES
from chainlat.traces import ReadCounters
from chainlat.traces._assemble import Trace, runs_of
from chainlat.traces.sdk import runs_from_spans, traced_span

MS = 1_000_000
T0 = 1_796_571_058_099_000_000


class Tracer:
    """Spans on an injected clock: times in ms from T0 (floats allowed), ends explicit."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("any-agent")

    def span(
        self,
        name: str,
        parent: Span | None,
        start_ms: float,
        end_ms: float | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        started = self.tracer.start_span(
            name, context=context, start_time=T0 + round(start_ms * MS), attributes=attributes
        )
        if end_ms is not None:
            started.end(end_time=T0 + round(end_ms * MS))
        return started

    def end(self, span: Span, end_ms: float) -> None:
        span.end(end_time=T0 + round(end_ms * MS))

    def runs(self) -> list[WorkflowRun]:
        return sorted(runs_from_spans(self.exporter.get_finished_spans()), key=_start)

    def runs_with_roots(self) -> list[WorkflowRun]:
        """The runs with ``--roots``, less those inside another (steps of it)."""
        spans = [traced_span(s) for s in self.exporter.get_finished_spans()]
        found = runs_of_trace("t", [s for s in spans if s is not None], roots=True)
        return [run for run in found if not run.nested]

    def counted(self) -> tuple[list[WorkflowRun], ReadCounters]:
        spans = [traced_span(s) for s in self.exporter.get_finished_spans()]
        counters = ReadCounters()
        found = list(runs_of([Trace("t", tuple(s for s in spans if s is not None))], counters))
        return found, counters


def _start(run: WorkflowRun) -> int:
    return run.start_ns


def _legacy_ai_sdk(t: Tracer, *, wire: bool = False) -> None:
    """The AI SDK's legacy spans as ai 7.0.185 wrote them for the interop agent (fixtures in
    tests/data/foreign/ai-sdk): a plan call that asks for a tool, the tool as a child of that
    call's doGenerate, a second plan call, then a streamed answer; starts on whole ms."""
    root = t.span("agent", None, 0)
    plan = t.span(
        "ai.generateText",
        root,
        32,
        None,
        {
            "ai.operationId": "ai.generateText",
            "ai.model.id": "sim-plan",
            "ai.usage.inputTokens": 285,
            "ai.usage.outputTokens": 25,
        },
    )
    call = {"ai.model.id": "sim-plan", "gen_ai.system": "openai.chat",
            "gen_ai.request.model": "sim-plan"}  # fmt: skip
    first = t.span(
        "ai.generateText.doGenerate",
        plan,
        33,
        None,
        {
            "ai.operationId": "ai.generateText.doGenerate",
            **call,
            "gen_ai.usage.input_tokens": 131,
            "gen_ai.usage.output_tokens": 5,
            "ai.response.finishReason": "tool-calls",
        },
    )
    if wire:
        t.span(
            "POST",
            first,
            34,
            130.25,
            {
                "http.request.method": "POST",
                "url.full": "http://127.0.0.1:1/v1/chat/completions",
            },
        )
    t.span(
        "ai.toolCall",
        first,
        134,
        160.5,
        {
            "ai.operationId": "ai.toolCall",
            "ai.toolCall.name": "lookup_order",
        },
    )
    t.end(first, 160.75)
    second = t.span(
        "ai.generateText.doGenerate",
        plan,
        161,
        None,
        {
            "ai.operationId": "ai.generateText.doGenerate",
            **call,
            "gen_ai.usage.input_tokens": 154,
            "gen_ai.usage.output_tokens": 20,
        },
    )
    if wire:
        t.span(
            "POST",
            second,
            162,
            270.5,
            {
                "http.request.method": "POST",
                "url.full": "http://127.0.0.1:1/v1/chat/completions",
            },
        )
    t.end(second, 280.7)
    t.end(plan, 281.0)
    answer = t.span("ai.streamText", root, 282, None, {"ai.operationId": "ai.streamText"})
    stream = t.span(
        "ai.streamText.doStream",
        answer,
        283,
        None,
        {
            "ai.operationId": "ai.streamText.doStream",
            "ai.model.id": "sim-answer",
            "gen_ai.request.model": "sim-answer",
            "ai.response.msToFirstChunk": 45.5,
            "gen_ai.usage.input_tokens": 53,
            "gen_ai.usage.output_tokens": 20,
        },
    )
    if wire:
        t.span(
            "POST",
            stream,
            284,
            402.6,
            {
                "http.request.method": "POST",
                "url.full": "http://127.0.0.1:1/v1/chat/completions",
            },
        )
    t.end(stream, 403.8)
    t.end(answer, 404.5)
    t.end(root, 405.25)


def test_the_ai_sdks_legacy_spans_read_as_calls_a_tool_tokens_and_a_first_output() -> None:
    t = Tracer()
    _legacy_ai_sdk(t)
    [run] = t.runs_with_roots()
    rollup = run.rollup
    assert (rollup.inference_count, rollup.tool_count) == (3, 1)
    assert (rollup.input_tokens, rollup.output_tokens) == (131 + 154 + 53, 5 + 20 + 20)
    # The streamed answer's first chunk, 45.5 ms after its doStream started at 283 ms.
    assert rollup.first_output_ms == pytest.approx(283 + 45.5)
    # The tool inside the first call's span is the tool's; the rest of that span the call's.
    assert rollup.tool_ms == pytest.approx(26.5)
    assert [s.name for s in run.steps if s.kind == "tool"] == ["lookup_order"]


def test_the_ai_sdks_call_span_is_a_run_of_its_own_when_nothing_holds_it() -> None:
    t = Tracer()
    _legacy_ai_sdk(t)
    runs, counters = t.counted()
    assert [r.workflow for r in runs] == ["ai.generateText", "ai.streamText"]
    # Two runs side by side under a span that is no run: said in one line, naming --roots.
    assert (counters.side_by_side_traces, counters.side_by_side_runs) == (1, 2)
    [line] = [w for w in counters.warnings() if "side by side" in w]
    assert "--roots" in line


def test_a_foreign_http_client_span_times_the_call_at_the_wire() -> None:
    """Undici's POST under the AI SDK's doGenerate: only its instants are the model's; the
    doGenerate's time around it and the tool's wait are not inference."""
    t = Tracer()
    _legacy_ai_sdk(t, wire=True)
    [run] = t.runs_with_roots()
    rollup = run.rollup
    assert rollup.inference_count == 3  # each POST is its call seen twice, counted once
    assert rollup.inference_ms == pytest.approx((130.25 - 34) + (270.5 - 162) + (402.6 - 284))
    assert rollup.tool_ms == pytest.approx(26.5)


def test_without_the_wire_a_framework_timed_run_is_said_to_include_its_time() -> None:
    t = Tracer()
    _legacy_ai_sdk(t)
    _, counters = t.counted()
    assert counters.framework_timed_runs == 2
    t = Tracer()
    _legacy_ai_sdk(t, wire=True)
    _, counters = t.counted()
    assert counters.framework_timed_runs == 0


def test_a_sibling_within_the_clocks_rounding_of_its_predecessor_is_sequential() -> None:
    """OpenTelemetry JS: starts on whole ms, ends finer. The second call started after the
    first ended (at 100.4 ms), but its start is written as 100 ms: the walk keeps both."""
    t = Tracer()
    root = t.span("invoke_agent a", None, 0, None, {"gen_ai.operation.name": "invoke_agent"})
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    t.span("chat m", root, 1, 100.4, chat)
    t.span("execute_tool t", root, 100, 120.3, {"gen_ai.operation.name": "execute_tool"})
    t.span("chat m", root, 120, 230.7, chat)
    t.end(root, 231.2)
    [run] = t.runs()
    rollup = run.rollup
    assert rollup.inference_count == 2
    # Each earlier sibling is cut where the next one's (rounded) start is.
    assert rollup.inference_ms == pytest.approx((100 - 1) + (230.7 - 120))
    assert rollup.tool_ms == pytest.approx(120 - 100)
    assert rollup.overhead_ms == pytest.approx(1 + (231.2 - 230.7))
    assert list(rollup.critical_path) == ["chat m", "execute_tool t", "chat m"]
    # No span says whether the calls streamed (rule 17): the last call's start bounds the
    # first output, rather than its end passing for it.
    assert rollup.first_output_ms == pytest.approx(120.0)
    assert rollup.bound_in("first_output")


def test_the_same_trace_on_a_nanosecond_clock_keeps_the_overlap() -> None:
    """The allowance is the clock's, not a tolerance: with starts written to the
    nanosecond, a call that ran 0.4 ms into the tool's start is parallel, as before."""
    t = Tracer()
    root = t.span("invoke_agent a", None, 0.000001, None, {"gen_ai.operation.name": "invoke_agent"})
    chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    t.span("chat m", root, 1.000003, 100.4, chat)
    t.span("execute_tool t", root, 100.000007, 120.3, {"gen_ai.operation.name": "execute_tool"})
    t.end(root, 120.5)
    [run] = t.runs()
    assert list(run.rollup.critical_path) == ["execute_tool t"]


def test_the_clocks_slack_is_the_starts_rounding_when_ends_are_finer() -> None:
    assert clock.slack_ns([T0, T0 + 5 * MS], [T0 + 417, T0 + 9 * MS + 1]) == MS
    # A clock that rounds starts and ends alike keeps the order it times: no slack.
    assert clock.slack_ns([T0, T0 + 5 * MS], [T0 + 3 * MS, T0 + 9 * MS]) == 0
    assert clock.slack_ns([T0 + 1_000, T0 + 5_000], [T0 + 3_001, T0 + 9_000]) == 1_000
    assert clock.slack_ns([T0 + 1], [T0 + 2]) == 0
    assert clock.resolution_ns([T0]) == clock.EXACT_NS  # one start says nothing


def test_a_coarse_clock_is_stated_once_with_its_resolution() -> None:
    t = Tracer()
    _legacy_ai_sdk(t)
    _, counters = t.counted()
    assert (counters.coarse_clock_runs, counters.coarse_clock_ns) == (2, MS)
    [line] = [w for w in counters.warnings() if "clock" in w]
    assert "1 ms" in line


def test_two_run_roots_of_one_name_nested_are_one_run_seen_twice() -> None:
    """Google ADK 2.13: invoke_workflow "support" holds invoke_agent "support"."""
    t = Tracer()
    outer = t.span(
        "invoke_workflow support",
        None,
        0,
        None,
        {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support"},
    )
    agent = t.span(
        "invoke_agent support",
        outer,
        0.5,
        None,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support"},
    )
    sub = t.span(
        "invoke_agent planner",
        agent,
        1,
        None,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    )
    t.span(
        "generate_content m",
        sub,
        2,
        90,
        {"gen_ai.operation.name": "generate_content", "gen_ai.request.model": "m"},
    )
    t.end(sub, 91)
    t.end(agent, 99)
    t.end(outer, 100)
    runs = t.runs()
    assert [(r.workflow, r.nested) for r in runs] == [("support", False), ("planner", True)]
    assert runs[0].rollup.inference_ms == pytest.approx(88)


def test_a_session_is_a_container_and_its_turns_are_the_runs() -> None:
    t = Tracer()
    session = t.span(
        "agent_session",
        None,
        0,
        None,
        {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent_session"},
    )
    for base in (1000, 5000):
        turn = t.span(
            "agent_turn",
            session,
            base,
            None,
            {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Assistant"},
        )
        t.span(
            "llm_request",
            turn,
            base + 10,
            base + 600,
            {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        )
        t.end(turn, base + 700)
    t.end(session, 9000)
    runs = t.runs()
    assert [(r.workflow, r.nested, r.total_ms) for r in runs] == [
        ("Assistant", False, 700.0),
        ("Assistant", False, 700.0),
    ]


def test_a_turn_inside_an_applications_workflow_is_a_step_of_it() -> None:
    """A framework's turn (Pipecat's ``turn``) wrapped in chainlat's workflow: one request."""
    t = Tracer()
    outer = t.span(
        "invoke_workflow voice-turn",
        None,
        0,
        None,
        {"chainlat.step.kind": "workflow", "gen_ai.workflow.name": "voice-turn"},
    )
    turn = t.span("turn", outer, 1, None, {"turn.number": 1})
    t.span("llm", turn, 2, 50, {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
    t.end(turn, 60)
    t.end(outer, 61)
    runs, _ = t.counted()
    top = [r for r in runs if not r.nested]
    assert [r.workflow for r in top] == ["voice-turn"]


def _haystack(t: Tracer) -> None:
    """haystack-ai 3.4.1 through opentelemetry-haystack 2.0.0, as the interop agent ran it
    (tests/data/foreign/haystack): only ``haystack.*`` keys, the agent's model call known
    by its span name alone."""
    pipeline = t.span("haystack.pipeline.run", None, 0)
    t.span(
        "haystack.component.run",
        pipeline,
        0.3,
        31,
        {"haystack.component.name": "retriever", "haystack.component.type": "FaqRetriever"},
    )
    t.span(
        "haystack.component.run",
        pipeline,
        32,
        34,
        {"haystack.component.name": "plan_prompt", "haystack.component.type": "ChatPromptBuilder"},
    )
    agent = t.span(
        "haystack.component.run",
        pipeline,
        35,
        None,
        {"haystack.component.name": "planner", "haystack.component.type": "Agent"},
    )
    step = t.span("haystack.agent.step", agent, 36)
    t.span("haystack.agent.step.llm", step, 37, 139)
    t.span("haystack.agent.step.tool", step, 140, 169.5, {"haystack.tool.name": "lookup_order"})
    t.end(step, 170)
    t.span("haystack.agent.step.llm", agent, 171, 290)
    t.end(agent, 291)
    t.span(
        "haystack.component.run",
        pipeline,
        292,
        412,
        {"haystack.component.name": "answer", "haystack.component.type": "OpenAIChatGenerator"},
    )
    t.end(pipeline, 413)


def test_haystacks_spans_read_by_component_type_and_span_name() -> None:
    t = Tracer()
    _haystack(t)
    [run] = t.runs()
    rollup = run.rollup
    assert run.workflow == "haystack.pipeline.run"  # a pipeline's run is the top of its trace
    assert (rollup.inference_count, rollup.data_count, rollup.tool_count) == (3, 1, 1)
    assert rollup.data_ms == pytest.approx(30.7)
    assert rollup.tool_ms == pytest.approx(29.5)
    assert rollup.inference_ms == pytest.approx(102 + 119 + 120)
    names = [(s.name, s.kind) for s in run.steps]
    assert ("retriever", "data") in names and ("answer", "inference") in names
    assert ("lookup_order", "tool") in names


def test_a_span_with_a_model_and_tokens_and_no_operation_is_a_model_call() -> None:
    t = Tracer()
    root = t.span("invoke_agent a", None, 0, None, {"gen_ai.operation.name": "invoke_agent"})
    t.span("LLM call", root, 1, 80, {"gen_ai.request.model": "m", "gen_ai.usage.input_tokens": 7})
    t.span("plain", root, 80, 90, {"gen_ai.request.model": "m"})  # a model alone: no call
    t.end(root, 91)
    [run] = t.runs()
    assert (run.rollup.inference_count, run.rollup.input_tokens) == (1, 7)


@pytest.mark.parametrize(
    ("attributes", "operation"),
    [
        ({"http.request.method": "POST", "url.full": "https://x.test/v1/chat/completions"}, "chat"),
        ({"http.method": "POST", "http.url": "http://h:1/proxy/v1/messages?beta=1"}, "chat"),
        ({"http.request.method": "POST", "url.full": "http://h/api/generate"}, "text_completion"),
        ({"http.request.method": "POST", "url.full": "http://h/v1/audio/speech"}, "text_to_speech"),
        ({"http.request.method": "GET", "url.full": "http://h/v1/chat/completions"}, None),
        ({"http.request.method": "POST", "url.full": "http://h/v1/chat/completions2"}, None),
        # A server span writes the path, not the URL: the model server's own span is not
        # taken for the client's call.
        ({"http.request.method": "POST", "url.path": "/v1/chat/completions"}, None),
        ({"http.request.method": "POST", "url.full": "http://[::1/v1/chat/completions"}, None),
    ],
)
def test_model_routes_by_url(attributes: dict[str, object], operation: str | None) -> None:
    assert model_operation(attributes) == operation


def test_the_wire_route_table_is_instrument_httpxs() -> None:
    """One table of model routes, held to the one ``instrument_httpx()`` matches by."""
    assert {(r.path, r.operation) for r in DEFAULT_ROUTES if r.method == "POST"} == set(
        MODEL_ROUTES
    )


def _steps(runs: list[WorkflowRun]) -> Iterator[tuple[str, str]]:
    for run in runs:
        for step in run.steps:
            yield step.name, step.kind


def test_a_sessions_turns_side_by_side_are_no_request_left_unjudged() -> None:
    """The turns of a session lie side by side under it by design: no warning."""
    t = Tracer()
    session = t.span("agent_session", None, 0, None, {"gen_ai.operation.name": "invoke_workflow"})
    for base in (1000, 5000):
        turn = t.span("agent_turn", session, base, None, {"gen_ai.operation.name": "invoke_agent"})
        t.span("llm_request", turn, base + 10, base + 600, {"gen_ai.operation.name": "chat"})
        t.end(turn, base + 700)
    t.end(session, 9000)
    runs, counters = t.counted()
    assert len(runs) == 2
    assert counters.side_by_side_traces == 0
