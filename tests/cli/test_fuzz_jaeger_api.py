"""Jaeger URLs to ``chainlat check`` that refuse, answer HTML or never answer: one clear
line, exit code 2. Everything listens on 127.0.0.1 and every wait is bounded."""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from chainlat import traces
from support.check_input import assert_one_clear_line, check


class FakeJaeger:
    """Answers every GET with HTML, or holds it until released."""

    def __init__(self, mode: str) -> None:
        self.release = threading.Event()
        jaeger = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if mode == "hang":
                    jaeger.release.wait(30)
                    return
                body = b"<!doctype html><html><body><h1>Sign in</h1>" + b"<p>x</p>" * 5000
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_jaeger_that_refuses(capsys: pytest.CaptureFixture[str], budgets: Path) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    code, _, err = check(capsys, "--jaeger", url, "--service", "svc", "--budgets", str(budgets))
    assert_one_clear_line(code, err, mentions="cannot reach Jaeger")


def test_jaeger_that_answers_html(capsys: pytest.CaptureFixture[str], budgets: Path) -> None:
    jaeger = FakeJaeger("html")
    try:
        code, _, err = check(
            capsys, "--jaeger", jaeger.url, "--service", "svc", "--budgets", str(budgets)
        )
    finally:
        jaeger.close()
    assert_one_clear_line(code, err, mentions="HTTP 200")


def test_jaeger_that_never_answers(
    capsys: pytest.CaptureFixture[str], budgets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The CLI waits 30 s for Jaeger; the test shortens that to 1 s.
    original = traces.JaegerSource.__init__

    def short_timeout(self: traces.JaegerSource, *args: Any, **kwargs: Any) -> None:
        kwargs["timeout_s"] = 1.0
        original(self, *args, **kwargs)

    monkeypatch.setattr(traces.JaegerSource, "__init__", short_timeout)
    jaeger = FakeJaeger("hang")
    try:
        code, _, err = check(
            capsys, "--jaeger", jaeger.url, "--service", "svc", "--budgets", str(budgets)
        )
    finally:
        jaeger.close()
    assert_one_clear_line(code, err, mentions="timed out")
