"""A model call's readings by the plan of its keys (``call_readings``, ``call_fields``)
against each reading asked on its own: the same tokens, first token, model and source,
whatever the keys, their order, their values, and the values of an earlier span with the
same keys."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from chainlat._core import conventions
from chainlat._core.conventions import source_of
from chainlat._core.records import call_fields
from support.fuzz_traces import CALL_KEYS, CALL_VALUES, FUZZ

_ATTRIBUTES = st.dictionaries(CALL_KEYS, CALL_VALUES, max_size=8)


def _one_by_one(attributes: dict[str, Any]) -> tuple[Any, ...]:
    return (
        conventions.input_tokens_of(attributes),
        conventions.output_tokens_of(attributes),
        conventions.ttft_ms_of(attributes),
        conventions.model_of(attributes),
        source_of(attributes),
    )


def _by_plan(attributes: dict[str, Any]) -> tuple[Any, ...]:
    """Tokens, first token, model and source, as ``call_fields`` reads them by the plan."""
    return call_fields(attributes)[:5]


def _same(found: tuple[Any, ...], expected: tuple[Any, ...]) -> bool:
    """Equal, type for type (1 is not 1.0 here)."""
    return [(type(v), v) for v in found] == [(type(v), v) for v in expected]


@FUZZ
@given(_ATTRIBUTES, st.lists(CALL_VALUES, min_size=8, max_size=8))
def test_readings_by_plan_are_the_readings_one_by_one(
    attributes: dict[str, Any], earlier_values: list[Any]
) -> None:
    # A span with the same keys read first: its plan is the one the second span reads by.
    earlier = dict(zip(attributes, earlier_values, strict=False))
    assert _same(_by_plan(earlier), _one_by_one(earlier))
    assert _same(_by_plan(attributes), _one_by_one(attributes))
    assert _same(conventions.call_readings(attributes), _one_by_one(attributes)[:4])


def test_the_first_usable_key_wins_in_each_convention_order() -> None:
    attributes = {
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.response.model": "unknown",  # a placeholder: the request's model is read
        "gen_ai.usage.input_tokens": "x",  # not a count: the next key's is read
        "llm.token_count.prompt": "120",
        "gen_ai.response.time_to_first_chunk": 0.25,
        "chainlat.latency.ttft_ms": -1.0,  # not a duration: the seconds are read
    }
    assert _by_plan(attributes) == (120, None, 250.0, "gpt-4o", "other")
    # A first token in ms past the limit is no reading, and the seconds are not asked.
    attributes["chainlat.latency.ttft_ms"] = 2e12
    assert _by_plan(attributes) == (120, None, None, "gpt-4o", "other")
