"""The runtime keeps secrets out of what it records and logs: exceptions of hand-written and
decorated steps are recorded scrubbed (and raised unchanged), chainlat's log lines too."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode

import chainlat
import chainlat._core.errors
from chainlat._core import attributes as attr
from chainlat._core.redact import REDACTED
from chainlat.testing import Capture

pytestmark = pytest.mark.usefixtures("clean_runtime_environment")


SECRET = "sk-proj-Q9x8W7v6U5t4S3r2P1o0NmLkJi"
URL_SECRET = "hunter2hunter2hunter2"


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
