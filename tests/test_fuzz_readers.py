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
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chainlat import InputError
from chainlat._core.runs import WorkflowRun
from chainlat.traces import FileSource, JaegerSource, ReadCounters, read_runs

FUZZ = settings(
    derandomize=True,
    database=None,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

HOSTILE_STRINGS = st.sampled_from(
    ["", "NaN", "Infinity", "-Infinity", "1e999", "9" * 400, "-1", "\ud800", "x" * 300, "0x10"]
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    HOSTILE_STRINGS,
)
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
HEX_ID = st.sampled_from(["ab" * 16, "cd" * 16, "0" * 32]) | st.text(
    "0123456789abcdefXYZ", max_size=34
)
SPAN_ID = st.sampled_from(["00000000000000a1", "00000000000000a2", "00000000000000a3"]) | st.text(
    "0123456789abcdef", max_size=18
)
TIME = st.one_of(
    HOSTILE_STRINGS,
    st.integers(min_value=0, max_value=2**64).map(str),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
)
KEYS = st.sampled_from(
    [
        "chainlat.chain.total_ms",
        "chainlat.chain.inference_ms",
        "chainlat.chain.data_ms",
        "chainlat.chain.tool_ms",
        "chainlat.chain.overhead_ms",
        "chainlat.step.kind",
        "gen_ai.operation.name",
        "gen_ai.usage.input_tokens",
        "gen_ai.request.model",
        "chainlat.latency.ttft_ms",
        "gen_ai.response.time_to_first_chunk",
        "chainlat.workflow.name",
    ]
) | st.text(max_size=8)
ANY_VALUE = st.one_of(
    st.builds(
        lambda v: {"stringValue": v},
        st.sampled_from(["workflow", "inference", "chat", "invoke_workflow"]) | HOSTILE_STRINGS,
    ),
    st.builds(lambda v: {"intValue": v}, TIME),
    st.builds(
        lambda v: {"doubleValue": v},
        st.floats(allow_nan=False, allow_infinity=False) | HOSTILE_STRINGS,
    ),
    st.builds(lambda v: {"boolValue": v}, SCALARS),
    st.builds(lambda v: {"arrayValue": {"values": v}}, st.lists(JSON, max_size=3)),
    JSON,
)
ATTRIBUTE = st.fixed_dictionaries({"key": KEYS, "value": ANY_VALUE}) | JSON


VALID_TIME = st.integers(min_value=1_700_000_000_000_000_000, max_value=1_700_000_010_000_000_000)


def _otlp_span() -> st.SearchStrategy[Any]:
    """Mostly well-formed spans of one of two traces, one field at a time made hostile."""
    required = {
        "traceId": st.sampled_from(["ab" * 16, "cd" * 16]),
        "spanId": st.sampled_from(["00000000000000a1", "00000000000000a2", "00000000000000a3"]),
        "name": st.sampled_from(["invoke_workflow w", "chat m", "record_outcome"]),
        "startTimeUnixNano": VALID_TIME.map(str),
        "endTimeUnixNano": VALID_TIME.map(str),
        "attributes": st.lists(
            st.fixed_dictionaries({"key": KEYS, "value": ANY_VALUE}), min_size=1, max_size=5
        ),
    }
    optional = {
        "parentSpanId": st.sampled_from(["00000000000000a1", "00000000000000a2"]),
        "events": st.lists(
            st.fixed_dictionaries(
                {"name": st.just("gen_ai.content.first_token"), "timeUnixNano": TIME}
            ),
            max_size=2,
        ),
        "status": st.fixed_dictionaries({"code": st.sampled_from([0, 1, 2, "STATUS_CODE_ERROR"])}),
        "flags": st.sampled_from([0, 0x300, 0x100]),
    }
    hostile = {
        "traceId": HEX_ID | JSON,
        "spanId": SPAN_ID | JSON,
        "parentSpanId": SPAN_ID | JSON,
        "name": SCALARS | JSON,
        "startTimeUnixNano": TIME,
        "endTimeUnixNano": TIME,
        "attributes": st.lists(ATTRIBUTE, max_size=5) | JSON,
        "events": JSON,
        "status": JSON,
        "flags": JSON,
    }

    @st.composite
    def span(draw: st.DrawFn) -> dict[str, Any]:
        raw = draw(st.fixed_dictionaries(required, optional=optional))
        for key in draw(st.lists(st.sampled_from(sorted(hostile)), max_size=2)):
            raw[key] = draw(hostile[key])
        return raw

    return span()


_WELL_FORMED = st.builds(
    lambda spans: {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]},
    st.lists(_otlp_span(), min_size=1, max_size=6),
)
OTLP_LINE = st.one_of(
    _WELL_FORMED,
    _WELL_FORMED,
    _WELL_FORMED,
    st.fixed_dictionaries(
        {"resourceSpans": st.lists(st.fixed_dictionaries({"scopeSpans": JSON}) | JSON) | JSON}
    ),
    JSON,
)

