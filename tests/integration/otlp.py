"""Hand-built OTLP/JSON traces and Jaeger query helpers for the integration tests.

The traces are written without the chainlat library or the OpenTelemetry SDK, so these
tests pin what the Collector tier and Jaeger do with the wire format alone.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import httpx

AttributeValue = str | bool | int | float

SPAN_KIND_INTERNAL: Final = 1
SPAN_KIND_CLIENT: Final = 3
STATUS_CODE_ERROR: Final = 2

T = TypeVar("T")


@dataclass(frozen=True)
class Span:
    """One span of a hand-built trace; times in Unix nanoseconds."""

    name: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    error: bool = False
    kind: int = SPAN_KIND_INTERNAL


@dataclass(frozen=True)
class Trace:
    """A trace id and its spans, the workflow span first."""

    trace_id: str
    spans: Sequence[Span]

    @property
    def duration_ms(self) -> float:
        start = min(s.start_ns for s in self.spans)
        end = max(s.end_ns for s in self.spans)
        return (end - start) / 1e6


def workflow_trace(
    rng: random.Random,
    *,
    duration_ms: float = 300.0,
    budget_ok: bool | None = True,
    error: bool = False,
    model: str = "gpt-4o-mini",
    end_ns: int | None = None,
) -> Trace:
    """A chain as chainlat records it: a workflow span over data, inference and tool steps.

    The steps split the workflow's duration 20/60/20; ``error`` marks the tool step
    failed; ``budget_ok=None`` leaves the budget attribute off.
    """
    end = end_ns if end_ns is not None else time.time_ns()
    total = int(duration_ms * 1e6)
    start = end - total
    root = _hex(rng, 8)
    wf_attrs: dict[str, AttributeValue] = {
        "chainlat.step.kind": "workflow",
        "chainlat.workflow.name": "support-chat",
        "gen_ai.operation.name": "invoke_workflow",
    }
    if budget_ok is not None:
        wf_attrs["chainlat.budget.ok"] = budget_ok
    cut1, cut2 = start + total // 5, start + total * 4 // 5
    spans = [
        Span("invoke_workflow support-chat", root, "", start, end, wf_attrs, error=error),
        Span(
            "data retrieve-docs",
            _hex(rng, 8),
            root,
            start,
            cut1,
            {"chainlat.step.kind": "data", "chainlat.step.index": 0},
        ),
        Span(
            f"chat {model}",
            _hex(rng, 8),
            root,
            cut1,
            cut2,
            {
                "chainlat.step.kind": "inference",
                "chainlat.step.index": 1,
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
            },
            kind=SPAN_KIND_CLIENT,
        ),
        Span(
            "execute_tool lookup-order",
            _hex(rng, 8),
            root,
            cut2,
            end,
            {"chainlat.step.kind": "tool", "chainlat.step.index": 2},
            error=error,
        ),
    ]
    return Trace(_hex(rng, 16), spans)


def otlp_json(service_name: str, traces: Iterable[Trace]) -> dict[str, Any]:
    """The OTLP/JSON body of an export request (ids in hex, as the JSON mapping wants)."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": service_name})},
                "scopeSpans": [
                    {
                        "scope": {"name": "chainlat"},
                        "spans": [_span_json(t.trace_id, s) for t in traces for s in t.spans],
                    }
                ],
            }
        ]
    }


def send(
    client: httpx.Client, otlp_http_endpoint: str, service: str, traces: Sequence[Trace]
) -> None:
    """POST traces to an OTLP/HTTP receiver and insist on a full success."""
    response = client.post(f"{otlp_http_endpoint}/v1/traces", json=otlp_json(service, traces))
    response.raise_for_status()
    assert "partialSuccess" not in response.json() or not response.json()["partialSuccess"]


def jaeger_trace_ids(client: httpx.Client, query_url: str, service: str) -> set[str]:
    """Ids of the traces Jaeger holds for a service (v1 HTTP API, one-hour lookback)."""
    response = client.get(
        f"{query_url}/api/traces",
        params={"service": service, "limit": 10_000, "lookback": "1h"},
    )
    if response.status_code == 404:  # the service has no trace yet
        return set()
    response.raise_for_status()
    return {t["traceID"] for t in response.json()["data"]}


def jaeger_trace_v3(client: httpx.Client, query_url: str, trace_id: str) -> list[dict[str, Any]]:
    """The spans of one trace from the api/v3 endpoint (OTLP/JSON), [] while it is unknown."""
    response = client.get(f"{query_url}/api/v3/traces/{trace_id}")
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return [
        span
        for resource_spans in response.json()["result"]["resourceSpans"]
        for scope_spans in resource_spans["scopeSpans"]
        for span in scope_spans["spans"]
    ]


def wait_for(
    probe: Callable[[], T | None],
    *,
    timeout_s: float,
    what: str,
    interval_s: float = 0.25,
) -> T:
    """Poll ``probe`` until it returns a truthy value; fail with ``what`` after the timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")
        time.sleep(interval_s)


def attribute_map(span: Mapping[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON span's attributes as {key: Python value}."""
    out: dict[str, Any] = {}
    for attribute in span.get("attributes", []):
        ((kind, value),) = attribute["value"].items()
        out[attribute["key"]] = int(value) if kind == "intValue" else value
    return out


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    """One line of a Prometheus text exposition."""

    name: str
    labels: Mapping[str, str]
    value: float


def prometheus_samples(text: str) -> list[Sample]:
    """Parse the Prometheus text format (enough of it for these tests)."""
    samples = []
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and not line.startswith("#"):
            name, labels, value = match.groups()
            samples.append(Sample(name, dict(_LABEL.findall(labels or "")), float(value)))
    return samples


def _hex(rng: random.Random, n_bytes: int) -> str:
    return rng.randbytes(n_bytes).hex()


def _attributes(values: Mapping[str, AttributeValue]) -> list[dict[str, Any]]:
    out = []
    for key, value in values.items():
        # bool before int: bool is an int subclass.
        if isinstance(value, bool):
            wire: dict[str, Any] = {"boolValue": value}
        elif isinstance(value, int):
            wire = {"intValue": str(value)}
        elif isinstance(value, float):
            wire = {"doubleValue": value}
        else:
            wire = {"stringValue": value}
        out.append({"key": key, "value": wire})
    return out


def _span_json(trace_id: str, span: Span) -> dict[str, Any]:
    body: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": _attributes(span.attributes),
    }
    if span.parent_span_id:
        body["parentSpanId"] = span.parent_span_id
    if span.error:
        body["status"] = {"code": STATUS_CODE_ERROR, "message": "tool failed"}
    return body
