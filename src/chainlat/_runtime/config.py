"""configure() and shutdown(): providers, exporters, environment variables, the embedded default."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SpanExporter

from chainlat._core.errors import ConfigError, internal_errors, logger
from chainlat._core.prices import Price, valid_price
from chainlat._runtime.export import (
    DEFAULT_EXPORT_TIMEOUT_S,
    BoundedBatchSpanProcessor,
    CountingSimpleSpanProcessor,
    clamp_shutdown_timeout_s,
    export_processor,
    shutdown_timeout_s,
    start_in_thread,
    wait_s,
)
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat._runtime.processor import (
    ChainlatSpanProcessor,
    Clock,
    processor_for,
    register,
    set_default_provider,
)

if TYPE_CHECKING:
    from chainlat._runtime.budgets import OnExceed
    from chainlat.budgets import Budgets

ExporterName = Literal["file", "otlp", "console", "none"]

DEFAULT_TRACES_FILE = "chainlat-traces.jsonl"
_PROTOCOLS = ("http/protobuf", "grpc")


@dataclass
class _Installed:
    provider: TracerProvider
    owned: bool
    processors: list[SpanProcessor] = field(default_factory=list)
    meter_provider: MeterProvider | None = None


_lock = threading.Lock()
_installed: _Installed | None = None
_owned_provider: TracerProvider | None = None
"""The provider configure() created; the global one can be set once per process, so it is reused."""
_exit_handler_registered = False


def _reinit_lock_in_child() -> None:
    # A fork while another thread held the lock would leave the child unable to shut down.
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reinit_lock_in_child)


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def _otlp_endpoint() -> str | None:
    return _env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or _env("OTEL_EXPORTER_OTLP_ENDPOINT")


def _choose_exporter(exporter: ExporterName | SpanExporter | None) -> ExporterName | SpanExporter:
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


def _otlp_metric_reader() -> MetricReader:
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


def configure(
    service_name: str | None = None,
    *,
    exporter: ExporterName | SpanExporter | None = None,
    traces_file: str | os.PathLike[str] | None = None,
    tracer_provider: TracerProvider | None = None,
    resource_attributes: Mapping[str, str] | None = None,
    metric_readers: list[MetricReader] | None = None,
    batch: bool = True,
    set_global: bool = True,
    clock: Clock | None = None,
    budgets: str | os.PathLike[str] | Budgets | None = None,
    on_exceed: OnExceed = "record",
    prices: Mapping[str, Price | Mapping[str, float]] | None = None,
) -> TracerProvider:
    """Set up tracing for an application and return its TracerProvider.

    With no OTLP endpoint configured (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), traces are appended to
    ``chainlat-traces.jsonl`` (or ``traces_file`` / ``CHAINLAT_TRACES_FILE``) in
    the OTLP/JSON lines format of the Collector's file exporter.

    Args:
        service_name: ``service.name``; default ``OTEL_SERVICE_NAME``, then the SDK's.
        exporter: ``"file"``, ``"otlp"``, ``"console"``, ``"none"`` or any SpanExporter;
            default ``OTEL_TRACES_EXPORTER``, else otlp when an endpoint is set, else file.
        traces_file: Where the file exporter appends.
        tracer_provider: An existing provider to add chainlat's span processor to, instead
            of creating one; chainlat's own spans go to it, global or not. It is neither
            replaced nor shut down by chainlat, and gets no exporter unless ``exporter``
            asks for one. When None and a global provider was already set up by another
            library (Logfire, OpenLLMetry), chainlat joins that one the same way.
        resource_attributes: Extra resource attributes (``OTEL_RESOURCE_ATTRIBUTES`` is read too).
        metric_readers: Readers for the GenAI metrics; default an OTLP reader when the
            exporter is otlp, none otherwise.
        batch: Export through a BatchSpanProcessor (default) or a SimpleSpanProcessor.
            Either way, spans that cannot be exported are counted and logged, never
            raised, and the exporter is rebuilt in a forked child (see docs/operating.md).
        set_global: Make the providers the global ones (only for providers chainlat creates).
        clock: Nanosecond clock for chainlat's own spans (tests inject one).
        budgets: Latency budgets to check every workflow run against when it ends: a
            budget file's path or a loaded ``chainlat.budgets.Budgets``. None (default)
            checks nothing; no file is looked for unless named, so an application's
            behaviour never depends on the directory it was started in.
        on_exceed: ``"record"`` (span attributes and events only), ``"warn"``
            (a ``LatencyBudgetWarning``), ``"raise"`` (``LatencyBudgetExceeded`` when the
            workflow block exits, after its span ended) or a callable given that exception.
        prices: US dollars per million tokens by model (``{"gpt-4o": {"input_per_mtok":
            2.5, "output_per_mtok": 10, "cache_read_per_mtok": 1.25}}``): every workflow
            gets ``chainlat.chain.cost_usd``. Default: the budget file's ``[prices]``.
            Never built in: prices change.

    Example::

        import chainlat
        chainlat.configure("support-bot")
        with chainlat.workflow("answer"): ...
    """
    global _installed, _owned_provider
    loaded_budgets = _load_budgets(budgets, on_exceed)
    model_prices = _prices(prices, loaded_budgets)
    with _lock:
        if tracer_provider is None and set_global:
            # Another library (Logfire, OpenLLMetry's Traceloop.init, the application)
            # owns the global provider: chainlat joins it rather than make a second one
            # that the application's spans would never reach.
            tracer_provider = _foreign_global()
        owned = tracer_provider is None
        chosen = _choose_exporter(exporter)
        # A provider the user brings already exports: chainlat adds an exporter only when
        # asked, so spans are not sent twice and no stray traces file appears.
        span_exporter = _make_exporter(chosen, traces_file) if owned or exporter else None
        if metric_readers is None:
            metric_readers = [_otlp_metric_reader()] if chosen == "otlp" and span_exporter else []

        if _installed is not None:
            _shutdown_installed(_installed)
            _installed = None
        if tracer_provider is None:
            if _owned_provider is None or not set_global:
                tracer_provider = TracerProvider(
                    resource=_resource(service_name, resource_attributes)
                )
            else:
                tracer_provider = _owned_provider
            if set_global:
                _owned_provider = tracer_provider
        resource = getattr(tracer_provider, "resource", None)
        meter_provider = (
            # Metrics describe the same service as the traces, also when the
            # provider was reused from an earlier configure().
            MeterProvider(
                metric_readers=metric_readers,
                resource=resource if isinstance(resource, Resource) else _resource(None, None),
            )
            if metric_readers
            else None
        )

        chainlat_processor = processor_for(tracer_provider, install=False)
        if chainlat_processor is None:
            chainlat_processor = ChainlatSpanProcessor()
            tracer_provider.add_span_processor(chainlat_processor)
            register(tracer_provider, chainlat_processor)
        if clock is not None:
            chainlat_processor.clock = clock
        chainlat_processor.prices = model_prices
        chainlat_processor.use_meter_provider(meter_provider)

        installed = _Installed(tracer_provider, owned, meter_provider=meter_provider)
        if span_exporter is not None:
            export = export_processor(
                span_exporter,
                target=_describe(span_exporter),
                batch=batch,
                factory=_exporter_factory(chosen, traces_file),
                meter_provider=meter_provider,
            )
            tracer_provider.add_span_processor(export)
            installed.processors.append(export)
        _register_exit_handler()
        if set_global and owned:
            _set_global(tracer_provider, meter_provider)
        _installed = installed
        set_default_provider(tracer_provider)
        _install_budgets(loaded_budgets, on_exceed)
        _install_chain_metrics(meter_provider, loaded_budgets)
        return tracer_provider


def _foreign_global() -> TracerProvider | None:
    """The global provider when another library set one that can take chainlat's processor."""
    current = trace.get_tracer_provider()
    if current is _owned_provider or isinstance(
        current, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
    ):
        return None
    if isinstance(current, TracerProvider) or callable(
        getattr(current, "add_span_processor", None)
    ):
        logger.info(
            "chainlat: joining the global TracerProvider (%s) set up before configure(); "
            "it keeps its own exporters (pass exporter= to add one)",
            type(current).__name__,
        )
        return current  # type: ignore[return-value]
    raise ConfigError(
        f"the global TracerProvider is a {type(current).__name__}, which takes no span "
        "processor: pass configure(tracer_provider=...) the SDK TracerProvider behind it"
    )


