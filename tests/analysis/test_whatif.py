"""What-if: exact re-estimates of hand-built runs, the dependency rule, and bad specs."""

from __future__ import annotations

import contextvars
import dataclasses
import math
import statistics
from collections.abc import Mapping

import pytest

import chainlat
from chainlat._core.rollup import SpanRecord, compute_rollup
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat.analysis.profiles import LatencyProfile, fit_profiles
from chainlat.analysis.whatif import (
    SpecError,
    StepOverride,
    WhatIfResult,
    parse_change,
    rebuild_timeline,
    whatif,
)
from chainlat.analysis.whatif.basis import PrefillSlope, borrowed_slope
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans

MS = 1_000_000
T0 = 1_700_000_000_000_000_000

# service = base + per_input * in + decode * (out - 1); at 100 in, 11 out:
BIG = LatencyProfile(ttft_base_ms=50, ttft_per_input_token_ms=0.5, decode_ms_per_token=10)  # 200
SMALL = LatencyProfile(ttft_base_ms=20, ttft_per_input_token_ms=0.1, decode_ms_per_token=2)  # 50
SLOW = LatencyProfile(ttft_base_ms=0, ttft_per_input_token_ms=0, decode_ms_per_token=40)  # 400
SAME = LatencyProfile(ttft_base_ms=0, ttft_per_input_token_ms=3, decode_ms_per_token=0)  # 300
PROFILES = {"big": BIG, "small": SMALL, "slow": SLOW, "same": SAME}

Step = tuple[int, int, str, float, float, Mapping[str, object]]
"""span id, parent id, name, start ms, end ms, attributes."""


def call(
    model: str, tokens_in: int = 100, tokens_out: int = 11, **extra: object
) -> dict[str, object]:
    return {
        "chainlat.step.kind": "inference",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tokens_in,
        "gen_ai.usage.output_tokens": tokens_out,
        **extra,
    }


TOOL = {"chainlat.step.kind": "tool"}
DATA = {"chainlat.step.kind": "data"}


def run_of(
    end_ms: float, *steps: Step, trace: str = "t1", variant: str | None = None
) -> WorkflowRun:
    """A workflow (span 1, from 0 to ``end_ms``) with the given descendants."""
    root_attributes: dict[str, object] = {
        "chainlat.step.kind": "workflow",
        "gen_ai.workflow.name": "w",
    }
    root = TracedSpan(
        SpanRecord(1, None, "invoke_workflow w", T0, T0 + round(end_ms * MS), "workflow"),
        root_attributes,
    )
    spans = []
    for span_id, parent, name, start, end, attributes in steps:
        kind = attributes.get("chainlat.step.kind")
        assert kind in ("inference", "data", "tool", "workflow", None)
        tokens_in = attributes.get("gen_ai.usage.input_tokens")
        tokens_out = attributes.get("gen_ai.usage.output_tokens")
        record = SpanRecord(
            span_id,
            parent,
            name,
            T0 + round(start * MS),
            T0 + round(end * MS),
            kind,
            cache_hit=attributes.get("chainlat.cache.hit") is True,
            input_tokens=tokens_in if isinstance(tokens_in, int) else None,
            output_tokens=tokens_out if isinstance(tokens_out, int) else None,
            ttft_ms=ttft if isinstance(ttft := attributes.get("chainlat.latency.ttft_ms"), float)
            else None,
        )  # fmt: skip
        spans.append(TracedSpan(record, attributes))
    return WorkflowRun.from_spans("w", root, tuple(spans), trace_id=trace, variant=variant)


def sequential(chat_ms: float = 200, **chat_extra: object) -> WorkflowRun:
    """data 10 ms, chat big, tool 5 ms, with 1 ms of glue around each."""
    chat_end = 12 + chat_ms
    return run_of(
        chat_end + 7,
        (2, 1, "data retrieve", 1, 11, DATA),
        (3, 1, "chat big", 12, chat_end, {**call("big"), **chat_extra}),
        (4, 1, "execute_tool lookup", chat_end + 1, chat_end + 6, TOOL),
    )


def parallel() -> WorkflowRun:
    """chat big (200 ms) beside a 300 ms tool; then a 50 ms tool after both."""
    return run_of(
        353,
        (2, 1, "chat big", 1, 201, call("big")),
        (3, 1, "execute_tool search", 1, 301, TOOL),
        (4, 1, "execute_tool merge", 302, 352, TOOL),
    )


def totals(runs: list[WorkflowRun], **changes: object) -> tuple[float, float]:
    result = whatif(runs, profiles=PROFILES, **changes)  # type: ignore[arg-type]
    [estimate] = result.runs
    return estimate.before.total_ms, estimate.after.total_ms


def test_swap_on_a_sequential_chain_shortens_it_by_the_difference() -> None:
    assert totals([sequential()], swap={"chat big": "small"}) == (219, 69)


def test_swap_off_the_critical_path_changes_nothing_until_it_is_the_longest_branch() -> None:
    assert totals([parallel()], swap={"chat big": "small"}) == (353, 353)
    assert totals([parallel()], swap={"chat big": "same"}) == (353, 353)  # a tie: 300 ms
    assert totals([parallel()], swap={"chat big": "slow"}) == (353, 453)


def test_the_critical_path_follows_the_new_longest_branch() -> None:
    result = whatif([parallel()], profiles=PROFILES, swap=["chat big=slow"])
    [estimate] = result.runs
    assert estimate.before.critical_path == ("execute_tool search", "execute_tool merge")
    assert estimate.after.critical_path == ("chat slow", "execute_tool merge")
    assert estimate.after.inference_ms == 400


def test_each_call_keeps_its_own_residual() -> None:
    # 220 ms observed where the big profile predicts 200: 10 % slow, so 55 ms on small.
    assert totals([sequential(220)], swap={"chat big": "small"}) == (239, 74)


