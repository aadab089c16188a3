"""Hostile attribute values: whatever an application records, every exporter still works.

NaN and infinities, integers beyond int64, lone surrogates, bytes, nested and
unsupported types, a megabyte string: each span is still exported by the OTLP
protobuf encoder and by the JSON lines file exporter, and every line of the file
stays strict JSON that chainlat's own reader and orjson accept.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export import SpanExportResult

import chainlat
from chainlat._core import attributes as attr
from chainlat._core.conventions import classify
from chainlat._core.rollup import Rollup
from chainlat._runtime.otlp_json import JsonLinesSpanExporter, any_value
from chainlat.cli import main
from chainlat.httpx import TracingTransport
from chainlat.testing import Capture

HOSTILE: dict[str, Any] = {
    "nan": math.nan,
    "inf": math.inf,
    "minus_inf": -math.inf,
    "huge_int": 2**70,
    "huge_negative_int": -(2**70),
    "int64_max": 2**63 - 1,
    "lone_surrogate": "before \ud800 after",
    "controls": "nul \x00 bell \x07 line separator \u2028 done",
    "bytes": b"\x00\xff\xfe",
    "nested": [1, "two", None, 3.5],
    "mixed_floats": [1.0, math.nan, -math.inf],
    "unsupported": object(),
    "big_string": "x" * 1_000_000,
    "k" * 10_000: "a very long key",
}


def _strict(line: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(line, parse_constant=refuse)


def test_hostile_values_are_exported_by_both_encoders(cap: Capture, tmp_path: Path) -> None:
    p = cap.provider
    with chainlat.workflow("answer", tracer_provider=p) as run:
        run.set_attribute("chainlat.outcome.score", math.nan)
        with chainlat.tool("lookup", tracer_provider=p) as step:
            for key, value in HOSTILE.items():
                step.set_attribute(key, value)
            step.span.add_event("hostile", attributes={"nan": math.nan, "huge": 2**70})
    spans = cap.spans()
    assert len(spans) == 2

    # OTLP protobuf (what the OTLP exporters send): encodes, dropping what int64 cannot hold.
    assert encode_spans(spans).SerializeToString()

    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(path)
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    lines = path.read_text(encoding="utf-8").splitlines()  # U+2028 is escaped: one line
    assert len(lines) == 1
    doc = _strict(lines[0])
    orjson.loads(lines[0])
    values = {
        kv["key"]: kv["value"]
        for rs in doc["resourceSpans"]  # type: ignore[index]
        for ss in rs["scopeSpans"]
        for span in ss["spans"]
        for kv in span.get("attributes", [])
    }
    assert values["nan"] == {"doubleValue": "NaN"}
    assert values["inf"] == {"doubleValue": "Infinity"}
    assert values["minus_inf"] == {"doubleValue": "-Infinity"}
    assert values["huge_int"] == {"stringValue": str(2**70)}
    assert values["int64_max"] == {"intValue": str(2**63 - 1)}
    assert values["lone_surrogate"] == {"stringValue": "before ? after"}
    assert values["controls"] == {"stringValue": HOSTILE["controls"]}
    assert values["big_string"] == {"stringValue": "x" * 1_000_000}

    # chainlat's own reader takes the file: the workflow is found and reported.
    assert main(["report", str(path), "--no-progress", "--format", "json"]) == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (math.nan, {"doubleValue": "NaN"}),
        (math.inf, {"doubleValue": "Infinity"}),
        (-math.inf, {"doubleValue": "-Infinity"}),
        (1.5, {"doubleValue": 1.5}),
        (-(2**63), {"intValue": str(-(2**63))}),
        (-(2**63) - 1, {"stringValue": str(-(2**63) - 1)}),
        (2**64, {"stringValue": str(2**64)}),
        (True, {"boolValue": True}),
    ],
)
def test_values_json_cannot_hold_follow_protobufs_json_mapping(
    value: object, expected: dict[str, object]
) -> None:
    assert any_value(value) == expected


def test_chainlat_attributes_survive_the_attribute_count_limit(
    cap: Capture, tmp_path: Path
) -> None:
    """Past the SDK's count limit the oldest attributes go: the application's, not chainlat's."""
    p = cap.provider
    with chainlat.workflow("answer", tracer_provider=p, tenant="acme") as run:
        for i in range(300):
            run.set_attribute(f"app.key{i}", i)
        with chainlat.inference("gpt-4o", provider="openai", tracer_provider=p) as call:
            for i in range(300):
                call.set_attribute(f"app.key{i}", i)
            call.record_usage(input_tokens=10, output_tokens=5)
    workflow, step = cap.span("invoke_workflow answer"), cap.span("chat gpt-4o")
    for span in (workflow, step):
        assert len(span.attributes or {}) == 128  # the SDK's default limit holds
        assert span.dropped_attributes > 0
    found = dict(workflow.attributes or {})
    assert classify(found) == "workflow"
    assert found[attr.GEN_AI_WORKFLOW_NAME] == "answer"
    assert found["tenant"] == "acme"
    assert Rollup.from_attributes(found) == run.rollup
    found = dict(step.attributes or {})
    assert classify(found) == "inference"
    assert found[attr.GEN_AI_REQUEST_MODEL] == "gpt-4o"
    assert found[attr.STEP_INDEX] == 0
    assert found[attr.WORKFLOW_NAME] == "answer"
    assert found[attr.GEN_AI_USAGE_INPUT_TOKENS] == 10

    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(path)
    exporter.export(cap.spans())
    exporter.shutdown()
    assert main(["report", str(path), "--no-progress", "--format", "json"]) == 0


