"""Langfuse's spans: its observation types classify, a generation's usage is read from its
JSON object, and its first chunk's instant from a JSON string.

Langfuse's SDK (langfuse 5.0.4) writes OpenTelemetry spans with keys of its own only: an
``@observe(as_type=...)`` function's span and each call of its OpenAI client, a
``generation``. Before the ``langfuse`` row, the interop matrix's ``langfuse`` stack read
no step at all without the wire (inference 0 calls of 5, data and tool 0; its whole run
read as overhead), and with the wire no data stage and no tool.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest

import chainlat
from chainlat._core import conventions
from chainlat._core.call_readings import call_readings, first_token_at
from chainlat._core.records import call_fields, call_record
from chainlat.testing import Capture
from support.convention_samples import LANGFUSE_GENERATION, LANGFUSE_RETRIEVER, LANGFUSE_TOOL
from support.readback import both_ways

USAGE = "langfuse.observation.usage_details"
STARTED = "langfuse.observation.completion_start_time"


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("generation", "inference"),
        ("embedding", "inference"),
        ("retriever", "data"),
        ("tool", "tool"),
        ("agent", "workflow"),
        ("span", None),
        ("chain", None),
        ("event", None),
        ("evaluator", None),
        ("guardrail", None),
    ],
)
def test_each_observation_type_has_its_kind(kind: str, expected: str | None) -> None:
    assert conventions.classify({"langfuse.observation.type": kind}) == expected


def test_the_samples_classify_and_are_langfuses() -> None:
    assert conventions.classify(LANGFUSE_RETRIEVER) == "data"
    assert conventions.classify(LANGFUSE_TOOL) == "tool"
    assert conventions.classify(LANGFUSE_GENERATION) == "inference"
    assert conventions.source_of(LANGFUSE_GENERATION) == "langfuse"


def test_a_generation_gives_its_tokens_model_and_no_duration_as_a_first_token() -> None:
    assert call_readings(LANGFUSE_GENERATION) == (53, 20, None, "sim-answer")


@pytest.mark.parametrize(
    ("usage", "tokens"),
    [
        # its OpenAI client, Chat Completions: the response's usage as it came
        ({"prompt_tokens": 111, "completion_tokens": 5, "total_tokens": 116}, (111, 5)),
        # the Responses API's names
        ({"input_tokens": 40, "output_tokens": 7}, (40, 7)),
        # Langfuse's own names, as an application reports usage itself
        ({"input": 12, "output": 3, "total": 15}, (12, 3)),
        # Langfuse's names first, whatever else the object holds
        ({"input": 12, "prompt_tokens": 99, "output": 3}, (12, 3)),
        # an embedding: input only
        ({"input": 8}, (8, None)),
        # counts that are no count: negative, text, a float with a fraction, a boolean
        ({"input": -1, "output": "many"}, (None, None)),
        ({"input": 2.5, "output": True}, (None, None)),
        # a nested count is not the object's own
        ({"prompt_tokens_details": {"cached_tokens": 4}}, (None, None)),
        # its JavaScript OpenAI client (@langfuse/openai 5.11.1 parseUsageDetails), from
        # prompt_tokens 1200 of which 1024 cached, completion_tokens 300 of which 256 of
        # reasoning: Langfuse's input and output leave their parts out, which are added
        (
            {
                "input": 176,
                "output": 44,
                "total": 1500,
                "input_cached_tokens": 1024,
                "input_audio_tokens": 0,
                "output_reasoning_tokens": 256,
            },
            (1200, 300),
        ),
        # its LangChain handler (CallbackHandler._parse_usage_model): a priority tier is
        # written beside, not subtracted, so it is no part
        ({"input": 90, "input_cache_read": 10, "input_priority": 100, "output": 5}, (100, 5)),
        # a part that is no count adds nothing; a read name is never a part
        ({"input": 12, "input_cached_tokens": "n/a", "input_tokens": 12}, (12, None)),
    ],
)
def test_usage_is_read_from_its_json_object(
    usage: dict[str, object], tokens: tuple[int | None, int | None]
) -> None:
    readings = call_readings({"langfuse.observation.type": "generation", USAGE: json.dumps(usage)})
    assert readings[:2] == tokens


@pytest.mark.parametrize(
    "text",
    ["not json", "[1, 2]", '"input"', "12", "[" * 100_000 + "]" * 100_000, ""],
)
def test_a_usage_value_that_is_no_object_gives_no_tokens(text: str) -> None:
    readings = call_readings({"langfuse.observation.type": "generation", USAGE: text})
    assert readings[:2] == (None, None)


def test_a_count_of_a_key_of_its_own_is_read_before_the_usage_object() -> None:
    span = {
        "langfuse.observation.type": "generation",
        "gen_ai.usage.input_tokens": 30,
        USAGE: json.dumps({"input": 12, "output": 3}),
    }
    assert call_readings(span)[:2] == (30, 3)


def _iso(ns: int) -> str:
    at = datetime.datetime.fromtimestamp(ns // 1000 / 1e6, tz=datetime.UTC)
    return json.dumps(at.isoformat().replace("+00:00", "Z"))


def test_the_first_chunks_instant_is_read_from_its_json_string() -> None:
    start = 1_765_000_000_000_000_000
    span = {STARTED: _iso(start + 43_001_000)}
    assert span[STARTED].startswith('"') and span[STARTED].endswith('Z"')
    assert first_token_at(span, start, start + 120_000_000) == (43.001, None)


def test_an_instant_outside_the_call_is_no_time_of_it() -> None:
    start = 1_765_000_000_000_000_000
    span = {STARTED: _iso(start - 5_000_000)}
    ttft, why = first_token_at(span, start, start + 120_000_000)
    assert ttft is None
    assert why is not None and why.startswith(STARTED)


def _observation(cap: Capture, name: str, kind: str, took_ms: float, **extra: str) -> None:
    tracer = cap.provider.get_tracer("langfuse-sdk")
    start = cap.clock()
    span = tracer.start_span(name, start_time=start)
    span.set_attribute("langfuse.observation.type", kind)
    for key, value in extra.items():
        span.set_attribute(key, value)
    span.end(end_time=cap.clock.advance(took_ms))


def test_a_langfuse_run_is_read_live_and_from_its_file_alike(cap: Capture, tmp_path: Path) -> None:
    """A retrieval of 30 ms, a generation of 100 ms whose first chunk came at 40 ms, a tool
    of 25 ms, 5 ms of glue between each: the workflow records what the readers read."""
    with chainlat.workflow("agent", tracer_provider=cap.provider):
        _observation(cap, "retrieve", "retriever", 30)
        cap.clock.advance(5)
        first_chunk = _iso(cap.clock() + 40_000_000)
        _observation(
            cap,
            "OpenAI-generation",
            "generation",
            100,
            **{
                "langfuse.observation.model.name": "sim-answer",
                USAGE: json.dumps({"prompt_tokens": 53, "completion_tokens": 20}),
                STARTED: first_chunk,
            },
        )
        cap.clock.advance(5)
        _observation(cap, "lookup_order", "tool", 25)
        cap.clock.advance(5)
    [live] = cap.rollups()
    assert (live.inference_count, live.data_count, live.tool_count) == (1, 1, 1)
    assert (live.input_tokens, live.output_tokens) == (53, 20)
    assert (live.inference_ms, live.data_ms, live.tool_ms) == pytest.approx((100.0, 30.0, 25.0))
    assert live.overhead_ms == pytest.approx(15.0)
    for run in both_ways(cap, tmp_path):
        rollup = run.rollup
        assert (rollup.inference_count, rollup.data_count, rollup.tool_count) == (1, 1, 1)
        assert (rollup.input_tokens, rollup.output_tokens) == (53, 20)
        assert rollup.inference_ms == pytest.approx(live.inference_ms)
        assert rollup.first_output_ms == pytest.approx(35.0 + 40.0)


@pytest.mark.parametrize(
    ("usage", "cache_read"),
    [
        # its JavaScript OpenAI client: OpenAI's cached tokens, a part of the input
        ({"input": 176, "input_cached_tokens": 1024, "output": 44}, 1024),
        # its LangChain handler: LangChain's cache_read
        ({"input": 90, "input_cache_read": 10, "output": 5}, 10),
        # its Python OpenAI client: OpenAI's usage as it came, the cached tokens nested
        ({"prompt_tokens": 1200, "prompt_tokens_details": {"cached_tokens": 1024}}, 1024),
        ({"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 512}}, 512),
        # a path that leads nowhere, or to no count
        ({"prompt_tokens": 1200, "prompt_tokens_details": None}, None),
        ({"prompt_tokens": 1200, "prompt_tokens_details": {"cached_tokens": "n/a"}}, None),
        ({"prompt_tokens": 1200, "prompt_tokens_details": [1024]}, None),
    ],
)
def test_cache_reads_are_read_from_the_usage_object(
    usage: dict[str, object], cache_read: int | None
) -> None:
    span = {"langfuse.observation.type": "generation", USAGE: json.dumps(usage)}
    record = call_record(1, None, "OpenAI.chat", 0, 100_000_000, "inference", span)
    assert record.cache_read_tokens == cache_read
    fields = call_fields(span)
    assert (fields[0], fields[6]) == (record.input_tokens, cache_read)


def test_a_cache_read_of_a_key_of_its_own_is_read_before_the_usage_object() -> None:
    span = {
        "langfuse.observation.type": "generation",
        "gen_ai.usage.cache_read.input_tokens": 7,
        USAGE: json.dumps({"input": 1, "input_cached_tokens": 1024}),
    }
    assert call_record(1, None, "c", 0, 1, "inference", span).cache_read_tokens == 7