def test_queue_and_network_are_kept_as_recorded() -> None:
    run = sequential(
        230, **{"chainlat.latency.queue_ms": 20.0, "chainlat.latency.network_ms": 10.0}
    )
    assert totals([run], swap={"chat big": "small"}) == (249, 99)  # 30 + 50


def test_prompt_scale_re_estimates_with_fewer_input_tokens() -> None:
    # big at 50 input tokens: 50 + 25 + 100 = 175
    assert totals([sequential()], prompt_scale={"chat big": 0.5}) == (219, 194)


def test_swap_and_prompt_scale_combine() -> None:
    # small at 50 input tokens: 20 + 5 + 20 = 45
    assert totals([sequential()], swap=["chat big=small"], prompt_scale=["chat big=0.5"]) == (
        219,
        64,
    )


def test_dropping_a_step_removes_its_time_and_keeps_the_glue() -> None:
    assert totals([sequential()], drop=["data retrieve"]) == (219, 209)
    result = whatif([sequential()], profiles=PROFILES, drop=["data retrieve"])
    assert [r.name for r in result.runs[0].after_spans] == ["chat big", "execute_tool lookup"]


def test_a_full_cache_hit_rate_costs_the_profiles_cache_hit_time() -> None:
    profiles = {"big": BIG.model_copy(update={"cache_hit_ms": 2.0})}
    result = whatif([sequential()], profiles=profiles, cache_hit_rate={"chat big": 1.0})
    [estimate] = result.runs
    assert estimate.after.total_ms == 21
    assert estimate.after.cache_hits == 1
    assert totals([sequential()], cache_hit_rate={"chat big": 0.0}) == (219, 219)


def test_cache_hit_draws_are_deterministic_and_near_the_rate() -> None:
    runs = [sequential() for _ in range(400)]
    runs = [dataclasses.replace(r, trace_id=f"{i:032x}") for i, r in enumerate(runs)]
    first = whatif(runs, profiles=PROFILES, cache_hit_rate=["chat big=0.3"], seed=4)
    again = whatif(runs, profiles=PROFILES, cache_hit_rate=["chat big=0.3"], seed=4)
    hits = [e.after.cache_hits for e in first.runs]
    assert hits == [e.after.cache_hits for e in again.runs]
    assert 0.24 < sum(hits) / len(hits) < 0.36
    assert any("no cache_hit_ms" in note for note in first.notes)


def test_a_tool_cache_hit_costs_the_median_of_its_recorded_hits() -> None:
    hit = {**TOOL, "chainlat.cache.hit": True}
    runs = [
        run_of(50, (2, 1, "execute_tool t", 0, 40, TOOL), trace="a"),
        run_of(50, (2, 1, "execute_tool t", 0, 4, hit), trace="b"),
    ]
    result = whatif(runs, profiles=PROFILES, cache_hit_rate={"execute_tool t": 1.0})
    assert [e.after.total_ms for e in result.runs] == [14, 50]


def test_percentiles_and_shares_before_and_after() -> None:
    runs = [sequential(200 + i) for i in range(20)]
    runs = [dataclasses.replace(r, trace_id=f"{i}") for i, r in enumerate(runs)]
    result = whatif(runs, profiles=PROFILES, swap={"chat big": "small"})
    [effect] = result.workflows
    assert effect.runs == 20
    assert (effect.before.p50, effect.before.p95, effect.before.p99) == (228, 237, 238)
    # Residuals 1.00 .. 1.095 carried over to 50 ms: 50 + i * 0.25
    assert effect.after.p50 == pytest.approx(69 + 9 * 0.25)
    assert effect.after.p99 == pytest.approx(69 + 19 * 0.25)
    chat = next(s for s in effect.steps if s.step == "chat big")
    assert chat.after_name == "chat small"
    assert (chat.critical_before, chat.critical_after) == (1.0, 1.0)
    assert effect.share_after["inference"] < effect.share_before["inference"]
    assert sum(effect.share_after.values()) == pytest.approx(1)


def test_sequence_inside_one_branch_moves_up_when_its_first_step_shrinks() -> None:
    # Branch one: chat big 1-201, then tool a 202-252. Branch two: tool b 1-301.
    run = run_of(
        302,
        (2, 1, "chat big", 1, 201, call("big")),
        (3, 1, "execute_tool b", 1, 301, TOOL),
        (4, 1, "execute_tool a", 202, 252, TOOL),
    )
    result = whatif([run], profiles=PROFILES, swap={"chat big": "small"})
    after = {r.name: (r.start_ns - T0) / MS for r in result.runs[0].after_spans}
    assert after == {"chat small": 1, "execute_tool b": 1, "execute_tool a": 52}
    assert result.runs[0].after.total_ms == 302


