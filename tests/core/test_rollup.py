"""The pure rollup: exact numbers from hand-built span records (times in ms for readability)."""

from __future__ import annotations

import dataclasses

import pytest

from chainlat._core.conventions import classify
from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup
from support.records import rec


def roll(root_end_ms: float, *spans: SpanRecord) -> Rollup:
    return compute_rollup(rec(1, None, "invoke_workflow w", 0, root_end_ms, "workflow"), spans)


def assert_split_sums(r: Rollup) -> None:
    assert r.inference_ms + r.data_ms + r.tool_ms + r.overhead_ms == pytest.approx(r.total_ms)


def test_sequential_chain_splits_by_kind_and_gaps_are_overhead() -> None:
    r = roll(
        100,
        rec(2, 1, "data retrieve", 5, 20, "data"),
        rec(3, 1, "chat big", 22, 70, "inference", input_tokens=100, output_tokens=20),
        rec(4, 1, "execute_tool calc", 71, 80, "tool"),
        rec(5, 1, "chat small", 80, 98, "inference", input_tokens=50, output_tokens=10),
    )
    assert r.total_ms == 100
    assert r.data_ms == 15
    assert r.inference_ms == 48 + 18
    assert r.inference_ms == r.inference_sum_ms
    assert r.tool_ms == 9
    assert r.overhead_ms == 5 + 2 + 1 + 2
    assert (r.step_count, r.inference_count, r.data_count, r.tool_count) == (4, 2, 1, 1)
    assert (r.input_tokens, r.output_tokens) == (150, 30)
    assert r.parallelism == pytest.approx(0.9)
    assert r.critical_path == ("data retrieve", "chat big", "execute_tool calc", "chat small")
    assert_split_sums(r)


def test_parallel_steps_only_the_one_that_ends_last_is_critical() -> None:
    # asyncio.gather of three calls starting together: the 60 ms one decides the end.
    r = roll(
        70,
        rec(2, 1, "chat a", 5, 25, "inference"),
        rec(3, 1, "chat b", 5, 65, "inference"),
        rec(4, 1, "data c", 5, 45, "data"),
    )
    assert r.inference_ms == 60
    assert r.data_ms == 0
    assert r.overhead_ms == 10
    assert r.inference_sum_ms == 80
    assert r.data_sum_ms == 40
    assert r.parallelism == pytest.approx((20 + 60 + 40) / 70)
    assert r.critical_path == ("chat b",)
    assert_split_sums(r)


def test_overlapping_steps_chain_back_through_the_last_finisher_before_each_start() -> None:
    # Thread-pool shape: data 0-30, then two tools 30-50 and 32-60, then inference 60-90.
    r = roll(
        95,
        rec(2, 1, "data d", 0, 30, "data"),
        rec(3, 1, "execute_tool x", 30, 50, "tool"),
        rec(4, 1, "execute_tool y", 32, 60, "tool"),
        rec(5, 1, "chat m", 60, 90, "inference"),
    )
    assert r.inference_ms == 30
    assert r.tool_ms == 28
    # From y's start (32) the walk takes the last child ending before it: d (ends 30).
    assert r.data_ms == 30
    assert r.overhead_ms == 2 + 5
    assert r.critical_path == ("data d", "execute_tool y", "chat m")
    assert_split_sums(r)


def test_nested_steps_give_each_instant_to_the_innermost_step() -> None:
    # A tool that calls a model inside it.
    r = roll(
        50,
        rec(2, 1, "execute_tool agent", 0, 40, "tool"),
        rec(3, 2, "chat m", 10, 30, "inference"),
    )
    assert r.tool_ms == 20
    assert r.inference_ms == 20
    assert r.overhead_ms == 10
    assert r.tool_sum_ms == 40
    assert r.step_count == 2
    assert r.parallelism == pytest.approx(40 / 50)  # only the tool is top level
    assert r.critical_path == ("execute_tool agent", "chat m")


def test_same_kind_nested_is_one_step_counted_once() -> None:
    # A hand-written chainlat.inference around the HTTP-level model span of the same call.
    r = roll(
        30,
        rec(2, 1, "chat m", 0, 30, "inference"),
        rec(3, 2, "chat m", 1, 29, "inference", input_tokens=7, output_tokens=3, cache_hit=True),
    )
    assert r.inference_count == 1
    assert r.step_count == 1
    assert r.inference_ms == 30
    assert r.inference_sum_ms == 30
    assert (r.input_tokens, r.output_tokens, r.cache_hits) == (7, 3, 1)


