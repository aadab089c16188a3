"""A fake Jaeger query service on 127.0.0.1: api/v3 (OTLP JSON) and/or the v1 /api/traces."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

DATA_DIR = Path(__file__).parent.parent / "data"


class FakeJaeger(ThreadingHTTPServer):
    """Answers like Jaeger's query service, as a context manager that serves while open.

    api/v3 (when ``v3``) answers the Collector test file (tests/data) for service
    ``support-api``, or ``otlp`` (one OTLP/JSON request) for ``service`` when given;
    the v1 API answers tests/data/jaeger-traces.json for service ``support-bot``. Every
    request is kept in ``requests`` as (path, query).
    """

    def __init__(
        self, *, v3: bool, otlp: dict[str, Any] | None = None, service: str = "support-api"
    ) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.daemon_threads = True
        self.v3 = v3
        self.otlp = otlp
        self.service = service
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self) -> FakeJaeger:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(10)


class _Handler(BaseHTTPRequestHandler):
    server: FakeJaeger

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: object | str) -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query)
        self.server.requests.append((url.path, query))
        service = (query.get("query.service_name") or query.get("service") or [""])[0]
        if url.path == "/api/v3/traces" and self.server.v3:
            if service != self.server.service:
                self._send(404, {"error": {"httpCode": 404, "message": "No traces found"}})
                return
            merged = self.server.otlp
            if merged is None:
                lines = (DATA_DIR / "collector-traces.jsonl").read_text().splitlines()
                merged = {
                    "resourceSpans": [rs for ln in lines for rs in json.loads(ln)["resourceSpans"]]
                }
            self._send(200, {"result": merged})
        elif url.path == "/api/traces":
            if service != "support-bot":
                self._send(404, {"data": None, "errors": [{"code": 404, "msg": "not found"}]})
                return
            self._send(200, json.loads((DATA_DIR / "jaeger-traces.json").read_text()))
        else:
            self._send(404, "404 page not found\n")


class StartFakeJaeger(Protocol):
    """The ``fake_jaeger`` fixture (tests/conftest.py): a running `FakeJaeger`."""

    def __call__(
        self, *, v3: bool, otlp: dict[str, Any] | None = None, service: str = "support-api"
    ) -> FakeJaeger: ...