def test_rebuild_stretches_the_children_of_a_changed_step() -> None:
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100 * MS, "workflow")
    spans = [
        SpanRecord(2, 1, "chat big", 10 * MS, 90 * MS, "inference"),
        SpanRecord(3, 2, "POST /v1/chat", 20 * MS, 80 * MS, None),
        SpanRecord(4, 1, "execute_tool after", 90 * MS, 95 * MS, "tool"),
    ]
    new_root, new_spans = rebuild_timeline(root, spans, {2: StepOverride(40 * MS, name="chat x")})
    by_id = {r.span_id: (r.name, r.start_ns // MS, r.end_ns // MS) for r in new_spans}
    assert by_id == {
        2: ("chat x", 10, 50),
        3: ("POST /v1/chat", 15, 45),
        4: ("execute_tool after", 50, 55),
    }
    assert new_root.end_ns == 60 * MS
    assert compute_rollup(new_root, new_spans).total_ms == 60


def test_rebuild_with_nothing_changed_is_the_identity() -> None:
    run = parallel()
    new_root, new_spans = rebuild_timeline(run.root_record, run.records, {})
    assert new_root == run.root_record
    assert sorted(new_spans, key=lambda r: r.span_id) == sorted(
        run.records, key=lambda r: r.span_id
    )


def test_a_nested_workflow_is_re_timed_inside() -> None:
    nested = {"chainlat.step.kind": "workflow", "gen_ai.workflow.name": "inner"}
    run = run_of(
        215,
        (2, 1, "invoke_workflow inner", 1, 213, nested),
        (3, 2, "chat big", 2, 202, call("big")),
        (4, 2, "execute_tool t", 203, 212, TOOL),
    )
    assert totals([run], swap={"chat big": "small"}) == (215, 65)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"swap": ["chat gpt-4o=gpt-4o-mini"]}, 'no step named "chat gpt-4o"'),
        ({"swap": ["chat big=nope"]}, "no latency profile for model 'nope'"),
        ({"swap": ["chat big"]}, "expected STEP=VALUE"),
        ({"swap": ["execute_tool lookup=small"]}, "is a tool step"),
        ({"prompt_scale": ["chat big=0"]}, "the scale must be above 0, got 0"),
        ({"prompt_scale": ["chat big=-1"]}, "the scale must be above 0"),
        ({"prompt_scale": ["chat big=half"]}, "'half' is not a number"),
        ({"cache_hit_rate": ["chat big=1.5"]}, "the rate must be between 0 and 1"),
        ({"drop": [" "]}, "expected a step name"),
        ({"drop": ["data nope"]}, 'no step named "data nope"'),
        ({}, "nothing to change"),
        ({"swap": ["chat big=small"], "drop": ["chat big"]}, "also dropped"),
    ],
)
def test_bad_specs_raise_a_one_line_spec_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError) as caught:
        whatif([sequential()], profiles=PROFILES, **kwargs)  # type: ignore[arg-type]
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert isinstance(caught.value, chainlat.InputError)


def test_selecting_no_run_is_an_input_error() -> None:
    with pytest.raises(chainlat.InputError, match="no workflow run of variant 'x'"):
        whatif([sequential()], profiles=PROFILES, swap=["chat big=small"], variant="x")


def test_parse_change_round_trips_its_spec() -> None:
    assert parse_change("swap", "chat a=b").spec == '--swap "chat a=b"'
    assert parse_change("cache_hit_rate", "chat a = 0.25").spec == '--cache-hit-rate "chat a=0.25"'
    assert parse_change("drop", "data rerank").spec == '--drop "data rerank"'


def test_budget_verdicts_before_and_after() -> None:
    from chainlat.budgets import parse_budgets

    budgets = parse_budgets({"workflows": {"w": {"total": "100ms"}}})
    result = whatif([sequential()], profiles=PROFILES, swap=["chat big=small"], budgets=budgets)
    assert result.budget_before is not None and result.budget_after is not None
    assert not result.budget_before.ok
    assert result.budget_after.ok


def test_the_python_api_is_exported_at_the_top() -> None:
    from chainlat.analysis.tradeoff import compare

    assert chainlat.whatif is whatif
    assert chainlat.compare is compare
    assert {"whatif", "compare", "record_outcome", "WhatIfResult", "Comparison"} <= set(
        chainlat.__all__
    )


