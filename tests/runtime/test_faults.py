"""A collector that is down, hangs or answers 503: the application never waits, never breaks.

Every server here listens on 127.0.0.1 and every wait is bounded. Timing
assertions compare against injected delays that are far longer than the
tolerance (an export that hangs for 30 s against a bound of a few seconds), so
they hold on a loaded machine.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import chainlat
from chainlat._runtime import config as _config
from chainlat._runtime import export as _export
from support import HANG_S, FakeCollector, free_port, until


def run_workflows(provider: TracerProvider, count: int, steps: int = 4) -> float:
    """Run ``count`` workflows of ``steps`` steps; returns the seconds it took."""
    started = time.perf_counter()
    for _ in range(count):
        with chainlat.workflow("answer", tracer_provider=provider):
            for _ in range(steps):
                with chainlat.tool("lookup", tracer_provider=provider):
                    pass
    return time.perf_counter() - started


@pytest.fixture(autouse=True)
def _otel_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if name.startswith(("OTEL_", "CHAINLAT_")):
            monkeypatch.delenv(name)
    # Export soon after spans end, so that the tests do not wait for the 5 s default.
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
    yield
    chainlat.shutdown()


def _configure_otlp(
    monkeypatch: pytest.MonkeyPatch,
    endpoint: str,
    *,
    request_timeout_s: float,
    shutdown_timeout_ms: int,
    reader: InMemoryMetricReader | None = None,
) -> TracerProvider:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", str(request_timeout_s))
    monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", str(shutdown_timeout_ms))
    return chainlat.configure(
        "faults", set_global=False, metric_readers=[reader] if reader is not None else []
    )


def _dropped_metric(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    found: dict[str, int] = {}
    if data is None:
        return found
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == _export.DROPPED_SPANS_METRIC:
                    for point in metric.data.data_points:
                        key = str(dict(point.attributes or {})["error.type"])
                        found[key] = found.get(key, 0) + int(point.value)  # type: ignore[union-attr]
    return found


def _losses(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "were not exported" in r.getMessage()]


# -- healthy and recovering collectors ----------------------------------------------


def test_healthy_collector_receives_every_span_and_nothing_is_reported(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeCollector("ok") as collector:
        provider = _configure_otlp(
            monkeypatch, collector.endpoint, request_timeout_s=5, shutdown_timeout_ms=5000
        )
        run_workflows(provider, 20)
        assert chainlat.shutdown() is True
    assert len(collector.span_names) == 20 * 5
    assert _losses(caplog) == []


def test_503_with_retry_after_then_recovering_loses_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with FakeCollector("unavailable", failures=2, retry_after="0") as collector:
        provider = _configure_otlp(
            monkeypatch, collector.endpoint, request_timeout_s=5, shutdown_timeout_ms=5000
        )
        run_workflows(provider, 10)
        assert chainlat.shutdown() is True
    assert len(collector.received) >= 3
    assert len(collector.span_names) == 10 * 5
    assert _losses(caplog) == []


def test_503_then_recovering_within_the_exporter_backoff(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without Retry-After the exporter backs off about 1 s, inside its 4 s request timeout."""
    with FakeCollector("unavailable", failures=1, retry_after=None) as collector:
        provider = _configure_otlp(
            monkeypatch, collector.endpoint, request_timeout_s=4, shutdown_timeout_ms=8000
        )
        run_workflows(provider, 5)
        assert chainlat.shutdown() is True
    assert len(collector.span_names) == 5 * 5
    assert _losses(caplog) == []


# -- a collector that is down or hangs ----------------------------------------------


def test_collector_down_workflows_complete_and_losses_are_counted_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reader = InMemoryMetricReader()
    provider = _configure_otlp(
        monkeypatch,
        f"http://127.0.0.1:{free_port()}",  # nothing listens there
        request_timeout_s=0.5,
        shutdown_timeout_ms=3000,
        reader=reader,
    )
    installed = _config._installed
    assert installed is not None
    (processor,) = installed.processors
    assert isinstance(processor, _export.BoundedBatchSpanProcessor)

    run_workflows(provider, 30)  # nothing raised

    def first_failures() -> list[logging.LogRecord]:
        return [r for r in caplog.records if "could not export" in r.getMessage()]

    # The export thread counts a failure, then logs it: wait for both.
    assert until(lambda: processor.counts.failed > 0 and bool(first_failures()))
    assert _dropped_metric(reader).get("export_failed", 0) > 0
    assert len(first_failures()) == 1  # the first failure, at once; later ones are only counted

    started = time.monotonic()
    assert chainlat.shutdown() is False
    assert time.monotonic() - started < 3.0 + 2.0  # the bound, with a generous margin
    (line,) = _losses(caplog)
    assert line.startswith(f"chainlat: {30 * 5} of {30 * 5} spans were not exported to http")
    assert processor.counts.offered == 30 * 5
    assert processor.counts.exported == 0


