"""Reading traces, streaming: whole traces, and the workflow runs in them.

Sources:

- **OTLP/JSON lines**: one ``ExportTraceServiceRequest`` per line, as chainlat's
  file exporter and a Collector's ``file`` exporter write them; gzip-compressed
  files are recognised by their first bytes, whatever their name.
- **Jaeger JSON**: a trace downloaded from Jaeger's UI or ``/api/traces``
  (``{"data": [trace, ...]}``); also a saved ``api/v3`` response
  (``{"result": {"resourceSpans": ...}}``). A file holding one pretty-printed JSON
  document (rather than one per line) is read whole.
- **Jaeger's HTTP API** (:class:`JaegerSource`): ``/api/v3/traces`` (OTLP/JSON),
  falling back to ``/api/traces`` on a Jaeger without api/v3.

:func:`read_traces` hands out each :class:`Trace` once it is complete: every span
of it, each with the attributes chainlat's analyses read (:data:`KEPT_ATTRIBUTES`),
not all of them, since a trace's attributes can hold whole prompts.
:func:`read_runs` is built on it: each workflow span becomes a
:class:`~chainlat.WorkflowRun`, whose rollup is read from the ``chainlat.chain.*``
attributes when present and rebuilt from the spans otherwise (traces written by
another instrumentation). The trade-off analysis reads the same traces as span
trees (``chainlat.traces.runs.read_run_trees``).

**When is a trace complete?** Spans of one trace arrive spread over many lines
(each exporter batch is a line), children before their parent since they end
first. The reader keeps the spans of each *open* trace and judges a trace once

1. a *local root* of it has been read (a span without a parent, or whose parent
   is remote: OTLP ``flags`` bit 0x200) and ``settle_lines`` further lines have
   passed (default 8), which leaves room for children that ended after the root
   and were exported in a later batch; or
2. no span of it arrived in the last ``idle_lines`` lines (default 1000), for
   traces whose root is in another file; or
3. the input ends.

A span that arrives for a trace already judged is counted in
``ReadCounters.late_spans`` and otherwise ignored; raise ``settle_lines`` when
that happens. Memory therefore grows with the spans of the traces open at once
(bounded by about ``settle_lines`` lines' worth for chainlat's own files), not
with the size of the file; the statistics then keep one float per sample.

The exception is outcomes: a ``record_outcome`` span is written when the run is
graded, often long after the run. :func:`read_traces` first scans a file for
them (a byte search, parsing only the lines that hold one), keeps them by trace
id, and gives each trace the outcome spans of its file wherever they are.
Memory for that grows with the outcome spans only. :func:`read_runs` has no use
for outcomes and skips the scan.

Example::

    from chainlat.traces import read_runs
    for run in read_runs(["chainlat-traces.jsonl"]):
        print(run.workflow, run.rollup.total_ms)
"""

from __future__ import annotations

import base64
import binascii
import collections
import datetime as dt
import gzip
import json
import os
import re
import sys
import types
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, Protocol

from chainlat._core import attributes as attr
from chainlat._core.errors import InputError, TraceSourceError, shown
from chainlat._core.rollup import Rollup, SpanRecord, classify
from chainlat._core.runs import WorkflowRun, build_run
from chainlat.traces.runs import TracedSpan

if TYPE_CHECKING:
    import httpx

__all__ = [
    "KEPT_ATTRIBUTES",
    "FileSource",
    "JaegerSource",
    "ReadCounters",
    "Trace",
    "TraceSource",
    "open_source",
    "parse_lookback",
    "read_runs",
    "read_traces",
]

try:  # orjson is several times faster on big files; the standard library is the fallback
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover
    _loads = json.loads

DEFAULT_SETTLE_LINES: Final = 8
DEFAULT_IDLE_LINES: Final = 1000
_PROGRESS_MIN_BYTES: Final = 4 * 1024 * 1024
_REMOTE_PARENT_FLAGS: Final = 0x300  # HAS_IS_REMOTE | IS_REMOTE
_KEEP_LATE_IDS: Final = 100_000
_WORKFLOW_PREFIX: Final = attr.workflow_span_name("")
_CHAIN_PREFIX: Final = "chainlat.chain."
_LATENCY_PREFIX: Final = "chainlat.latency."
_OUTCOME_MARK: Final = f'"{attr.OUTCOME_SPAN_NAME}"'.encode()