def test_parallel_branches_recorded_on_an_injected_clock(cap: Capture) -> None:
    """Real spans through the SDK: chat big (200 ms) beside a 300 ms tool, then a 50 ms tool."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("w", tracer_provider=p):
        clock.advance(1)
        # Two branches, each in its own copy of the context, as asyncio.gather gives them.
        chat_ctx, tool_ctx = contextvars.copy_context(), contextvars.copy_context()
        chat = chainlat.inference("big", tracer_provider=p)
        tool = chainlat.tool("search", tracer_provider=p)
        call = chat_ctx.run(chat.__enter__)
        tool_ctx.run(tool.__enter__)
        clock.advance(200)
        call.record_usage(100, 11)
        chat_ctx.run(chat.__exit__, None, None, None)
        clock.advance(100)
        tool_ctx.run(tool.__exit__, None, None, None)
        clock.advance(1)
        with chainlat.tool("merge", tracer_provider=p):
            clock.advance(50)
        clock.advance(1)
    runs = runs_from_spans(cap.spans())
    assert [r.recomputed_rollup().total_ms for r in runs] == [353]
    expected = {"small": 353, "same": 353, "slow": 453}
    for model, total in expected.items():
        [estimate] = whatif(runs, profiles=PROFILES, swap={"chat big": model}).runs
        assert estimate.after.total_ms == total, model


# -- the new model's noise ------------------------------------------------------------------


def swapped_ms(result: WhatIfResult, step_id: int = 2) -> list[float]:
    """The new duration of span ``step_id`` in every estimated run, in run order."""
    return [
        next((r.end_ns - r.start_ns) / MS for r in e.after_spans if r.span_id == step_id)
        for e in result.runs
    ]


def big_beside_small(
    big_ms: float, small_ms: float, trace: str, small_ttft_ms: float | None = None
) -> WorkflowRun:
    """chat big (span 2) and chat small (span 3) side by side, both at 100 in, 11 out."""
    small = call("small")
    if small_ttft_ms is not None:
        small["chainlat.latency.ttft_ms"] = small_ttft_ms
    return run_of(
        max(big_ms, small_ms) + 1,
        (2, 1, "chat big", 0, big_ms, call("big")),
        (3, 1, "chat small", 0, small_ms, small),
        trace=trace,
    )


def test_a_swapped_call_takes_the_new_models_residual_at_its_rank() -> None:
    # big predicts 200 ms, small 50 ms. The slowest big call (x1.2) gets the slowest
    # small residual (x1.4), not its own: the new model's noise is its own.
    big = [1.0, 1.1, 0.9, 1.2, 0.8]
    small = [1.4, 1.0, 0.6, 1.2, 0.8]
    runs = [
        big_beside_small(200 * b, 50 * s, trace=f"t{i}")
        for i, (b, s) in enumerate(zip(big, small, strict=True))
    ]
    result = whatif(runs, profiles=PROFILES, swap={"chat big": "small"})
    assert swapped_ms(result) == pytest.approx([50, 60, 40, 70, 30], abs=1e-6)
    assert result.notes == ()


def test_the_new_models_noise_comes_from_its_calls_streamed_like_the_swapped_one() -> None:
    # small: streamed calls 2x its profile, calls not streamed 1x. A big call not
    # streamed is estimated from the latter; a streamed one from the former, TTFT too.
    runs = [big_beside_small(200, 100, trace=f"s{i}", small_ttft_ms=20.0) for i in range(5)] + [
        big_beside_small(200, 50, trace=f"n{i}") for i in range(5)
    ]
    streamed = run_of(
        201, (2, 1, "chat big", 0, 200, {**call("big"), "chainlat.latency.ttft_ms": 100.0}),
        trace="x",
    )  # fmt: skip
    result = whatif([*runs, streamed], profiles=PROFILES, swap={"chat big": "small"})
    assert swapped_ms(result) == pytest.approx([50] * 10 + [100], abs=1e-6)
    ttft = next(r.ttft_ms for r in result.runs[-1].after_spans if r.span_id == 2)
    assert ttft == pytest.approx(2 * SMALL.ttft_ms(100))


def test_too_few_calls_of_the_swapped_calls_mode_keep_the_recorded_residual_and_say_so() -> None:
    # small is seen streamed only (2x its profile, a level and spread of their own): the
    # big calls, not streamed, keep their own residuals (x1.0, x1.1, x0.9, x1.2, x0.8).
    big = [1.0, 1.1, 0.9, 1.2, 0.8]
    runs = [
        big_beside_small(200 * b, 100, trace=f"s{i}", small_ttft_ms=20.0) for i, b in enumerate(big)
    ]
    result = whatif(runs, profiles=PROFILES, swap={"chat big": "small"})
    assert swapped_ms(result) == pytest.approx([50, 55, 45, 60, 40], abs=1e-6)
    [note] = result.notes
    assert note.startswith("small: fewer than 5 calls not streamed in the runs")


def test_a_model_the_runs_never_called_draws_its_noise_from_its_residual_sigma() -> None:
    big = [1.0, 1.1, 0.9, 1.2, 0.8]  # ranks 0.5, 0.7, 0.3, 0.9, 0.1
    runs = [
        run_of(201, (2, 1, "chat big", 0, 200 * b, call("big")), trace=f"t{i}")
        for i, b in enumerate(big)
    ]
    profiles = {**PROFILES, "small": SMALL.model_copy(update={"residual_sigma": 0.2})}
    result = whatif(runs, profiles=profiles, swap={"chat big": "small"})
    normal = statistics.NormalDist()
    expected = [50 * math.exp(0.2 * normal.inv_cdf(u)) for u in (0.5, 0.7, 0.3, 0.9, 0.1)]
    assert swapped_ms(result) == pytest.approx(expected, abs=1e-6)


def test_a_prompt_size_effect_the_profile_left_out_is_not_taken_for_slowness() -> None:
    # big's slope (0.18 ms/token at 2.1 standard errors) is dropped from its profile:
    # measured against that flat line, the longest prompts would look slow and carry
    # it to small on top of small's own slope. The residual is taken against the
    # closest line instead (small has no calls and no residual_sigma: the call keeps it).
    points = [(100, 250.0), (200, 210.0), (300, 230.0), (400, 310.0), (500, 330.0), (600, 290.0)]
    runs = [
        run_of(ms + 1, (2, 1, "chat big", 0, ms, call("big", tokens_in=x)), trace=f"t{i}")
        for i, (x, ms) in enumerate(points)
    ]
    result = whatif(runs, profiles={"small": SMALL}, swap={"chat big": "small"})
    assert result.profiles["big"].ttft_per_input_token_ms == 0
    line = statistics.linear_regression([x for x, _ in points], [ms for _, ms in points])
    expected = [
        SMALL.service_ms(x, 11) * ms / (line.intercept + line.slope * x) for x, ms in points
    ]
    assert swapped_ms(result) == pytest.approx(expected, rel=1e-5)


def test_a_new_model_fitted_from_the_runs_is_predicted_from_its_calls_of_the_same_mode() -> None:
    # small, fitted from the runs: 80 ms streamed (TTFT 30), 40 ms not streamed. One
    # profile fitted from both would take the streamed calls' 80 ms for every call.
    runs = [big_beside_small(200, 80, trace=f"s{i}", small_ttft_ms=30.0) for i in range(5)] + [
        big_beside_small(200, 40, trace=f"n{i}") for i in range(5)
    ]
    result = whatif(runs, swap={"chat big": "small"})
    assert result.profiles["small"].service_ms(100, 11) == pytest.approx(80)
    assert swapped_ms(result) == pytest.approx([40] * 10, abs=1e-6)


def test_within_the_sizes_it_was_fitted_on_the_new_model_keeps_every_slope() -> None:
    # small, not streamed, fitted from the runs: 0.18 ms/token at 2.1 standard errors, a
    # slope its profile drops. At 100 tokens, inside the 100-600 it was seen at, the
    # closest line predicts; each big call takes small's residual around that line at
    # its own rank (big: x1.0, x1.1, x0.9, x1.2, x0.8, x1.05).
    points = [(100, 250.0), (200, 210.0), (300, 230.0), (400, 310.0), (500, 330.0), (600, 290.0)]
    big = [1.0, 1.1, 0.9, 1.2, 0.8, 1.05]
    runs = [
        run_of(
            400,
            (2, 1, "chat big", 0, 200 * b, call("big")),
            (3, 1, "chat small", 0, ms, call("small", tokens_in=x)),
            trace=f"t{i}",
        )
        for i, ((x, ms), b) in enumerate(zip(points, big, strict=True))
    ]
    result = whatif(runs, swap={"chat big": "small"})
    assert result.profiles["small"].ttft_per_input_token_ms == 0
    line = statistics.linear_regression([x for x, _ in points], [ms for _, ms in points])
    noise = sorted(math.log(ms / (line.intercept + line.slope * x)) for x, ms in points)
    ranks = [sorted(big).index(b) for b in big]
    expected = [(line.intercept + line.slope * 100) * math.exp(noise[r]) for r in ranks]
    assert swapped_ms(result) == pytest.approx(expected, rel=1e-5)


def test_a_swapped_step_named_without_its_model_stays_on_the_critical_path() -> None:
    """``--swap "plan=small"`` (a step name without the model): on the path before and after."""
    runs = [
        run_of(
            219,
            (2, 1, "data retrieve", 1, 11, DATA),
            (3, 1, "plan", 12, 212, call("big")),
            (4, 1, "execute_tool lookup", 213, 218, TOOL),
        )
    ]
    result = whatif(runs, profiles=PROFILES, swap={"plan": "small"})
    [estimate] = result.runs
    assert estimate.after.critical_path == ("data retrieve", "plan", "execute_tool lookup")
    assert estimate.after.total_ms == 69
    [workflow] = result.workflows
    plan = next(s for s in workflow.steps if s.step == "plan")
    assert (plan.after_name, plan.critical_before, plan.critical_after) == (
        "plan -> small",
        1.0,
        1.0,
    )


def test_a_dropped_step_is_never_on_the_critical_path_after() -> None:
    result = whatif([sequential()], profiles=PROFILES, drop=["data retrieve"])
    steps = {s.step: s for s in result.workflows[0].steps}
    assert (steps["data retrieve"].critical_before, steps["data retrieve"].critical_after) == (
        1.0,
        0.0,
    )
    assert steps["chat big"].critical_after == 1.0


def test_a_model_streamed_without_usage_is_named_with_the_stream_option_to_fix_it() -> None:
    """Calls of the new model exist but streamed without token counts: say how to get them."""
    streamed = {
        "chainlat.step.kind": "inference",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "small",
        "chainlat.latency.ttft_ms": 20.0,
    }
    runs = [
        sequential(),
        run_of(60, (2, 1, "chat small", 1, 51, streamed), trace="t2"),
        run_of(60, (2, 1, "chat small", 1, 51, streamed), trace="t3"),
    ]
    with pytest.raises(SpecError) as caught:
        whatif(runs, swap={"chat big": "small"})
    message = str(caught.value)
    assert "no latency profile for model 'small'" in message
    assert "its 2 calls in the runs streamed without token counts" in message
    assert 'stream_options={"include_usage": True}' in message
    assert "record runs that use it" not in message
    # A model the runs never called still gets the general advice.
    with pytest.raises(SpecError, match="record runs that use it"):
        whatif(runs, swap={"chat big": "gpt-9"})


def test_whatif_takes_runs_not_a_file_name() -> None:
    with pytest.raises(TypeError, match="load_runs"):
        whatif("traces.jsonl", swap={"chat big": "small"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="load_profiles"):
        whatif([sequential()], swap=["chat big=small"], profiles="p.toml")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="load_budgets"):
        whatif([sequential()], swap=["chat big=small"], budgets="b.toml")  # type: ignore[arg-type]


def small_alone(trace: str, tokens_in: int, tokens_out: int, *, streamed: bool) -> WorkflowRun:
    """One call of small: 20 + 0.1 ms per input token, then 4 ms per output token after the
    first when streamed (the client reads every chunk), 2 ms when not."""
    ttft = 20 + 0.1 * tokens_in
    ms = ttft + (4 if streamed else 2) * (tokens_out - 1)
    extra: dict[str, object] = {"chainlat.latency.ttft_ms": ttft} if streamed else {}
    attributes = {**call("small", tokens_in=tokens_in, tokens_out=tokens_out), **extra}
    return run_of(ms + 1, (2, 1, "chat small", 0, ms, attributes), trace=trace)


def test_a_swap_from_a_profile_file_predicts_calls_not_streamed_at_their_own_rate() -> None:
    """The new model known only from a profile fitted from its other runs, streamed and not:
    a call not streamed is predicted at the rate of its calls not streamed (2 ms a token),
    not at the streamed calls' (4 ms a token, which made every estimate high)."""
    sizes = [(100, 11), (200, 21), (300, 31), (400, 41), (500, 51)]
    measured = [
        small_alone(f"{mode}{i}", x, y, streamed=mode == "s")
        for mode in ("s", "n")
        for i, (x, y) in enumerate(sizes)
    ]
    small = fit_profiles(measured)["small"]
    # sequential(): data 10 ms, chat big 200 ms (BIG's prediction, residual 1), tool 5 ms.
    result = whatif([sequential()], profiles={"big": BIG, "small": small}, swap=["chat big=small"])
    assert swapped_ms(result, step_id=3) == [50]
    assert result.runs[0].after.total_ms == 69
    assert (small.ttft_base_ms, small.ttft_per_input_token_ms, small.decode_ms_per_token) == (
        20,
        0.1,
        4,
    )
    assert (small.unstreamed_base_ms, small.unstreamed_decode_ms_per_token) == (20, 2)
    assert small.residual_sigma == 0
    assert small.service_ms(100, 11, streamed=False) == 50
    assert small.service_ms(100, 11, streamed=True) == small.service_ms(100, 11) == 70


