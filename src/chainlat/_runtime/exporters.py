"""Which span exporter configure() builds: from its arguments, else from the environment.

``OTEL_TRACES_EXPORTER`` names one; an OTLP endpoint (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) means OTLP; otherwise traces go to a file, in
the OTLP/JSON lines format of the Collector's file exporter.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter

from chainlat._core.errors import ConfigError
from chainlat._runtime.export import DEFAULT_EXPORT_TIMEOUT_S
from chainlat._runtime.otel_compat import exporter_endpoint
from chainlat._runtime.otlp_json import JsonLinesSpanExporter

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricReader

ExporterName = Literal["file", "otlp", "console", "none"]

DEFAULT_TRACES_FILE = "chainlat-traces.jsonl"
_PROTOCOLS = ("http/protobuf", "grpc")


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def traces_file_path(traces_file: str | os.PathLike[str] | None) -> str | os.PathLike[str]:
    """Where the file exporter appends: ``traces_file``, else ``CHAINLAT_TRACES_FILE``, else
    ``chainlat-traces.jsonl``."""
    return traces_file or _env("CHAINLAT_TRACES_FILE") or DEFAULT_TRACES_FILE


def _otlp_endpoint() -> str | None:
    return _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT")


def choose_exporter(exporter: ExporterName | SpanExporter | None) -> ExporterName | SpanExporter:
    """The exporter ``configure(exporter=...)`` uses: the one given, else what the
    environment names (``OTEL_TRACES_EXPORTER``, an OTLP endpoint), else ``"file"``."""
    if exporter is not None:
        return exporter
    named = _env("OTEL_TRACES_EXPORTER")
    if named is not None:
        first = named.split(",")[0].strip().lower()
        if first not in ("otlp", "console", "none", "file"):
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER={named!r}: expected otlp, console, none or file"
            )
        return first  # type: ignore[return-value]
    return "otlp" if _otlp_endpoint() else "file"


def _protocol() -> str:
    protocol = (
        _env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or _env("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol not in _PROTOCOLS:
        raise ConfigError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r}: expected one of {', '.join(_PROTOCOLS)}"
        )
    return protocol


def _export_timeout_s(signal: str) -> float | None:
    # The SDK's default is 10 s per export request, retries included; chainlat's is
    # shorter, so that a hanging collector holds the export thread less long. The
    # standard variables (seconds, as the Python exporters read them) still win.
    if _env(f"OTEL_EXPORTER_OTLP_{signal}_TIMEOUT") or _env("OTEL_EXPORTER_OTLP_TIMEOUT"):
        return None
    return DEFAULT_EXPORT_TIMEOUT_S


def _otlp_span_exporter() -> SpanExporter:
    # The exporters read OTEL_EXPORTER_OTLP_* (endpoint, headers, timeout,
    # compression) themselves, each with the per-signal override.
    timeout = _export_timeout_s("TRACES")
    if _protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(timeout=timeout)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    from chainlat._runtime.otlp_http import deadline_session

    _import_what_requests_imports_per_request()
    # requests bounds each socket read, not the request: a collector dripping its answer
    # would hold the export thread far beyond the timeout. This session bounds it whole.
    return HttpSpanExporter(timeout=timeout, session=deadline_session())


def _import_what_requests_imports_per_request() -> None:
    # requests imports netrc inside its first request, in whichever thread sends it. A
    # fork in the middle of that import leaves the child a module lock that no thread
    # will release: every export there hangs. Span exports hold off a fork (see
    # GuardedExporter); the metrics thread does not, so the import happens here, early.
    import netrc  # noqa: F401


def otlp_metric_reader() -> MetricReader:
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    timeout = _export_timeout_s("METRICS")
    if _protocol() == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return PeriodicExportingMetricReader(OTLPMetricExporter(timeout=timeout))
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpMetricExporter,
    )

    from chainlat._runtime.otlp_http import deadline_session

    _import_what_requests_imports_per_request()
    return PeriodicExportingMetricReader(
        HttpMetricExporter(timeout=timeout, session=deadline_session())
    )


def describe(exporter: SpanExporter) -> str:
    """How log lines name where spans go."""
    if isinstance(exporter, JsonLinesSpanExporter):
        return exporter.path
    endpoint = exporter_endpoint(exporter)
    return str(endpoint) if endpoint else type(exporter).__name__


def exporter_factory(
    chosen: ExporterName | SpanExporter, traces_file: str | os.PathLike[str] | None
) -> Callable[[], SpanExporter] | None:
    """Builds the same exporter again in a forked child; None for an exporter given as is."""
    if isinstance(chosen, SpanExporter):
        return None

    def build() -> SpanExporter:
        exporter = make_exporter(chosen, traces_file)
        assert exporter is not None
        return exporter

    return build


def make_exporter(
    chosen: ExporterName | SpanExporter, traces_file: str | os.PathLike[str] | None
) -> SpanExporter | None:
    if isinstance(chosen, SpanExporter):
        return chosen
    if chosen == "none":
        return None
    if chosen == "console":
        return ConsoleSpanExporter()
    if chosen == "otlp":
        return _otlp_span_exporter()
    if chosen == "file":
        return JsonLinesSpanExporter(traces_file_path(traces_file))
    raise ConfigError(f"exporter={chosen!r}: expected file, otlp, console, none or a SpanExporter")
