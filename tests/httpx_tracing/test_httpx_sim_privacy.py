"""chainlat.httpx over real HTTP on 127.0.0.1, against chainlat.sim: no credential reaches a
span, a log or a file, and content is recorded only when asked, truncated."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from chainlat._core import attributes as attr
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.httpx import TracingTransport
from chainlat.sim import SimServer
from chainlat.testing import Capture
from support.httpx_checks import model_spans
from support.httpx_sim import MESSAGES, openai_client

SECRETS = {
    "authorization": "sk-SECRET-bearer-5f1e0c",
    "x-api-key": "SECRET-x-api-key-91ab2d",
    "cookie": "SECRET-cookie-3c77e0",
    "query": "SECRET-query-key-8d20f4",
    "anthropic": "sk-ant-SECRET-4e9b1a",
}


def test_no_credential_ever_reaches_a_span_a_log_or_a_file(
    sim: SimServer, live: Capture, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="chainlat")
    traces = tmp_path / "traces.jsonl"
    live.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(traces)))
    # Asking for the credential headers by name must not make them recorded.
    asked = ["authorization", "x-api-key", "cookie", "api-key", "x-request-id"]
    client = openai_client(sim, live, record_headers=asked, capture_content=True).with_options(
        api_key=SECRETS["authorization"],
        default_headers={"x-api-key": SECRETS["x-api-key"], "cookie": f"s={SECRETS['cookie']}"},
        default_query={"api-key": SECRETS["query"]},
    )
    client.chat.completions.create(model="sim-test", messages=MESSAGES)
    stream = client.chat.completions.create(model="sim-test", messages=MESSAGES, stream=True)
    for _ in stream:
        pass
    transport = TracingTransport(
        httpx2.HTTPTransport(), tracer_provider=live.provider, record_headers=asked
    )
    claude = anthropic.Anthropic(
        base_url=sim.base_url,
        api_key=SECRETS["anthropic"],
        http_client=httpx2.Client(transport=transport),
        max_retries=0,
        open_telemetry=False,
    )
    claude.messages.create(model="sim-test", max_tokens=10, messages=MESSAGES)
    claude.close()
    client.close()
    live.provider.force_flush()
    spans = live.spans()
    assert len(model_spans(spans)) == 3
    exported = "\n".join(s.to_json() for s in spans) + traces.read_text() + caplog.text
    for secret in SECRETS.values():
        assert secret not in exported
    recorded = {k for s in spans for k in (s.attributes or {}) if k.startswith("http.")}
    assert attr.HTTP_RESPONSE_HEADER_PREFIX + "x-request-id" in recorded  # asked, harmless
    assert not any(("authorization" in k or "api-key" in k or "cookie" in k) for k in recorded)


def test_content_is_recorded_only_when_asked_and_then_truncated(
    sim: SimServer, live: Capture
) -> None:
    question = "Please tell me everything about the weather in Lyon today. " * 4
    messages: list[Any] = [{"role": "user", "content": question}]
    with openai_client(sim, live) as client:
        client.chat.completions.create(model="sim-test", messages=messages)
    [plain] = model_spans(live.spans())
    assert not any(k.startswith("gen_ai.input") for k in (plain.attributes or {}))
    assert attr.GEN_AI_OUTPUT_MESSAGES not in (plain.attributes or {})
    live.clear()
    with openai_client(sim, live, capture_content=True, max_content_length=40) as client:
        reply = client.chat.completions.create(model="sim-test", messages=messages)
    [captured] = model_spans(live.spans())
    attributes = captured.attributes or {}
    [sent] = json.loads(str(attributes[attr.GEN_AI_INPUT_MESSAGES]))
    assert sent == {"role": "user", "parts": [{"type": "text", "content": question[:40]}]}
    [answer] = json.loads(str(attributes[attr.GEN_AI_OUTPUT_MESSAGES]))
    assert answer["role"] == "assistant" and answer["finish_reason"] == "stop"
    assert reply.choices[0].message.content is not None
    assert answer["parts"][0]["content"] == reply.choices[0].message.content[:40]
    assert attributes[attr.CONTENT_TRUNCATED] is True
