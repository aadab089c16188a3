"""The rollup with other instrumentations' spans: one call seen twice, framework spans beside
the steps. Exact numbers from hand-built records (times in ms)."""

from __future__ import annotations

import pytest

from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup, find_twins
from chainlat._core.runs import steps_of
from support.records import rec

ROOT = rec(1, None, "invoke_workflow w", 0, 100, "workflow", source="chainlat")


def roll(*spans: SpanRecord) -> Rollup:
    return compute_rollup(ROOT, list(spans))


def test_a_callback_span_and_the_wire_span_beside_it_are_one_call() -> None:
    """LangChain's LLM span (not made current) and the HTTP-level span it caused, siblings."""
    r = roll(
        rec(2, 1, "ChatOpenAI", 10, 60, "inference", source="openinference", model="gpt-4o-mini",
            input_tokens=100, output_tokens=20),
        rec(3, 1, "chat gpt-4o-mini", 12, 58, "inference", source="chainlat",
            model="gpt-4o-mini-2024-07-18", input_tokens=100, output_tokens=20),
    )  # fmt: skip
    assert (r.inference_count, r.step_count) == (1, 1)
    assert (r.input_tokens, r.output_tokens) == (100, 20)
    assert r.inference_ms == 50
    assert r.inference_sum_ms == 50
    assert r.critical_path == ("ChatOpenAI",)


def test_two_parallel_calls_of_one_instrumentation_are_two_calls() -> None:
    r = roll(
        rec(2, 1, "chat m", 10, 60, "inference", source="chainlat", model="m", output_tokens=5),
        rec(3, 1, "chat m", 12, 58, "inference", source="chainlat", model="m", output_tokens=7),
    )
    assert r.inference_count == 2
    assert r.output_tokens == 12


def test_calls_of_different_models_are_never_twins() -> None:
    r = roll(
        rec(2, 1, "ChatOpenAI", 10, 60, "inference", source="openinference", model="gpt-4o"),
        rec(3, 1, "chat gpt-4o-mini", 12, 58, "inference", source="chainlat", model="gpt-4o-mini"),
    )
    assert r.inference_count == 2


def test_two_parallel_calls_seen_by_two_instrumentations_are_two_calls() -> None:
    """Each framework span pairs with one wire span: 4 spans, 2 calls, tokens once each."""
    r = roll(
        rec(2, 1, "ChatOpenAI", 10, 60, "inference", source="openinference", model="m",
            output_tokens=5),
        rec(3, 1, "ChatOpenAI", 10, 80, "inference", source="openinference", model="m",
            output_tokens=7),
        rec(4, 1, "chat m", 11, 59, "inference", source="chainlat", model="m", output_tokens=5),
        rec(5, 1, "chat m", 11, 79, "inference", source="chainlat", model="m", output_tokens=7),
    )  # fmt: skip
    assert r.inference_count == 2
    assert r.output_tokens == 12
    assert r.inference_ms == 70


def test_a_barely_overlapping_span_is_not_a_twin() -> None:
    twins = find_twins(
        1,
        [
            rec(2, 1, "a", 0, 50, "inference", source="x", model="m"),
            rec(3, 1, "b", 40, 90, "inference", source="y", model="m"),
        ],
    )
    assert twins == {}


def test_a_framework_span_that_ends_last_does_not_hide_the_steps_beside_it() -> None:
    """A graph span (transparent) holding the LLM span, the wire span beside it, ending last."""
    r = roll(
        rec(2, 1, "LangGraph", 5, 95),
        rec(3, 2, "agent", 6, 94),
        rec(4, 1, "chat m", 10, 40, "inference", source="chainlat"),
        rec(5, 1, "execute_tool lookup", 45, 60, "tool", source="chainlat"),
        rec(6, 1, "chat m", 62, 90, "inference", source="chainlat"),
    )
    assert r.inference_ms == 30 + 28
    assert r.tool_ms == 15
    assert r.overhead_ms == 100 - 58 - 15
    assert r.critical_path == ("chat m", "execute_tool lookup", "chat m")


def test_steps_inside_a_transparent_span_keep_their_time() -> None:
    r = roll(
        rec(2, 1, "chain", 0, 100),
        rec(3, 2, "retriever", 10, 30, "data", source="openinference"),
        rec(4, 2, "llm", 30, 90, "inference", source="openinference"),
    )
    assert (r.data_ms, r.inference_ms, r.overhead_ms) == (20, 60, 20)
    assert r.critical_path == ("retriever", "llm")


def test_the_steps_of_a_run_list_a_call_seen_twice_once_with_its_first_token() -> None:
    records = [
        rec(2, 1, "ChatOpenAI", 10, 60, "inference", source="openinference", model="m"),
        rec(3, 1, "chat m", 12, 58, "inference", source="chainlat", model="m", ttft_ms=20.0),
    ]
    [step] = steps_of(ROOT, records)
    assert (step.name, step.duration_ms) == ("ChatOpenAI", 50.0)
    assert step.ttft_ms == pytest.approx(22.0)


def test_a_nan_recorded_rollup_is_no_rollup() -> None:
    attributes = Rollup(100, 50, 0, 0, 50).to_attributes()
    assert Rollup.from_attributes(attributes) is not None
    for bad in ("NaN", float("nan"), float("inf"), "-Infinity"):
        assert Rollup.from_attributes({**attributes, "chainlat.chain.total_ms": bad}) is None
    assert Rollup.from_attributes({**attributes, "chainlat.chain.step_count": "NaN"}) is None
