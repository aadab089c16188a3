"""Bad settings and values log one line and carry on: a huge or infinite shutdown bound is
clamped (against an exporter that hangs 30 s, far beyond the bound asserted), invalid
usage, outcome and first-token values and batch settings fall back."""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import pytest
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import chainlat
from chainlat._core import attributes as attr
from chainlat._runtime import config as _config
from chainlat._runtime import export as _export
from chainlat.testing import Capture

pytestmark = pytest.mark.usefixtures("clean_runtime_environment")


# -- 9. shutdown with a huge or infinite bound ---------------------------------------------------


class _Hanging(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    def export(self, spans: Any) -> SpanExportResult:
        self.calls += 1
        self.release.wait(30)
        return SpanExportResult.SUCCESS


@pytest.mark.parametrize("raw", ["inf", "1e300", "Infinity"])
def test_an_infinite_shutdown_bound_is_clamped_and_losses_reported(
    raw: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", raw)
    assert _export.shutdown_timeout_s() == _export.MAX_SHUTDOWN_TIMEOUT_MS / 1000
    assert f"OTEL_BSP_EXPORT_TIMEOUT='{raw}'" in caplog.text
    # The documented maximum, made short here so that the test does not wait a minute.
    monkeypatch.setattr(_export, "MAX_SHUTDOWN_TIMEOUT_MS", 300)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
    exporter = _Hanging()
    provider = chainlat.configure(exporter=exporter, set_global=False)
    with chainlat.tool("t", tracer_provider=provider):
        pass
    started = time.monotonic()
    try:
        assert chainlat.shutdown() is False  # the span never reached the collector
    finally:
        exporter.release.set()
    assert time.monotonic() - started < 10  # the hang lasts 30 s
    assert "1 of 1 spans were not exported" in caplog.text


def test_an_infinite_explicit_shutdown_bound_is_clamped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_export, "MAX_SHUTDOWN_TIMEOUT_MS", 300)
    exporter = _Hanging()
    provider = chainlat.configure(exporter=exporter, set_global=False)
    with chainlat.tool("t", tracer_provider=provider):
        pass
    try:
        assert chainlat.shutdown(timeout_ms=math.inf) is False
    finally:
        exporter.release.set()
    assert _export.wait_s(math.nan) == 0.0 and _export.wait_s(math.inf) == threading.TIMEOUT_MAX


class _Ok(SpanExporter):
    def export(self, spans: Any) -> SpanExportResult:
        return SpanExportResult.SUCCESS


# -- 12. invalid values from the application log and carry on ----------------------------------


@pytest.mark.parametrize("bad", ["abc", math.nan, math.inf, -1, True, 2.5, [3]])
def test_record_usage_with_an_invalid_value_logs_once_and_records_the_rest(
    bad: object, cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with chainlat.inference("m", tracer_provider=cap.provider) as call:
        call.record_usage(bad, 5)  # type: ignore[arg-type]
        call.record_usage(input_tokens=bad)  # type: ignore[arg-type]
    attributes = dict(cap.span("chat m").attributes or {})
    assert attr.GEN_AI_USAGE_INPUT_TOKENS not in attributes
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 5
    lines = [r.getMessage() for r in caplog.records if "record_usage" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("chainlat: record_usage(input_tokens=")


def test_record_usage_accepts_whole_numbers_however_spelled(cap: Capture) -> None:
    with chainlat.inference("m", tracer_provider=cap.provider) as call:
        call.record_usage(12.0, "7", 0)  # type: ignore[arg-type]
    attributes = dict(cap.span("chat m").attributes or {})
    assert attributes[attr.GEN_AI_USAGE_INPUT_TOKENS] == 12
    assert attributes[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert attributes[attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 0


def test_bad_outcomes_and_first_token_times_log_and_carry_on(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with chainlat.workflow("w", tracer_provider=cap.provider) as run:
        with chainlat.inference("m", tracer_provider=cap.provider) as call:
            cap.clock.advance(7)
            call.first_token(at_ns="soon")  # type: ignore[arg-type]
        run.record_outcome(score=math.nan)
        run.record_outcome()
    run.record_outcome(success=1)  # type: ignore[arg-type]
    assert dict(cap.span("chat m").attributes or {})[attr.LATENCY_TTFT_MS] == 7.0
    assert attr.OUTCOME_SCORE not in dict(cap.span("invoke_workflow w").attributes or {})
    lines = [r.getMessage() for r in caplog.records if r.name == "chainlat"]
    assert len(lines) == 4 and all("not recorded" in m or "using now" in m for m in lines)


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("OTEL_BSP_MAX_QUEUE_SIZE", "abc"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "-1"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "inf"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
        ("OTEL_BSP_MAX_QUEUE_SIZE", "2.5"),
        ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "-3"),
        ("OTEL_BSP_SCHEDULE_DELAY", "nan"),
        ("OTEL_BSP_SCHEDULE_DELAY", "-5"),
        ("OTEL_BSP_EXPORT_TIMEOUT", "soon"),
    ],
)
def test_bad_batch_settings_log_one_line_and_use_defaults(
    name: str, raw: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(name, raw)
    provider = chainlat.configure(exporter=_Ok(), set_global=False)
    with chainlat.tool("t", tracer_provider=provider):
        pass
    installed = _config._installed
    assert installed is not None
    batch = installed.processors[0]._batch_processor  # type: ignore[attr-defined]
    settings = {
        "OTEL_BSP_MAX_QUEUE_SIZE": batch._max_queue_size,
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": batch._max_export_batch_size,
        "OTEL_BSP_SCHEDULE_DELAY": batch._schedule_delay_millis,
        "OTEL_BSP_EXPORT_TIMEOUT": batch._export_timeout_millis,
    }
    defaults = {**_export._DEFAULT_BATCH, "OTEL_BSP_EXPORT_TIMEOUT": 5000}
    assert settings == defaults
    lines = [r for r in caplog.records if name in r.getMessage()]
    assert len(lines) == 1 and lines[0].name == "chainlat" and lines[0].exc_info is None
    assert lines[0].getMessage().startswith(f"chainlat: {name}={raw!r}: expected")
    assert not [r for r in caplog.records if r.exc_info]  # no traceback from the SDK either


def test_a_batch_larger_than_the_queue_is_cut_to_the_queue(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "100")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512")
    chainlat.configure(exporter=_Ok(), set_global=False)
    installed = _config._installed
    assert installed is not None
    batch = installed.processors[0]._batch_processor  # type: ignore[attr-defined]
    assert (batch._max_queue_size, batch._max_export_batch_size) == (100, 100)
    assert "at most the queue size 100" in caplog.text
