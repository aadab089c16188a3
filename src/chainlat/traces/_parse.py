"""Parsing spans into :class:`~chainlat._core.runs.TracedSpan`, with the attributes chainlat reads.

The validating reader: OTLP/JSON (chainlat's exporter, a Collector's file exporter, Jaeger
api/v3) in every valid form, each problem named, for whatever the typed reader
(:mod:`chainlat.traces._fast`) refuses and for Jaeger's answers; and the field readers and
span builder that :mod:`chainlat.traces._jaeger_json` uses for Jaeger JSON.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat._core import conventions
from chainlat._core.conventions import classify
from chainlat._core.errors import shown
from chainlat._core.records import apply_events
from chainlat._core.rollup import (
    CACHE_READ_KEYS,
    STEP_NAME_KEYS,
    call_record,
)
from chainlat._core.runs import TracedSpan
from chainlat.traces._derive import (
    NO_ATTRIBUTES as NO_ATTRIBUTES,
)

try:  # orjson is several times faster on big files; the standard library is the fallback
    import orjson

    loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover
    loads = json.loads

MAX_NS: Final = 2**64 - 1
"""OTLP's timestamps are fixed64: anything past that is not a time (and would overflow a float)."""
_MAX_ARRAY_DEPTH: Final = 8
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class ParseDrops:
    """What parsing dropped, counted where no :class:`ReadCounters` is at hand."""

    nonfinite_values: int = 0
    """NaN, infinite (protobuf's JSON spells them "NaN", "Infinity") or out-of-range numbers
    (beyond :data:`MAX_NUMBER`), dropped."""
    negative_spans: int = 0
    """Spans that end before they start, dropped (the rest of their line is kept)."""
    last_negative_span: str = ""
    """Where the latest of them is, and what it says."""
    negative_runs: list[tuple[int, str]]
    """The run roots among them: (their count in ``negative_spans``, their workflow's name).
    A run without its root span cannot be read at all, and the gate must not pass its
    workflow on the others."""

    def __init__(self) -> None:
        self.negative_runs = []

    def negative(self, where: str, exc: NegativeDuration) -> None:
        """Count one span dropped for ending before it starts."""
        self.negative_spans += 1
        self.last_negative_span = where
        if exc.workflow is not None:
            if len(self.negative_runs) >= 4096:
                del self.negative_runs[:2048]  # read long ago: every reader took its share
            self.negative_runs.append((self.negative_spans, exc.workflow))

    def dropped_since(self, counters: Any, negative_spans: int) -> None:
        """Add the spans dropped since the count was ``negative_spans`` to ``counters``."""
        if self.negative_spans > negative_spans:
            counters.negative_spans += self.negative_spans - negative_spans
            counters.negative_span_example = (
                counters.negative_span_example or self.last_negative_span
            )
            dropped = counters.dropped_workflows
            for count, workflow in self.negative_runs:
                if count > negative_spans:
                    dropped[workflow] = dropped.get(workflow, 0) + 1


tally: Final = ParseDrops()


