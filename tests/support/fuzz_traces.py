"""Hypothesis strategies for trace files of random structure and hostile values: OTLP/JSON
lines and Jaeger JSON documents, shared by the reader fuzzing tests."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from chainlat._core import attributes as attr
from chainlat._core import call_readings
from chainlat._core.convention_table import OUTPUT_KEYS
from chainlat._core.records import CACHE_READ_KEYS, STEP_NAME_KEYS

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


def _call_keys() -> list[str]:
    return sorted(
        {
            attr.CACHE_HIT,
            attr.STEP_NAME,
            attr.USER_FACING,
            attr.STEP_KIND,
            attr.GEN_AI_OPERATION_NAME,
            attr.LIVEKIT_RESPONSE_TTFB,
            *CACHE_READ_KEYS,
            *OUTPUT_KEYS,
            *call_readings.INPUT_TOKEN_KEYS,
            *call_readings.OUTPUT_TOKEN_KEYS,
            *call_readings.TTFT_MS_KEYS,
            *call_readings.TTFT_SECONDS_KEYS,
            *call_readings.MODEL_KEYS,
            *STEP_NAME_KEYS,
            *call_readings.SAYS_STREAMING,
            "ai.operationId",
            "haystack.component.type",
            "url.full",
            "openinference.span.kind",
            "traceloop.span.kind",
            "http.request.method",
            "other.key",
        }
    )


CALL_KEYS = st.sampled_from(_call_keys())
"""Every key a model call's record reads (tokens, first token, model, marks, source), and one
it does not."""
_CALL_TEXTS = (
    *("", " ", "unknown", "UNKNOWN", " gpt-4o ", "12", "-3", "0.25", "1e13", "x"),
    *("chat", "stt", "tts", "inference", "step-a", "LLM"),
    *("tool_calls", '["tool-calls"]', "[not json", "stop", "True"),
)
CALL_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(_CALL_TEXTS),
)
"""Values of every type a reading must tell apart, placeholders and numeric strings too."""