def test_a_huge_prompt_is_truncated_when_content_is_captured(cap: Capture, tmp_path: Path) -> None:
    """A 10 MB prompt, twice in the request (over the decoding limit): traced, kept small."""
    prompt = "Tell me about my order. " * (10 * 2**20 // 24)
    answer = {
        "id": "chatcmpl-1",
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok " * 10_000}}],
        "usage": {"prompt_tokens": 5_242_880, "completion_tokens": 10_000},
    }
    transport = TracingTransport(
        httpx.MockTransport(lambda request: httpx.Response(200, json=answer)),
        capture_content=True,
        tracer_provider=cap.provider,
    )
    with httpx.Client(transport=transport) as client:
        reply = client.post(
            "https://api.openai.com/v1/chat/completions",
            json={
                "messages": [
                    {"role": "system", "content": prompt},
                    {"role": "user", "content": prompt},
                ],
                "model": "gpt-4o",  # after the messages, as the openai SDK writes it
            },
        )
    assert reply.status_code == 200
    (span,) = cap.spans()
    assert span.name == "chat gpt-4o"
    found = span.attributes or {}
    assert found[attr.GEN_AI_REQUEST_MODEL] == "gpt-4o"
    assert found[attr.REQUEST_BODY_UNREAD] is True
    assert found[attr.CONTENT_TRUNCATED] is True
    assert attr.GEN_AI_INPUT_MESSAGES not in found  # none of a prompt too large to decode
    assert found[attr.GEN_AI_USAGE_INPUT_TOKENS] == 5_242_880  # the response is still read
    # 2048 characters of each text at most (the default), plus the JSON around them
    assert len(str(found[attr.GEN_AI_OUTPUT_MESSAGES])) < 3 * 2048
    total = sum(len(str(v)) for v in found.values())
    assert total < 20_000  # the span stays small whatever the prompt
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(path)
    assert exporter.export([span]) is SpanExportResult.SUCCESS
    exporter.shutdown()
    assert path.stat().st_size < 30_000


def test_a_prompt_under_the_decoding_limit_is_captured_truncated(cap: Capture) -> None:
    prompt = "Tell me about my order. " * (3 * 2**20 // 24)  # 3 MB, twice in the request
    transport = TracingTransport(
        httpx.MockTransport(lambda request: httpx.Response(200, json={"choices": []})),
        capture_content=True,
        tracer_provider=cap.provider,
    )
    with httpx.Client(transport=transport) as client:
        client.post(
            "https://api.openai.com/v1/chat/completions",
            json={
                "model": "gpt-4o",
                "messages": [
                    {"role": "system", "content": prompt},
                    {"role": "user", "content": prompt},
                ],
            },
        )
    (span,) = cap.spans()
    found = span.attributes or {}
    assert found[attr.CONTENT_TRUNCATED] is True
    assert attr.REQUEST_BODY_UNREAD not in found
    assert len(str(found[attr.GEN_AI_INPUT_MESSAGES])) < 3 * 2048
