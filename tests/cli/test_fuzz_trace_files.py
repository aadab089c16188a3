"""Bad trace files to ``chainlat check``: corrupt, truncated, empty, binary or wrong-typed
files, spans and containers give one line naming the file and the field, exit code 2,
never a traceback; a span with a negative duration is dropped alone."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.check_input import (
    assert_one_clear_line,
    check,
    edited,
    set_field,
    spans_of,
    workflow_request,
)

_NAN_ATTRIBUTE = {"key": "x", "value": {"doubleValue": float("nan")}}

BAD_FILES: dict[str, tuple[Callable[[], bytes], str]] = {
    # name: (content, what the message must mention besides the file name)
    # A corrupt line among good ones is skipped and counted (tests/traces/test_hostile_traces.py);
    # a file where no line is spans is bad input.
    "corrupt line": (lambda: b"{not json\n{nor this\n", ":1: not valid JSON"),
    "truncated": (lambda: json.dumps(workflow_request()).encode()[:500], ":1: truncated"),
    "empty": (lambda: b"", "empty file"),
    "binary": (lambda: bytes(range(256)) * 40, ":1: not valid JSON"),
    # JSON the standard library reads (NaN) and chainlat refuses: the line's own reason.
    "NaN for a number": (
        lambda: edited(set_field(0, "attributes", [_NAN_ATTRIBUTE])).encode(),
        ":1: not valid JSON (",
    ),
    "bad UTF-8 on the second line of one document": (
        lambda: json.dumps(workflow_request(), indent=1).encode().replace(b'"', b'"\xff', 1),
        ":2: not valid JSON (",
    ),
    "wrong-typed start time": (
        lambda: edited(set_field(0, "startTimeUnixNano", {"nano": 1})).encode(),
        "startTimeUnixNano: expected an integer",
    ),
    "wrong-typed span id": (
        lambda: edited(set_field(1, "spanId", 12345)).encode(),
        "spanId: expected a hex id",
    ),
    "a span that is not an object": (
        lambda: edited(lambda spans: spans.append("span")).encode(),  # type: ignore[arg-type]
        "expected a span object",
    ),
    "not a trace at all": (lambda: b'{"hello": "world"}\n', "expected an OTLP/JSON request"),
    "no workflow span": (
        lambda: edited(
            lambda spans: spans.__setitem__(slice(None), [s for s in spans if "parentSpanId" in s])
        ).encode(),
        "nothing to judge",
    ),
}


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_trace_file_gives_one_line_naming_the_file(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    content, mentions = BAD_FILES[name]
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content())
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    line = assert_one_clear_line(code, err, mentions=mentions)
    assert str(path) in line or path.name in line
    assert out == ""


WRONG_SPANS: dict[str, tuple[Callable[[list[dict[str, Any]]], None], str]] = {
    # name: (edit, what the one line must say)
    "attributes not a list": (
        set_field(0, "attributes", "oops"),
        ":1: resourceSpans[0].scopeSpans[0].spans[0].attributes: expected a list of key/value"
        " pairs, got a string",
    ),
    "an attribute not an object": (
        set_field(0, "attributes", [7]),
        ":1: resourceSpans[0].scopeSpans[0].spans[0].attributes[0]: expected an object",
    ),
    "events not a list": (
        set_field(0, "events", {"name": "x"}),
        ":1: resourceSpans[0].scopeSpans[0].spans[0].events: expected a list of events, "
        "got an object",
    ),
}


@pytest.mark.parametrize("name", list(WRONG_SPANS))
def test_a_wrong_span_gives_one_line_naming_file_line_and_field(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    edit, mentions = WRONG_SPANS[name]
    path = tmp_path / "odd.jsonl"
    path.write_text(edited(edit))
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=f"{path}{mentions}")
    assert out == ""


def test_a_span_with_a_negative_duration_is_dropped_alone_in_one_warning_line(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """The span, not its line: the run is still judged, and one warning names the span."""
    path = tmp_path / "odd.jsonl"
    path.write_text(
        edited(
            lambda spans: spans[0].update(
                endTimeUnixNano=str(int(spans[0]["startTimeUnixNano"]) - 5_000_000)
            )
        )
    )
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    span = spans_of(json.loads(path.read_text()))[0]
    start, end = int(span["startTimeUnixNano"]), int(span["endTimeUnixNano"])
    assert code in (0, 1), err
    assert "OK" in out or "FAILED" in out
    (line,) = err.splitlines()
    assert line.startswith("chainlat: warning: 1 spans end before they start and were dropped")
    assert f"{path}:1: resourceSpans[0].scopeSpans[0].spans[0]: span 'data retrieve-docs' (" in line
    assert line.endswith(
        f"ends before it starts (end {end} < start {start} ns): a negative duration)"
    ), line


def _request_with(edit: Callable[[dict[str, Any]], None]) -> str:
    doc = copy.deepcopy(workflow_request())
    edit(doc)
    return json.dumps(doc) + "\n"


WRONG_CONTAINERS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "resourceSpans not a list": (
        lambda doc: doc.update(resourceSpans={"spans": []}),
        ":1: resourceSpans: expected a list, got an object",
    ),
    "a resource not an object": (
        lambda doc: doc["resourceSpans"].append("r"),
        ":1: resourceSpans[1]: expected an object, got a string",
    ),
    "scopeSpans not a list": (
        lambda doc: doc["resourceSpans"][0].update(scopeSpans="s"),
        ":1: resourceSpans[0].scopeSpans: expected a list of scopes, got a string",
    ),
    "spans not a list": (
        lambda doc: doc["resourceSpans"][0]["scopeSpans"][0].update(spans=12),
        ":1: resourceSpans[0].scopeSpans[0].spans: expected a list, got a number",
    ),
}


@pytest.mark.parametrize("name", list(WRONG_CONTAINERS))
def test_a_wrong_typed_container_is_bad_input_not_no_spans(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path, name: str
) -> None:
    edit, mentions = WRONG_CONTAINERS[name]
    path = tmp_path / "odd.jsonl"
    path.write_text(_request_with(edit))
    code, out, err = check(capsys, str(path), "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions=f"{path}{mentions}")
    assert out == ""


def test_a_huge_wrong_typed_value_is_quoted_short(
    capsys: pytest.CaptureFixture[str], budgets: Path, tmp_path: Path
) -> None:
    """An error quotes at most 60 characters of a value, so 10 MB of it gives a short line."""
    path = tmp_path / "odd.jsonl"
    path.write_text(edited(set_field(0, "startTimeUnixNano", "9x" * 5_000_000)))
    code, _, err = check(capsys, str(path), "--budgets", str(budgets))
    line = assert_one_clear_line(code, err, mentions="startTimeUnixNano: expected an integer")
    assert line.endswith("got " + repr("9x" * 100)[:60] + "…"), line[-100:]
    assert len(line) < 250
