"""The quick path for OTLP/JSON lines: typed decoding of the fields chainlat reads.

A line as chainlat's exporter and a Collector's file exporter write it is decoded by
msgspec into structs that declare only the fields chainlat reads: the decoder skips
everything else without building a Python object for it, and checks the types of
what it keeps. :func:`quick_spans` then makes the same :data:`Parsed` spans as
:func:`~chainlat.traces._parse.otlp_spans`, with the same attributes (every key the
validating path keeps, read through its key filter, so that a key added there is kept
here too).

Anything that is not that common layout (another type for a field, a value of two
kinds, ids in base64, an old ``instrumentationLibrarySpans`` request, a Jaeger trace,
a line that is not JSON, a span ending before it starts) makes :func:`quick_spans`
return None, and the caller reads the line with the validating path, which accepts
every valid form and names any problem. The quick path is strict, never lenient: where
it answers, the validating path gives the same spans (``tests/traces/test_fast_reader_*.py``).

One known difference: a number beyond the range of a double (``1e999``) in a field
chainlat does not read is skipped here without being parsed, where the validating path
refuses the line as not JSON.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from chainlat._core.records import apply_events
from chainlat._core.rollup import SpanRecord
from chainlat._core.runs import TracedSpan
from chainlat.traces._derive import NO_READINGS, Readings, derive, span_record
from chainlat.traces._parse import (
    INT64,
    MAX_NS,
    MAX_NUMBER,
    MISSING,
    REMOTE_PARENT_FLAGS,
    Parsed,
    any_value,
    cached_key,
    key_cache,
    loads,
    names,
    tally,
)

# --- the common layout, as typed structs -------------------------------------------------


class _Value(Struct, forbid_unknown_fields=True, gc=False):
    """An ``AnyValue``: exactly one of these is set (checked after decoding)."""

    stringValue: str | UnsetType = UNSET
    intValue: int | str | UnsetType = UNSET
    doubleValue: float | UnsetType = UNSET
    boolValue: bool | UnsetType = UNSET
    arrayValue: Raw | UnsetType = UNSET


class _KeyValue(Struct, gc=False):
    key: str
    value: _Value


class _Event(Struct, gc=False):
    name: str
    timeUnixNano: str | UnsetType = UNSET


class _Status(Struct, gc=False):
    code: int | str | None = None


class _Span(Struct, gc=False):
    traceId: str
    spanId: str
    name: str
    startTimeUnixNano: str
    endTimeUnixNano: str
    parentSpanId: str | None = None
    flags: int = 0
    attributes: Raw | UnsetType = UNSET
    events: list[_Event] | None = None
    status: _Status | None = None


class _Scope(Struct, gc=False):
    spans: list[_Span] | None = None


class _Resource(Struct, gc=False):
    scopeSpans: list[_Scope] | None = None
    instrumentationLibrarySpans: Raw | UnsetType = UNSET


class _Request(Struct, gc=False):
    resourceSpans: list[_Resource]
    result: Raw | UnsetType = UNSET


class _String(Struct, forbid_unknown_fields=True, gc=False):
    stringValue: str


class _Strings(Struct, gc=False):
    values: list[_String]


_decode: Final = msgspec.json.Decoder(_Request).decode
_decode_strings: Final = msgspec.json.Decoder(_Strings).decode
_string_of: Final = operator.attrgetter("stringValue")
_decode_attributes: Final = msgspec.json.Decoder(list[_KeyValue] | None).decode


class _NotCommon(Exception):
    """The line is not in the common layout: the validating path reads it."""


_FALLBACK: Final = (
    _NotCommon,
    msgspec.DecodeError,
    msgspec.ValidationError,
    RecursionError,
    UnicodeDecodeError,
    KeyError,
    TypeError,
    ValueError,
    OverflowError,
)


def quick_spans(line: bytes, origin: str) -> list[Parsed] | None:
    """The spans of one OTLP/JSON line in the common layout; None for anything else."""
    try:
        if not line.isascii():
            line.decode()  # the decoder does not check the UTF-8 of what it skips
        request = _decode(line)
        if request.result is not UNSET:
            return None  # a saved api/v3 response: read as the validating path reads it
        found: list[Parsed] = []
        append = found.append
        for resource in request.resourceSpans:
            scopes = resource.scopeSpans
            if scopes is None:
                if resource.instrumentationLibrarySpans is not UNSET:
                    return None
                continue
            for scope in scopes:
                if scope.spans:
                    _scope_spans(scope.spans, origin, append)
    except _FALLBACK:
        return None
    return found


_derived_cache: dict[bytes, Readings] = {}
_CACHE_ENTRIES: Final = 4096


# whole: its loop runs once per span read; in parts, each would cost a call per span.
def _scope_spans(
    raws: list[_Span],
    origin: str,
    append: Callable[[Parsed], None],
    # Bound once: the globals a span needs, looked up millions of times.
    _cache: dict[bytes, Readings] = _derived_cache,
    names: dict[str, str] = names,
    _unset: Any = UNSET,
    _new: Any = object.__new__,
    _span_record: Callable[..., SpanRecord] = span_record,
    _traced: type[TracedSpan] = TracedSpan,
) -> None:
    """Each span of a scope, as :func:`~chainlat.traces._parse.otlp_spans` reads it (its
    record made by :func:`~chainlat.traces._derive.span_record`), handed to ``append``;
    raises _NotCommon (or a decoding error) on anything else."""
    last: str | None = None  # no trace id is None, the empty one included
    trace_id = ""
    for raw in raws:
        # The spans of a trace mostly come one after another: their trace id is checked and
        # lowered once, and shared (hashed once).
        if raw.traceId != last:
            last = raw.traceId
            if len(last) != 32:
                raise _NotCommon
            int(last, 16)
            trace_id = last.lower()
        span_hex = raw.spanId
        if len(span_hex) != 16:
            raise _NotCommon
        span_id = int(span_hex, 16)
        parent = raw.parentSpanId
        if parent:
            if len(parent) != 16:
                raise _NotCommon
            parent_id: int | None = int(parent, 16)
        else:
            parent_id = None
        start_ns = int(raw.startTimeUnixNano)
        end_ns = int(raw.endTimeUnixNano)
        if not 0 <= start_ns <= end_ns <= MAX_NS:
            raise _NotCommon
        readings = NO_READINGS
        items: Any = raw.attributes
        if items is not _unset:
            # Spans of one kind repeat the same attributes (a data stage's kind and workflow)
            # on every run: what they give is worked out once per distinct list.
            blob = bytes(items)
            known = _cache.get(blob)
            if known is not None:
                readings = known
            else:
                readings, counted = _derive(_decode_attributes(blob))
                if not counted:  # a value dropped is counted again on each span that has one
                    if len(_cache) >= _CACHE_ENTRIES:
                        _cache.clear()
                    _cache[blob] = readings
        events = raw.events
        status = raw.status
        code = status.code if status is not None else None
        name = raw.name
        record = _span_record(
            readings, span_id, parent_id, names.setdefault(name, name), start_ns, end_ns
        )
        if events:  # the first token by any convention's event; events after the span's end
            found = []
            for event in events:
                at = int(event.timeUnixNano)  # type: ignore[arg-type]
                if not 0 <= at <= MAX_NS:
                    raise _NotCommon  # the checking path skips it, or drops the span
                found.append((event.name, at))
            apply_events(record, found)
        local_root = parent_id is None or raw.flags & REMOTE_PARENT_FLAGS == REMOTE_PARENT_FLAGS
        error = code == 2 or code == "STATUS_CODE_ERROR"
        traced = _new(_traced)
        traced.record = record
        traced.attributes = readings.attributes
        traced.error = error
        traced.origin = origin
        append((trace_id, local_root, traced))


def _attribute_values(
    items: list[_KeyValue],
    # Bound once: the globals each attribute needs.
    _keys: dict[str, str | None] = key_cache,
    names: dict[str, str] = names,
    _missing: object = MISSING,
    _unset: Any = UNSET,
) -> tuple[dict[str, object], bool]:
    """The kept attributes by key, and whether reading them counted a value dropped (an
    out-of-range number inside an array); raises _NotCommon on a value not in the common
    layout."""
    found: dict[str, object] = {}
    counted = False
    for item in items:
        key = _keys.get(item.key, _missing)
        if key is None:
            continue
        if key is _missing:
            key = cached_key(item.key)
            if key is None:
                continue
        value = item.value
        # Exactly one kind set, as in the common layout; two are read in their order
        # by the validating path.
        inner: Any = value.stringValue
        if inner is not _unset:
            if not (
                value.intValue is _unset
                and value.doubleValue is _unset
                and value.boolValue is _unset
                and value.arrayValue is _unset
            ):
                raise _NotCommon
            found[key] = names.setdefault(inner, inner) if len(inner) <= 200 else inner  # type: ignore[index]
            continue
        if value.arrayValue is not _unset:
            if not (
                value.intValue is _unset
                and value.doubleValue is _unset
                and value.boolValue is _unset
            ):
                raise _NotCommon
            raw = bytes(value.arrayValue)  # type: ignore[arg-type]
            try:  # an array of strings (a critical path), checked in C
                found[key] = list(map(_string_of, _decode_strings(raw).values))  # type: ignore[index]
            except msgspec.DecodeError:  # any other array: read as the validating path reads it
                dropped = tally.nonfinite_values
                found[key] = any_value({"arrayValue": loads(raw)})  # type: ignore[index]
                counted = counted or tally.nonfinite_values != dropped
            continue
        inner = value.intValue
        if inner is not _unset:
            if not (value.doubleValue is _unset and value.boolValue is _unset):
                raise _NotCommon
            if type(inner) is str:
                if len(inner) >= 19:
                    raise _NotCommon  # maybe past an int64: the validating path decides
                inner = int(inner)
            elif inner not in INT64:
                raise _NotCommon  # not read, by the validating path's rule
            found[key] = inner  # type: ignore[index]
            continue
        inner = value.doubleValue
        if inner is not _unset:
            if value.boolValue is not _unset or not -MAX_NUMBER <= inner <= MAX_NUMBER:
                raise _NotCommon  # out of range: the validating path drops it, counted
            found[key] = inner  # type: ignore[index]
            continue
        inner = value.boolValue
        if inner is _unset:
            raise _NotCommon  # an empty value: no attribute, as the validating path reads it
        found[key] = inner  # type: ignore[index]
    return found, counted


def _derive(
    items: list[_KeyValue] | None,
    _values: Callable[[list[_KeyValue]], tuple[dict[str, object], bool]] = _attribute_values,
) -> tuple[Readings, bool]:
    """What a span's attributes give, as :func:`~chainlat.traces._parse.otlp_spans` reads
    them (by :func:`~chainlat.traces._derive.derive`), and whether reading them
    counted a value dropped (then not remembered: it is counted on each span that has it)."""
    if not items:
        return NO_READINGS, False
    found, counted = _values(items)
    return derive(found), counted
