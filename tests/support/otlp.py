"""A fake OTLP/HTTP receiver on 127.0.0.1: answers, hangs, or fails the first requests."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

Mode = Literal["ok", "hang", "unavailable"]

HANG_S = 30.0
"""How long a hanging receiver holds a request: far beyond every bound a test asserts."""


@dataclass(frozen=True)
class Received:
    """One request as it arrived: path, headers (lower-case names) and body."""

    path: str
    headers: dict[str, str]
    body: bytes


class FakeCollector:
    """An OTLP/HTTP receiver on 127.0.0.1, as a context manager that serves while open.

    ``ok`` accepts everything; ``hang`` holds every request (up to ``HANG_S``, or until
    the receiver closes) and never answers; ``unavailable`` answers the first
    ``failures`` requests 503 (with ``Retry-After`` unless None), then accepts.
    Every request is kept in ``received``; the accepted trace requests, parsed, in
    ``traces``.
    """

    def __init__(
        self, mode: Mode = "ok", *, failures: int = 0, retry_after: str | None = "0"
    ) -> None:
        self.mode = mode
        self.failures = failures
        self.retry_after = retry_after
        self.received: list[Received] = []
        self.traces: list[ExportTraceServiceRequest] = []
        self.holding = threading.Event()
        """Set once a ``hang`` receiver holds a request."""
        self.release = threading.Event()
        """Set when the receiver closes: the held requests end, unanswered."""
        self._lock = threading.Lock()
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {name.lower(): value for name, value in self.headers.items()}
                with collector._lock:
                    collector.received.append(Received(self.path, headers, body))
                    number = len(collector.received)
                if collector.mode == "hang":
                    collector.holding.set()
                    collector.release.wait(HANG_S)
                    self.close_connection = True
                    return  # never answers
                if collector.mode == "unavailable" and number <= collector.failures:
                    self.send_response(503)
                    if collector.retry_after is not None:
                        self.send_header("Retry-After", collector.retry_after)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if self.path == "/v1/traces":  # metrics and logs: accepted, not parsed
                    request = ExportTraceServiceRequest.FromString(body)
                    with collector._lock:
                        collector.traces.append(request)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def span_names(self) -> list[str]:
        """The names of the spans accepted so far, in arrival order."""
        with self._lock:
            requests = list(self.traces)
        return [
            span.name
            for request in requests
            for rs in request.resource_spans
            for ss in rs.scope_spans
            for span in ss.spans
        ]

    @property
    def bodies(self) -> list[bytes]:
        """Every request body received, accepted or not."""
        with self._lock:
            return [r.body for r in self.received]

    def __enter__(self) -> FakeCollector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)
