"""Arrays by the quick OTLP/JSON path: an array of strings (a critical path) decoded and
checked in C, any other array read as the validating path reads it; the same values
either way, or the line handed back."""

from __future__ import annotations

import pytest

from chainlat.traces._fast import quick_spans
from support.fast_reader import ORIGIN, validating

_KEY = b"chainlat.chain.critical_path"


def _line(array: bytes) -> bytes:
    return (
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"' + b"ab" * 16 + b'",'
        b'"spanId":"00000000000000a1","name":"invoke_workflow w",'
        b'"startTimeUnixNano":"1","endTimeUnixNano":"2",'
        b'"attributes":[{"key":"' + _KEY + b'","value":{"arrayValue":' + array + b"}}]}]}]}]}"
    )


@pytest.mark.parametrize(
    ("array", "read"),
    [
        (b'{"values":[{"stringValue":"data a"},{"stringValue":"chat m"}]}', ["data a", "chat m"]),
        (b'{"values":[]}', []),
        (b"{}", []),
        (b'{"values":null}', []),
        (b'{"values":[{"stringValue":"a"}],"other":1}', ["a"]),
        (b'{"values":[{"stringValue":"a"},{"intValue":"7"}]}', ["a", 7]),
        (b'{"values":[{"stringValue":"a","intValue":"7"}]}', ["a"]),
        (b'{"values":[{"intValue":"7","stringValue":"a"}]}', [7]),
        (b'{"values":[{}]}', [None]),
        (b'{"values":[{"arrayValue":{"values":[{"stringValue":"b"}]}}]}', [["b"]]),
        (b'{"values":[{"stringValue":null}]}', [None]),
        (b'{"values":[{"stringValue":"a\\u00e9"}]}', ["a\u00e9"]),
    ],
)
def test_arrays_are_read_as_the_validating_path_reads_them(array: bytes, read: object) -> None:
    line = _line(array)
    quick = quick_spans(line, ORIGIN)
    assert quick is not None
    assert quick == validating(line)
    assert quick[0][2].attributes[_KEY.decode()] == read


@pytest.mark.parametrize("text", [b'"\\ud800"', b'"\\udc00x"'])
def test_an_array_with_a_lone_surrogate_is_handed_back(text: bytes) -> None:
    line = _line(b'{"values":[{"stringValue":' + text + b"}]}")
    assert quick_spans(line, ORIGIN) is None
    assert not isinstance(validating(line), str)
