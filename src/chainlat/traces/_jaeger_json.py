"""Jaeger JSON (the query service's ``api/traces`` answer, the UI's download) into spans."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from chainlat.traces._parse import (
    MAX_NS,
    NO_ATTRIBUTES,
    BadSpan,
    NegativeDuration,
    Parsed,
    dropped_run,
    ends_before_start,
    finite,
    hex_id,
    integer,
    kept_key,
    kept_value,
    list_of_objects,
    make_span,
    tally,
    time_ns,
)


def _jaeger_value(tag: Mapping[str, object]) -> object:
    value, kind = tag.get("value"), tag.get("type")
    try:
        if kind == "int64" and isinstance(value, (str, int)):
            return int(value)
        if kind == "float64" and isinstance(value, (str, int, float)):
            return finite(float(value))
    except (ValueError, OverflowError):
        return None
    if kind == "bool" and isinstance(value, str):
        return value == "true"
    return value if isinstance(value, (str, int, float, bool)) else None


def _jaeger_tags(tags: object, where: str) -> Mapping[str, object]:
    found: dict[str, object] = {}
    if tags is not None:
        for tag in list_of_objects(tags, where, "tags"):
            key = kept_key(tag.get("key"))
            if key is not None:
                found[key] = kept_value(_jaeger_value(tag))
    return found or NO_ATTRIBUTES


def jaeger_trace(
    trace: Mapping[str, Any], where: str, origin: str, only: str | None = None
) -> list[Parsed]:
    """The spans of a Jaeger trace; with ``only``, just the spans of that name."""
    spans = trace.get("spans")
    if not isinstance(spans, list):
        raise BadSpan(f"{where}.spans", "expected a list of spans")
    found = []
    for k, raw in enumerate(spans):
        at = f"{where}.spans[{k}]"
        if not isinstance(raw, dict):
            raise BadSpan(at, "expected a span object")
        name = raw.get("operationName", "")
        if only is not None and name != only:
            continue
        trace_id = hex_id(raw.get("traceID", trace.get("traceID")), 16, f"{at}.traceID")
        span_id = int(hex_id(raw.get("spanID"), 8, f"{at}.spanID"), 16)
        parent_id = None
        references = list_of_objects(raw.get("references"), f"{at}.references", "references")
        refs = list(references)
        refs.sort(key=lambda r: r.get("refType") != "CHILD_OF")
        if refs:
            parent_id = int(hex_id(refs[0].get("spanID"), 8, f"{at}.references"), 16)
        elif raw.get("parentSpanID"):
            parent_id = int(hex_id(raw.get("parentSpanID"), 8, f"{at}.parentSpanID"), 16)
        start_us = time_ns(raw.get("startTime", 0), f"{at}.startTime")
        duration_us = integer(raw.get("duration", 0), f"{at}.duration")
        if (start_us + duration_us) * 1000 > MAX_NS:
            raise BadSpan(f"{at}.startTime", f"expected a time in µs since 1970, got {start_us}")
        if duration_us < 0:
            # One impossible span costs itself, as in OTLP files, not the trace's other spans.
            why = ends_before_start(name, span_id, start_us * 1000, (start_us + duration_us) * 1000)
            workflow = dropped_run(_jaeger_tags(raw.get("tags"), f"{at}.tags"), name)
            tally.negative(f"{origin}: {at}: {why}", NegativeDuration(at, why, workflow))
            continue
        attributes = _jaeger_tags(raw.get("tags"), f"{at}.tags")
        error = attributes.get("error") is True or attributes.get("otel.status_code") == "ERROR"
        events: list[tuple[str, int]] = []
        for log in list_of_objects(raw.get("logs"), f"{at}.logs", "logs"):
            fields = log.get("fields")
            event = ""
            if isinstance(fields, list):
                for f in fields:
                    if isinstance(f, dict) and f.get("key") == "event":
                        event = str(f.get("value", ""))
                        break
            events.append((event, time_ns(log.get("timestamp", 0), f"{at}.logs") * 1000))
        found.append(
            make_span(
                trace_id=trace_id,
                span_id=span_id,
                parent_id=parent_id,
                name=name if isinstance(name, str) else str(name),
                start_ns=start_us * 1000,
                end_ns=(start_us + duration_us) * 1000,
                attributes=attributes,
                error=error,
                local_root=parent_id is None,
                events=events,
                origin=origin,
            )
        )
    return found


def jaeger_traces(doc: object) -> list[Mapping[str, Any]] | None:
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
