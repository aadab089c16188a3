"""Jaeger UI's GenAI view gives every span chainlat writes the kind it is.

Jaeger UI (from its 2026 releases) gives each span of a GenAI trace a kind from
``gen_ai.operation.name``; any other span with a ``gen_ai.*`` attribute is "unknown GenAI".
The rules below are copied as data from jaegertracing/jaeger-ui,
``packages/jaeger-ui/src/utils/genai/detect.ts`` at commit 0609514ec91582fdb054acad7bc1653d6c9cd457
(``OPERATION_TO_KIND`` and ``classifySpan``); an earlier version of the file (commit
9c14946bed2116e77529ad3717d639810cf4fe2b) knew only ``chat``, ``text_completion``,
``execute_tool``, ``invoke_agent`` and ``retrieval``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import httpx

import chainlat
from chainlat._core import attributes as attr
from chainlat.httpx import TracingTransport
from chainlat.testing import Capture

JAEGER_UI_DETECT = "jaegertracing/jaeger-ui packages/jaeger-ui/src/utils/genai/detect.ts@0609514"
OPERATION_TO_KIND: Mapping[str, str] = {
    "chat": "LLM_CALL",
    "text_completion": "LLM_CALL",
    "generate_content": "LLM_CALL",
    "embeddings": "LLM_CALL",
    "execute_tool": "TOOL_CALL",
    "invoke_agent": "AGENT",
    "create_agent": "AGENT",
    "invoke_workflow": "AGENT",
    "retrieval": "RETRIEVAL",
}


def jaeger_kind(attributes: Mapping[str, object]) -> str:
    """``classifySpan`` of detect.ts: the operation's kind, else unknown GenAI for any
    ``gen_ai.*`` key, else a standard span."""
    operation = attributes.get("gen_ai.operation.name")
    if isinstance(operation, str):
        return OPERATION_TO_KIND.get(operation, "UNKNOWN_GENAI")
    return "UNKNOWN_GENAI" if any(k.startswith("gen_ai.") for k in attributes) else "STANDARD"


def _reply(request: httpx.Request) -> httpx.Response:
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }  # fmt: skip
    return httpx.Response(200, content=json.dumps(body).encode(), request=request)


def test_every_span_chainlat_writes_has_its_kind_in_jaegers_genai_view(cap: Capture) -> None:
    p = cap.provider
    transport = TracingTransport(httpx.MockTransport(_reply), tracer_provider=p)
    with chainlat.workflow("support", tracer_provider=p):
        with chainlat.data_stage("retrieve-docs", kind="retrieval", tracer_provider=p):
            pass
        with chainlat.data_stage("search", source="faq-index", tracer_provider=p):
            pass
        with chainlat.data_stage("features", kind="feature-fetch", tracer_provider=p):
            pass
        with chainlat.data_stage("load", tracer_provider=p):
            pass
        with chainlat.workflow("planner", tracer_provider=p):
            with chainlat.inference("gpt-4o-mini", tracer_provider=p):
                with httpx.Client(transport=transport) as client:
                    client.post(
                        "https://api.openai.com/v1/chat/completions",
                        json={"model": "gpt-4o-mini", "messages": [{"role": "user",
                                                                    "content": "hi"}]},
                    )  # fmt: skip
        with chainlat.inference("text-embedding-3-small", operation="embeddings",
                                tracer_provider=p):  # fmt: skip
            pass
        with chainlat.tool("lookup", tracer_provider=p):
            pass
    kinds = {s.name: jaeger_kind(s.attributes or {}) for s in cap.spans()}
    assert kinds == {
        "invoke_workflow support": "AGENT",
        "invoke_workflow planner": "AGENT",
        "data retrieve-docs": "RETRIEVAL",
        "data search": "RETRIEVAL",
        "data features": "STANDARD",
        "data load": "STANDARD",
        "chat gpt-4o-mini": "LLM_CALL",  # the hand-written call and its httpx twin
        "embeddings text-embedding-3-small": "LLM_CALL",
        "execute_tool lookup": "TOOL_CALL",
    }
    assert len([s for s in cap.spans() if s.name == "chat gpt-4o-mini"]) == 2
    assert "UNKNOWN_GENAI" not in kinds.values(), JAEGER_UI_DETECT


def test_data_stages_are_still_data_and_read_back_as_before(cap: Capture) -> None:
    """The new attributes change no number: every data stage is a data step."""
    p = cap.provider
    with chainlat.workflow("w", tracer_provider=p) as run:
        for kind in ("retrieval", "feature-fetch", None):
            with chainlat.data_stage(f"d-{kind}", kind=kind, tracer_provider=p):
                cap.clock.advance(5)
    assert run.rollup is not None
    assert (run.rollup.data_count, run.rollup.data_ms) == (3, 15)
    retrieval = cap.span("data d-retrieval").attributes or {}
    assert retrieval.get("gen_ai.operation.name") == "retrieval"
    other = cap.span("data d-feature-fetch").attributes or {}
    assert other.get("chainlat.data.kind") == "feature-fetch"
    workflow = cap.span("invoke_workflow w").attributes or {}
    assert workflow.get("gen_ai.agent.name") == workflow.get("gen_ai.workflow.name") == "w"


def test_the_conventions_version_is_pinned_once_and_named_in_the_docs() -> None:
    repository, version = attr.GEN_AI_CONVENTIONS.split(" ")
    docs = (Path(__file__).parents[2] / "docs" / "attributes.md").read_text()
    assert f"**`{repository}` {version}**" in docs
    assert "chainlat._core.attributes.GEN_AI_CONVENTIONS" in docs
