"""Attributes by the quick OTLP/JSON path: carried generically through the validating path's
key filter, an attribute list worked out once and shared, what is counted per span still
counted per span, and named steps, first outputs and cache-read tokens read as the
validating path reads them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from chainlat.traces import _fast, _files, _parse
from chainlat.traces._fast import quick_spans
from support.fast_reader import (
    ORIGIN,
    assert_agree,
    file_runs,
    no_quick_path,
    one_line,
    run_fields,
    validating,
)

# --- attributes are carried generically -------------------------------------------------


def test_every_kept_key_is_kept_a_new_chain_attribute_too() -> None:
    line = one_line(
        [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
            {"key": "chainlat.chain.first_output_ms", "value": {"doubleValue": 12.5}},
            {"key": "chainlat.chain.cost_usd", "value": {"doubleValue": 0.002}},
            {"key": "chainlat.latency.queue_ms", "value": {"intValue": "3"}},
            {"key": "not.read", "value": {"stringValue": "dropped"}},
        ]
    )
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    assert quick == validating(line)
    attributes = quick[0][2].attributes
    assert attributes["chainlat.chain.first_output_ms"] == 12.5
    assert attributes["chainlat.chain.cost_usd"] == 0.002
    assert attributes["chainlat.latency.queue_ms"] == 3
    assert "not.read" not in attributes


@pytest.fixture
def fresh_caches() -> Iterator[None]:
    """The readers' caches of keys and of what an attribute list gives, empty for a test
    and after it: the very dicts the readers look in (bound to their functions at import,
    so replacing the module's name would not reach them)."""
    caches: tuple[dict[Any, Any], ...] = (_parse.key_cache, _fast._derived_cache)
    for cache in caches:
        cache.clear()
    yield
    for cache in caches:
        cache.clear()


def _forget_cached_reads() -> None:
    _parse.key_cache.clear()
    _fast._derived_cache.clear()


def test_a_key_the_validating_path_keeps_is_kept_whatever_its_name(
    monkeypatch: pytest.MonkeyPatch, fresh_caches: None
) -> None:
    """The quick path reads keys through the validating path's filter, not a list of its own:
    a key added there (``chainlat.step.name``) is carried here with no change."""
    line = one_line([{"key": "example.added", "value": {"stringValue": "plan"}}])
    before = quick_spans(line, ORIGIN)
    assert before is not None
    assert before[0][2].attributes == {}
    # Both caches now say the key is not kept: a test that adds it must start without them.
    assert _parse.key_cache["example.added"] is None
    assert len(_fast._derived_cache) == 1
    monkeypatch.setitem(_parse._KEYS, "example.added", "example.added")
    _forget_cached_reads()
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    assert quick[0][2].attributes == {"example.added": "plan"}


def test_spans_with_the_same_attribute_list_share_what_it_gives(fresh_caches: None) -> None:
    """An attribute list is worked out once and remembered: the next span with the same
    list gets the same attributes (one object), until the cache is emptied."""
    line = one_line([{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}])
    first = quick_spans(line, ORIGIN)
    again = quick_spans(line, ORIGIN)
    assert first is not None and again is not None
    assert len(_fast._derived_cache) == 1
    assert again[0][2].attributes is first[0][2].attributes
    _forget_cached_reads()
    fresh = quick_spans(line, ORIGIN)
    assert fresh is not None
    assert fresh[0][2].attributes is not first[0][2].attributes
    assert fresh == first


def test_spans_that_repeat_their_attributes_are_counted_as_often_as_they_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quick path works out a repeated attribute list once; what the validating path
    counts per span (a NaN dropped from an array) is still counted per span."""
    nan = {"arrayValue": {"values": [{"doubleValue": "NaN"}, {"doubleValue": 1.5}]}}
    attributes = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},
        {"key": "chainlat.chain.critical_path", "value": nan},
    ]
    path = tmp_path / "nan.jsonl"
    lines = [
        one_line(attributes, spanId=f"00000000000000a{n}", traceId=f"{n:032x}") for n in range(1, 4)
    ]
    path.write_bytes(b"\n".join(lines * 2) + b"\n")
    assert all(assert_agree(line) for line in lines)
    quick, quick_counters = file_runs(path)
    monkeypatch.setattr(_files, "quick_spans", no_quick_path)
    slow, slow_counters = file_runs(path)
    assert [run_fields(r) for r in quick] == [run_fields(r) for r in slow]
    assert quick_counters == slow_counters
    assert quick_counters.nonfinite_values == 6


def test_named_steps_and_the_first_output_reach_the_records_as_the_validating_path_reads_them(
    monkeypatch: pytest.MonkeyPatch, fresh_caches: None
) -> None:
    """``chainlat.step.name``, ``chainlat.step.user_facing`` and cache-read tokens, read
    field by field as the validating path proper (``_otlp_span``, through ``call_record``)
    reads them, whether or not the key filter already keeps them."""

    for key in (
        "chainlat.step.name",
        "chainlat.step.user_facing",
        "gen_ai.usage.cache_read.input_tokens",
    ):
        monkeypatch.setitem(_parse._KEYS, key, key)
    _forget_cached_reads()  # what was read before the keys were added
    call = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "gpt-4o"}},
        {"key": "chainlat.step.name", "value": {"stringValue": "plan"}},
        {"key": "chainlat.step.user_facing", "value": {"boolValue": True}},
        {"key": "gen_ai.usage.cache_read.input_tokens", "value": {"intValue": "40"}},
    ]
    tool = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
        {"key": "chainlat.step.name", "value": {"stringValue": "  "}},
    ]
    for attributes in (call, tool):
        line = one_line(attributes, name="chat gpt-4o")
        quick = quick_spans(line, ORIGIN)
        assert quick is not None
        raw = orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        assert quick == [_parse._otlp_span(raw, "spans[0]", ORIGIN)]
    found = quick_spans(one_line(call), ORIGIN)
    assert found is not None
    record = found[0][2].record
    assert (record.step_name, record.user_facing, record.cache_read_tokens) == ("plan", True, 40)


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("-9223372036854775808", -(2**63)),
        ("9223372036854775807", 2**63 - 1),
        ('"9223372036854775807"', 2**63 - 1),
        ("-9223372036854775809", None),  # orjson: a float; the standard library: an int
        ("9223372036854775808", None),
        ("18446744073709551616", None),
        ('"-9223372036854775809"', None),
        ('"9999999999999999999"', None),
    ],
)
def test_an_int_value_past_an_int64_is_not_read_by_either_path(written: str, read: object) -> None:
    """OTLP's ``intValue`` is an int64: both paths read the same, whatever the parser made
    of a number past 64 bits."""
    attributes = (
        '[{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}},'
        f' {{"key": "chainlat.latency.queue_ms", "value": {{"intValue": {written}}}}}]'
    )
    line = one_line([]).replace(b'"attributes":[]', b'"attributes":' + attributes.encode())
    assert b"queue_ms" in line
    found = validating(line)
    assert not isinstance(found, str), found
    assert found[0][2].attributes.get("chainlat.latency.queue_ms") == read
    quick = quick_spans(line, ORIGIN)
    assert quick is None or quick == found
