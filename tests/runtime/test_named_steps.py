"""Named steps: two calls of one model are two steps when the application names them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from rich.console import Console

import chainlat
from chainlat._core.rollup import compute_rollup
from chainlat._core.runs import steps_of
from chainlat._core.stats import aggregate
from chainlat.budgets import Budgets, evaluate
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans
from support.records import rec


def _names(spans: tuple[ReadableSpan, ...]) -> dict[str, object]:
    return {s.name: (s.attributes or {}).get("chainlat.step.name") for s in spans}


def _planner_and_answer(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("triage", tracer_provider=p):
        with chainlat.inference("sim-small", step="plan", tracer_provider=p):
            clock.advance(40)
        with chainlat.step_name("answer"), chainlat.inference("sim-small", tracer_provider=p):
            clock.advance(90)


def test_the_deprecated_step_alias_still_names_the_steps_inside(cap: Capture) -> None:
    p = cap.provider
    with pytest.warns(DeprecationWarning, match="chainlat.step_name"):
        alias = chainlat.step("answer")
    with chainlat.workflow("w", tracer_provider=p), alias, chainlat.tool("t", tracer_provider=p):
        pass
    assert _names(cap.spans())["execute_tool t"] == "answer"


def test_step_argument_and_step_block_name_the_span(cap: Capture) -> None:
    _planner_and_answer(cap)
    named = [
        (s.attributes or {}).get("chainlat.step.name")
        for s in cap.spans()
        if s.name == "chat sim-small"
    ]
    assert named == ["plan", "answer"]


def test_two_calls_of_one_model_are_two_rows_in_stats_and_budgets(cap: Capture) -> None:
    _planner_and_answer(cap)
    runs = runs_from_spans(cap.spans())
    assert [s.name for s in runs[0].steps] == ["plan", "answer"]
    assert [s.span_name for s in runs[0].steps] == ["chat sim-small", "chat sim-small"]
    stats = aggregate(runs).workflows["triage"]
    assert {name: s.duration.max() for name, s in stats.steps.items()} == {
        "plan": 40.0,
        "answer": 90.0,
    }
    budgets = Budgets.model_validate(
        {"workflows": {"triage": {"steps": {"plan": {"max": "50ms"}, "answer": {"max": "80ms"}}}}}
    )
    report = evaluate(runs, budgets)
    assert [(v.target, v.status, v.actual_ms) for v in report.verdicts] == [
        ("steps.plan.max", "ok", 40.0),
        ("steps.answer.max", "broken", 90.0),
    ]
    assert runs[0].rollup.critical_path == ("plan", "answer")


def test_a_block_names_foreign_spans_begun_inside_it(cap: Capture) -> None:
    # A model call traced by another instrumentation: a plain span with GenAI attributes.
    tracer = cap.provider.get_tracer("some.sdk")
    with chainlat.workflow("w", tracer_provider=cap.provider), chainlat.step_name("plan"):
        with tracer.start_as_current_span(
            "chat gpt-4o", attributes={"gen_ai.operation.name": "chat"}
        ):
            cap.clock.advance(5)
        with tracer.start_as_current_span("not a step"):
            pass
    names = _names(cap.spans())
    assert names["chat gpt-4o"] == "plan"
    assert names["not a step"] is None  # only steps are named
    assert names["invoke_workflow w"] is None


def test_innermost_block_wins_and_the_step_argument_wins_over_blocks(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("w", tracer_provider=p), chainlat.step_name("outer"):
        with chainlat.tool("a", tracer_provider=p):
            pass
        with chainlat.step_name("inner"), chainlat.tool("b", tracer_provider=p):
            pass
        with chainlat.step_name("inner"), chainlat.inference("m", step="own", tracer_provider=p):
            pass
        with chainlat.tool("c", tracer_provider=p):
            pass
    names = _names(cap.spans())
    assert names["execute_tool a"] == "outer"
    assert names["execute_tool b"] == "inner"
    assert names["chat m"] == "own"
    assert names["execute_tool c"] == "outer"  # the inner block ended: the outer name is back


@pytest.mark.anyio
async def test_one_step_object_shared_by_concurrent_tasks_names_each_task(cap: Capture) -> None:
    p = cap.provider
    shared = chainlat.step_name("fan-out")

    @shared
    async def call(model: str) -> None:
        with chainlat.inference(model, tracer_provider=p):
            await asyncio.sleep(0)

    with chainlat.workflow("w", tracer_provider=p):
        await asyncio.gather(call("a"), call("b"))
        with chainlat.inference("c", tracer_provider=p):
            pass
    names = _names(cap.spans())
    assert (names["chat a"], names["chat b"], names["chat c"]) == ("fan-out", "fan-out", None)


def test_a_name_on_either_twin_names_the_call() -> None:
    # The framework span is the one counted (longer); only the wire-level twin is named.
    spans = [
        rec(2, 1, "ChatOpenAI", 0, 50, "inference", model="m", source="openinference"),
        rec(3, 1, "chat m", 5, 45, "inference", model="m", source="chainlat", step_name="plan"),
    ]
    root = rec(1, None, "invoke_workflow w", 0, 60, "workflow")
    assert [s.name for s in steps_of(root, spans)] == ["plan"]
    assert compute_rollup(root, spans).critical_path == ("plan",)


def test_whatif_swaps_a_named_step_and_re_estimates_first_output_and_cost(cap: Capture) -> None:
    from chainlat._core.latency import LatencyProfile
    from chainlat._core.prices import Price

    p, clock = cap.provider, cap.clock
    for _ in range(3):
        with chainlat.workflow("triage", tracer_provider=p):
            with chainlat.inference("a", step="plan", tracer_provider=p) as call:
                clock.advance(40)  # a: 40 ms to the first token, 1 ms per token after it
                call.first_token()
                clock.advance(10)
                call.record_usage(input_tokens=100, output_tokens=11)
            with chainlat.inference("a", step="answer", tracer_provider=p) as call:
                clock.advance(40)
                call.first_token()
                clock.advance(10)
                call.record_usage(input_tokens=100, output_tokens=11)
    profiles = {
        "a": LatencyProfile(ttft_base_ms=40, decode_ms_per_token=1.0),
        "b": LatencyProfile(ttft_base_ms=10, decode_ms_per_token=0.5),
    }
    result = chainlat.whatif(
        runs_from_spans(cap.spans()),
        swap=["plan=b"],
        profiles=profiles,
        prices={"a": Price(10.0, 10.0), "b": Price(1.0, 1.0)},
    )
    (effect,) = result.workflows
    steps = {s.step: (s.before_p50_ms, s.after_p50_ms) for s in effect.steps}
    # Only the planner moves: 10 ms to its first token, 5 ms for 10 more tokens.
    assert steps == {"plan": (50.0, 15.0), "answer": (50.0, 50.0)}
    assert (effect.before.p50, effect.after.p50) == (100.0, 65.0)
    # The answer's first token (the last streamed call) comes 35 ms sooner.
    assert effect.first_output_before is not None and effect.first_output_after is not None
    assert (effect.first_output_before.p50, effect.first_output_after.p50) == (90.0, 55.0)
    # Two calls of 111 tokens at $10 per million, then one of them at $1 per million.
    assert effect.cost_before == pytest.approx(2 * 111 * 10 / 1e6)
    assert effect.cost_after == pytest.approx(111 * 10 / 1e6 + 111 / 1e6)


def test_step_names_user_facing_and_marks_survive_a_traces_file(tmp_path: Path) -> None:
    from chainlat._runtime.otlp_json import JsonLinesSpanExporter
    from chainlat.testing import capture
    from chainlat.traces import read_runs

    path = tmp_path / "t.jsonl"
    with capture(fake_clock=True, sequential_ids=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
        p, clock = cap.provider, cap.clock
        with chainlat.workflow("w", tracer_provider=p) as run:
            with chainlat.inference("m", step="greet", user_facing=True, tracer_provider=p) as c:
                clock.advance(10)
                c.first_token()
                clock.advance(5)
            with chainlat.step_name("answer[1]"), chainlat.inference("m", tracer_provider=p) as c:
                clock.advance(20)
                c.first_token()
                clock.advance(5)
            run.first_output(at_ns=clock.advance(1))
    (read,) = read_runs([path])
    assert [s.name for s in read.steps] == ["greet", "answer[1]"]
    assert read.first_output_ms == 41.0
    assert read.recomputed_rollup().first_output_ms == 41.0  # the mark, not the rules
    # Without the mark, the user-facing call's first token is the first output.
    spans = [s for s in read.spans]
    rules = compute_rollup(read.root_record, [s.record for s in spans])
    assert rules.first_output_ms == 10.0


def _swapped_to_b(cap: Capture, step: str) -> chainlat.WhatIfResult:
    """What-if of ``cap``'s runs with ``step`` swapped from model ``a`` to ``b``, on given
    profiles (``a``: 40 ms to the first token, 1 ms a token; ``b``: 10 ms, 0.5 ms)."""
    from chainlat._core.latency import LatencyProfile

    return chainlat.whatif(
        runs_from_spans(cap.spans()),
        swap=[f"{step}=b"],
        profiles={
            "a": LatencyProfile(ttft_base_ms=40, decode_ms_per_token=1.0),
            "b": LatencyProfile(ttft_base_ms=10, decode_ms_per_token=0.5),
        },
    )


def test_whatif_leaves_a_first_output_that_is_a_bound_out_and_says_so(cap: Capture) -> None:
    """Two runs answered by chainlat's own call (measured at its end), one by another
    instrumentation's call that says nothing of streaming (rule 17 of docs/attributes.md:
    a bound at its start). The bound is in no first-output percentile, and is counted."""
    from chainlat.report.tradeoff import whatif_json, whatif_text

    p, clock = cap.provider, cap.clock
    foreign = p.get_tracer("opentelemetry.instrumentation.openai_v2")
    for own in (True, True, False):
        with chainlat.workflow("triage", tracer_provider=p):
            with chainlat.inference("a", step="plan", tracer_provider=p) as call:
                clock.advance(50)
                call.record_usage(input_tokens=100, output_tokens=11)
            if own:
                with chainlat.inference("a", step="answer", tracer_provider=p) as call:
                    clock.advance(50)
                    call.record_usage(input_tokens=100, output_tokens=11)
            else:
                chat = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "a"}
                span = foreign.start_span("answer", attributes=chat, start_time=clock())
                span.end(end_time=clock.advance(50))
    result = _swapped_to_b(cap, "plan")
    (effect,) = result.workflows
    assert effect.runs == 3 and effect.first_output_bounds == 1
    assert effect.first_output_before is not None
    assert (effect.first_output_before.p50, effect.first_output_before.p95) == (100.0, 100.0)
    [workflow] = whatif_json(result)["workflows"]
    assert workflow["first_output_bound_runs"] == 1
    console = Console(width=200, record=True)
    console.print(whatif_text(result, "t.jsonl"))
    assert "first output: 1 of 3 runs' is a bound, not a measurement" in console.export_text()


def test_whatif_leaves_out_a_turn_whose_start_is_unknown(cap: Capture) -> None:
    """Rule 16 of docs/attributes.md: one of three turns says its start is no end of the
    caller's words. Its first output counts from that start, a bound the run carries (its
    rollup does not): left out of the percentiles before and after, and counted."""
    from chainlat._core import attributes as attr

    p, clock = cap.provider, cap.clock
    for known in (True, False, True):
        with chainlat.workflow("turn", tracer_provider=p) as turn:
            if not known:
                turn.set_attribute(attr.WORKFLOW_START_UNKNOWN, "semantic_vad")
            with chainlat.inference("a", step="answer", tracer_provider=p) as call:
                clock.advance(60 if known else 20)
                call.record_usage(input_tokens=100, output_tokens=11)
    result = _swapped_to_b(cap, "answer")
    (effect,) = result.workflows
    assert effect.runs == 3 and effect.first_output_bounds == 1
    assert effect.first_output_before is not None
    assert (effect.first_output_before.p50, effect.first_output_before.p95) == (60.0, 60.0)
