"""chainlat's own attribute writes (`span_attributes.set_attributes`) leave a span as the
SDK's would.

The values are written straight into the span's attribute dict when they are what the
SDK would keep; each case here sets the same values on two spans, one through the SDK's
``set_attributes`` and one through chainlat's, and compares what the spans hold.
"""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.util.types import AttributeValue

from chainlat._runtime.span_attributes import set_attributes

START: dict[str, AttributeValue] = {"a": "x", "b": 1, "c": 2.5}


def spans_after(values: dict[str, Any], limits: SpanLimits | None = None) -> list[ReadableSpan]:
    provider = TracerProvider(span_limits=limits) if limits else TracerProvider()
    tracer = provider.get_tracer("t")
    through_sdk = tracer.start_span("s", attributes=START)
    through_chainlat = tracer.start_span("s", attributes=START)
    through_sdk.set_attributes(values)
    set_attributes(through_chainlat, values)
    return [through_sdk, through_chainlat]  # type: ignore[list-item]


def held(span: ReadableSpan) -> tuple[list[tuple[str, Any]], int]:
    assert span.attributes is not None
    return list(span.attributes.items()), span.dropped_attributes


@pytest.mark.parametrize(
    "values",
    [
        {"d": "y", "e": 3, "f": 0.5, "g": True},
        {"b": 9, "h": ("p", "q"), "a": "z"},  # replaced keys move to the end, in order
        {"i": ()},
        {"j": ["p", "q"]},  # a list: the SDK makes it a tuple (the SDK's path)
        {"k": ("p", 1)},  # a mixed tuple: the SDK's path
        {"o": ("p",), "q": (1, 2), "r": "s"},  # one tuple of strings, one not: the SDK's path
        {"t": ("p",), "u": (), "v": ("w", "x"), "y": 7},  # tuples of strings only: written
        {"z": ("p", b"q")},  # bytes in a tuple: the SDK's path
        {"l": None},  # dropped by the SDK, with its warning
        {"m": {"n": 1}},
    ],
)
def test_values_land_as_the_sdk_sets_them(values: dict[str, Any]) -> None:
    sdk, chainlat = spans_after(values)
    assert held(chainlat) == held(sdk)
    assert held(chainlat)[0][: len(START) - len(set(START) & set(values))] == [
        (k, v) for k, v in START.items() if k not in values
    ]


def test_the_attribute_limit_evicts_as_the_sdk_does() -> None:
    sdk, chainlat = spans_after({"d": "1", "e": "2"}, SpanLimits(max_span_attributes=4))
    assert held(chainlat) == held(sdk)
    assert held(chainlat)[1] == 1


def test_the_value_length_limit_truncates_as_the_sdk_does() -> None:
    sdk, chainlat = spans_after({"d": "abcdef"}, SpanLimits(max_span_attribute_length=3))
    assert held(chainlat) == held(sdk)
    assert dict(held(chainlat)[0])["d"] == "abc"


def test_an_ended_span_takes_nothing() -> None:
    span = TracerProvider().get_tracer("t").start_span("s", attributes=START)
    span.end()
    set_attributes(span, {"d": "y"})
    assert dict(span.attributes or {}) == START  # type: ignore[attr-defined]


def test_a_non_recording_span_takes_the_call_quietly() -> None:
    from opentelemetry import trace

    set_attributes(trace.INVALID_SPAN, {"d": "y"})
