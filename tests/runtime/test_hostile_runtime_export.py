"""Export under a hostile destination: a collector on 127.0.0.1 that drips its answer (the
request is bounded whole, far below the 30 s the drip takes) and a JSON lines file on a
full disk (whole lines lost, counted once, never written later)."""

from __future__ import annotations

import errno
import json
import socket
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

import chainlat
from chainlat._runtime import exporters as _exporters
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.testing import Capture

pytestmark = pytest.mark.usefixtures("clean_runtime_environment")


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