def test_hanging_collector_never_blocks_ending_spans(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Workflows run to completion while an export is stuck in the collector."""
    with FakeCollector("ok") as healthy:
        provider = _configure_otlp(
            monkeypatch, healthy.endpoint, request_timeout_s=HANG_S, shutdown_timeout_ms=5000
        )
        run_workflows(provider, 20)  # warm up
        healthy_s = run_workflows(provider, 200)
        assert chainlat.shutdown() is True

    with FakeCollector("hang") as collector:
        provider = _configure_otlp(
            monkeypatch, collector.endpoint, request_timeout_s=HANG_S, shutdown_timeout_ms=1000
        )
        run_workflows(provider, 20)
        assert collector.holding.wait(10), "the exporter never reached the collector"
        hanging_s = run_workflows(provider, 200)
        # The export that started before these workflows is still held by the collector:
        # they ended their spans while it was in flight, so ending a span never waits for it.
        assert len(collector.received) == 1
        assert not collector.release.is_set()
        # The same work as against the healthy collector, with a generous tolerance: a
        # span end that waited for the export would take the whole HANG_S.
        assert hanging_s < healthy_s * 5 + 1.0

        started = time.monotonic()
        assert chainlat.shutdown() is False
        elapsed = time.monotonic() - started
    assert elapsed < 1.0 + 2.0, f"shutdown took {elapsed:.1f} s with a 1 s bound"
    (line,) = _losses(caplog)
    assert f"of {220 * 5} spans were not exported" in line
    assert "shutdown stopped waiting after" in line


def test_exporter_that_raises_is_counted_never_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            raise ConnectionError("collector exploded")

    provider = chainlat.configure(exporter=Broken(), set_global=False, batch=False)
    run_workflows(provider, 3, steps=1)
    assert chainlat.shutdown() is False
    messages = [r.getMessage() for r in caplog.records]
    assert any("ConnectionError: collector exploded" in m for m in messages)
    assert any(m.startswith("chainlat: 6 of 6 spans were not exported") for m in messages)


def test_full_queue_drops_are_counted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    class Stuck(SpanExporter):
        def __init__(self) -> None:
            self.exported = 0

        def export(self, spans: Any) -> SpanExportResult:
            release.wait(HANG_S)
            self.exported += len(spans)
            return SpanExportResult.SUCCESS

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "16")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "8")
    exporter = Stuck()
    caplog.set_level(logging.WARNING)
    provider = chainlat.configure(exporter=exporter, set_global=False)
    run_workflows(provider, 40, steps=1)  # 80 spans into a queue of 16 behind a stuck export
    release.set()
    assert chainlat.shutdown() is False
    (line,) = _losses(caplog)
    lost = 80 - exporter.exported
    assert lost > 0
    assert line.startswith(f"chainlat: {lost} of 80 spans were not exported")
    assert f"{lost} dropped from a full queue or still queued or in flight at shutdown" in line


# -- bounds and their configuration ---------------------------------------------------


def test_documented_defaults_and_their_environment_overrides(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _export.shutdown_timeout_s() == _export.DEFAULT_SHUTDOWN_TIMEOUT_MS / 1000 == 5.0
    monkeypatch.setenv("OTEL_BSP_EXPORT_TIMEOUT", "1500")
    assert _export.shutdown_timeout_s() == 1.5

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    assert _request_timeout(chainlat.configure(set_global=False, metric_readers=[])) == 5.0
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2.5")
    assert _request_timeout(chainlat.configure(set_global=False, metric_readers=[])) == 2.5
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "7")
    assert _request_timeout(chainlat.configure(set_global=False, metric_readers=[])) == 7.0


def _request_timeout(provider: TracerProvider) -> float:
    installed = _config._installed
    assert installed is not None and installed.provider is provider
    exporter = installed.processors[0].span_exporter  # type: ignore[attr-defined]
    # The SDK keeps the resolved timeout on its HTTP client.
    timeout: float = exporter._client._timeout
    return timeout


def test_shutdown_accepts_an_explicit_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeCollector("hang") as collector:
        provider = _configure_otlp(
            monkeypatch, collector.endpoint, request_timeout_s=HANG_S, shutdown_timeout_ms=60000
        )
        run_workflows(provider, 2)
        assert collector.holding.wait(10)
        started = time.monotonic()
        assert chainlat.shutdown(timeout_ms=500) is False
        assert time.monotonic() - started < 0.5 + 2.0


# -- process lifecycle (real subprocesses) --------------------------------------------

_EXIT_WITHOUT_SHUTDOWN = """
import chainlat
chainlat.configure("exit-test")
for _ in range(25):
    with chainlat.workflow("answer"):
        with chainlat.tool("lookup"):
            pass
print("done", flush=True)
# no chainlat.shutdown(): the interpreter exits here
"""


def _python(
    script: str, env: dict[str, str], timeout_s: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHAINLAT_"))}
    full_env.update(env)
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    return result, time.monotonic() - started


def test_exit_without_shutdown_flushes_to_a_healthy_collector() -> None:
    with FakeCollector("ok") as collector:
        result, _ = _python(
            _EXIT_WITHOUT_SHUTDOWN,
            {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_TRACES_EXPORTER": "otlp"},
            timeout_s=60,
        )
    assert result.returncode == 0, result.stderr
    assert len(collector.span_names) == 25 * 2
    assert "were not exported" not in result.stderr


def test_exit_without_shutdown_reports_and_never_hangs_on_a_hanging_collector() -> None:
    with FakeCollector("hang") as collector:
        result, elapsed = _python(
            _EXIT_WITHOUT_SHUTDOWN,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
                "OTEL_EXPORTER_OTLP_TIMEOUT": str(HANG_S),
                "OTEL_BSP_EXPORT_TIMEOUT": "1000",
            },
            timeout_s=60,
        )
    assert result.returncode == 0, result.stderr
    # Interpreter start and imports take a few seconds on a loaded machine; a process
    # that waited for the held export would take HANG_S.
    assert elapsed < HANG_S / 2, f"exit took {elapsed:.1f} s"
    assert "spans were not exported" in result.stderr
    assert "Traceback" not in result.stderr


_BUSY_MAX = 500
"""Workflows of 2 spans the fork test runs in its background thread, at most."""

_FORK = (
    f"BUSY_MAX = {_BUSY_MAX}\n"
    + """
import os, sys, threading, time
import chainlat

chainlat.configure("fork-test")

def workflows(name, count):
    for _ in range(count):
        with chainlat.workflow(name):
            with chainlat.data_stage("fetch"):
                pass

workflows("parent-before", 5)
# Keep spans flowing in a thread while forking, as a busy prefork server would: a
# bounded number, so that the queue (2048 spans) holds them all however slowly the
# exporter drains it on a loaded machine, and shutdown() has nothing to drop.
stop = threading.Event()
flowing = threading.Event()
def busy():
    for _ in range(BUSY_MAX):
        if stop.is_set():
            break
        workflows("parent-busy", 1)
        flowing.set()
        time.sleep(0.001)
background = threading.Thread(target=busy, daemon=True)
background.start()
assert flowing.wait(60), "no span flowed before the fork"
children = []
for number in range(3):
    pid = os.fork()
    if pid == 0:
        workflows(f"child-{number}", 10)
        sys.exit(0)  # a worker's normal exit: atexit flushes
    children.append(pid)
for pid in children:
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
stop.set()
background.join()
workflows("parent-after", 5)
assert chainlat.shutdown()
print("ok", flush=True)
"""
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
@pytest.mark.parametrize("exporter", ["otlp", "file"])
def test_fork_after_configure_exports_the_childrens_spans(exporter: str, tmp_path: Path) -> None:
    traces = tmp_path / "traces.jsonl"
    with FakeCollector("ok") as collector:
        env = {
            "OTEL_TRACES_EXPORTER": exporter,
            "OTEL_BSP_SCHEDULE_DELAY": "20",
            # shutdown() exports what is queued (a few hundred spans): let it take its
            # time on a loaded machine, a deadlock still fails at the 90 s bound below
            "OTEL_BSP_EXPORT_TIMEOUT": "60000",
        }
        if exporter == "otlp":
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.endpoint
        else:
            env["CHAINLAT_TRACES_FILE"] = str(traces)
        result, _ = _python(_FORK, env, timeout_s=90)  # a deadlock fails here
        names = collector.span_names if exporter == "otlp" else _names_in_file(traces)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
    for workflow in ("parent-before", "child-0", "child-1", "child-2", "parent-after"):
        count = 5 if workflow.startswith("parent") else 10
        assert names.count(f"invoke_workflow {workflow}") == count, (workflow, result.stderr)
    busy = names.count("invoke_workflow parent-busy")
    assert 1 <= busy <= _BUSY_MAX  # spans flowed while forking; none was lost
    assert names.count("data fetch") == busy + 30 + 10


# The exporter's first export imports a module, as requests imports netrc inside its
# first request; the import stays in progress until the fork begins. A child forked in
# the middle of it inherits the module's import lock held by a thread it does not have:
# importing the module there (its application, its exports) hangs for ever. The child
# imports it in its main thread (a new thread may be given the dead thread's id, and
# with it the lock), within an alarm, so that a hang fails the test instead of stalling it.
_FORK_DURING_IMPORT = """
import os, signal, sys, threading
import chainlat
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

sys.path.insert(0, MODULES)
entered = threading.Event()
release = threading.Event()

class ImportsOnFirstExport(SpanExporter):
    def export(self, spans):
        import first_request  # blocks until `release`, like a slow lazy import
        with open(NAMES, "a") as out:
            out.writelines(f"{os.getpid()} {span.name}\\n" for span in spans)
        return SpanExportResult.SUCCESS

chainlat.configure("fork-test", exporter=ImportsOnFirstExport())
with chainlat.workflow("parent-before"):
    pass
assert entered.wait(60), "the first export did not start"
if WAIT_S is not None:
    import chainlat._runtime.export
    chainlat._runtime.export.FORK_WAIT_S = WAIT_S
else:
    # Registered last, so it runs first of the before-fork hooks: the import may end
    # only once the fork has begun, never before it.
    os.register_at_fork(before=release.set)
pid = os.fork()
if pid == 0:
    if WAIT_S is None:
        signal.alarm(60)
        import first_request
        signal.alarm(0)
    with chainlat.workflow("child"):
        pass
    sys.exit(0)  # a worker's normal exit: atexit flushes
release.set()
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, status
with chainlat.workflow("parent-after"):
    pass
assert chainlat.shutdown()
print(pid, flush=True)
"""


def _fork_during_import(tmp_path: Path, wait_s: float | None) -> tuple[str, int, list[str]]:
    """Run _FORK_DURING_IMPORT; returns its stderr, the child's pid and the exported lines."""
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "first_request.py").write_text(
        "import __main__\n__main__.entered.set()\nassert __main__.release.wait(60)\n"
    )
    names = tmp_path / "names.txt"
    script = (
        f"MODULES = {str(modules)!r}\nNAMES = {str(names)!r}\nWAIT_S = {wait_s!r}\n"
        + _FORK_DURING_IMPORT
    )
    # A child that hangs on the import gives up at this deadline and exits.
    result, _ = _python(script, {"OTEL_BSP_EXPORT_TIMEOUT": "30000"}, timeout_s=120)
    assert result.returncode == 0, result.stderr
    lines = names.read_text().splitlines() if names.exists() else []
    return result.stderr, int(result.stdout.strip()), lines


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_waits_for_an_export_in_flight_so_the_child_can_import(tmp_path: Path) -> None:
    """A fork during the export thread's first import: the child still exports its spans."""
    stderr, child, lines = _fork_during_import(tmp_path, wait_s=None)
    parent = [line for line in lines if not line.startswith(f"{child} ")]
    assert lines.count(f"{child} invoke_workflow child") == 1, stderr
    assert len(parent) == 2, lines  # parent-before and parent-after
    assert "were not exported" not in stderr
    assert "still in flight" not in stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_waits_for_an_export_in_flight_at_most_the_bound(tmp_path: Path) -> None:
    """An export that outlasts FORK_WAIT_S: the fork goes ahead and the child says why."""
    # The export ends only once the parent's fork() has returned: had the fork waited
    # for it without a bound, this would deadlock (and fail at the subprocess timeout).
    stderr, _, lines = _fork_during_import(tmp_path, wait_s=0.2)
    assert "forked while an export to ImportsOnFirstExport was still in flight" in stderr
    assert lines, stderr  # the parent's spans were exported


def _names_in_file(path: Path) -> list[str]:
    import json

    names: list[str] = []
    for line in path.read_text().splitlines():
        if not line:
            # A writer that finds the file ending mid-line (another process's append seen
            # half done) starts on a new line; readers skip the blank line that leaves.
            continue
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                names.extend(span["name"] for span in ss["spans"])
    return names


def test_guarded_exporter_never_calls_the_exporter_after_the_deadline() -> None:
    calls: list[int] = []

    class Recording(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            calls.append(len(spans))
            return SpanExportResult.SUCCESS

    counts = _export.ExportCounts("memory")
    guard = _export.GuardedExporter(Recording(), counts)
    spans: list[ReadableSpan] = []
    assert guard.export(spans) is SpanExportResult.SUCCESS
    guard.set_deadline(time.monotonic() - 1)
    assert guard.export(spans) is SpanExportResult.FAILURE
    assert calls == [0]