def test_a_swap_to_a_model_seen_streamed_only_says_its_estimate_is_high() -> None:
    """Without a model called both ways or a stream's last chunk, nothing shows the cost."""
    runs = [big_beside_small(200, 100, trace=f"s{i}", small_ttft_ms=20.0) for i in range(5)]
    result = whatif(runs, swap={"chat big": "small"})
    assert any(n.startswith("small: known from calls streamed only") for n in result.notes)
    assert "so high" in next(n for n in result.notes if n.startswith("small: known"))
    (basis,) = result.basis
    assert basis.streaming is None


def streaming_runs(*, small_streamed: bool, big_streamed: bool = False) -> list[WorkflowRun]:
    """Five runs, each: chat big (span 2: 100 in, 11 out, 200 ms, streamed or not) beside
    chat small (span 5) and a model called both ways, mid (spans 3 and 4).

    mid: streamed 20 ms to the first token + 4 ms a token after it, not streamed 20 ms +
    2 ms a token: streaming costs 0 ms + 2 ms an output token. small: 10 ms to the first
    token + 3 ms a token, streamed or not. Output tokens 11, 21, ... 51 across the runs.
    """
    runs = []
    for i in range(5):
        out = 11 + 10 * i
        big = call("big")
        if big_streamed:
            big["chainlat.latency.ttft_ms"] = 100.0
        small = call("small", tokens_out=out)
        small_ms = 10 + 3 * (out - 1)
        if small_streamed:
            small["chainlat.latency.ttft_ms"] = 10.0
        mid = {**call("mid", tokens_out=out), "chainlat.latency.ttft_ms": 20.0}
        runs.append(
            run_of(
                max(200, small_ms) + 1,
                (2, 1, "chat big", 0, 200, big),
                (3, 1, "chat mid", 0, 20 + 4 * (out - 1), mid),
                (4, 1, "chat mid", 0, 20 + 2 * (out - 1), call("mid", tokens_out=out)),
                (5, 1, "chat small", 0, small_ms, small),
                trace=f"r{i}",
            )
        )
    return runs


