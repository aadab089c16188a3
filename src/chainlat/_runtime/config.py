"""configure() and shutdown(): providers, exporters, environment variables, the embedded default."""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from opentelemetry import metrics, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from chainlat._core.errors import ConfigError, internal_errors, logger, shown
from chainlat._core.prices import Price, valid_price
from chainlat._runtime.export import (
    BoundedBatchSpanProcessor,
    CountingSimpleSpanProcessor,
    clamp_shutdown_timeout_s,
    export_processor,
    shutdown_timeout_s,
    start_in_thread,
    wait_s,
)
from chainlat._runtime.exporters import (
    ExporterName,
    choose_exporter,
    describe,
    exporter_factory,
    make_exporter,
    otlp_metric_reader,
)
from chainlat._runtime.processor import (
    ChainlatSpanProcessor,
    Clock,
    processor_for,
    register,
    set_default_provider,
)

if TYPE_CHECKING:
    # The metrics SDK is imported when a configure() makes a meter provider, not with
    # chainlat: an application or a command that never exports metrics does not pay for it.
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader

    from chainlat._runtime.budgets import OnExceed
    from chainlat.budgets import Budgets


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
    loaded_budgets = _load_budgets(budgets, on_exceed)
    model_prices = _prices(prices, loaded_budgets)
    with _lock:
        plan = _plan(exporter, traces_file, tracer_provider, metric_readers, set_global)
        _stop_installed()
        provider = plan.provider or _own_provider(service_name, resource_attributes, set_global)
        meter_provider = _meter_provider(provider, plan.metric_readers)
        _install_processor(provider, clock, model_prices, meter_provider)
        installed = _install_export(provider, plan, batch, meter_provider)
        _activate(installed, set_global, loaded_budgets, on_exceed)
        return provider


# -- the phases of configure(), in order; each runs under _lock -------------------------------
@dataclass
class _Plan:
    """What configure() will set up, decided before anything is torn down."""

    provider: TracerProvider | None
    """The provider given, or the foreign global one joined; None: chainlat's own."""
    chosen: ExporterName | SpanExporter
    span_exporter: SpanExporter | None
    metric_readers: list[MetricReader]
    traces_file: str | os.PathLike[str] | None

    @property
    def owned(self) -> bool:
        return self.provider is None


def _plan(
    exporter: ExporterName | SpanExporter | None,
    traces_file: str | os.PathLike[str] | None,
    tracer_provider: TracerProvider | None,
    metric_readers: list[MetricReader] | None,
    set_global: bool,
) -> _Plan:
    if tracer_provider is None and set_global:
        # Another library (Logfire, OpenLLMetry's Traceloop.init, the application)
        # owns the global provider: chainlat joins it rather than make a second one
        # that the application's spans would never reach.
        tracer_provider = _foreign_global()
    chosen = choose_exporter(exporter)
    # A provider the user brings already exports: chainlat adds an exporter only when
    # asked, so spans are not sent twice and no stray traces file appears.
    wanted = tracer_provider is None or exporter is not None
    span_exporter = make_exporter(chosen, traces_file) if wanted else None
    if metric_readers is None:
        metric_readers = [otlp_metric_reader()] if chosen == "otlp" and span_exporter else []
    return _Plan(tracer_provider, chosen, span_exporter, metric_readers, traces_file)


def _stop_installed() -> None:
    global _installed
    if _installed is not None:
        _shutdown_installed(_installed)
        _installed = None


def _own_provider(
    service_name: str | None, resource_attributes: Mapping[str, str] | None, set_global: bool
) -> TracerProvider:
    """chainlat's own provider: the one made before when global (set once per process)."""
    global _owned_provider
    if _owned_provider is None or not set_global:
        provider = TracerProvider(resource=_resource(service_name, resource_attributes))
    else:
        provider = _owned_provider
    if set_global:
        _owned_provider = provider
    return provider