def _load_budgets(
    budgets: str | os.PathLike[str] | Budgets | None, on_exceed: OnExceed
) -> Budgets | None:
    # Budgets import pydantic: only when asked for, so that `import chainlat` stays cheap.
    if budgets is None:
        if on_exceed != "record":
            raise ConfigError(f"on_exceed={on_exceed!r} needs budgets=")
        return None
    from chainlat.budgets import Budgets, load_budgets

    return budgets if isinstance(budgets, Budgets) else load_budgets(budgets)


def _prices(
    given: Mapping[str, Price | Mapping[str, float]] | None, budgets: Budgets | None
) -> dict[str, Price] | None:
    if given is None:
        return budgets.model_prices() if budgets is not None else None
    found: dict[str, Price] = {}
    for model, value in given.items():
        if isinstance(value, Price):
            found[model] = value
            continue
        try:
            price = Price(
                float(value["input_per_mtok"]),
                float(value["output_per_mtok"]),
                float(value["cache_read_per_mtok"]) if "cache_read_per_mtok" in value else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"prices[{model!r}]: expected input_per_mtok and output_per_mtok (US dollars "
                f"per million tokens), and optionally cache_read_per_mtok: {exc!r}"
            ) from None
        values = (price.input_per_mtok, price.output_per_mtok, price.cache_read_per_mtok or 0.0)
        if not all(valid_price(v) for v in values):
            raise ConfigError(f"prices[{model!r}]: a price is a finite number of dollars >= 0")
        found[model] = price
    return found