KEPT_ATTRIBUTES: Final = frozenset(
    {
        # the step kind (classify) and the workflow's name
        attr.STEP_KIND,
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
_NO_ATTRIBUTES: Final[Mapping[str, object]] = types.MappingProxyType({})


@dataclass
class ReadCounters:
    """What a read saw; filled in while the runs are iterated."""

    lines: int = 0
    spans: int = 0
    traces: int = 0
    workflows: int = 0
    """Workflow runs handed out."""
    late_spans: int = 0
    """Spans that arrived after their trace was judged (see ``settle_lines``)."""
    peak_open_traces: int = 0
    peak_open_spans: int = 0
    """The most spans held at once: what memory grows with."""
    skewed_spans: int = 0
    """Spans that start before their parent (clock skew between hosts); the rollup clips
    them to the parent."""
    orphan_spans: int = 0
    """Spans whose parent is not in their trace (sampling, a partial Jaeger answer); a
    span marked as having a remote parent is not counted."""

    def warnings(self) -> list[str]:
        """One line per kind of oddity seen, for the CLI to print on stderr."""
        found = []
        if self.late_spans:
            found.append(
                f"{self.late_spans} spans arrived after their trace was judged; "
                "raise --settle-lines"
            )
        if self.skewed_spans:
            found.append(
                f"{self.skewed_spans} spans start before their parent (clock skew); "
                "clipped to the parent"
            )
        if self.orphan_spans:
            found.append(
                f"{self.orphan_spans} spans have a parent missing from their trace "
                "(sampling or a partial trace); read without it"
            )
        return found


@dataclass(frozen=True, slots=True)
class Trace:
    """One complete trace: its spans as read, each with the attributes chainlat reads."""

    trace_id: str
    """32 lower-case hex digits."""
    spans: tuple[TracedSpan, ...]
    """In the order read."""

    def workflow_runs(self) -> list[WorkflowRun]:
        """A run for every workflow span in the trace (nested ones too), in start order."""
        workflows = [s for s in self.spans if s.record.kind == "workflow"]
        if not workflows:
            return []
        records = [s.record for s in self.spans]
        runs = []
        if len(workflows) > 1:
            workflows.sort(key=lambda s: s.record.start_ns)
        for span in workflows:
            # The recorded rollup, when the span has one (from_attributes reads its keys).
            recorded = attr.CHAIN_TOTAL_MS in span.attributes
            runs.append(
                build_run(
                    _workflow_name(span),
                    span.record,
                    records,
                    rollup=Rollup.from_attributes(span.attributes) if recorded else None,
                    trace_id=self.trace_id,
                    error=span.error,
                    origin=span.origin,
                )
            )
        return runs


def _workflow_name(span: TracedSpan) -> str:
    workflow = span.attributes.get(attr.GEN_AI_WORKFLOW_NAME)
    if isinstance(workflow, str):
        return workflow
    name = span.record.name
    return name[len(_WORKFLOW_PREFIX) :] if name.startswith(_WORKFLOW_PREFIX) else name


class TraceSource(Protocol):
    """Anything traces can be read from, any number of times."""

    name: str

    def traces(self, counters: ReadCounters | None = None) -> Iterator[Trace]:
        """The traces of the source, each once it is complete."""
        ...

    def runs(self, counters: ReadCounters | None = None) -> Iterator[WorkflowRun]:
        """The workflow runs of the source, in the order their traces completed."""
        ...


def _runs_of(traces: Iterable[Trace], counters: ReadCounters) -> Iterator[WorkflowRun]:
    for trace in traces:
        runs = trace.workflow_runs()
        counters.workflows += len(runs)
        yield from runs


# --- span parsing ------------------------------------------------------------------------

_Parsed = tuple[str, bool, TracedSpan]
"""A span as parsed: its trace id, whether it is a local root of the trace, the span."""

_names: dict[str, str] = {}


def _intern(name: str) -> str:
    # Span names and attribute values are few and repeat millions of times: keep one
    # copy of each.
    found = _names.get(name)
    if found is None:
        if len(_names) > 100_000:
            _names.clear()
        found = _names[name] = name
    return found


def _kept_key(key: object) -> str | None:
    if not isinstance(key, str):
        return None
    known = _KEYS.get(key)
    if known is not None:
        return known
    if key.startswith(_CHAIN_PREFIX) or key.startswith(_LATENCY_PREFIX):
        return _intern(key)
    return None


_MISSING: Final = object()
_key_cache: dict[str, str | None] = {}


def _cached_key(key: str) -> str | None:
    """:func:`_kept_key`, remembered: a file repeats the same few keys on every span."""
    found = _key_cache.get(key, _MISSING)
    if found is _MISSING:
        if len(_key_cache) > 10_000:
            _key_cache.clear()  # keys made of ids: do not let them grow the cache
        found = _key_cache[key] = _kept_key(key)
    return found  # type: ignore[return-value]


def _kept_value(value: object) -> object:
    return _intern(value) if isinstance(value, str) and len(value) <= 200 else value


class _BadSpan(Exception):
    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")


def _hex_id(value: object, n_bytes: int, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise _BadSpan(where, f"expected a hex id, got {shown(value)}")
    if len(value) == 2 * n_bytes or (n_bytes == 16 and len(value) == 16):
        try:
            int(value, 16)
        except ValueError:
            raise _BadSpan(where, f"expected a hex id, got {shown(value)}") from None
        return value.lower().rjust(2 * n_bytes, "0")
    try:  # protobuf's JSON mapping proper encodes bytes as base64
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != n_bytes:
        raise _BadSpan(where, f"expected {2 * n_bytes} hex digits, got {shown(value)}")
    return raw.hex()


def _int(value: object, where: str) -> int:
    if isinstance(value, bool):
        raise _BadSpan(where, f"expected an integer, got {shown(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _BadSpan(where, f"expected an integer, got {shown(value)}")


def _any_value(value: object) -> object:
    if not isinstance(value, dict) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "stringValue" or kind == "boolValue":
        return inner
    if kind == "intValue":
        try:
            return int(inner)
        except (TypeError, ValueError):
            return None
    if kind == "doubleValue":
        try:
            return float(inner)
        except (TypeError, ValueError):
            return None
    if kind == "arrayValue" and isinstance(inner, dict):
        return [_any_value(v) for v in inner.get("values") or ()]
    return inner


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


def _list_of_objects(value: object, where: str, what: str) -> list[dict[str, Any]]:
    """``value`` when it is a list of objects (None: empty); _BadSpan naming ``where`` otherwise."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise _BadSpan(where, f"expected a list of {what}, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise _BadSpan(f"{where}[{index}]", f"expected an object, got {_type_name(item)}")
    return value


def _otlp_attributes(items: object, where: str) -> Mapping[str, object]:
    found: dict[str, object] = {}
    if items is not None:
        for item in _list_of_objects(items, where, "key/value pairs"):
            key = _kept_key(item.get("key"))
            if key is not None:
                found[key] = _kept_value(_any_value(item.get("value")))
    return found or _NO_ATTRIBUTES


def _ttft_from(attributes: Mapping[str, object]) -> float | None:
    ms = attributes.get(attr.LATENCY_TTFT_MS)
    if isinstance(ms, (int, float)) and not isinstance(ms, bool):
        return float(ms)
    seconds = attributes.get(attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK)
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        return float(seconds) * 1000
    return None


def _make_span(
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
    first_token_ns: int | None,
    origin: str,
) -> _Parsed:
    ttft = _ttft_from(attributes)
    if ttft is None and first_token_ns is not None:
        ttft = (first_token_ns - start_ns) / 1e6
    tokens_in = attributes.get(attr.GEN_AI_USAGE_INPUT_TOKENS)
    tokens_out = attributes.get(attr.GEN_AI_USAGE_OUTPUT_TOKENS)
    record = SpanRecord(
        span_id=span_id,
        parent_id=parent_id,
        name=_intern(name),
        start_ns=start_ns,
        end_ns=end_ns,
        kind=classify(attributes),
        cache_hit=attributes.get(attr.CACHE_HIT) is True,
        input_tokens=tokens_in if isinstance(tokens_in, int) else None,
        output_tokens=tokens_out if isinstance(tokens_out, int) else None,
        ttft_ms=ttft,
    )
    return trace_id, local_root, TracedSpan(record, attributes, error, origin)


_NOT_COMMON: Final = (KeyError, TypeError, ValueError, AttributeError)


_TTFT_MS: Final = attr.LATENCY_TTFT_MS
_TTFC_S: Final = attr.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK
_TOKENS_IN: Final = attr.GEN_AI_USAGE_INPUT_TOKENS
_TOKENS_OUT: Final = attr.GEN_AI_USAGE_OUTPUT_TOKENS
_CACHE_HIT: Final = attr.CACHE_HIT
_FIRST_TOKEN: Final = attr.FIRST_TOKEN_EVENT


def _common_otlp_span(
    raw: dict[str, Any],
    origin: str,
    # Bound once: the globals a span needs, looked up millions of times.
    _keys: dict[str, str | None] = _key_cache,
    _names: dict[str, str] = _names,
    _missing: object = _MISSING,
    _classify: Callable[[Mapping[str, object]], Any] = classify,
    _record: type[SpanRecord] = SpanRecord,
    _traced: type[TracedSpan] = TracedSpan,
) -> _Parsed:
    """A span as chainlat and the Collector write it, read quickly.

    Raises one of ``_NOT_COMMON`` on anything else (a missing or odd field, ids in
    base64, numbers as numbers, a negative duration), and the caller reads the span
    again with :func:`_otlp_span`, which accepts every valid form and names any
    problem. Two paths rather than one: checking each field for a good message
    costs more than the whole common case.
    """
    trace_id = raw["traceId"]
    span_hex = raw["spanId"]
    if len(trace_id) != 32 or len(span_hex) != 16:
        raise ValueError
    int(trace_id, 16)
    span_id = int(span_hex, 16)
    parent = raw.get("parentSpanId")
    if parent:
        if len(parent) != 16:
            raise ValueError
        parent_id: int | None = int(parent, 16)
    else:
        parent_id = None
    start = raw["startTimeUnixNano"]
    end = raw["endTimeUnixNano"]
    name = raw["name"]
    if type(start) is not str or type(end) is not str or type(name) is not str:
        raise TypeError
    start_ns = int(start)
    end_ns = int(end)
    if end_ns < start_ns:
        raise ValueError
    kind = tokens_in = tokens_out = None
    ttft: Any = None
    cache_hit = False
    attributes: Mapping[str, object] = _NO_ATTRIBUTES
    items = raw.get("attributes")
    if items:
        found: dict[str, object] = {}
        for item in items:
            key = _keys.get(item["key"], _missing)
            if key is None:
                continue
            if key is _missing:
                key = _cached_key(item["key"])
                if key is None:
                    continue
            for type_, inner in item["value"].items():  # one entry: the type and the value
                if type_ == "stringValue" and type(inner) is str:
                    found[key] = _names.setdefault(inner, inner) if len(inner) <= 200 else inner  # type: ignore[index]
                elif type_ == "intValue" and type(inner) is str:
                    found[key] = int(inner)  # type: ignore[index]
                elif type_ == "doubleValue" and type(inner) is float:
                    found[key] = inner  # type: ignore[index]
                else:
                    found[key] = _any_value(item["value"])  # type: ignore[index]
                break
        if found:
            attributes = found
            kind = _classify(found)
            ttft = found.get(_TTFT_MS)
            if type(ttft) is not float and (ttft is not None or _TTFC_S in found):
                ttft = _ttft_from(found)
            tokens_in = found.get(_TOKENS_IN)
            tokens_out = found.get(_TOKENS_OUT)
            cache_hit = found.get(_CACHE_HIT) is True
    events = raw.get("events")
    if events is not None and type(events) is not list:
        raise TypeError
    if ttft is None and events:
        for event in events:
            if event["name"] == _FIRST_TOKEN:
                ttft = (int(event["timeUnixNano"]) - start_ns) / 1e6
                break
    status = raw.get("status")
    code = status.get("code") if status else None
    flags = raw.get("flags", 0)
    record = _record(
        span_id,
        parent_id,
        _names.setdefault(name, name),
        start_ns,
        end_ns,
        kind,
        cache_hit,
        tokens_in if type(tokens_in) is int else None,
        tokens_out if type(tokens_out) is int else None,
        ttft,
    )
    local_root = parent_id is None or (
        type(flags) is int and flags & _REMOTE_PARENT_FLAGS == _REMOTE_PARENT_FLAGS
    )
    error = code == 2 or code == "STATUS_CODE_ERROR"
    return trace_id.lower(), local_root, _traced(record, attributes, error, origin)


def _otlp_span(raw: object, where: str, origin: str) -> _Parsed:
    if not isinstance(raw, dict):
        raise _BadSpan(where, "expected a span object")
    trace_id = _hex_id(raw.get("traceId"), 16, f"{where}.traceId")
    span_id = int(_hex_id(raw.get("spanId"), 8, f"{where}.spanId"), 16)
    parent = raw.get("parentSpanId")
    parent_id = int(_hex_id(parent, 8, f"{where}.parentSpanId"), 16) if parent else None
    start_ns = _int(raw.get("startTimeUnixNano", 0), f"{where}.startTimeUnixNano")
    end_ns = _int(raw.get("endTimeUnixNano", 0), f"{where}.endTimeUnixNano")
    attributes = _otlp_attributes(raw.get("attributes"), f"{where}.attributes")
    status = raw.get("status")
    code = status.get("code") if isinstance(status, dict) else None
    first_token_ns = None
    for event in _list_of_objects(raw.get("events"), f"{where}.events", "events"):
        if event.get("name") == attr.FIRST_TOKEN_EVENT:
            first_token_ns = _int(event.get("timeUnixNano", 0), f"{where}.events")
            break
    flags = raw.get("flags", 0)
    remote = isinstance(flags, int) and flags & _REMOTE_PARENT_FLAGS == _REMOTE_PARENT_FLAGS
    name = raw.get("name", "")
    if end_ns < start_ns:
        raise _BadSpan(where, _ends_before_start(name, span_id, start_ns, end_ns))
    return _make_span(
        trace_id=trace_id,
        span_id=span_id,
        parent_id=parent_id,
        name=name if isinstance(name, str) else str(name),
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=attributes,
        error=code in (2, "STATUS_CODE_ERROR"),
        local_root=parent_id is None or remote,
        first_token_ns=first_token_ns,
        origin=origin,
    )


def _ends_before_start(name: object, span_id: int, start_ns: int, end_ns: int) -> str:
    return (
        f"span {shown(name)} ({span_id:016x}) ends before it starts "
        f"(end {end_ns} < start {start_ns} ns): a negative duration"
    )


def _otlp_spans(doc: Mapping[str, Any], origin: str, only: str | None = None) -> Iterator[_Parsed]:
    """The spans of an OTLP/JSON request; with ``only``, just the spans of that name."""
    resource_spans = doc.get("resourceSpans")
    if not isinstance(resource_spans, list):
        raise _BadSpan("resourceSpans", f"expected a list, got {_type_name(resource_spans)}")
    for i, resource in enumerate(_list_of_objects(resource_spans, "resourceSpans", "resources")):
        key = "scopeSpans"
        scopes = resource.get(key)
        if scopes is None and "instrumentationLibrarySpans" in resource:
            key = "instrumentationLibrarySpans"  # before OTLP 0.15
            scopes = resource[key]
        at = f"resourceSpans[{i}].{key}"
        for j, scope in enumerate(_list_of_objects(scopes, at, "scopes")):
            spans = scope.get("spans")
            if spans is not None and not isinstance(spans, list):
                raise _BadSpan(f"{at}[{j}].spans", f"expected a list, got {_type_name(spans)}")
            for k, raw in enumerate(spans or ()):
                if only is not None and (not isinstance(raw, dict) or raw.get("name") != only):
                    continue
                try:
                    parsed = _common_otlp_span(raw, origin)
                except _NOT_COMMON:
                    parsed = _otlp_span(raw, f"{at}[{j}].spans[{k}]", origin)
                yield parsed


def _jaeger_value(tag: Mapping[str, object]) -> object:
    value, kind = tag.get("value"), tag.get("type")
    try:
        if kind == "int64" and isinstance(value, (str, int)):
            return int(value)
        if kind == "float64" and isinstance(value, (str, int, float)):
            return float(value)
    except ValueError:
        return None
    if kind == "bool" and isinstance(value, str):
        return value == "true"
    return value


def _jaeger_tags(tags: object, where: str) -> Mapping[str, object]:
    found: dict[str, object] = {}
    if tags is not None:
        for tag in _list_of_objects(tags, where, "tags"):
            key = _kept_key(tag.get("key"))
            if key is not None:
                found[key] = _kept_value(_jaeger_value(tag))
    return found or _NO_ATTRIBUTES


def _jaeger_trace(
    trace: Mapping[str, Any], where: str, origin: str, only: str | None = None
) -> list[_Parsed]:
    """The spans of a Jaeger trace; with ``only``, just the spans of that name."""
    spans = trace.get("spans")
    if not isinstance(spans, list):
        raise _BadSpan(f"{where}.spans", "expected a list of spans")
    found = []
    for k, raw in enumerate(spans):
        at = f"{where}.spans[{k}]"
        if not isinstance(raw, dict):
            raise _BadSpan(at, "expected a span object")
        name = raw.get("operationName", "")
        if only is not None and name != only:
            continue
        trace_id = _hex_id(raw.get("traceID", trace.get("traceID")), 16, f"{at}.traceID")
        span_id = int(_hex_id(raw.get("spanID"), 8, f"{at}.spanID"), 16)
        parent_id = None
        references = raw.get("references") or []
        refs = [r for r in references if isinstance(r, dict)]
        refs.sort(key=lambda r: r.get("refType") != "CHILD_OF")
        if refs:
            parent_id = int(_hex_id(refs[0].get("spanID"), 8, f"{at}.references"), 16)
        elif raw.get("parentSpanID"):
            parent_id = int(_hex_id(raw.get("parentSpanID"), 8, f"{at}.parentSpanID"), 16)
        start_us = _int(raw.get("startTime", 0), f"{at}.startTime")
        duration_us = _int(raw.get("duration", 0), f"{at}.duration")
        if duration_us < 0:
            raise _BadSpan(
                at,
                _ends_before_start(name, span_id, start_us * 1000, (start_us + duration_us) * 1000),
            )
        attributes = _jaeger_tags(raw.get("tags"), f"{at}.tags")
        error = attributes.get("error") is True or attributes.get("otel.status_code") == "ERROR"
        first_token_ns = None
        for log in raw.get("logs") or ():
            fields = log.get("fields") if isinstance(log, dict) else None
            if any(
                isinstance(f, dict)
                and f.get("key") == "event"
                and f.get("value") == attr.FIRST_TOKEN_EVENT
                for f in fields or ()
            ):
                first_token_ns = _int(log.get("timestamp", 0), f"{at}.logs") * 1000
                break
        found.append(
            _make_span(
                trace_id=trace_id,
                span_id=span_id,
                parent_id=parent_id,
                name=name if isinstance(name, str) else str(name),
                start_ns=start_us * 1000,
                end_ns=(start_us + duration_us) * 1000,
                attributes=attributes,
                error=error,
                local_root=parent_id is None,
                first_token_ns=first_token_ns,
                origin=origin,
            )
        )
    return found


# --- assembling spans into traces ---------------------------------------------------------


@dataclass(slots=True)
class _Trace:
    spans: list[TracedSpan] = field(default_factory=list)
    last_line: int = 0
    root_line: int | None = None
    remote_parents: int = 0
    """Local roots whose parent is in another service: not orphans."""


def _is_outcome(span: TracedSpan) -> bool:
    return span.record.name == attr.OUTCOME_SPAN_NAME and span.record.kind is None


class _Assembler:
    """Holds open traces; hands out each trace once it is judged complete.

    ``outcomes``: the outcome spans of the whole input by trace id, found by a scan
    before the read; each trace gets its own, and one that arrives after its trace
    was judged is expected, not late.
    """

    def __init__(
        self,
        counters: ReadCounters,
        settle_lines: int,
        idle_lines: int,
        outcomes: Mapping[str, list[TracedSpan]] | None = None,
    ) -> None:
        self._open: collections.OrderedDict[str, _Trace] = collections.OrderedDict()
        self._rooted: collections.deque[tuple[int, str]] = collections.deque()
        self._judged: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._counters = counters
        self._settle = max(settle_lines, 0)
        self._idle = max(idle_lines, 1)
        self._held = 0
        self._outcomes = outcomes or {}
        self._unclaimed = set(self._outcomes)

    def add(self, parsed: _Parsed, line: int) -> None:
        trace_id, local_root, span = parsed
        counters = self._counters
        counters.spans += 1
        trace = self._open.get(trace_id)
        if trace is None:
            if trace_id in self._judged:
                if not (trace_id in self._outcomes and _is_outcome(span)):
                    counters.late_spans += 1
                return
            trace = self._open[trace_id] = _Trace()
            counters.peak_open_traces = max(counters.peak_open_traces, len(self._open))
        elif trace.last_line != line:
            self._open.move_to_end(trace_id)  # by line is enough for the idle rule
        trace.spans.append(span)
        trace.last_line = line
        self._held += 1
        if self._held > counters.peak_open_spans:
            counters.peak_open_spans = self._held
        if local_root:
            if span.record.parent_id is not None:
                trace.remote_parents += 1
            if trace.root_line is None:
                trace.root_line = line
                self._rooted.append((line, trace_id))

    def complete(self, line: int) -> Iterator[Trace]:
        """The traces complete once ``line`` has been read."""
        while self._rooted and self._rooted[0][0] + self._settle <= line:
            _, trace_id = self._rooted.popleft()
            yield from self._flush(trace_id)
        while self._open:
            trace_id, trace = next(iter(self._open.items()))
            if trace.last_line + self._idle > line:
                break
            yield from self._flush(trace_id)

    def add_whole(self, spans: Sequence[_Parsed]) -> Iterator[Trace]:
        """Traces given whole (Jaeger), grouped by trace id."""
        by_trace: dict[str, list[TracedSpan]] = {}
        for trace_id, _, span in spans:
            self._counters.spans += 1
            by_trace.setdefault(trace_id, []).append(span)
        for trace_id, trace_spans in by_trace.items():
            yield self._trace(trace_id, trace_spans)

    def drain(self) -> Iterator[Trace]:
        """Every trace still open, at the end of the input; then outcomes of unseen traces."""
        self._rooted.clear()
        while self._open:
            yield from self._flush(next(iter(self._open)))
        for trace_id in [t for t in self._outcomes if t in self._unclaimed]:
            yield self._trace(trace_id, [])

    def _flush(self, trace_id: str) -> Iterator[Trace]:
        trace = self._open.pop(trace_id, None)
        if trace is None:
            return
        self._held -= len(trace.spans)
        self._judged[trace_id] = None
        if len(self._judged) > _KEEP_LATE_IDS:
            self._judged.popitem(last=False)
        yield self._trace(trace_id, trace.spans, trace.remote_parents)

    def _trace(self, trace_id: str, spans: list[TracedSpan], remote_parents: int = 0) -> Trace:
        counters = self._counters
        counters.traces += 1
        self._count_oddities(spans, remote_parents)
        outcomes = self._outcomes.get(trace_id)
        if outcomes:
            self._unclaimed.discard(trace_id)
            present = {s.record.span_id for s in spans}
            spans = spans + [s for s in outcomes if s.record.span_id not in present]
        return Trace(trace_id, tuple(spans))

    def _count_oddities(self, spans: list[TracedSpan], remote_parents: int) -> None:
        """Count children that start before their parent, and spans whose parent is missing.

        Both are common in real traces (skewed clocks, sampling, partial answers), so
        they are counted and reported once, not errors.
        """
        starts = {s.record.span_id: s.record.start_ns for s in spans}
        orphans = skewed = 0
        for span in spans:
            parent_id = span.record.parent_id
            if parent_id is None:
                continue
            parent_start = starts.get(parent_id)
            if parent_start is None:
                orphans += 1
            elif span.record.start_ns < parent_start:
                skewed += 1
        self._counters.orphan_spans += max(orphans - remote_parents, 0)
        self._counters.skewed_spans += skewed


# --- files ---------------------------------------------------------------------------------


class _Progress:
    """A progress bar over bytes on a terminal; nothing otherwise."""

    def __init__(self, label: str, total: int, enabled: bool) -> None:
        self._bar: Any = None
        if enabled and total >= _PROGRESS_MIN_BYTES:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TimeRemainingColumn(),
                transient=True,
            )
            self._task = self._bar.add_task(label, total=total)
            self._bar.start()

    def update(self, position: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=position)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class FileSource:
    """A trace file: OTLP/JSON lines (plain or gzip), a Jaeger JSON download, or one
    OTLP/JSON document.

    Example::

        source = FileSource("chainlat-traces.jsonl")
        runs = list(source.runs())
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        settle_lines: int = DEFAULT_SETTLE_LINES,
        idle_lines: int = DEFAULT_IDLE_LINES,
        progress: bool = False,
    ) -> None:
        self.path = Path(path)
        self.name = str(path)
        self.settle_lines = settle_lines
        self.idle_lines = idle_lines
        self.progress = progress

    def runs(self, counters: ReadCounters | None = None) -> Iterator[WorkflowRun]:
        """The runs in the file, each as soon as its trace is complete."""
        counters = counters if counters is not None else ReadCounters()
        yield from _runs_of(self._traces(counters, outcomes=False), counters)

    def traces(self, counters: ReadCounters | None = None) -> Iterator[Trace]:
        """The traces in the file, each as soon as it is complete, with the file's outcomes."""
        counters = counters if counters is not None else ReadCounters()
        yield from self._traces(counters, outcomes=True)

    def _traces(self, counters: ReadCounters, *, outcomes: bool) -> Iterator[Trace]:
        found = self._outcome_spans() if outcomes else None
        with self._open() as raw:
            size = os.fstat(raw.fileno()).st_size
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            stream: Iterable[bytes] = gzip.GzipFile(fileobj=raw) if compressed else raw
            progress = _Progress(self.path.name, size, self.progress and sys.stderr.isatty())
            assembler = _Assembler(counters, self.settle_lines, self.idle_lines, found)
            try:
                yield from self._read(stream, raw, progress, assembler, counters, compressed)
            finally:
                progress.close()

    def _open(self) -> IO[bytes]:
        try:
            return open(self.path, "rb")
        except FileNotFoundError:
            raise TraceSourceError(f"{self.name}: no such file") from None
        except IsADirectoryError:
            raise TraceSourceError(f"{self.name}: is a directory, not a trace file") from None
        except OSError as exc:
            raise TraceSourceError(f"{self.name}: cannot read: {exc.strerror or exc}") from None

    def _outcome_spans(self) -> dict[str, list[TracedSpan]]:
        """The file's outcome spans by trace id, from the lines that mention one.

        A line that cannot be read is skipped: the read proper names the problem.
        """
        found: dict[str, list[TracedSpan]] = {}
        with self._open() as raw:
            compressed = raw.read(2) == b"\x1f\x8b"
            raw.seek(0)
            stream: Iterable[bytes] = gzip.GzipFile(fileobj=raw) if compressed else raw
            try:
                for line_no, line in enumerate(stream, 1):
                    if _OUTCOME_MARK not in line:
                        continue
                    try:
                        doc = _loads(line)
                        spans = self._named(doc, f"{self.name}:{line_no}", attr.OUTCOME_SPAN_NAME)
                    except (ValueError, _BadSpan):
                        continue
                    for trace_id, _, span in spans:
                        if _is_outcome(span):
                            found.setdefault(trace_id, []).append(span)
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError):
                pass
        return found

    def _named(self, doc: object, origin: str, name: str) -> list[_Parsed]:
        if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
            doc = doc["result"]
        if isinstance(doc, dict) and "resourceSpans" in doc:
            return list(_otlp_spans(doc, origin, only=name))
        found = []
        for index, trace in enumerate(_jaeger_traces(doc) or ()):
            found.extend(_jaeger_trace(trace, f"data[{index}]", origin, only=name))
        return found

    def _read(
        self,
        stream: Iterable[bytes],
        raw: IO[bytes],
        progress: _Progress,
        assembler: _Assembler,
        counters: ReadCounters,
        compressed: bool,
    ) -> Iterator[Trace]:
        line_no = 0
        seen_content = False
        lines = iter(stream)
        while True:
            try:
                line = next(lines)
            except StopIteration:
                break
            except (EOFError, gzip.BadGzipFile, zlib.error, OSError) as exc:
                raise TraceSourceError(
                    f"{self.name}:{line_no + 1}: truncated or corrupt gzip data "
                    f"({' '.join(str(exc).split()) or type(exc).__name__})"
                ) from None
            line_no += 1
            counters.lines += 1
            if not line.strip():
                yield from assembler.complete(line_no)
                continue
            try:
                doc = _loads(line)
            except ValueError as exc:
                if not line.endswith(b"\n"):
                    raise TraceSourceError(
                        f"{self.name}:{line_no}: truncated: the file ends in the middle of a "
                        "record (was it still being written?)"
                    ) from None
                if not seen_content and line.lstrip()[:1] in (b"{", b"["):
                    # Perhaps one pretty-printed document rather than JSON lines.
                    yield from self._read_document(assembler, compressed)
                    return
                raise TraceSourceError(
                    f"{self.name}:{line_no}: not valid JSON ({_json_problem(exc)})"
                ) from None
            seen_content = True
            origin = f"{self.name}:{line_no}"
            try:
                yield from self._document(doc, assembler, line_no, origin)
            except _BadSpan as exc:
                raise TraceSourceError(f"{self.name}:{line_no}: {exc}") from None
            yield from assembler.complete(line_no)
            if line_no % 64 == 0:
                if len(_names) > 100_000:
                    _names.clear()  # names made of ids: keep memory flat
                progress.update(raw.tell())
        if not seen_content:
            raise TraceSourceError(f"{self.name}: empty file: no spans to read")
        yield from assembler.drain()

    def _read_document(self, assembler: _Assembler, compressed: bool) -> Iterator[Trace]:
        with open(self.path, "rb") as raw:
            data = gzip.GzipFile(fileobj=raw).read() if compressed else raw.read()
        try:
            doc = json.loads(data)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(data.rstrip()):
                raise TraceSourceError(
                    f"{self.name}:{exc.lineno}: truncated: the document ends early"
                ) from None
            raise TraceSourceError(
                f"{self.name}:{exc.lineno}: not valid JSON ({_json_problem(exc)})"
            ) from None
        except ValueError as exc:
            raise TraceSourceError(f"{self.name}: not valid JSON ({exc})") from None
        documents = doc if isinstance(doc, list) else [doc]
        try:
            for doc in documents:
                yield from self._document(doc, assembler, 1, f"{self.name}:1")
        except _BadSpan as exc:
            raise TraceSourceError(f"{self.name}: {exc}") from None
        yield from assembler.drain()

    def _document(
        self, doc: object, assembler: _Assembler, line: int, origin: str
    ) -> Iterator[Trace]:
        if isinstance(doc, dict) and isinstance(doc.get("result"), dict):
            doc = doc["result"]  # a saved api/v3 response
        if isinstance(doc, dict) and "resourceSpans" in doc:
            for span in _otlp_spans(doc, origin):
                assembler.add(span, line)
            return
        traces = _jaeger_traces(doc)
        if traces is None:
            keys = ", ".join(sorted(doc)[:5]) if isinstance(doc, dict) else type(doc).__name__
            raise _BadSpan(
                "expected an OTLP/JSON request (resourceSpans) or a Jaeger trace "
                "(data, traceID/spans)",
                f"got {keys or 'an empty object'}",
            )
        for index, trace in enumerate(traces):
            yield from assembler.add_whole(_jaeger_trace(trace, f"data[{index}]", origin))


def _jaeger_traces(doc: object) -> list[Mapping[str, Any]] | None:
    if isinstance(doc, dict) and "data" in doc:
        data = doc["data"]
        if data is None:
            return []
        if isinstance(data, list) and all(isinstance(t, dict) for t in data):
            return data
        return None
    if isinstance(doc, dict) and "spans" in doc and ("traceID" in doc or "processes" in doc):
        return [doc]
    return None


def _json_problem(exc: ValueError) -> str:
    message = getattr(exc, "msg", None) or str(exc)
    column = getattr(exc, "colno", None)
    message = re.sub(r":? line \d+ column \d+ \(char \d+\)$", "", message)
    return f"{message} at column {column}" if column is not None else message


# --- Jaeger's HTTP API -----------------------------------------------------------------------

_LOOKBACK_RE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)\s*$")
_LOOKBACK_UNIT_S: Final = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_lookback(text: str) -> dt.timedelta:
    """``"30m"``, ``"1h"``, ``"2d"`` as a timedelta."""
    match = _LOOKBACK_RE.match(text)
    if match is None:
        raise InputError(f"--lookback {text!r}: expected a duration like 30m, 1h or 2d")
    return dt.timedelta(seconds=float(match.group(1)) * _LOOKBACK_UNIT_S[match.group(2)])


class JaegerSource:
    """Traces of one service from Jaeger's HTTP query API.

    Asks ``/api/v3/traces`` (OTLP/JSON) and falls back to ``/api/traces`` when the
    Jaeger has no api/v3. The answer is fetched once and kept, so the source can be
    read again.

    Example::

        source = JaegerSource("http://localhost:16686", "support-bot", lookback="1h", limit=500)
        runs = list(source.runs())
    """

    def __init__(
        self,
        url: str,
        service: str,
        *,
        lookback: str | dt.timedelta = "1h",
        limit: int = 100,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.service = service
        self.name = f"{self.url} (service {service})"
        self.lookback = parse_lookback(lookback) if isinstance(lookback, str) else lookback
        if limit < 1:
            raise InputError(f"--limit {limit}: expected a positive number of traces")
        self.limit = limit
        self.timeout_s = timeout_s
        self._transport = transport
        self._spans: list[_Parsed] | None = None
        self.api: str | None = None
        """``v3`` or ``v1``: which API answered."""

    def runs(self, counters: ReadCounters | None = None) -> Iterator[WorkflowRun]:
        """The runs of the traces Jaeger returned."""
        counters = counters if counters is not None else ReadCounters()
        yield from _runs_of(self.traces(counters), counters)

    def traces(self, counters: ReadCounters | None = None) -> Iterator[Trace]:
        """The traces Jaeger returned, each whole."""
        counters = counters if counters is not None else ReadCounters()
        if self._spans is None:
            self._spans = self._fetch()
        assembler = _Assembler(counters, 0, 1)
        yield from assembler.add_whole(self._spans)

    def _fetch(self) -> list[_Parsed]:
        import httpx

        end = dt.datetime.now(dt.UTC)
        start = end - self.lookback
        try:
            with httpx.Client(timeout=self.timeout_s, transport=self._transport) as client:
                v3 = client.get(
                    f"{self.url}/api/v3/traces",
                    params={
                        "query.service_name": self.service,
                        "query.start_time_min": _rfc3339(start),
                        "query.start_time_max": _rfc3339(end),
                        "query.num_traces": str(self.limit),
                        "query.search_depth": str(self.limit),
                    },
                )
                body = _json_body(v3)
                if v3.status_code == 200 and isinstance(body, dict):
                    self.api = "v3"
                    return self._otlp(body.get("result", body))
                if v3.status_code == 404 and _is_gateway_error(body):
                    self.api = "v3"
                    return []  # api/v3 answers 404 "No traces found"
                if v3.status_code not in (404, 405, 501) and v3.status_code >= 400:
                    raise TraceSourceError(f"{self.name}: {_http_problem(v3, body)}")
                v1 = client.get(
                    f"{self.url}/api/traces",
                    params={
                        "service": self.service,
                        "start": str(int(start.timestamp() * 1e6)),
                        "end": str(int(end.timestamp() * 1e6)),
                        "lookback": _lookback_text(self.lookback),
                        "limit": str(self.limit),
                    },
                )
                body = _json_body(v1)
                self.api = "v1"
                if v1.status_code == 404:
                    return []  # a service Jaeger has never seen
                if v1.status_code != 200 or not isinstance(body, dict):
                    raise TraceSourceError(f"{self.name}: {_http_problem(v1, body)}")
                traces = _jaeger_traces(body)
                if traces is None:
                    raise TraceSourceError(f"{self.name}: /api/traces: unexpected answer")
                spans: list[_Parsed] = []
                for index, trace in enumerate(traces):
                    spans.extend(_jaeger_trace(trace, f"data[{index}]", self.url))
                return spans
        except httpx.HTTPError as exc:
            raise TraceSourceError(f"{self.name}: cannot reach Jaeger: {exc}") from None
        except _BadSpan as exc:
            raise TraceSourceError(f"{self.name}: {exc}") from None

    def _otlp(self, doc: object) -> list[_Parsed]:
        if not isinstance(doc, dict):
            raise TraceSourceError(f"{self.name}: /api/v3/traces: unexpected answer")
        if "resourceSpans" not in doc:
            return []
        return list(_otlp_spans(doc, self.url))


def _rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _lookback_text(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{max(seconds // 60, 1)}m"


def _json_body(response: httpx.Response) -> object:
    try:
        return response.json()
    except ValueError:
        return None


def _is_gateway_error(body: object) -> bool:
    return isinstance(body, dict) and isinstance(body.get("error"), dict)


def _http_problem(response: httpx.Response, body: object) -> str:
    detail = ""
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            detail = str(error.get("message", ""))
        elif isinstance(body.get("errors"), list) and body["errors"]:
            detail = str(body["errors"][0])
    if not detail:
        detail = " ".join(response.text.split())[:200]
    return (
        f"{response.request.url.path}: HTTP {response.status_code}{': ' + detail if detail else ''}"
    )


# --- entry points ---------------------------------------------------------------------------------


def open_source(
    spec: str | os.PathLike[str] | TraceSource,
    *,
    settle_lines: int = DEFAULT_SETTLE_LINES,
    idle_lines: int = DEFAULT_IDLE_LINES,
    progress: bool = False,
) -> TraceSource:
    """A source from a file path (or a source, returned as is)."""
    if isinstance(spec, (str, os.PathLike)):
        return FileSource(spec, settle_lines=settle_lines, idle_lines=idle_lines, progress=progress)
    return spec


def read_traces(
    sources: Iterable[str | os.PathLike[str] | TraceSource],
    *,
    settle_lines: int = DEFAULT_SETTLE_LINES,
    idle_lines: int = DEFAULT_IDLE_LINES,
    progress: bool = False,
    counters: ReadCounters | None = None,
) -> Iterator[Trace]:
    """The traces of every source, each once it is complete, streamed.

    Each trace has every span read for it, with the attributes in
    :data:`KEPT_ATTRIBUTES`, and the ``record_outcome`` spans of its source
    wherever they are in it (see the module docstring).

    Example::

        for trace in read_traces(["chainlat-traces.jsonl"]):
            print(trace.trace_id, len(trace.spans))

    Args:
        sources: Trace file paths, :class:`JaegerSource` objects, or any TraceSource.
        settle_lines: Lines to wait after a trace's root before judging it complete.
        idle_lines: Lines after which a trace without a root is judged anyway.
        progress: Show a progress bar on a terminal for files over 4 MiB.
        counters: Filled in with what was read.

    Raises:
        TraceSourceError: a file is missing, empty, truncated or has a corrupt line;
            Jaeger cannot be reached. The message names the file and line.
    """
    counters = counters if counters is not None else ReadCounters()
    for source in _opened(sources, settle_lines, idle_lines, progress):
        yield from source.traces(counters)


def _opened(
    sources: Iterable[str | os.PathLike[str] | TraceSource],
    settle_lines: int,
    idle_lines: int,
    progress: bool,
) -> Iterator[TraceSource]:
    """Each source opened in turn, as it is reached (a later one is not opened early)."""
    for spec in sources:
        yield open_source(spec, settle_lines=settle_lines, idle_lines=idle_lines, progress=progress)


def read_runs(
    sources: Iterable[str | os.PathLike[str] | TraceSource],
    *,
    settle_lines: int = DEFAULT_SETTLE_LINES,
    idle_lines: int = DEFAULT_IDLE_LINES,
    progress: bool = False,
    counters: ReadCounters | None = None,
) -> Iterator[WorkflowRun]:
    """The workflow runs of every source, streamed: a run per workflow span of each trace
    :func:`read_traces` hands out (without looking for outcome spans).

    Args:
        sources: Trace file paths, :class:`JaegerSource` objects, or any TraceSource.
        settle_lines: Lines to wait after a trace's root before judging it complete.
        idle_lines: Lines after which a trace without a root is judged anyway.
        progress: Show a progress bar on a terminal for files over 4 MiB.
        counters: Filled in with what was read.

    Raises:
        TraceSourceError: a file is missing, empty, truncated or has a corrupt line;
            Jaeger cannot be reached. The message names the file and line.
    """
    counters = counters if counters is not None else ReadCounters()
    for source in _opened(sources, settle_lines, idle_lines, progress):
        yield from source.runs(counters)