def test_the_cost_of_streaming_measured_on_a_model_called_both_ways_is_taken_off() -> None:
    """small seen streamed only: 10 + 3 x 10 = 40 ms streamed for 11 tokens out, less
    mid's cost of streaming (0 + 2 x 10 = 20 ms): 20 ms not streamed."""
    result = whatif(streaming_runs(small_streamed=True), swap={"chat big": "small"})
    assert swapped_ms(result) == pytest.approx([20.0] * 5, abs=1e-6)
    (basis,) = result.basis
    assert (basis.step, basis.model, basis.streamed, basis.calls) == ("chat big", "small", False, 5)
    assert basis.fit == "the closest fit of its calls streamed"
    assert basis.fitted_calls == 5
    assert basis.output_tokens_range == (11, 51)
    assert basis.streaming is not None
    assert basis.streaming.base_ms == pytest.approx(0.0, abs=1e-9)
    assert basis.streaming.per_output_token_ms == pytest.approx(2.0)
    assert basis.streaming.calls == 10
    assert basis.extrapolated == 0
    assert not any(n.startswith("small: known") for n in result.notes)
    assert "less the cost of streaming (0.0 ms + 2.00 ms an output token" in basis.line()


def test_the_cost_of_streaming_is_added_for_a_model_seen_not_streamed_only() -> None:
    """small seen not streamed only (10 + 3 x 10 = 40 ms), the swapped call streamed: plus
    20 ms, 60 ms."""
    runs = streaming_runs(small_streamed=False, big_streamed=True)
    result = whatif(runs, swap={"chat big": "small"})
    assert swapped_ms(result) == pytest.approx([60.0] * 5, abs=1e-6)
    (basis,) = result.basis
    assert basis.streamed is True
    assert basis.fit == "the closest fit of its calls not streamed"
    assert "plus the cost of streaming" in basis.line()


def test_without_a_model_called_both_ways_a_streams_tail_is_its_cost() -> None:
    """small streamed with 6 ms after its last chunk: 10 + 3.6 x 10 = 46 ms at 11 tokens
    out by the line fitted through its ends, less the 6 ms tail: 40 ms not streamed."""
    runs = [
        run_of(201, (2, 1, "chat big", 0, 200, call("big")),
               (5, 1, "chat small", 0, 46, {**call("small"), "chainlat.latency.ttft_ms": 10.0,
                                            "chainlat.latency.generation_ms": 30.0}),
               trace=f"r{i}")
        for i in range(5)
    ]  # fmt: skip
    result = whatif(runs, swap={"chat big": "small"})
    assert swapped_ms(result) == pytest.approx([40.0] * 5, abs=1e-6)
    (basis,) = result.basis
    assert basis.streaming is not None
    assert (basis.streaming.base_ms, basis.streaming.per_output_token_ms) == (6.0, 0.0)
    assert "after their last chunk" in basis.streaming.source


def test_a_swap_beyond_the_prompts_seen_extrapolates_at_a_robust_slope_and_says_how_far() -> None:
    """small's first token at 100-500 input tokens: 10 + 0.1 x in, off by +10, -5, -10, -5,
    +10 ms (30, 25, 30, 45, 70 ms). Its least-squares slope, 0.1, is within three standard
    errors (0.034) of 0, so its profile is flat at 40 ms. The swapped call at 2000 tokens
    takes the closest fit at 500 tokens (60 ms) plus the median of the ten slopes between
    two calls (0.1) for each of the 1500 tokens beyond: 210 ms. Sen's interval takes the
    slopes ranked 3rd and 9th: 0.05 and 0.2."""
    runs = []
    for i, (x, e) in enumerate(zip((100, 200, 300, 400, 500), (10, -5, -10, -5, 10), strict=True)):
        ttft = 10 + 0.1 * x + e
        small = {**call("small", x), "chainlat.latency.ttft_ms": ttft}
        runs.append(
            run_of(
                901,
                (2, 1, "chat big", 0, 900, call("big", 2000, 1)),
                (5, 1, "chat small", 0, ttft + 30, small),
                trace=f"r{i}",
            )
        )
    result = whatif(runs, swap={"chat big": "small"})
    assert result.profiles["small"].ttft_per_input_token_ms == 0
    assert swapped_ms(result) == pytest.approx([210.0] * 5, abs=1e-6)
    (basis,) = result.basis
    assert basis.input_tokens_range == (100, 500)
    assert basis.swapped_input_range == (2000, 2000)
    assert basis.extrapolated == 5
    assert basis.prefill is not None
    assert basis.prefill.ms_per_token == pytest.approx(0.1)
    assert (basis.prefill.low, basis.prefill.high) == pytest.approx((0.05, 0.2))
    assert "extrapolated for 5 of them (input 2000-2000 tokens) at 0.1 ms an input token " in (
        basis.line()
    )
    assert "(0.05-0.2, about one standard error either way)" in basis.line()


