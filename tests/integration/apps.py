"""Applications traced by chainlat itself, for the end-to-end tests.

An :func:`otlp_app` is ``chainlat.configure(exporter="otlp")`` pointed at an endpoint
through the standard ``OTEL_EXPORTER_OTLP_*`` variables, as a user would set it up,
with one more processor on the returned provider that keeps the very same span
objects in memory (and, if asked, in a local JSON-lines file). What the application
computed is then at hand to compare with what arrived in Jaeger.

The other helpers read OTLP/JSON (chainlat's files, Jaeger's api/v3) into plain
records, so that the two sides are compared in one shape.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter

JAEGER_ANNOTATION_PREFIX = "@jaeger@"
"""Jaeger adds its own notes as attributes (``@jaeger@warnings`` on clock skew)."""


class ToolFailed(Exception):
    """The error a failing tool step raises in the workloads."""


@dataclass
class App:
    """A configured chainlat application and the local copy of what it exported."""

    provider: TracerProvider
    local: InMemorySpanExporter
    """Every span the exporter was handed, the same objects."""
    metrics: InMemoryMetricReader
    """chainlat's metrics (GenAI histograms, ``chainlat.export.dropped_spans``)."""

    def flush(self) -> None:
        """Export everything ended so far; returns when the exporter answered (or failed)."""
        assert self.provider.force_flush(30_000), "force_flush timed out"

    def spans_of(self, trace_ids: set[str]) -> list[ReadableSpan]:
        """The finished spans of the given traces (ids in hex)."""
        return [s for s in self.local.get_finished_spans() if trace_id_of(s) in trace_ids]

    def metric_sum(self, name: str, **labels: str) -> int:
        """The summed data points of a counter whose attributes include ``labels``."""
        data = self.metrics.get_metrics_data()
        total = 0
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name != name:
                        continue
                    for point in metric.data.data_points:
                        attributes = dict(point.attributes or {})
                        if all(attributes.get(k) == v for k, v in labels.items()):
                            total += int(getattr(point, "value", 0))
        return total


@contextmanager
def otlp_app(
    endpoint: str,
    service: str,
    *,
    budgets: Path | None = None,
    traces_file: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[App]:
    """chainlat configured to send OTLP/HTTP to ``endpoint``; shut down on exit.

    ``budgets`` is enforced at runtime (``chainlat.budget.ok`` on workflow spans);
    ``traces_file`` gets a JSON-lines copy of every span as well; ``env`` adds
    ``OTEL_*`` variables for the exporter (timeouts).
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        patch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        for key, value in (env or {}).items():
            patch.setenv(key, value)
        reader = InMemoryMetricReader()
        provider = chainlat.configure(
            service,
            exporter="otlp",
            set_global=False,
            metric_readers=[reader],
            budgets=budgets,
        )
        try:
            local = InMemorySpanExporter()
            provider.add_span_processor(SimpleSpanProcessor(local))
            if traces_file is not None:
                provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(traces_file)))
            yield App(provider, local, reader)
        finally:
            chainlat.shutdown()
            provider.shutdown()


async def run_workflow(
    provider: TracerProvider,
    name: str,
    *,
    data_ms: float = 0.0,
    inference_ms: float = 0.0,
    tool_ms: float = 0.0,
    model: str = "sim-model",
    fail: bool = False,
) -> str:
    """One run of a three-step workflow with the given step durations; its trace id (hex).

    With ``fail`` the tool step raises :class:`ToolFailed`, which is recorded on the
    tool and workflow spans and caught here, outside the workflow.
    """
    handle: chainlat.WorkflowHandle | None = None
    try:
        async with chainlat.workflow(name, tracer_provider=provider) as handle:
            async with chainlat.data_stage("retrieve-docs", tracer_provider=provider):
                await asyncio.sleep(data_ms / 1000)
            async with chainlat.inference(model, provider="sim", tracer_provider=provider):
                await asyncio.sleep(inference_ms / 1000)
            async with chainlat.tool("lookup-order", tracer_provider=provider):
                await asyncio.sleep(tool_ms / 1000)
                if fail:
                    raise ToolFailed("order service unavailable")
    except ToolFailed:
        pass
    assert handle is not None
    assert handle.rollup is not None, "the workflow finished without a rollup"
    return f"{handle.span.get_span_context().trace_id:032x}"


def trace_id_of(span: ReadableSpan) -> str:
    context = span.context
    assert context is not None
    return f"{context.trace_id:032x}"


# --- OTLP/JSON, from a file or from Jaeger --------------------------------------------------


def otlp_value(value: Mapping[str, Any]) -> object:
    """An OTLP/JSON ``AnyValue`` as a Python value (64-bit ints arrive as strings)."""
    ((kind, raw),) = value.items()
    if kind == "intValue":
        return int(raw)
    if kind == "doubleValue":
        return float(raw)  # Go writes 0.0 as 0
    if kind == "arrayValue":
        return tuple(otlp_value(v) for v in raw.get("values", []))
    if kind == "kvlistValue":
        return {kv["key"]: otlp_value(kv["value"]) for kv in raw.get("values", [])}
    return raw


def attributes(span: Mapping[str, Any]) -> dict[str, object]:
    """An OTLP/JSON span's attributes as {key: value}, without Jaeger's own notes."""
    return {
        a["key"]: otlp_value(a["value"])
        for a in span.get("attributes", [])
        if not a["key"].startswith(JAEGER_ANNOTATION_PREFIX)
    }


def spans_of_request(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """The spans of one OTLP/JSON export request (or Jaeger's api/v3 ``result``)."""
    for resource_spans in doc.get("resourceSpans", []):
        for scope_spans in resource_spans.get("scopeSpans", []):
            yield from scope_spans.get("spans", [])


def spans_in_file(path: Path) -> dict[str, list[dict[str, Any]]]:
    """The spans of a JSON-lines traces file, by trace id."""
    by_trace: dict[str, list[dict[str, Any]]] = {}
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            for span in spans_of_request(json.loads(line)):
                by_trace.setdefault(span["traceId"], []).append(span)
    return by_trace


def jaeger_spans(client: httpx.Client, query_url: str, trace_id: str) -> list[dict[str, Any]]:
    """The spans of one trace from Jaeger's api/v3 (OTLP/JSON); [] while it is unknown."""
    response = client.get(f"{query_url}/api/v3/traces/{trace_id}")
    if response.status_code == 404:
        return []
    response.raise_for_status()
    return list(spans_of_request(response.json()["result"]))


def jaeger_span_counts(client: httpx.Client, query_url: str, service: str) -> dict[str, int]:
    """{trace id: spans Jaeger holds} for every trace of a service (v1 search, last hour)."""
    response = client.get(
        f"{query_url}/api/traces",
        params={"service": service, "limit": 10_000, "lookback": "1h"},
    )
    if response.status_code == 404:  # no trace of the service yet
        return {}
    response.raise_for_status()
    return {t["traceID"]: len(t["spans"]) for t in response.json()["data"]}