def _meter_provider(
    provider: TracerProvider, metric_readers: list[MetricReader]
) -> MeterProvider | None:
    if not metric_readers:
        return None
    from opentelemetry.sdk.metrics import MeterProvider

    # Metrics describe the same service as the traces, also when the provider was
    # reused from an earlier configure().
    resource = getattr(provider, "resource", None)
    return MeterProvider(
        metric_readers=metric_readers,
        resource=resource if isinstance(resource, Resource) else _resource(None, None),
    )


def _install_processor(
    provider: TracerProvider,
    clock: Clock | None,
    model_prices: dict[str, Price] | None,
    meter_provider: MeterProvider | None,
) -> None:
    processor = processor_for(provider, install=False)
    if processor is None:
        processor = ChainlatSpanProcessor()
        provider.add_span_processor(processor)
        register(provider, processor)
    if clock is not None:
        processor.clock = clock
    processor.prices = model_prices
    processor.use_meter_provider(meter_provider)


def _install_export(
    provider: TracerProvider, plan: _Plan, batch: bool, meter_provider: MeterProvider | None
) -> _Installed:
    installed = _Installed(provider, plan.owned, meter_provider=meter_provider)
    if plan.span_exporter is not None:
        export = export_processor(
            plan.span_exporter,
            target=describe(plan.span_exporter),
            batch=batch,
            factory=exporter_factory(plan.chosen, plan.traces_file),
            meter_provider=meter_provider,
        )
        provider.add_span_processor(export)
        installed.processors.append(export)
    return installed


def _activate(
    installed: _Installed, set_global: bool, budgets: Budgets | None, on_exceed: OnExceed
) -> None:
    global _installed
    _register_exit_handler()
    if set_global and installed.owned:
        _set_global(installed.provider, installed.meter_provider)
    _installed = installed
    set_default_provider(installed.provider)
    _install_budgets(budgets, on_exceed)
    _install_chain_metrics(installed.meter_provider, budgets)


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


def _prices(given: object, budgets: Budgets | None) -> dict[str, Price] | None:
    if given is None:
        return budgets.model_prices() if budgets is not None else None
    if not isinstance(given, Mapping):
        raise ConfigError(
            f"prices={shown(given)}: expected a mapping of model names to prices "
            '({"gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10}})'
        )
    found: dict[str, Price] = {}
    for model, value in given.items():
        if not isinstance(model, str):
            raise ConfigError(f"prices: the key {shown(model)} is not a model name (a string)")
        found[model] = _price(model, value)
    return found


_PRICE_FIELDS: Final = ("input_per_mtok", "output_per_mtok", "cache_read_per_mtok")


def _price(model: str, value: object) -> Price:
    """One model's price, checked: each a finite number of dollars >= 0, never a bool."""
    if isinstance(value, Price):
        given: Mapping[object, object] = {
            "input_per_mtok": value.input_per_mtok,
            "output_per_mtok": value.output_per_mtok,
            "cache_read_per_mtok": value.cache_read_per_mtok,
        }
    elif isinstance(value, Mapping) and "input_per_mtok" in value and "output_per_mtok" in value:
        given = value
    else:
        raise ConfigError(
            f"prices[{model!r}]: expected input_per_mtok and output_per_mtok (US dollars per "
            f"million tokens), and optionally cache_read_per_mtok, got {shown(value)}"
        )
    numbers = [_dollars(model, key, given.get(key)) for key in _PRICE_FIELDS]
    input_price, output_price, cache_price = numbers
    assert input_price is not None and output_price is not None
    return Price(input_price, output_price, cache_price)


def _dollars(model: str, key: str, value: object) -> float | None:
    if value is None and key == "cache_read_per_mtok":
        return None
    number: float | None = None
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            number = float(value)
        except (ValueError, OverflowError):
            number = None
    if number is None or not valid_price(number):
        raise ConfigError(
            f"prices[{model!r}].{key}={shown(value)}: a price is a finite number of dollars >= 0"
        )
    return number


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
    if meter_provider is not None:
        from opentelemetry.sdk.metrics import MeterProvider

        if not isinstance(metrics.get_meter_provider(), MeterProvider):
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