def test_transparent_spans_pass_their_time_to_the_step_around_them() -> None:
    r = roll(
        40,
        rec(2, 1, "POST", 0, 10),  # an HTTP span outside any step: overhead
        rec(3, 1, "chat m", 10, 40, "inference"),
        rec(4, 3, "POST /v1/chat", 12, 38),  # inside the model call: inference
        rec(5, 2, "chat nested", 2, 8, "inference"),  # classified below a transparent span
    )
    assert r.inference_ms == 30 + 6
    assert r.overhead_ms == 4
    assert r.step_count == 2
    assert r.parallelism == pytest.approx((30 + 6) / 40)


def test_nested_workflow_is_a_step_and_its_kinds_count_in_the_outer_rollup() -> None:
    r = roll(
        100,
        rec(2, 1, "invoke_workflow inner", 10, 90, "workflow"),
        rec(3, 2, "data d", 10, 30, "data"),
        rec(4, 2, "chat m", 40, 85, "inference"),
    )
    assert r.data_ms == 20
    assert r.inference_ms == 45
    assert r.overhead_ms == 100 - 65
    assert r.step_count == 3
    assert r.critical_path == ("invoke_workflow inner", "data d", "chat m")


def test_children_are_clipped_to_their_parent_and_zero_length_steps_do_not_break_the_walk() -> None:
    r = roll(
        50,
        rec(2, 1, "chat early", -10, 20, "inference"),  # clock skew: starts before the workflow
        rec(3, 1, "execute_tool late", 45, 70, "tool"),  # ends after the workflow
        rec(4, 1, "data instant", 30, 30, "data"),
    )
    assert r.inference_ms == 20
    assert r.tool_ms == 5
    assert r.data_count == 1
    assert_split_sums(r)


def test_orphans_and_unrelated_spans_are_ignored() -> None:
    r = roll(10, rec(7, 99, "chat elsewhere", 0, 5, "inference"))
    assert r.step_count == 0
    assert r.overhead_ms == 10
    assert r.critical_path == ()


def test_empty_workflow_has_zero_parallelism() -> None:
    r = roll(0)
    assert (r.total_ms, r.parallelism, r.step_count) == (0, 0, 0)


def test_rollup_attributes_round_trip() -> None:
    r = roll(10, rec(2, 1, "chat m", 1, 9, "inference", input_tokens=3))
    assert Rollup.from_attributes(r.to_attributes()) == r
    assert Rollup.from_attributes({"chainlat.chain.total_ms": "x"}) is None
    assert Rollup.from_attributes({}) is None


@pytest.mark.parametrize(
    ("attributes", "kind"),
    [
        ({"chainlat.step.kind": "tool"}, "tool"),
        ({"gen_ai.operation.name": "chat"}, "inference"),
        ({"gen_ai.operation.name": "embeddings"}, "inference"),
        ({"gen_ai.operation.name": "text_completion"}, "inference"),
        ({"gen_ai.operation.name": "generate_content"}, "inference"),
        ({"gen_ai.operation.name": "execute_tool"}, "tool"),
        ({"gen_ai.operation.name": "retrieval"}, "data"),
        ({"db.system": "postgresql"}, "data"),
        ({"db.system.name": "sqlite"}, "data"),
        ({"gen_ai.operation.name": "invoke_workflow"}, "workflow"),
        ({"http.request.method": "POST"}, None),
        ({"gen_ai.operation.name": "invoke_agent"}, "workflow"),
    ],
)
def test_classify_other_instrumentations(attributes: dict[str, object], kind: str | None) -> None:
    assert classify(attributes) == kind


def test_a_recorded_rollup_reads_back_field_for_field() -> None:
    """Every field distinct, so that a field read into another's place is seen."""
    names = [f.name for f in dataclasses.fields(Rollup)]
    values: dict[str, object] = {}
    for number, name in enumerate(names, 1):
        default = Rollup.__dataclass_fields__[name].default
        if isinstance(default, tuple):
            values[name] = (name, str(number))
        elif isinstance(default, int) and not isinstance(default, float):
            values[name] = number
        else:
            values[name] = number + 0.5
    rollup = Rollup(**values)  # type: ignore[arg-type]
    assert Rollup.from_attributes(rollup.to_attributes()) == rollup
