"""Property-based fuzzing of the trace readers: OTLP/JSON lines and Jaeger JSON of random
structure and hostile values either give runs or one clear TraceSourceError line."""

from __future__ import annotations

import functools
import json
import math
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import httpx
from hypothesis import example, given
from hypothesis import strategies as st

from chainlat import InputError
from chainlat._core.runs import WorkflowRun
from chainlat.traces import FileSource, JaegerSource, ReadCounters, read_runs
from support.fuzz_traces import (
    FUZZ,
    JAEGER_DOC,
    OTLP_LINE,
)


def _encoded(doc: object) -> bytes:
    # The standard library writes what orjson refuses (NaN, lone surrogates): hostile too.
    return doc if isinstance(doc, bytes) else json.dumps(doc).encode()


def _assert_sane(runs: list[object]) -> None:
    for run in runs:
        assert isinstance(run, WorkflowRun)
        assert math.isfinite(run.rollup.total_ms)
        run.workflow.encode("utf-8")
        for step in run.steps:
            step.name.encode("utf-8")


def _runs_or_error(read: Callable[[], Iterable[object]]) -> tuple[list[object], str | None]:
    """What ``read`` gives, or the message of the InputError it raises (any other
    exception fails the test)."""
    try:
        return list(read()), None
    except InputError as exc:
        return [], str(exc)


def _read_file(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_bytes(data)
        for roots in (False, True):
            counters = ReadCounters()
            runs, error = _runs_or_error(
                functools.partial(read_runs, [path], counters=counters, roots=roots)
            )
            if error is not None:
                assert "\n" not in error and str(path) in error
                continue
            _assert_sane(runs)
            for line in counters.warnings():
                assert "\n" not in line
        _, error = _runs_or_error(lambda: FileSource(path).traces())
        assert error is None or "\n" not in error


_SPAN = {
    "traceId": "ab" * 16,
    "spanId": "00000000000000a1",
    "name": "invoke_workflow w",
    "startTimeUnixNano": "1700000000000000000",
    "endTimeUnixNano": "1700000001000000000",
    "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_workflow"}}],
}


def _line(**changes: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": [{**_SPAN, **changes}]}]}]}


@FUZZ
@given(st.lists(OTLP_LINE, min_size=1, max_size=4), st.booleans())
# What crashed the readers before issue 11: a time past 64 bits (OverflowError), a NaN
# rollup, a name with a lone surrogate, nesting past any parser's depth.
@example([_line(endTimeUnixNano="9" * 400)], False)
@example(
    [_line(attributes=[{"key": "chainlat.chain.total_ms", "value": {"doubleValue": "NaN"}}])],
    False,
)
@example([_line(name="\ud800")], False)
@example([b'{"resourceSpans": ' + b"[" * 3000 + b"]" * 3000 + b"}", _line()], False)
def test_otlp_json_lines_give_runs_or_one_clear_line(lines: list[Any], cut: bool) -> None:
    data = b"\n".join(_encoded(line) for line in lines) + b"\n"
    _read_file(data[: len(data) // 2] if cut else data)


_JAEGER_SPAN = {
    "traceID": "ab" * 16,
    "spanID": "00000000000000a1",
    "operationName": "invoke_workflow w",
    "startTime": 1_700_000_000_000_000,
    "duration": 5,
}


def _jaeger(**changes: Any) -> dict[str, Any]:
    return {"data": [{"traceID": "ab" * 16, "spans": [{**_JAEGER_SPAN, **changes}]}]}


@FUZZ
@given(JAEGER_DOC, st.booleans())
# What crashed the Jaeger reader before issue 11: logs or references that are not lists
# (TypeError), a float tag of "NaN", a start time past 64 bits.
@example(_jaeger(logs=5), False)
@example(_jaeger(references=5), False)
@example(_jaeger(logs=[{"fields": 5}]), False)
@example(
    _jaeger(tags=[{"key": "chainlat.chain.total_ms", "type": "float64", "value": "NaN"}]), False
)
@example(_jaeger(startTime=2**80), False)
def test_jaeger_json_files_give_runs_or_one_clear_line(doc: Any, pretty: bool) -> None:
    _read_file(json.dumps(doc, indent=2 if pretty else None).encode())


@FUZZ
@given(
    st.one_of(JAEGER_DOC, st.fixed_dictionaries({"result": OTLP_LINE})),
    st.sampled_from([200, 404, 500]),
)
def test_jaeger_api_answers_give_runs_or_one_clear_line(doc: Any, status: int) -> None:
    body = _encoded(doc)

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/api/v3/traces") and not (
            isinstance(doc, dict) and "result" in doc
        ):
            return httpx.Response(404)
        return httpx.Response(status, content=body, headers={"content-type": "application/json"})

    source = JaegerSource("http://jaeger", "s", transport=httpx.MockTransport(answer))
    runs, error = _runs_or_error(source.runs)
    assert error is None or "\n" not in error
    _assert_sane(runs)