TAG = st.fixed_dictionaries(
    {
        "key": KEYS,
        "type": st.sampled_from(["string", "int64", "float64", "bool"]) | JSON,
        "value": SCALARS | JSON,
    }
)


def _jaeger_span() -> st.SearchStrategy[Any]:
    """Mostly well-formed Jaeger spans, one or two fields at a time made hostile."""
    required = {
        "traceID": st.just("ab" * 16),
        "spanID": st.sampled_from(["00000000000000a1", "00000000000000a2", "00000000000000a3"]),
        "operationName": st.sampled_from(["invoke_workflow w", "chat m"]),
        "startTime": st.integers(min_value=1_700_000_000_000_000, max_value=1_700_000_010_000_000),
        "duration": st.integers(min_value=0, max_value=10_000_000),
        "tags": st.lists(TAG, max_size=4),
    }
    optional = {
        "references": st.lists(
            st.fixed_dictionaries(
                {"refType": st.just("CHILD_OF"), "spanID": st.just("00000000000000a1")}
            ),
            max_size=1,
        ),
        "logs": st.lists(
            st.fixed_dictionaries(
                {
                    "timestamp": TIME,
                    "fields": st.just([{"key": "event", "value": "gen_ai.content.first_token"}]),
                }
            ),
            max_size=1,
        ),
    }
    hostile = {
        "traceID": HEX_ID | JSON,
        "spanID": SPAN_ID | JSON,
        "operationName": SCALARS | JSON,
        "startTime": TIME,
        "duration": TIME,
        "tags": st.lists(TAG | JSON, max_size=4) | JSON,
        "references": st.lists(
            st.fixed_dictionaries({"refType": JSON, "spanID": SPAN_ID | JSON}) | JSON, max_size=2
        )
        | JSON,
        "logs": st.lists(st.fixed_dictionaries({"timestamp": TIME, "fields": JSON}) | JSON) | JSON,
    }

    @st.composite
    def span(draw: st.DrawFn) -> dict[str, Any]:
        raw = draw(st.fixed_dictionaries(required, optional=optional))
        for key in draw(st.lists(st.sampled_from(sorted(hostile)), max_size=2)):
            raw[key] = draw(hostile[key])
        return raw

    return span()


JAEGER_SPAN = _jaeger_span()
_JAEGER_WELL_FORMED = st.builds(
    lambda spans: {"data": [{"traceID": "ab" * 16, "spans": spans}]},
    st.lists(JAEGER_SPAN, min_size=1, max_size=5),
)
JAEGER_DOC = st.one_of(
    _JAEGER_WELL_FORMED,
    _JAEGER_WELL_FORMED,
    _JAEGER_WELL_FORMED,
    st.fixed_dictionaries(
        {"data": st.lists(st.fixed_dictionaries({"traceID": HEX_ID, "spans": JSON}) | JSON) | JSON}
    ),
    JSON,
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