def _install_budgets(budgets: Budgets | None, on_exceed: OnExceed) -> None:
    runtime = sys.modules.get("chainlat._runtime.budgets")
    if budgets is not None:
        from chainlat._runtime import budgets as runtime
    if runtime is not None:
        runtime.install(budgets, on_exceed)


def _install_chain_metrics(meter_provider: MeterProvider | None, budgets: Budgets | None) -> None:
    # Per-run histograms and budget counters only when metrics are read (a reader is set).
    runtime = sys.modules.get("chainlat._runtime.metrics")
    if meter_provider is not None:
        from chainlat._runtime import metrics as runtime
    if runtime is not None:
        runtime.install(meter_provider, budgets)


def _describe(exporter: SpanExporter) -> str:
    """How log lines name where spans go."""
    if isinstance(exporter, JsonLinesSpanExporter):
        return exporter.path
    endpoint = getattr(exporter, "_endpoint", None)  # the OTLP exporters keep their URL here
    return str(endpoint) if endpoint else type(exporter).__name__


def _exporter_factory(
    chosen: ExporterName | SpanExporter, traces_file: str | os.PathLike[str] | None
) -> Callable[[], SpanExporter] | None:
    """Builds the same exporter again in a forked child; None for an exporter given as is."""
    if isinstance(chosen, SpanExporter):
        return None

    def build() -> SpanExporter:
        exporter = _make_exporter(chosen, traces_file)
        assert exporter is not None
        return exporter

    return build


def _make_exporter(
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
        path = traces_file or _env("CHAINLAT_TRACES_FILE") or DEFAULT_TRACES_FILE
        return JsonLinesSpanExporter(path)
    raise ConfigError(f"exporter={chosen!r}: expected file, otlp, console, none or a SpanExporter")


def _resource(service_name: str | None, extra: Mapping[str, str] | None) -> Resource:
    attributes: dict[str, str] = dict(extra or {})
    if service_name is not None:
        attributes["service.name"] = service_name
    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME, and
    # lets explicit attributes win over them.
    return Resource.create(attributes)


def _set_global(provider: TracerProvider, meter_provider: MeterProvider | None) -> None:
    current = trace.get_tracer_provider()
    if current is not provider:
        if isinstance(current, TracerProvider):
            logger.warning(
                "chainlat: a global TracerProvider is already set; pass it as "
                "configure(tracer_provider=...) to add chainlat to it"
            )
        else:
            trace.set_tracer_provider(provider)
    if meter_provider is not None and not isinstance(metrics.get_meter_provider(), MeterProvider):
        metrics.set_meter_provider(meter_provider)


def _shutdown_installed(installed: _Installed, timeout_s: float | None = None) -> bool:
    # The provider itself stays up: it may be the global one, which cannot be
    # replaced, and a later configure() adds fresh exporters to it.
    bound_s = shutdown_timeout_s() if timeout_s is None else clamp_shutdown_timeout_s(timeout_s)
    deadline = time.monotonic() + bound_s
    metrics_done = None
    meter_provider = installed.meter_provider
    if meter_provider is not None:
        # In parallel with the spans and within the same bound: its last export may hang too.
        metrics_done = start_in_thread(
            lambda: meter_provider.shutdown(timeout_millis=bound_s * 1000), "metrics-shutdown"
        )
    ok = True
    for processor in installed.processors:
        # A shutdown that failed is not a shutdown that lost nothing: report False.
        finished = False
        with internal_errors("shutting down an exporter"):
            if isinstance(processor, (BoundedBatchSpanProcessor, CountingSimpleSpanProcessor)):
                finished = processor.shutdown_by(deadline)
            else:
                finished = processor.force_flush(int(bound_s * 1000))
                processor.shutdown()
        ok = finished and ok
    installed.processors.clear()
    if metrics_done is not None:
        metrics_done.wait(wait_s(deadline - time.monotonic()))
    return ok


def _register_exit_handler() -> None:
    # Registered after the SDK providers' own handlers, so it runs before them (atexit
    # is last in, first out): the last spans are flushed within chainlat's bound, and
    # what cannot be sent is reported, when the application exits without shutdown().
    global _exit_handler_registered
    if not _exit_handler_registered:
        _exit_handler_registered = True
        atexit.register(_shutdown_at_exit)


def _shutdown_at_exit() -> None:
    with internal_errors("shutting down at exit"):
        shutdown()


def shutdown(*, timeout_ms: float | None = None) -> bool:
    """Flush and close what configure() set up; True when every span was exported.

    Returns within ``timeout_ms`` (default ``OTEL_BSP_EXPORT_TIMEOUT``, else 5000 ms;
    never more than 60 000 ms, ``inf`` included) even when the collector hangs; spans it
    could not export are counted and logged in one line. It also runs when the
    interpreter exits, if the application did not call it.

    Example::

        chainlat.configure()
        run_the_app()
        chainlat.shutdown()
    """
    global _installed
    with _lock:
        if _installed is None:
            return True
        installed, _installed = _installed, None
        set_default_provider(None)
        _install_budgets(None, "record")
        _install_chain_metrics(None, None)
        return _shutdown_installed(installed, None if timeout_ms is None else timeout_ms / 1000)
