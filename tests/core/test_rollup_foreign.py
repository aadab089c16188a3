"""The rollup with other instrumentations' spans: one call seen twice, framework spans beside
the steps. Exact numbers from hand-built records (times in ms)."""

from __future__ import annotations

import random

import pytest

from chainlat._core.rollup import WIRE, Rollup, SpanRecord, compute_rollup, find_twins
from chainlat._core.runs import steps_of
from support.records import rec

ROOT = rec(1, None, "invoke_workflow w", 0, 100, "workflow", source="chainlat")


def roll(*spans: SpanRecord) -> Rollup:
    return compute_rollup(ROOT, list(spans))


def test_a_callback_span_and_the_wire_span_beside_it_are_one_call_timed_by_the_wire() -> None:
    """LangChain's LLM span (not made current) and the HTTP-level span it caused, siblings:
    one call, named by the framework, timed by the wire; the framework's own 4 ms are
    overhead, as they are for the plain SDK traced at the wire."""
    r = roll(
        rec(2, 1, "ChatOpenAI", 10, 60, "inference", source="openinference", model="gpt-4o-mini",
            input_tokens=100, output_tokens=20),
        rec(3, 1, "chat gpt-4o-mini", 12, 58, "inference", source=WIRE,
            model="gpt-4o-mini-2024-07-18", input_tokens=100, output_tokens=20),
    )  # fmt: skip
    assert (r.inference_count, r.step_count) == (1, 1)
    assert (r.input_tokens, r.output_tokens) == (100, 20)
    assert r.inference_ms == 46
    assert r.overhead_ms == 54
    assert r.inference_sum_ms == 50
    assert r.critical_path == ("ChatOpenAI",)


def test_two_framework_spans_of_one_call_count_once_over_both_intervals() -> None:
    """Neither is at the wire: the longer counts, with the union of both intervals."""
    r = roll(
        rec(2, 1, "ChatOpenAI", 10, 60, "inference", source="openinference", model="m",
            input_tokens=100),
        rec(3, 1, "openai.chat", 12, 62, "inference", source="traceloop", model="m",
            input_tokens=100),
    )  # fmt: skip
    assert (r.inference_count, r.input_tokens) == (1, 100)
    assert r.inference_ms == 52
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


# -- the wire times a call seen twice ---------------------------------------------------------
OWN_WIRE: dict[str, object] = {"source": WIRE, "streamed": False}
"""chainlat's wire span of a call, which says whether the call streamed (rule 18)."""

# Shapes of the interop matrix's +httpx cases (tests/interop): a framework's model-call span
# with chainlat's HTTP-level span inside it (made current: traceloop, OpenInference openai,
# pydantic-ai, openai-v2, the Agents SDK) or beside it (callbacks: LangChain, LiteLLM).


def test_a_wire_span_inside_a_framework_call_times_it() -> None:
    """openai.chat (traceloop) 10-60 around the HTTP call 14-55: the model's 41 ms are
    inference; request building (4 ms) and response handling (5 ms) are overhead."""
    r = roll(
        rec(2, 1, "openai.chat", 10, 60, "inference", source="traceloop", model="m",
            input_tokens=111, output_tokens=20),
        rec(3, 2, "chat m", 14, 55, "inference", **OWN_WIRE, model="m", input_tokens=111,
            output_tokens=20),
    )  # fmt: skip
    assert (r.inference_count, r.step_count) == (1, 1)
    assert (r.input_tokens, r.output_tokens) == (111, 20)
    assert (r.inference_ms, r.overhead_ms) == (41, 59)
    assert r.critical_path == ("openai.chat",)


def test_a_framework_span_tagged_by_chainlat_is_timed_by_its_wire_span_too() -> None:
    """Inside chainlat.workflow the processor tags pydantic-ai's and openai-v2's GenAI
    spans with chainlat.step.kind, so they read as chainlat's: the wire still times them."""
    r = roll(
        rec(2, 1, "chat sim-plan", 10, 60, "inference", source="chainlat", model="m"),
        rec(3, 2, "chat sim-plan", 15, 52, "inference", **OWN_WIRE, model="m"),
    )
    assert (r.inference_count, r.inference_ms, r.overhead_ms) == (1, 37, 63)


def test_the_wire_times_a_call_through_transparent_spans_and_every_span_around_it() -> None:
    """A hand-written chainlat.inference around an instrumented SDK call around an HTTP
    span inside a transparent one: one call, its inference the wire's 30 ms only."""
    r = roll(
        rec(2, 1, "plan", 5, 80, "inference", source="chainlat"),
        rec(3, 2, "chat m", 10, 70, "inference", source="gen_ai", model="m"),
        rec(4, 3, "POST", 12, 66),
        rec(5, 4, "chat m", 20, 50, "inference", **OWN_WIRE, model="m", input_tokens=9),
    )
    assert (r.inference_count, r.step_count, r.input_tokens) == (1, 1, 9)
    assert (r.inference_ms, r.overhead_ms) == (30, 70)
    assert r.critical_path == ("plan",)


def test_a_call_retried_at_the_wire_is_one_call_with_both_requests_as_inference() -> None:
    r = roll(
        rec(2, 1, "openai.chat", 10, 90, "inference", source="traceloop", model="m"),
        rec(3, 2, "chat m", 12, 30, "inference", **OWN_WIRE, model="m"),
        rec(4, 2, "chat m", 40, 85, "inference", **OWN_WIRE, model="m", input_tokens=7),
    )
    assert (r.inference_count, r.input_tokens) == (1, 7)
    assert (r.inference_ms, r.overhead_ms) == (18 + 45, 100 - 63)


