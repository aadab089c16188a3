"""Fuzzed and hostile lines by the quick OTLP/JSON path and the validating path: the same
spans, field for field, or handed back; and the comparison itself tells a one-field
difference."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chainlat.traces import BadSpan, unread_spans
from chainlat.traces._fast import quick_spans
from chainlat.traces._parse import walked_unread_spans
from support.fast_reader import (
    ORIGIN,
    assert_agree,
    one_line,
    validating,
)
from support.fuzz_traces import ANY_VALUE, FUZZ, KEYS, OTLP_LINE, TIME, VALID_TIME

# --- fuzzed lines -------------------------------------------------------------------------


@FUZZ
@given(OTLP_LINE)
def test_fuzzed_lines_get_the_same_spans_or_are_handed_back(doc: Any) -> None:
    line = json.dumps(doc).encode()
    assert_agree(line)


@FUZZ
@given(OTLP_LINE)
def test_fuzzed_lines_compact_as_orjson_writes_them(doc: Any) -> None:
    try:
        line = orjson.dumps(doc)
    except TypeError:  # an integer beyond 64 bits: orjson does not write it
        return
    assert_agree(line)


# Well-formed spans whose attribute values, events and status are drawn from the hostile
# ones: the lines the quick path answers for, mostly.
_SPAN = st.fixed_dictionaries(
    {
        "traceId": st.sampled_from(["ab" * 16, "CD" * 16]),
        "spanId": st.sampled_from(["00000000000000a1", "00000000000000a2"]),
        "name": st.sampled_from(["invoke_workflow w", "chat m", "record_outcome"]),
        "startTimeUnixNano": VALID_TIME.map(str),
        "endTimeUnixNano": VALID_TIME.map(str),
        "attributes": st.lists(st.fixed_dictionaries({"key": KEYS, "value": ANY_VALUE})),
    },
    optional={
        "parentSpanId": st.sampled_from(["00000000000000a1", "", None]),
        "events": st.lists(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["chainlat.first_token", "other"]), "timeUnixNano": TIME}
            ),
            max_size=2,
        ),
        "status": st.none() | st.fixed_dictionaries({"code": st.sampled_from([0, 2, "x"])}),
        "flags": st.sampled_from([0, 0x300, 0x100, -1]),
        "kind": st.integers(0, 5),
    },
)


@FUZZ
@given(st.lists(_SPAN, min_size=1, max_size=4))
def test_fuzzed_attributes_of_well_formed_spans_agree(spans: list[Any]) -> None:
    assert_agree(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode())


def test_records_and_attributes_are_compared_field_by_field() -> None:
    """The agreement above compares every field: a record that differs in one is unequal."""
    line = one_line([{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}}])
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    trace_id, root, span = quick[0]
    moved = dataclasses.replace(span.record, end_ns=span.record.end_ns + 1)
    assert [(trace_id, root, dataclasses.replace(span, record=moved))] != validating(line)


def test_every_field_of_a_quick_record_is_set_whatever_the_kind() -> None:
    """The quick path sets each field without the constructor: a field it forgot would be
    unset, for a model call and for any other span alike."""
    for attributes in (
        [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
        [{"key": "chainlat.step.kind", "value": {"stringValue": "data"}}],
        [],
    ):
        quick = quick_spans(one_line(attributes), ORIGIN)
        assert quick is not None
        _, _, span = quick[0]
        for instance in (span, span.record):
            unset = [f.name for f in dataclasses.fields(instance) if not hasattr(instance, f.name)]
            assert unset == []
        assert quick == validating(one_line(attributes))


def test_spans_of_traces_that_take_turns_keep_their_own_trace_ids() -> None:
    """The trace id is checked and lowered once for spans of one trace that come one after
    another: traces taking turns, in either case, and a bad id after a good one."""
    spans = [
        {
            "traceId": trace_id,
            "spanId": f"{number:016x}",
            "name": "s",
            "startTimeUnixNano": "1",
            "endTimeUnixNano": "2",
        }
        for number, trace_id in enumerate(("AB" * 16, "cd" * 16, "ab" * 16, "AB" * 16), 1)
    ]
    line = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    assert [trace_id for trace_id, _, _ in quick] == ["ab" * 16, "cd" * 16, "ab" * 16, "ab" * 16]
    assert quick == validating(line)
    spans.append({**spans[-1], "traceId": "zz" * 16, "spanId": "00000000000000ff"})
    line = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]})
    assert quick_spans(line, ORIGIN) is None


# --- what a line would leave out, quick path first -----------------------------------------


def _unread_outcome(count: Any, doc: Any) -> tuple[str, Any]:
    try:
        return "read", count(doc)
    except BadSpan as exc:
        return "skipped", str(exc)
    except Exception as exc:  # not a document (the receiver checks its shape first)
        return "failed", type(exc).__name__


@FUZZ
@given(OTLP_LINE)
def test_unread_spans_with_the_quick_path_first_says_what_the_walk_says(doc: Any) -> None:
    """The receiver's check of a request (``traces.unread_spans``: the quick path, then the
    validating walk) says what the walk alone says: the spans left out and the first's
    reason, or the line skipped whole."""
    assert _unread_outcome(unread_spans, doc) == _unread_outcome(walked_unread_spans, doc)


@FUZZ
@given(st.lists(_SPAN, min_size=1, max_size=4))
def test_unread_spans_of_well_formed_spans_agree(spans: list[Any]) -> None:
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}
    assert _unread_outcome(unread_spans, doc) == _unread_outcome(walked_unread_spans, doc)


def test_a_request_the_quick_path_reads_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The quick path answers for a request of spans as chainlat writes them: the walk is
    not asked (it is what costs three times as much)."""
    import chainlat.traces._files as files

    def walked(doc: Any) -> tuple[int, str]:
        raise AssertionError("walked")

    monkeypatch.setattr(files, "walked_unread_spans", walked)
    span = {
        "traceId": "ab" * 16,
        "spanId": "00000000000000a1",
        "name": "chat m",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000005000000",
        "attributes": [{"key": "gen_ai.request.model", "value": {"stringValue": "m"}}],
    }
    assert unread_spans({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) == (0, "")
    backwards = {**span, "endTimeUnixNano": "1699999999999999999"}
    with pytest.raises(AssertionError, match="walked"):  # not the quick path's to say
        unread_spans({"resourceSpans": [{"scopeSpans": [{"spans": [backwards]}]}]})
