"""MLflow Tracing's spans: its span types classify in their quotes, its model and usage are
read from JSON text, its first chunk is a span event, and the key it puts on other spans
does not make them its own.

MLflow (mlflow-tracing 3.17.2) writes every attribute value as JSON text, a string in its
quotes (``mlflow.spanType = "CHAT_MODEL"``, with the quotes). With
``MLFLOW_USE_DEFAULT_TRACER_PROVIDER=false`` its spans go through the application's
provider, and its span processor writes ``mlflow.spanType = null`` on every span that is
not its own, chainlat's and the wire's included. Before the ``mlflow`` row, the interop
matrix's ``mlflow`` stack read no step without the wire (no run at all without
``--roots``); with the row first among the marks, the wire's span of each call read as
MLflow's, and no call had its twin (10 calls of 5).
"""

from __future__ import annotations

import json

import pytest

from chainlat._core import conventions
from chainlat._core.call_readings import call_readings
from chainlat._core.records import SpanRecord, apply_events, call_record
from chainlat._core.twins import find_twins

SPAN_TYPE = "mlflow.spanType"
USAGE = "mlflow.chat.tokenUsage"
CHAT: dict[str, object] = {
    SPAN_TYPE: '"CHAT_MODEL"',
    "mlflow.llm.model": '"sim-plan"',
    USAGE: '{"input_tokens": 111, "output_tokens": 5, "total_tokens": 116, '
    '"cache_read_input_tokens": 0}',
    "mlflow.message.format": '"openai"',
    "mlflow.traceRequestId": '"tr-e96793309e84d137c86d734009cf7893"',
}


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("LLM", "inference"),
        ("CHAT_MODEL", "inference"),
        ("EMBEDDING", "inference"),
        ("RETRIEVER", "data"),
        ("RERANKER", "data"),
        ("MEMORY", "data"),
        ("TOOL", "tool"),
        ("AGENT", "workflow"),
        ("CHAIN", None),
        ("PARSER", None),
        ("UNKNOWN", None),
        ("WORKFLOW", None),
        ("TASK", None),
        ("GUARDRAIL", None),
        ("EVALUATOR", None),
    ],
)
def test_each_span_type_in_its_quotes_has_its_kind(kind: str, expected: str | None) -> None:
    assert conventions.classify({SPAN_TYPE: json.dumps(kind)}) == expected
    assert conventions.classify({SPAN_TYPE: kind}) is None  # not as MLflow writes it


def test_a_chat_gives_its_model_without_quotes_and_its_tokens() -> None:
    assert conventions.classify(CHAT) == "inference"
    assert conventions.source_of(CHAT) == "mlflow"
    assert call_readings(CHAT) == (111, 5, None, "sim-plan")


def test_cache_reads_are_read_from_its_usage() -> None:
    span = {**CHAT, USAGE: json.dumps({"input_tokens": 1200, "cache_read_input_tokens": 1024})}
    record = call_record(1, None, "Completions", 0, 100_000_000, "inference", span)
    assert (record.input_tokens, record.cache_read_tokens) == (1200, 1024)


@pytest.mark.parametrize(
    ("value", "model"),
    [
        ('"sim-plan"', "sim-plan"),
        ("sim-plan", "sim-plan"),  # any other writer's, unquoted
        ('"unknown"', None),  # a placeholder, quoted or not
        ('""', None),
        ('"', '"'),  # one quote is no JSON text: kept as it is
        ('"a" "b"', '"a" "b"'),
        ('"\\u00e9t\\u00e9"', "été"),
    ],
)
def test_a_model_written_as_json_text_is_read_as_its_string(value: str, model: str | None) -> None:
    assert call_readings({SPAN_TYPE: '"LLM"', "mlflow.llm.model": value})[3] == model


def test_the_null_it_writes_on_other_spans_classifies_nothing() -> None:
    # A span of another instrumentation under MLflow keeps its own kind...
    assert conventions.classify({SPAN_TYPE: "null", "db.system.name": "sqlite"}) == "data"
    # ...and an HTTP client span of a model route is still the wire's call.
    wire = {
        SPAN_TYPE: "null",
        "http.request.method": "POST",
        "url.full": "http://127.0.0.1:8000/v1/chat/completions",
    }
    assert conventions.classify(wire) == "inference"
    assert conventions.source_of(wire) == "http"
    assert conventions.classify({SPAN_TYPE: "null"}) is None


def test_a_call_and_its_wire_span_beside_it_are_twins() -> None:
    """MLflow's ``Completions`` span is not the current span while its call runs, so the
    wire's span (chainlat's, with MLflow's ``null`` on it) lies beside it: one call."""
    wire = {
        "chainlat.step.kind": "inference",
        "http.request.method": "POST",
        "gen_ai.request.model": "sim-plan",
        "gen_ai.usage.input_tokens": 111,
        SPAN_TYPE: "null",
    }
    framework = call_record(2, 1, "Completions", 33_600_000, 135_600_000, "inference", CHAT)
    on_wire = call_record(3, 1, "chat sim-plan", 35_600_000, 133_100_000, "inference", wire)
    assert (framework.source, on_wire.source) == ("mlflow", "http")
    root = call_record(1, None, "agent", 0, 489_000_000, "workflow", {SPAN_TYPE: '"AGENT"'})
    twins = find_twins(1, [root, framework, on_wire])
    assert len(twins) == 1


def test_its_first_chunk_event_is_the_first_token() -> None:
    record: SpanRecord = call_record(1, None, "Completions", 0, 120_000_000, "inference", CHAT)
    apply_events(record, [("mlflow.chunk.item.0", 42_900_000), ("mlflow.chunk.item.1", 46_900_000)])
    assert record.ttft_ms == pytest.approx(42.9)