def loads_lenient(data: bytes) -> Any:
    """JSON ``data`` as orjson reads it; lone surrogates (``"\\ud800"``) replaced by U+FFFD.

    Raises ValueError for anything that is not JSON, nested too deep included (orjson stops
    at 1024 levels; the standard library's RecursionError is turned into a ValueError).
    """
    try:
        return loads(data)
    except ValueError as exc:
        if "surrogate" not in str(exc):
            raise
    # Rare: another writer escaped a lone surrogate. Read it with the standard library,
    # which keeps them, and write it back with each replaced, so that no later rendering
    # (a report, a terminal) meets a string that cannot be encoded.
    try:
        doc = json.loads(data)
        text = json.dumps(doc, ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise ValueError("nested too deep") from None
    return loads(_SURROGATE.sub("\ufffd", text).encode())


REMOTE_PARENT_FLAGS: Final = 0x300  # HAS_IS_REMOTE | IS_REMOTE
_CHAIN_PREFIX: Final = "chainlat.chain."
_LATENCY_PREFIX: Final = "chainlat.latency."

KEPT_ATTRIBUTES: Final = conventions.KEYS | frozenset(
    {
        # the step kind (classify), who wrote it, and the workflow's name
        attr.STEP_KIND,
        attr.STEP_FOREIGN,
        attr.GEN_AI_OPERATION_NAME,
        attr.GEN_AI_WORKFLOW_NAME,
        attr.DB_SYSTEM,
        attr.DB_SYSTEM_NAME,
        # model calls: the model, tokens, first token, cache, failure
        attr.GEN_AI_REQUEST_MODEL,
        attr.GEN_AI_RESPONSE_MODEL,
        attr.GEN_AI_USAGE_INPUT_TOKENS,
        attr.GEN_AI_USAGE_OUTPUT_TOKENS,
        attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
        attr.CACHE_HIT,
        attr.ERROR_TYPE,
        *CACHE_READ_KEYS,
        # where a call went (what-if lends a prefill slope between models of one server)
        attr.SERVER_ADDRESS,
        attr.SERVER_PORT,
        # named steps and the first output
        *STEP_NAME_KEYS,
        attr.USER_FACING,
        attr.WORKFLOW_FIRST_OUTPUT_MS,
        # the end of the caller's words on a Pipecat turn (chainlat's observer)
        attr.WORKFLOW_SPEECH_END_MS,
        attr.WORKFLOW_START_UNKNOWN,
        # sampled sources
        attr.SAMPLING_PROBABILITY,
        attr.TAIL_SAMPLING_POLICY,
        # variants and outcomes
        attr.VARIANT,
        attr.OUTCOME_SUCCESS,
        attr.OUTCOME_SCORE,
        # Jaeger's form of the span status
        "otel.status_code",
        "error",
    }
)
"""The attributes a :class:`Trace`'s spans keep, besides every ``chainlat.chain.*`` (the
recorded rollup) and ``chainlat.latency.*`` (the latency breakdown of a call)."""

_KEYS: Final = {key: key for key in KEPT_ATTRIBUTES}


# --- span parsing ------------------------------------------------------------------------

Parsed = tuple[str, bool, TracedSpan]
"""A span as parsed: its trace id, whether it is a local root of the trace, the span."""

names: dict[str, str] = {}


def _intern(name: str) -> str:
    # Span names and attribute values are few and repeat millions of times: keep one
    # copy of each.
    found = names.get(name)
    if found is None:
        if len(names) > 100_000:
            names.clear()
        found = names[name] = name
    return found


def kept_key(key: object) -> str | None:
    if not isinstance(key, str):
        return None
    known = _KEYS.get(key)
    if known is not None:
        return known
    if key.startswith(_CHAIN_PREFIX) or key.startswith(_LATENCY_PREFIX):
        return _intern(key)
    return None


MISSING: Final = object()
key_cache: dict[str, str | None] = {}


def cached_key(key: str) -> str | None:
    """:func:`kept_key`, remembered: a file repeats the same few keys on every span."""
    found = key_cache.get(key, MISSING)
    if found is MISSING:
        if len(key_cache) > 10_000:
            key_cache.clear()  # keys made of ids: do not let them grow the cache
        found = key_cache[key] = kept_key(key)
    return found  # type: ignore[return-value]


def kept_value(value: object) -> object:
    return _intern(value) if isinstance(value, str) and len(value) <= 200 else value


class BadSpan(Exception):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")


class NegativeDuration(BadSpan):
    """A span that ends before it starts: dropped alone, counted."""

    def __init__(self, where: str, message: str, workflow: str | None = None) -> None:
        super().__init__(where, message)
        self.workflow = workflow
        """The workflow's name when the span is a run root (a workflow span)."""


def dropped_run(attributes: Mapping[str, object], name: object) -> str | None:
    """The workflow a dropped span was the root of, None when it is no workflow span."""
    text = name if isinstance(name, str) else str(name)
    by_name = conventions.kind_by_name(text)
    kind = by_name[0] if by_name is not None else conventions.classify(attributes)
    return conventions.workflow_name_of(attributes, text) if kind == "workflow" else None


def hex_id(value: object, n_bytes: int, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise BadSpan(where, f"expected a hex id, got {shown(value)}")
    if len(value) == 2 * n_bytes or (n_bytes == 16 and len(value) == 16):
        try:
            int(value, 16)
        except ValueError:
            raise BadSpan(where, f"expected a hex id, got {shown(value)}") from None
        return value.lower().rjust(2 * n_bytes, "0")
    try:  # protobuf's JSON mapping proper encodes bytes as base64
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != n_bytes:
        raise BadSpan(where, f"expected {2 * n_bytes} hex digits, got {shown(value)}")
    return raw.hex()


def integer(value: object, where: str) -> int:
    found: int | None = None
    if isinstance(value, bool):
        pass
    elif isinstance(value, int):
        found = value
    elif isinstance(value, str):
        with contextlib.suppress(ValueError):
            found = int(value)
    elif isinstance(value, float) and value.is_integer():
        found = int(value)
    if found is None:
        raise BadSpan(where, f"expected an integer, got {shown(value)}")
    if not -MAX_NS <= found <= MAX_NS:
        raise BadSpan(where, f"expected a 64-bit integer, got {shown(value)}")
    return found


def time_ns(value: object, where: str) -> int:
    found = integer(value, where)
    if not 0 <= found <= MAX_NS:
        raise BadSpan(where, f"expected a time in ns since 1970, got {shown(value)}")
    return found


INT64: Final = range(-(2**63), 2**63)
"""OTLP's ``intValue`` is an int64: a number outside it is not read, whatever the JSON
parser made of it (orjson gives a float past 64 bits, the standard library an int)."""

MAX_NUMBER: Final = 1e300
"""The largest magnitude of a number read from a span: beyond it, sums and unit changes
(ms to ns) overflow a float and would cost the whole file, so the attribute is dropped."""


def finite(value: float) -> float | None:
    if -MAX_NUMBER <= value <= MAX_NUMBER:
        return value
    tally.nonfinite_values += 1
    return None


def any_value(value: object, depth: int = 0) -> object:
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" or kind == "boolValue":
        return inner
    if kind == "intValue":
        if type(inner) is float:
            return None  # a JSON number past 64 bits, as orjson reads it
        try:
            number = int(inner)
        except (TypeError, ValueError):
            return None
        return number if number in INT64 else None
    if kind == "doubleValue":
        try:
            return finite(float(inner))
        except (TypeError, ValueError):
            return None
    if kind == "arrayValue" and isinstance(inner, dict):
        if depth >= _MAX_ARRAY_DEPTH:
            return None
        values = inner.get("values")
        return [any_value(v, depth + 1) for v in values] if isinstance(values, list) else []
    return inner if isinstance(inner, (str, int, float, bool)) else None


def _type_name(value: object) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


def list_of_objects(value: object, where: str, what: str) -> list[dict[str, Any]]:
    """``value`` when it is a list of objects (None: empty); BadSpan naming ``where`` otherwise."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadSpan(where, f"expected a list of {what}, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise BadSpan(f"{where}[{index}]", f"expected an object, got {_type_name(item)}")
    return value


def _otlp_attributes(items: object, where: str) -> Mapping[str, object]:
    found: dict[str, object] = {}
    if items is not None:
        for item in list_of_objects(items, where, "key/value pairs"):
            key = kept_key(item.get("key"))
            if key is not None:
                found[key] = kept_value(any_value(item.get("value")))
    return found or NO_ATTRIBUTES


def make_span(
    *,
    trace_id: str,
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, object],
    error: bool,
    local_root: bool,
    events: list[tuple[str, int]],
    origin: str,
) -> Parsed:
    record = call_record(
        span_id, parent_id, _intern(name), start_ns, end_ns, classify(attributes), attributes
    )
    if events:  # the first token by any convention's event; events after the span's end
        apply_events(record, events)
    return trace_id, local_root, TracedSpan(record, attributes, error, origin)


def _otlp_events(raw: object, where: str) -> list[tuple[str, int]]:
    """A span's events as (name, time): a first-token event with a bad time is a bad span,
    as it always was; any other event with a bad time is skipped (it only extends a span)."""
    found: list[tuple[str, int]] = []
    for event in list_of_objects(raw, where, "events"):
        name = str(event.get("name", ""))
        if name in conventions.FIRST_TOKEN_EVENTS:
            found.append((name, time_ns(event.get("timeUnixNano", 0), where)))
            continue
        try:
            found.append((name, time_ns(event.get("timeUnixNano", 0), where)))
        except BadSpan:
            continue
    return found


def _otlp_span(raw: object, where: str, origin: str) -> Parsed:
    if not isinstance(raw, dict):
        raise BadSpan(where, "expected a span object")
    trace_id = hex_id(raw.get("traceId"), 16, f"{where}.traceId")
    span_id = int(hex_id(raw.get("spanId"), 8, f"{where}.spanId"), 16)
    parent = raw.get("parentSpanId")
    parent_id = int(hex_id(parent, 8, f"{where}.parentSpanId"), 16) if parent else None
    start_ns = time_ns(raw.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano")
    end_ns = time_ns(raw.get("endTimeUnixNano", 0), f"{where}.endTimeUnixNano")
    attributes = _otlp_attributes(raw.get("attributes"), f"{where}.attributes")
    status = raw.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    events = _otlp_events(raw.get("events"), f"{where}.events")
    flags = raw.get("flags", 0)
    remote = isinstance(flags, int) and flags & REMOTE_PARENT_FLAGS == REMOTE_PARENT_FLAGS
    name = raw.get("name", "")
    if end_ns < start_ns:
        raise NegativeDuration(
            where,
            ends_before_start(name, span_id, start_ns, end_ns),
            dropped_run(attributes, name),
        )
    return make_span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name if isinstance(name, str) else str(name),
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=attributes,
        error=code in (2, "STATUS_CODE_ERROR"),
        local_root=parent_id is None or remote,
        events=events,
        origin=origin,
    )


def ends_before_start(name: object, span_id: int, start_ns: int, end_ns: int) -> str:
    return (
        f"span {shown(name)} ({span_id:016x}) ends before it starts "
        f"(end {end_ns} < start {start_ns} ns): a negative duration"
    )


def otlp_spans(
    doc: Mapping[str, Any],
    origin: str,
    only: str | None = None,
    *,
    dropped: Callable[[NegativeDuration], object] | None = None,
) -> Iterator[Parsed]:
    """The spans of an OTLP/JSON request; with ``only``, just the spans of that name. A
    span that ends before it starts is left out, counted in the reader's tally, or handed
    to ``dropped`` instead; anything else wrong raises :class:`BadSpan` (the line is not
    read)."""
    resource_spans = doc.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise BadSpan("resourceSpans", f"expected a list, got {_type_name(resource_spans)}")
    for i, resource in enumerate(list_of_objects(resource_spans, "resourceSpans", "resources")):
        key = "scopeSpans"
        scopes = resource.get(key)
        if scopes is None and "instrumentationLibrarySpans" in resource:
            key = "instrumentationLibrarySpans"  # before OTLP 0.15
            scopes = resource[key]
        at = f"resourceSpans[{i}].{key}"
        for j, scope in enumerate(list_of_objects(scopes, at, "scopes")):
            spans = scope.get("spans")
            if spans is not None and not isinstance(spans, list):
                raise BadSpan(f"{at}[{j}].spans", f"expected a list, got {_type_name(spans)}")
            for k, raw in enumerate(spans or ()):
                if only is not None and (not isinstance(raw, dict) or raw.get("name") != only):
                    continue
                try:
                    parsed = _otlp_span(raw, f"{at}[{j}].spans[{k}]", origin)
                except NegativeDuration as exc:
                    # One impossible span costs itself, not the line's other spans (a
                    # whole run, and the gate would pass without it).
                    if dropped is None:
                        tally.negative(f"{origin}: {exc}", exc)
                    else:
                        dropped(exc)
                    continue
                yield parsed


def walked_unread_spans(doc: Mapping[str, Any]) -> tuple[int, str]:
    """What reading ``doc`` as a line of a file would leave out: the spans that end before
    they start (their count, and what the first says); :class:`BadSpan` when the whole
    line would not be read (an id or a time that is none, a list that is not one). The
    validating reader's own walk, :func:`otlp_spans`, with nothing counted in its tally;
    ``traces.unread_spans`` tries the quick path first."""
    found: list[NegativeDuration] = []
    for _ in otlp_spans(doc, "", dropped=found.append):
        pass
    return len(found), str(found[0]) if found else ""