def test_calls_held_up_by_the_machine_do_not_set_the_slope_beyond_the_prompts_seen() -> None:
    """small: 200 + 0.1 ms an input token at 100-900 tokens, but the two calls at 800 and
    900 held up 400 ms by a busy client: least squares puts the slope at 0.57, the median
    of the pairwise slopes stays at 0.1. At 2000 tokens: the closest fit at 900 tokens,
    then 0.1 ms for each of the 1100 tokens beyond."""
    runs = []
    for i, x in enumerate(range(100, 1000, 100)):
        ttft = 200 + 0.1 * x + (400 if x >= 800 else 0)
        small = {**call("small", x), "chainlat.latency.ttft_ms": ttft}
        runs.append(
            run_of(
                901,
                (2, 1, "chat big", 0, 900, call("big", 2000, 1)),
                (5, 1, "chat small", 0, ttft + 30, small),
                trace=f"r{i}",
            )
        )
    result = whatif(runs, swap={"chat big": "small"})
    (basis,) = result.basis
    assert basis.prefill is not None
    assert basis.prefill.ms_per_token == pytest.approx(0.1)
    line = statistics.linear_regression(
        range(100, 1000, 100),
        [200 + 0.1 * x + (400 if x >= 800 else 0) for x in range(100, 1000, 100)],
    )
    assert line.slope == pytest.approx(0.1 + 7 / 15)  # 400 ms x (300 + 400) / 600,000
    at_900 = line.intercept + line.slope * 900
    assert swapped_ms(result) == pytest.approx([at_900 + 0.1 * 1100] * 9, abs=1e-3)


def test_the_report_says_what_the_estimate_rests_on() -> None:
    """The text (and so Markdown) and the JSON carry the basis of the swapped calls."""
    from rich.console import Console

    from chainlat.report.tradeoff import whatif_json, whatif_text

    result = whatif(streaming_runs(small_streamed=True), swap={"chat big": "small"})
    document = whatif_json(result)
    (basis,) = document["basis"]
    assert basis["streaming_cost"]["per_output_token_ms"] == pytest.approx(2.0)
    assert basis["fitted_calls"] == 5
    assert basis["input_tokens_range"] == [100, 100]
    assert basis["extrapolated_calls"] == 0
    console = Console(width=400, record=True)
    console.print(whatif_text(result, "t.jsonl"))
    text = console.export_text()
    assert 'basis: "chat big" -> small, 5 calls not streamed: the closest fit of its calls' in text


def _slope(value: float, error: float) -> PrefillSlope:
    return PrefillSlope(value, value - error, value + error)


def test_a_borrowed_slope_is_weighed_with_the_own_by_their_errors() -> None:
    """Own 0.2 +/- 0.1. Borrowed: big's 0.3 +/- 0.03 times 3/10 (decode rates 3 +/- 0.3 and
    10 +/- 1): 0.09, each factor 10 % off, so +/- 0.09 * sqrt(3) / 10 = 0.0155885. They are
    0.11 apart, within 3 x hypot(0.1, 0.0155885) = 0.3036: weighed by 1 / error^2, 100
    and 4115.23, to (20 + 370.370) / 4215.23 = 0.0926096 +/- 1 / sqrt(4215.23) = 0.0154024."""
    own = _slope(0.2, 0.1)
    weighed = borrowed_slope(
        own, _slope(3.0, 0.3), [(("big", False), _slope(0.3, 0.03), _slope(10.0, 1.0))]
    )
    assert weighed is not None and weighed.borrowed is not None
    borrowed = weighed.borrowed
    assert borrowed.slope.ms_per_token == pytest.approx(0.09)
    assert borrowed.slope.error == pytest.approx(0.09 * math.sqrt(3) / 10)
    assert borrowed.weighed and borrowed.own == own and borrowed.donor == "big"
    w_own, w_borrowed = 1 / 0.1**2, 1 / (0.09 * math.sqrt(3) / 10) ** 2
    assert weighed.ms_per_token == pytest.approx(
        (0.2 * w_own + 0.09 * w_borrowed) / (w_own + w_borrowed)
    )
    assert weighed.ms_per_token == pytest.approx(0.0926096, abs=1e-7)
    assert weighed.error == pytest.approx(1 / math.sqrt(w_own + w_borrowed))
    assert (weighed.low, weighed.high) == pytest.approx(
        (0.0926096 - 0.0154024, 0.0926096 + 0.0154024), abs=1e-7
    )
    assert borrowed.line() == (
        "its own calls' 0.2 (0.1-0.3) weighed with big's (its calls not streamed) "
        "0.3 (0.27-0.33) times the ratio of the two decode rates (3 and 10 ms an output "
        "token), 0.09 (0.0744-0.106)"
    )


def test_a_slope_the_runs_contradict_is_not_borrowed() -> None:
    """Own 0.5 +/- 0.01 against a borrowed 0.09 +/- 0.0156: 0.41 apart, more than three
    standard errors of the difference (0.0556). The own slope is kept, and says why."""
    own = _slope(0.5, 0.01)
    kept = borrowed_slope(
        own, _slope(3.0, 0.3), [(("big", True), _slope(0.3, 0.03), _slope(10.0, 1.0))]
    )
    assert kept is not None and kept.borrowed is not None
    assert (kept.ms_per_token, kept.low, kept.high) == (0.5, 0.49, 0.51)
    assert not kept.borrowed.weighed
    assert kept.borrowed.line().startswith("its own calls' 0.5 (0.49-0.51), kept alone: big's")
    assert kept.borrowed.line().endswith("further than 3 standard errors from it")


