"""A span read from a trace file gets the record the live path gives the same attributes:
the readers' ``derive`` reads a model call's tokens and first token by the conventions'
one rule (finite, non-negative, at most about 31 years), and leaves them unset on other
kinds of span, as ``call_record`` does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainlat._core import attributes as attr
from chainlat._core.records import SpanRecord
from chainlat._core.runs import record_of
from chainlat.traces._derive import Readings, derive
from support.fuzz_traces import CALL_KEYS, CALL_VALUES, FUZZ

_KINDS = st.sampled_from(["inference", "data", "tool", "workflow"])


def _derived_fields(derived: Readings) -> tuple[Any, ...]:
    return (
        derived.kind, derived.ttft_ms, derived.input_tokens, derived.output_tokens,
        derived.cache_hit, derived.model, derived.source, derived.step_name,
        derived.user_facing, derived.cache_read_tokens, derived.has_output,
        derived.ttft_marked, derived.operation, derived.ttft_unusable,
    )  # fmt: skip


def _record_fields(record: SpanRecord) -> tuple[Any, ...]:
    return (
        record.kind, record.ttft_ms, record.input_tokens, record.output_tokens,
        record.cache_hit, record.model, record.source, record.step_name, record.user_facing,
        record.cache_read_tokens, record.has_output, record.ttft_marked, record.operation,
        record.ttft_unusable,
    )  # fmt: skip


def _both(attributes: dict[str, object]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    read = _derived_fields(derive(dict(attributes)))
    live = _record_fields(record_of(1, None, "span", 0, 10, attributes))
    return read, live


@FUZZ
@given(kind=_KINDS, attributes=st.dictionaries(CALL_KEYS, CALL_VALUES, max_size=8))
def test_a_read_span_gets_the_live_record_of_its_attributes(
    kind: str, attributes: dict[str, object]
) -> None:
    attributes[attr.STEP_KIND] = kind
    read, live = _both(attributes)
    assert read == live


@pytest.mark.parametrize("ttft_ms", [-5.0, 2e12, float("inf")])
def test_a_first_token_the_rule_refuses_is_none_when_read(ttft_ms: float) -> None:
    read, live = _both({attr.STEP_KIND: "inference", attr.LATENCY_TTFT_MS: ttft_ms})
    assert read[1] is None
    assert read[-1] is not None and read[-1].startswith("chainlat.latency.ttft_ms = ")
    assert read == live


def test_a_tool_span_has_no_first_token_or_tokens_when_read() -> None:
    read, _ = _both(
        {
            attr.STEP_KIND: "tool",
            attr.LATENCY_TTFT_MS: 12.0,
            attr.GEN_AI_USAGE_INPUT_TOKENS: 30,
        }
    )
    assert read[1:4] == (None, None, None)
