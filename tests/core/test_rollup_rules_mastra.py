"""Two readings of traces Mastra writes (@mastra/otel-exporter 1.4.0, Mastra 1.71, run
against the sim: tests/data/foreign/mastra). Rule 19 of docs/attributes.md: a model call that
answered by asking for tools had answered before they ran; Mastra ends its ``chat`` span on
the step's last chunk, after the step's tool has run, and read as the span says, the tool's
time was the call's and the critical path went around the tool (tool 0.0 ms, a broken tool
budget kept). And its first token, an instant (``mastra.completion_start_time``), not a
duration. Spans written by the real OpenTelemetry SDK in Mastra's shape, on given times."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from chainlat._core.runs import WorkflowRun
from chainlat.traces import read_runs
from support.sdk_traces import MS, T0, sdk_tracer, workflow_span, written

CHAT: dict[str, AttributeValue] = {
    "gen_ai.operation.name": "chat",
    "gen_ai.request.model": "sim-plan",
    "gen_ai.usage.input_tokens": 131,
    "gen_ai.usage.output_tokens": 5,
}
TOOL: dict[str, AttributeValue] = {
    "gen_ai.operation.name": "execute_tool",
    "gen_ai.tool.name": "lookup_order",
    "gen_ai.tool.call.id": "call_1",
}


def _run(tmp_path: Path, finish: AttributeValue, tool_ms: tuple[int, int]) -> WorkflowRun:
    """A workflow 0-200 ms; under an agent step (no kind, as Mastra's ``agent_step``), the
    call 10-140 ms with ``finish`` as its finish reasons and the tool beside it at
    ``tool_ms``; the step ends at 140."""
    tracer, exporter = sdk_tracer("mastra")
    root = workflow_span(tracer, "agent")

    def span(
        name: str, parent: trace.Span, at_ms: tuple[int, int], attrs: dict[str, AttributeValue]
    ) -> None:
        made = tracer.start_span(
            name, trace.set_span_in_context(parent), attributes=attrs, start_time=T0 + at_ms[0] * MS
        )
        made.end(end_time=T0 + at_ms[1] * MS)

    step = tracer.start_span(
        "agent_step planner", trace.set_span_in_context(root), start_time=T0 + 10 * MS
    )
    span("chat sim-plan", step, (10, 140), {**CHAT, "gen_ai.response.finish_reasons": finish})
    span("execute_tool lookup_order", step, tool_ms, TOOL)
    step.end(end_time=T0 + 140 * MS)
    root.end(end_time=T0 + 200 * MS)
    [run] = read_runs([written(tmp_path / "run.jsonl", exporter)])
    return run


@pytest.mark.parametrize("finish", ['["tool-calls"]', ("tool_calls",), ("tool_use",)])
def test_a_call_that_asked_for_tools_ends_where_they_start(
    tmp_path: Path, finish: AttributeValue
) -> None:
    """The call's span runs to 140, over its tool (110-136): the call is 10-110 (100 ms of
    inference), the tool's 26 ms are on the path. Before: inference 130, tool 0."""
    run = _run(tmp_path, finish, (110, 136))
    assert (run.rollup.inference_ms, run.rollup.tool_ms) == (100.0, 26.0)
    assert run.rollup.critical_path == ("chat sim-plan", "execute_tool lookup_order")
    [call] = [s for s in run.steps if s.kind == "inference"]
    assert (call.end_ns - call.start_ns) / MS == 100.0


def test_a_call_that_did_not_ask_for_tools_keeps_its_span(tmp_path: Path) -> None:
    """A call that answered (``stop``) beside a tool running inside its span: the two ran at
    once, and the call's span stands (130 ms of inference; the tool off the path)."""
    run = _run(tmp_path, ("stop",), (110, 136))
    assert (run.rollup.inference_ms, run.rollup.tool_ms) == (130.0, 0.0)


def test_a_tool_after_the_call_changes_nothing(tmp_path: Path) -> None:
    """The common shape: the call ended (140) before its tool started (150)."""
    run = _run(tmp_path, ("tool_calls",), (150, 176))
    assert (run.rollup.inference_ms, run.rollup.tool_ms) == (130.0, 26.0)


def _chat_at(tmp_path: Path, first_token: str) -> WorkflowRun:
    """A workflow at T0 (2023-11-14T22:13:20Z), 0-200 ms, with Mastra's ``chat`` 10-150 ms
    whose first chunk is given as the instant ``first_token``."""
    tracer, exporter = sdk_tracer("mastra")
    root = workflow_span(tracer, "agent")
    call = tracer.start_span(
        "chat sim-answer",
        trace.set_span_in_context(root),
        attributes={**CHAT, "mastra.completion_start_time": first_token},
        start_time=T0 + 10 * MS,
    )
    call.end(end_time=T0 + 150 * MS)
    root.end(end_time=T0 + 200 * MS)
    [run] = read_runs([written(tmp_path / "run.jsonl", exporter)])
    return run


def test_mastras_first_token_is_an_instant_read_against_the_calls_start(tmp_path: Path) -> None:
    """``mastra.completion_start_time`` 56 ms after the workflow's start: the call's first
    token 46 ms in, the first output at 56 ms, measured."""
    run = _chat_at(tmp_path, "2023-11-14T22:13:20.056Z")
    [call] = run.steps
    assert call.ttft_ms == pytest.approx(46.0)
    assert run.rollup.first_output_ms == pytest.approx(56.0)
    assert not run.first_output_bound


def test_an_instant_outside_the_call_is_no_time_of_it(tmp_path: Path) -> None:
    """Mastra repeats an earlier call's instant on a later call (before its start): no time
    of this call (rule 15), so its first output is a bound at its start, not 5 ms before."""
    run = _chat_at(tmp_path, "2023-11-14T22:13:20.005Z")
    [call] = run.steps
    assert call.ttft_ms is None
    assert run.rollup.first_output_ms == pytest.approx(10.0)
    assert run.first_output_bound
