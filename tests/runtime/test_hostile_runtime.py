"""The runtime keeps its promises under hostile input: secrets, sharing, bad settings, full disks.

Every server listens on 127.0.0.1 and every wait is bounded; timing assertions compare
against injected delays far longer than the tolerance.
"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

import chainlat
import chainlat._core.errors
from chainlat._core import attributes as attr
from chainlat._core.redact import REDACTED
from chainlat._runtime import config as _config
from chainlat._runtime import export as _export
from chainlat._runtime import exporters as _exporters
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.testing import Capture

SECRET = "sk-proj-Q9x8W7v6U5t4S3r2P1o0NmLkJi"
URL_SECRET = "hunter2hunter2hunter2"


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch, fresh_warnings: None) -> Iterator[None]:
    """Each test sees its own environment and one-time warnings."""
    for name in list(os.environ):
        if name.startswith(("OTEL_", "CHAINLAT_")):
            monkeypatch.delenv(name)
    monkeypatch.setattr(_export, "_reported_env", set())
    yield
    chainlat.shutdown()


def dump(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> str:
    """Everything an exporter could send of these spans, as text."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.name)
        parts.append(repr(dict(span.attributes or {})))
        parts.append(span.status.description or "")
        for event in span.events:
            parts.append(repr(dict(event.attributes or {})))
    return "\n".join(parts)


# -- 2. hand-written steps record scrubbed exceptions -----------------------------------------


def _http_401() -> httpx.Response:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": f"Incorrect API key provided: {SECRET}"})

    with httpx.Client(transport=httpx.MockTransport(handler)) as client:
        return client.get(f"https://api.example.com/v1/models?key={URL_SECRET}")


def test_step_exceptions_are_recorded_scrubbed_and_raised_unchanged(cap: Capture) -> None:
    p = cap.provider
    response = _http_401()
    with pytest.raises(httpx.HTTPStatusError) as raised:
        with chainlat.workflow("support", tracer_provider=p):
            with chainlat.tool("fetch", tracer_provider=p):
                response.raise_for_status()
    assert URL_SECRET in str(raised.value)  # the application's exception is untouched

    with pytest.raises(RuntimeError) as echoed:
        with chainlat.inference("m", tracer_provider=p):
            raise RuntimeError(f"provider said: {response.text}")
    assert SECRET in str(echoed.value)

    for span in cap.spans():
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})[attr.ERROR_TYPE] in (
            "httpx.HTTPStatusError",
            "RuntimeError",
        )
        [event] = span.events
        assert event.name == "exception"
        assert REDACTED in str((event.attributes or {})["exception.message"])
    text = dump(cap.spans())
    assert URL_SECRET not in text and SECRET not in text
    assert len(cap.spans()) == 3


@pytest.mark.anyio
async def test_decorated_steps_record_scrubbed_exceptions(cap: Capture) -> None:
    @chainlat.data_stage("load", tracer_provider=cap.provider)
    async def load() -> None:
        raise ValueError(f"GET https://db.example.com/x?token={URL_SECRET} failed")

    @chainlat.tool("sync", tracer_provider=cap.provider)
    def sync_tool() -> None:
        raise ValueError(f"Authorization: Bearer {SECRET}")

    with pytest.raises(ValueError, match=URL_SECRET):
        await load()
    with pytest.raises(ValueError, match=SECRET):
        sync_tool()
    text = dump(cap.spans())
    assert len(cap.spans()) == 2
    assert URL_SECRET not in text and SECRET not in text
    assert text.count(REDACTED) >= 4  # message, stack trace and status of each


