"""``call_record`` sets every field of its record itself, without the class's constructor:
field for field, the record the constructor makes of the same span, given the same
readings (``call_fields``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from chainlat._core import attributes as attr
from chainlat._core.records import (
    SpanRecord,
    call_fields,
    call_marks,
    call_record,
    step_name_of,
)
from support.fuzz_traces import CALL_KEYS, CALL_VALUES, FUZZ

_KINDS = st.sampled_from(["inference", "data", "tool", "workflow", None])


def _by_constructor(
    kind: Any, attributes: Mapping[str, object], ttft_ms: float | None
) -> SpanRecord:
    """The record as call_record made it with SpanRecord(...)."""
    cache_hit = attributes.get(attr.CACHE_HIT) is True
    step_name = step_name_of(attributes)
    if kind != "inference":
        record = SpanRecord(7, 3, "span", 10, 20, kind, cache_hit)
        if step_name is not None:
            record.step_name = step_name
        return record
    (
        tokens_in, tokens_out, ttft, model, source, user_facing, cache_read, has_output,
        ttft_marked, operation, unusable, streamed, asked_tools,
    ) = call_fields(attributes)  # fmt: skip
    if ttft_ms is not None:  # a first token given: the marks are read for it
        has_output, ttft_marked, operation = call_marks(attributes, ttft_ms, source)
        unusable = None
    return SpanRecord(
        7, 3, "span", 10, 20, kind, cache_hit, tokens_in, tokens_out,
        ttft_ms if ttft_ms is not None else ttft, model, source, step_name, user_facing,
        cache_read, False, has_output, ttft_marked, operation, ttft_unusable=unusable,
        streamed=streamed, asked_tools=asked_tools,
    )  # fmt: skip


def _fields(record: SpanRecord) -> list[tuple[str, type, Any]]:
    """Every field, its type and value: a field left unset raises here."""
    return [
        (field.name, type(getattr(record, field.name)), getattr(record, field.name))
        for field in dataclasses.fields(SpanRecord)
    ]


_MARKED: dict[str, object] = {
    attr.STEP_KIND: "inference",
    attr.USER_FACING: True,
    attr.CACHE_HIT: True,
    attr.STEP_NAME: "answer",
}
"""A call user-facing, a cache hit and named: marks the fuzzed attributes rarely hold."""


@FUZZ
@given(_KINDS, st.dictionaries(CALL_KEYS, CALL_VALUES, max_size=8), st.none() | st.floats(0, 1e3))
@example("inference", _MARKED, None)
@example("tool", _MARKED, None)
def test_every_field_is_the_constructors(
    kind: Any, attributes: dict[str, object], ttft_ms: float | None
) -> None:
    made = call_record(7, 3, "span", 10, 20, kind, attributes, ttft_ms)
    assert _fields(made) == _fields(_by_constructor(kind, attributes, ttft_ms))


def test_a_first_token_the_application_marked_is_marked_either_way() -> None:
    attributes = {attr.STEP_KIND: "inference", attr.LATENCY_TTFT_MS: 12.5}
    made = call_record(7, 3, "span", 10, 20, "inference", attributes)
    assert (made.ttft_ms, made.source, made.ttft_marked) == (12.5, "chainlat", True)
    assert _fields(made) == _fields(_by_constructor("inference", attributes, None))


def test_records_are_compared_field_by_field() -> None:
    made = call_record(7, 3, "span", 10, 20, "inference", {attr.GEN_AI_OPERATION_NAME: "chat"})
    assert (made.operation, made.has_output, made.failed) == ("chat", False, False)
    assert _fields(dataclasses.replace(made, failed=True)) != _fields(made)