def test_without_an_own_slope_the_most_certain_borrowed_one_is_taken() -> None:
    """Two donors: 0.3 +/- 10 % (0.09 +/- 17.3 %) and 0.2 +/- 1 % with decode 10 +/- 1 %
    (0.06, sqrt(1 + 1 + 100) % = 10.1 %): the second is the more certain."""
    donors = [
        (("big", False), _slope(0.3, 0.03), _slope(10.0, 1.0)),
        (("huge", True), _slope(0.2, 0.002), _slope(10.0, 0.1)),
    ]
    taken = borrowed_slope(None, _slope(3.0, 0.3), donors)
    assert taken is not None and taken.borrowed is not None
    assert taken.ms_per_token == pytest.approx(0.06)
    assert taken.error == pytest.approx(0.06 * math.sqrt(0.0102))
    assert taken.borrowed.donor == "huge" and taken.borrowed.own is None
    assert taken.borrowed.line().startswith("borrowed: huge's (its calls streamed) 0.2")


def test_nothing_to_borrow_leaves_the_own_slope() -> None:
    own = _slope(0.2, 0.1)
    donor = [(("big", False), _slope(0.3, 0.03), _slope(10.0, 1.0))]
    assert borrowed_slope(own, _slope(3.0, 0.3), []) is own
    assert borrowed_slope(own, None, donor) is own  # the model's decode rate unknown
    assert borrowed_slope(own, _slope(0.0, 0.0), donor) is own
    assert (
        borrowed_slope(
            own, _slope(3.0, 0.3), [(("big", False), _slope(0.0, 0.0), _slope(10.0, 1.0))]
        )
        is own
    )


def _server_runs(big_port: int) -> list[WorkflowRun]:
    """small streamed at 100-500 input tokens, first token 10 + 0.1 x off by +10, -5,
    -10, -5, +10 ms (its own slope 0.1, 0.05-0.2), 3 ms an output token after it; big
    streamed at 400-2000 tokens, first token 100 + 0.25 x, 10 ms an output token: exactly.
    Both on 127.0.0.1:8000, or big on ``big_port``."""
    runs = []
    errors = (10, -5, -10, -5, 10)
    for i, (x, e) in enumerate(zip((100, 200, 300, 400, 500), errors, strict=True)):
        small_out, big_out, big_in = 6 + 5 * i, 5 + 5 * i, 400 * (i + 1)
        small_ttft, big_ttft = 10 + 0.1 * x + e, 100 + 0.25 * big_in
        small_end, big_end = small_ttft + 3 * (small_out - 1), big_ttft + 10 * (big_out - 1)
        here = {"server.address": "127.0.0.1", "server.port": 8000}
        small = {**call("small", x, small_out), "chainlat.latency.ttft_ms": small_ttft, **here}
        big = {
            **call("big", big_in, big_out),
            "chainlat.latency.ttft_ms": big_ttft,
            **here,
            "server.port": big_port,
        }
        runs.append(
            run_of(
                max(small_end, big_end) + 1,
                (2, 1, "chat big", 0, big_end, big),
                (5, 1, "chat small", 0, small_end, small),
                trace=f"r{i}",
            )
        )
    return runs


def test_a_model_seen_at_short_prompts_borrows_the_slope_of_a_model_on_its_server() -> None:
    """big's 0.25 exactly, times small's decode rate over big's (3 / 10, both exact): 0.075,
    with no error, so it decides (small's own 0.1 +/- 0.075 agrees with it). On another
    server, big lends nothing: small's own 0.1."""
    result = whatif(_server_runs(8000), swap={"chat big": "small"})
    (basis,) = result.basis
    assert basis.extrapolated == 4  # big's calls at 800 to 2000 tokens
    assert basis.prefill is not None and basis.prefill.borrowed is not None
    assert basis.prefill.ms_per_token == pytest.approx(0.075)
    assert basis.prefill.borrowed.own == PrefillSlope(0.1, 0.05, 0.2)
    assert "its own calls' 0.1 (0.05-0.2) weighed with big's (its calls streamed) 0.25" in (
        basis.line()
    )
    elsewhere = whatif(_server_runs(8001), swap={"chat big": "small"})
    (basis,) = elsewhere.basis
    assert basis.prefill == PrefillSlope(0.1, 0.05, 0.2)
    assert "weighed" not in basis.line()
    # 0.025 ms less for each token past 500, times the call's residual: one of small's
    # (its calls against their closest fit, 10 + 0.1 x + 3 ms an output token after the
    # first), whichever the big call's rank takes.
    residuals = sorted(
        (10 + 0.1 * x + e + 3 * (5 + 5 * i)) / (10 + 0.1 * x + 3 * (5 + 5 * i))
        for i, (x, e) in enumerate(
            zip((100, 200, 300, 400, 500), (10, -5, -10, -5, 10), strict=True)
        )
    )
    differences = [a - b for a, b in zip(swapped_ms(elsewhere), swapped_ms(result), strict=True)]
    assert differences[0] == pytest.approx(0.0, abs=1e-6)  # 400 tokens: within 100-500
    for difference, tokens in zip(differences[1:], (800, 1200, 1600, 2000), strict=True):
        ratio = difference / (0.025 * (tokens - 500))
        assert any(ratio == pytest.approx(r, rel=1e-6) for r in residuals), ratio


def test_a_borrowed_slope_less_certain_than_its_value_is_weighed_at_its_whole_error() -> None:
    """Borrowed 0.09 +/- 0.09 * sqrt(1.02) (the donor's slope 0.3 +/- 100 %): its interval
    is cut at 0, its weight is not: 1 / 0.0826^2 beside the own 1 / 0.1^2."""
    own = _slope(0.2, 0.1)
    weighed = borrowed_slope(
        own, _slope(3.0, 0.3), [(("big", False), _slope(0.3, 0.3), _slope(10.0, 1.0))]
    )
    assert weighed is not None and weighed.borrowed is not None
    assert weighed.borrowed.slope.low == 0.0
    error = 0.09 * math.sqrt(1.02)
    w_own, w_borrowed = 1 / 0.1**2, 1 / error**2
    assert weighed.ms_per_token == pytest.approx(
        (0.2 * w_own + 0.09 * w_borrowed) / (w_own + w_borrowed)
    )
    assert weighed.error == pytest.approx(1 / math.sqrt(w_own + w_borrowed))
