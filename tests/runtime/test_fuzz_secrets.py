"""Credentials never leave the process, whichever features are on.

A known secret rides in every place a model call can carry one (``Authorization``,
``api-key``, ``x-api-key``, a cookie, a ``?key=`` query parameter), through a real
local server, with content capture on, the credential headers asked for by name,
streaming, errors and a refused connection, and every exporter at once: OTLP over
HTTP (traces and metrics) to a receiver on 127.0.0.1, the JSON lines file, and the
log at DEBUG. No byte of any of them contains a secret.
"""

from __future__ import annotations

import logging
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.httpx import instrument_httpx
from chainlat.sim import ModelProfile, SimServer
from support import FakeCollector, SimOptions, free_port

SECRETS = {
    "authorization": "sk-SECRET-authorization-7d41",
    "api-key": "SECRET-api-key-0b9e",
    "x-api-key": "SECRET-x-api-key-c3f2",
    "cookie": "SECRET-cookie-55aa",
    "query": "SECRET-query-key-e81d",
}
ASKED = ["authorization", "api-key", "x-api-key", "cookie", "set-cookie", "proxy-authorization"]
MESSAGES = [{"role": "user", "content": "Where is my order?"}]


@pytest.fixture
def sim_options() -> SimOptions:
    zero = ModelProfile("sim-zero", ttft_base_ms=0, decode_ms_per_token=0, output_tokens=8)
    return SimOptions(profiles=[zero])


def test_no_secret_in_any_exported_byte(
    sim: SimServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    traces_file = tmp_path / "traces.jsonl"
    with FakeCollector("ok") as collector:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        provider = chainlat.configure("secrets", set_global=False)  # OTLP traces and metrics
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(traces_file)))

        headers = {
            "Authorization": f"Bearer {SECRETS['authorization']}",
            "api-key": SECRETS["api-key"],
            "x-api-key": SECRETS["x-api-key"],
            "Cookie": f"session={SECRETS['cookie']}; theme=dark",
        }
        client = instrument_httpx(
            httpx.Client(headers=headers, params={"key": SECRETS["query"]}),
            capture_content=True,
            record_headers=ASKED,
            tracer_provider=provider,
        )
        chat = f"{sim.base_url}/v1/chat/completions"
        body = {"model": "sim-zero", "messages": MESSAGES}
        with client, chainlat.workflow("answer", tracer_provider=provider):
            assert client.post(chat, json=body).status_code == 200
            with client.stream("POST", chat, json={**body, "stream": True}) as stream:
                for _ in stream.iter_lines():
                    pass
            failed = client.post(chat, json=body, headers={"x-sim-status": "500"})
            assert failed.status_code == 500
            assert client.post(chat, json={**body, "model": "no-such-model"}).status_code == 404
            with pytest.raises(httpx.ConnectError):
                client.post(f"http://127.0.0.1:{free_port()}/v1/chat/completions", json=body)
        assert chainlat.shutdown()
        received = b"".join(collector.bodies)

    assert collector.span_names.count("chat sim-zero") == 4  # with the refused connection
    assert any(b"gen_ai.client.operation.duration" in body for body in collector.bodies)
    exported = {
        "OTLP (traces and metrics)": received,
        "JSON lines file": traces_file.read_bytes(),
        # chainlat's log and the SDK's (httpx logs its own requests, URL included: not ours)
        "log": "\n".join(
            r.getMessage()
            for r in caplog.records
            if r.name.startswith(("chainlat", "opentelemetry"))
        ).encode(),
    }
    assert b"Where is my order?" in exported["JSON lines file"]  # content capture was on
    for where, data in exported.items():
        for name, secret in SECRETS.items():
            assert secret.encode() not in data, f"the {name} secret is in the {where}"