def test_a_wire_span_longer_than_its_framework_twin_counts_over_its_own_interval() -> None:
    """LiteLLM dates its span from its own clock readings: it can end before the wire."""
    r = roll(
        rec(2, 1, "litellm_request", 20, 50, "inference", source="gen_ai", model="m"),
        rec(3, 1, "chat m", 18, 52, "inference", **OWN_WIRE, model="m", output_tokens=4),
    )
    assert (r.inference_count, r.output_tokens) == (1, 4)
    assert (r.inference_ms, r.overhead_ms) == (34, 66)
    assert r.critical_path == ("chat m",)


def test_parallel_calls_each_with_its_wire_span_inside_keep_their_own_tokens() -> None:
    """The two sim-fast calls of the matrix, started together. Each wire span lies inside
    both framework spans; matched by time alone, each went to the other call's span (a
    tie, the longer span first) and the tokens crossed: 33 + 33 read instead of 31 + 33,
    the occasional 365 input tokens instead of 363. A span inside a call is that call's."""
    records = [
        rec(2, 1, "ChatCompletion", 9, 92, "inference", source="openinference",
            model="sim-fast", input_tokens=31),
        rec(3, 2, "chat sim-fast", 15, 88, "inference", **OWN_WIRE, model="sim-fast",
            input_tokens=31),
        rec(4, 1, "ChatCompletion", 11.5, 90.5, "inference", source="openinference",
            model="sim-fast", input_tokens=33),
        rec(5, 4, "chat sim-fast", 12, 90, "inference", **OWN_WIRE, model="sim-fast",
            input_tokens=33),
    ]  # fmt: skip
    assert find_twins(1, records) == {}
    r = roll(*records)
    assert (r.inference_count, r.input_tokens) == (2, 64)
    assert (r.inference_ms, r.overhead_ms) == (73, 27)


def test_parallel_callback_calls_pair_with_the_wire_span_of_the_same_tokens() -> None:
    """Siblings (LangChain): the wire span of the 31-token call overlaps the 33-token
    call's span the most; the same token count pairs it with its own."""
    records = [
        rec(2, 1, "ChatOpenAI", 10, 60, "inference", source="openinference", model="m",
            input_tokens=33),
        rec(3, 1, "ChatOpenAI", 11, 62, "inference", source="openinference", model="m",
            input_tokens=31),
        rec(4, 1, "chat m", 11, 60, "inference", **OWN_WIRE, model="m", input_tokens=31),
        rec(5, 1, "chat m", 12, 59, "inference", **OWN_WIRE, model="m", input_tokens=33),
    ]  # fmt: skip
    twins = find_twins(1, records)
    assert {k: v.span_id for k, v in twins.items()} == {4: 3, 5: 2}
    r = roll(*records)
    assert (r.inference_count, r.input_tokens) == (2, 64)


def test_a_nested_workflow_never_hides_the_steps_beside_it() -> None:
    """The Agents SDK's ``trace("agent")``, bridged by OpenInference (an AGENT span, so a
    nested workflow), is never current: the retrieval run inside it in time lands beside
    it. Like a transparent span, the nested workflow's own time is no step's, so the
    retrieval stays on the critical path (it was lost: data -30 ms)."""
    r = roll(
        rec(2, 1, "agent", 1, 99, "workflow", source="openinference"),
        rec(3, 1, "retrieve", 1.5, 31.5, "data", source="chainlat"),
        rec(4, 2, "generation", 33, 60, "inference", source="openinference"),
        rec(5, 2, "lookup_order", 61, 86, "tool", source="openinference"),
        rec(6, 2, "generation", 87, 98, "inference", source="openinference"),
    )
    assert (r.data_ms, r.inference_ms, r.tool_ms) == (30, 27 + 11, 25)
    assert r.overhead_ms == 100 - 30 - 38 - 25
    assert r.critical_path == ("retrieve", "agent", "generation", "lookup_order", "generation")


def _random_calls(rng: random.Random, *, malformed: bool) -> list[SpanRecord]:
    records: list[SpanRecord] = []
    for index in range(rng.randint(0, 25)):
        span_id = index + 2
        parent: int | None = rng.choice([1, *[r.span_id for r in records]])
        start = rng.randint(-20, 110)
        end = start + rng.randint(-30 if malformed else 1, 60)
        if malformed and rng.random() < 0.1:
            span_id = rng.randint(1, index + 2)  # duplicate ids, the root's, cycles
        kind = rng.choice((None, "inference", "inference", "data", "tool", "workflow"))
        records.append(
            rec(span_id, parent, f"s{index}", start, end, kind,  # type: ignore[arg-type]
                source=rng.choice((WIRE, WIRE, "chainlat", "openinference", "gen_ai")),
                model=rng.choice((None, "m", "n")),
                input_tokens=rng.choice((None, 10, 20)))
        )  # fmt: skip
    return records


@pytest.mark.parametrize("malformed", [False, True])
def test_calls_seen_twice_at_random_keep_the_rollup_whole(malformed: bool) -> None:
    """Wire spans, framework spans and twins at random, malformed trees included: the
    split sums to the total and every counted call keeps its tokens."""
    rng = random.Random(20261203 + malformed)
    for _ in range(300):
        records = _random_calls(rng, malformed=malformed)
        r = roll(*records)
        parts = (r.inference_ms, r.data_ms, r.tool_ms, r.overhead_ms)
        assert all(part >= 0 for part in parts)
        assert sum(parts) == pytest.approx(r.total_ms, abs=1e-9)
        assert r.inference_sum_ms >= r.inference_ms - 1e-9
        assert r.input_tokens <= 20 * r.inference_count
