"""The quick OTLP/JSON path (``chainlat.traces._fast``) beside the validating path: one
line's spans by each, a file's runs with or without the quick path, and a line of one span
to vary, for the tests in tests/traces/test_fast_reader_*.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from chainlat._core.runs import WorkflowRun
from chainlat.traces import FileSource, ReadCounters, read_runs
from chainlat.traces._fast import quick_spans
from chainlat.traces._parse import BadSpan, Parsed, loads_lenient, otlp_spans

ORIGIN = "t.jsonl:1"


def validating(line: bytes) -> list[Parsed] | str:
    """The validating path's spans of one line, or its problem."""
    try:
        doc = loads_lenient(line)
        if not isinstance(doc, dict) or "resourceSpans" not in doc:
            return "not an OTLP request"
        if isinstance(doc.get("result"), dict):
            return "an api/v3 response"
        return list(otlp_spans(doc, ORIGIN))
    except (ValueError, BadSpan, RecursionError) as exc:
        return f"{type(exc).__name__}: {exc}"


def assert_agree(line: bytes) -> bool:
    """Both paths agree on ``line``; True when the quick path answered."""
    quick = quick_spans(line, ORIGIN)
    if quick is None:
        return False
    assert quick == validating(line)
    return True


def no_quick_path(line: bytes, origin: str) -> None:
    """In place of ``quick_spans``: every line left to the validating path."""
    return None


def file_runs(path: Path, *, roots: bool = False) -> tuple[list[WorkflowRun], ReadCounters]:
    """The runs of a trace file, and what the reader counted; with ``roots``, each trace's
    top span is a run, as ``--roots`` reads a file with no workflow span."""
    counters = ReadCounters()
    if roots:
        return list(read_runs([path], counters=counters, roots=True)), counters
    return list(FileSource(path).runs(counters)), counters


def run_fields(run: WorkflowRun) -> tuple[Any, ...]:
    """Everything in a run, the spans and attributes it carries (not compared by ==) too."""
    return (run, run.root, run.spans)


def one_line(attributes: list[dict[str, Any]], **fields: Any) -> bytes:
    """An OTLP/JSON request of one span with ``attributes``; ``fields`` replace its own."""
    span = {
        "traceId": "ab" * 16,
        "spanId": "00000000000000a1",
        "name": "invoke_workflow w",
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000001000000000",
        "attributes": attributes,
        **fields,
    }
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