def test_chainlat_log_lines_are_scrubbed(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class Refusing(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            raise RuntimeError(f"401 from https://collector.example.com/v1/traces?key={URL_SECRET}")

    caplog.set_level(logging.WARNING, logger="chainlat")
    provider = chainlat.configure(exporter=Refusing(), batch=False, set_global=False)
    with chainlat.tool("t", tracer_provider=provider):
        pass
    # An internal error logs its traceback: scrubbed too.
    monkeypatch.setattr(chainlat._core.errors, "RAISE_INTERNAL_ERRORS", False)
    monkeypatch.setattr(chainlat._core.errors, "_reported", set())

    def leak() -> None:
        raise KeyError(f"api_key={SECRET}")

    with chainlat._core.errors.internal_errors("testing the scrubber"):
        leak()
    assert "could not export 1 spans" in caplog.text
    assert "internal error while testing the scrubber" in caplog.text
    assert URL_SECRET not in caplog.text and SECRET not in caplog.text
    assert caplog.text.count(REDACTED) >= 2


# -- 8. one step object shared by concurrent tasks and threads ---------------------------------

support = chainlat.workflow("support")
answer = chainlat.inference("m")


def _bind(cap: Capture) -> tuple[chainlat.Workflow, chainlat.Inference]:
    # Module-level objects, as in an application, pointed at this test's provider.
    support._provider = cap.provider
    answer._provider = cap.provider
    return support, answer


@pytest.mark.anyio
async def test_a_shared_step_in_concurrent_tasks_keeps_each_run_apart(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    workflow, inference = _bind(cap)
    clock = cap.clock
    a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()
    runs: dict[str, chainlat.WorkflowHandle] = {}

    async def first() -> None:
        async with workflow as run:
            runs["a"] = run
            async with inference:
                a_in.set()
                await b_in.wait()
                clock.advance(50)
        a_out.set()

    async def second() -> None:
        await a_in.wait()
        clock.advance(10)
        async with workflow as run:
            runs["b"] = run
            async with inference:
                b_in.set()
                await a_out.wait()
                clock.advance(264)
            clock.advance(40)

    await asyncio.wait_for(asyncio.gather(first(), second()), timeout=10)
    a, b = runs["a"].rollup, runs["b"].rollup
    assert a is not None and b is not None
    assert (a.total_ms, a.inference_ms) == (60.0, 60.0)
    assert (b.total_ms, b.inference_ms) == (354.0, 314.0)
    assert "Failed to detach context" not in caplog.text
    assert chainlat.current_step() is None


def test_a_shared_step_in_threads_keeps_each_run_apart(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    workflow, inference = _bind(cap)
    clock = cap.clock
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    runs: dict[str, chainlat.WorkflowHandle] = {}

    def first() -> None:
        with workflow as run:
            runs["a"] = run
            with inference:
                a_in.set()
                assert b_in.wait(10)
                clock.advance(50)
        a_out.set()

    def second() -> None:
        assert a_in.wait(10)
        clock.advance(10)
        with workflow as run:
            runs["b"] = run
            with inference:
                b_in.set()
                assert a_out.wait(10)
                clock.advance(264)
            clock.advance(40)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    a, b = runs["a"].rollup, runs["b"].rollup
    assert a is not None and b is not None
    assert (a.total_ms, a.inference_ms) == (60.0, 60.0)
    assert (b.total_ms, b.inference_ms) == (354.0, 314.0)
    assert "Failed to detach context" not in caplog.text


def test_a_shared_step_nested_in_itself_and_as_decorator_ends_the_right_spans(
    cap: Capture,
) -> None:
    step = chainlat.tool("again", tracer_provider=cap.provider)

    @step
    def decorated() -> None:
        cap.clock.advance(1)

    with step as outer:
        cap.clock.advance(2)
        with step as inner:
            decorated()
            cap.clock.advance(3)
        cap.clock.advance(4)
    assert (inner.duration_ms, outer.duration_ms) == (4.0, 10.0)
    step.__exit__(None, None, None)  # never entered here: logged, nothing raised
    assert len(cap.spans()) == 3


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


# -- 15. a collector that drips its answer -------------------------------------------------------

DRIP_S = 30.0
"""How long the dripping collector would take to send its whole answer."""


class DrippingCollector:
    """Answers each request with its headers at once, then one byte of body every 0.1 s."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.endpoint = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.stop = threading.Event()
        self.bytes_sent = 0
        self.requests = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        steps = int(DRIP_S / 0.1)
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            while len(body) < length:
                body += conn.recv(65536)
            self.requests += 1
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                + f"Content-Length: {steps}\r\n\r\n".encode()
            )
            try:
                for _ in range(steps):
                    if self.stop.wait(0.1):
                        return
                    conn.sendall(b"\x00")
                    self.bytes_sent += 1
            except OSError:
                return  # the client gave up and closed the connection

    def __enter__(self) -> DrippingCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(5)
        self.sock.close()


def test_an_otlp_request_is_bounded_whole_when_the_collector_drips_its_answer(
    cap: Capture, monkeypatch: pytest.MonkeyPatch
) -> None:
    with chainlat.tool("t", tracer_provider=cap.provider):
        pass
    with DrippingCollector() as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
        exporter = _exporters._otlp_span_exporter()
        started = time.monotonic()
        result = exporter.export(cap.spans())
        elapsed = time.monotonic() - started
        exporter.shutdown()
    assert result is SpanExportResult.FAILURE
    assert collector.requests >= 1
    # Bounded by the 1 s request timeout, not by the 30 s the answer would take.
    assert elapsed < DRIP_S / 3
    assert collector.bytes_sent < int(DRIP_S / 0.1) / 3


# -- 16. the JSON lines file on a full disk ------------------------------------------------------


class _FillingFile:
    """A real file whose writes fail with ENOSPC while ``full`` is set.

    Mocked, and only this: a full disk cannot be made on demand in a test. Like a real
    one, the failing write first takes part of the data, then raises.
    """

    def __init__(self, inner: IO[bytes]) -> None:
        self.inner = inner
        self.full = False
        self._took_part = False

    def write(self, data: Any) -> int:
        if self.full:
            if not self._took_part:
                self._took_part = True
                return self.inner.write(bytes(data)[: max(len(data) // 2, 1)])
            raise OSError(errno.ENOSPC, "No space left on device")
        self._took_part = False
        return self.inner.write(data)

    def fileno(self) -> int:
        return self.inner.fileno()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _FillingExporter(JsonLinesSpanExporter):
    file: _FillingFile | None = None

    def _open(self) -> IO[bytes]:
        self.file = _FillingFile(super()._open())
        return self.file  # type: ignore[return-value]


def _names_in(path: Path) -> tuple[list[str], int]:
    """Span names in the file's valid lines, and how many lines are not valid JSON."""
    names: list[str] = []
    broken = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line:
            continue
        try:
            request = json.loads(line)
        except ValueError:
            broken += 1
            continue
        names.extend(
            span["name"]
            for rs in request["resourceSpans"]
            for ss in rs["scopeSpans"]
            for span in ss["spans"]
        )
    return names, broken


def _one_span(cap: Capture, name: str) -> list[ReadableSpan]:
    with chainlat.tool(name, tracer_provider=cap.provider):
        pass
    return [cap.spans()[-1]]


def test_a_full_disk_loses_whole_lines_counted_once_and_never_writes_them_later(
    cap: Capture, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "traces.jsonl"
    exporter = _FillingExporter(path)
    assert exporter.export(_one_span(cap, "before")) is SpanExportResult.SUCCESS
    assert exporter.file is not None
    exporter.file.full = True
    lost = [exporter.export(_one_span(cap, f"lost-{i}")) for i in range(3)]
    assert lost == [SpanExportResult.FAILURE] * 3
    exporter.file.full = False
    assert exporter.export(_one_span(cap, "after")) is SpanExportResult.SUCCESS
    exporter.shutdown()

    messages = [r.getMessage() for r in caplog.records if r.name == "chainlat"]
    assert sum("cannot write traces" in m for m in messages) == 1
    assert sum("again, after 3 batches" in m for m in messages) == 1
    assert not [r for r in caplog.records if r.exc_info]  # closing logged no traceback
    names, broken = _names_in(path)
    assert names == ["execute_tool before", "execute_tool after"]  # nothing counted as lost appears
    assert broken == 1  # the half line the disk took, and only it


def test_a_file_left_with_a_cut_last_line_gets_its_next_line_whole(
    cap: Capture, tmp_path: Path
) -> None:
    path = tmp_path / "traces.jsonl"
    first = JsonLinesSpanExporter(path)
    first.export(_one_span(cap, "earlier-run"))
    first.shutdown()
    with path.open("ab") as file:
        file.write(b'{"resourceSpans":[{"resou')  # the last run died mid-line
    second = JsonLinesSpanExporter(path)
    second.export(_one_span(cap, "this-run"))
    second.shutdown()
    names, broken = _names_in(path)
    assert names == ["execute_tool earlier-run", "execute_tool this-run"]
    assert broken == 1


def test_spans_dropped_by_the_exporter_are_counted_exactly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "traces.jsonl"
    exporter = _FillingExporter(path)
    provider = chainlat.configure(exporter=exporter, batch=False, set_global=False)

    def run(name: str) -> None:
        with chainlat.tool(name, tracer_provider=provider):
            pass

    run("first")
    assert exporter.file is not None
    exporter.file.full = True
    for i in range(4):
        run(f"lost-{i}")
    exporter.file.full = False
    run("last")
    assert chainlat.shutdown() is False
    names, _ = _names_in(path)
    assert names == ["execute_tool first", "execute_tool last"]
    assert "4 of 6 spans were not exported" in caplog.text
    assert "4 in failed exports" in caplog.text
