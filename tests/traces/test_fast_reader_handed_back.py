"""What the quick OTLP/JSON path leaves to the validating path: every line off the common
layout is handed back, a file of such lines keeps every message of the validating path,
and the one known difference (a number beyond a double in a field not read)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from chainlat.traces import _files
from chainlat.traces._fast import quick_spans
from support.fast_reader import (
    ORIGIN,
    file_runs,
    no_quick_path,
    one_line,
    run_fields,
    validating,
)

# --- what the quick path leaves to the validating path ----------------------------------

HANDED_BACK = {
    "two kinds in one value": one_line(
        [{"key": "gen_ai.operation.name", "value": {"intValue": "1", "stringValue": "chat"}}]
    ),
    "a null value": one_line(
        [{"key": "gen_ai.operation.name", "value": {"stringValue": None, "intValue": "1"}}]
    ),
    "an empty value": one_line([{"key": "gen_ai.operation.name", "value": {}}]),
    "an unknown kind of value": one_line(
        [{"key": "gen_ai.operation.name", "value": {"kvlistValue": {"values": []}}}]
    ),
    "base64 ids": one_line([], traceId="q83vEjRWeJCrze8SNFZ4kA==", spanId="AAAAAAAAAKE="),
    "times as numbers": one_line([], startTimeUnixNano=1_700_000_000_000_000_000),
    "a negative duration": one_line([], endTimeUnixNano="1600000000000000000"),
    "a lone surrogate": one_line([]).replace(b"invoke_workflow w", b"w\\ud800"),
    "invalid UTF-8 in a field not read": one_line([], kind="x").replace(b'"x"', b'"\xff"'),
    "an api/v3 response": orjson.dumps({"result": {"resourceSpans": []}, "resourceSpans": []}),
    "an old request": orjson.dumps(
        {"resourceSpans": [{"instrumentationLibrarySpans": [{"spans": []}]}]}
    ),
    "not JSON": b'{"resourceSpans": [',
    "nested too deep": b'{"resourceSpans": [{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}]}",
}


@pytest.mark.parametrize("line", HANDED_BACK.values(), ids=HANDED_BACK.keys())
def test_what_is_not_the_common_layout_is_handed_back(line: bytes) -> None:
    assert quick_spans(line, ORIGIN) is None


def test_a_file_of_odd_lines_keeps_every_message_of_the_validating_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "odd.jsonl"
    good = one_line([{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}}])
    path.write_bytes(b"\n".join([good, *HANDED_BACK.values(), good]) + b"\n")
    quick, quick_counters = file_runs(path)
    monkeypatch.setattr(_files, "quick_spans", no_quick_path)
    slow, slow_counters = file_runs(path)
    assert [run_fields(r) for r in quick] == [run_fields(r) for r in slow]
    assert quick_counters == slow_counters
    assert quick_counters.bad_lines > 0
    assert quick_counters.warnings() == slow_counters.warnings()


def test_a_number_beyond_a_double_in_a_field_not_read_is_the_one_known_difference() -> None:
    """The decoder skips fields chainlat does not read without parsing their numbers: a
    ``1e999`` there is read past by the quick path, refused by the validating path."""
    line = one_line([], kind="x").replace(b'"x"', b"1e999")
    assert isinstance(validating(line), str)
    assert quick_spans(line, ORIGIN) is not None
