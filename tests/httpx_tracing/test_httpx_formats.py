"""Provider wire formats, read (chainlat.httpx._formats): bodies, stream events, decoders."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import pytest

from chainlat._core import attributes as attr
from chainlat.httpx._decoders import NdjsonDecoder, SseDecoder, decompressor
from chainlat.httpx._formats import Truncator, reader_for, request_attributes
from chainlat.httpx._routes import Format


# --- requests ------------------------------------------------------------------------------------
def test_openai_chat_request_attributes() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_completion_tokens": 100,
        "max_tokens": 5,
        "temperature": 0.2,
        "top_p": 1,
        "seed": 7,
        "stop": "END",
        "n": 2,
        "frequency_penalty": 0.5,
        "presence_penalty": -0.5,
    }
    assert request_attributes("openai_chat", body) == {
        attr.GEN_AI_REQUEST_STREAM: True,
        attr.GEN_AI_REQUEST_MAX_TOKENS: 100,  # max_completion_tokens wins
        attr.GEN_AI_REQUEST_TEMPERATURE: 0.2,
        attr.GEN_AI_REQUEST_TOP_P: 1.0,
        attr.GEN_AI_REQUEST_SEED: 7,
        attr.GEN_AI_REQUEST_STOP_SEQUENCES: ("END",),
        attr.GEN_AI_REQUEST_CHOICE_COUNT: 2,
        attr.GEN_AI_REQUEST_FREQUENCY_PENALTY: 0.5,
        attr.GEN_AI_REQUEST_PRESENCE_PENALTY: -0.5,
    }


def test_anthropic_request_attributes() -> None:
    body = {"model": "claude", "max_tokens": 64, "top_k": 5, "stop_sequences": ["a", "b"]}
    assert request_attributes("anthropic_messages", body) == {
        attr.GEN_AI_REQUEST_STREAM: False,
        attr.GEN_AI_REQUEST_MAX_TOKENS: 64,
        attr.GEN_AI_REQUEST_TOP_K: 5,
        attr.GEN_AI_REQUEST_STOP_SEQUENCES: ("a", "b"),
    }


def test_ollama_streams_unless_told_not_to_and_keeps_options_apart() -> None:
    body = {"model": "llama3", "prompt": "x", "options": {"num_predict": 9, "temperature": 0}}
    assert request_attributes("ollama_generate", body) == {
        attr.GEN_AI_REQUEST_STREAM: True,
        attr.GEN_AI_REQUEST_MAX_TOKENS: 9,
        attr.GEN_AI_REQUEST_TEMPERATURE: 0.0,
    }
    assert request_attributes("ollama_chat", {"stream": False})[attr.GEN_AI_REQUEST_STREAM] is False


def test_embeddings_request_attributes() -> None:
    body = {"model": "e", "input": "x", "dimensions": 256, "encoding_format": "base64"}
    assert request_attributes("openai_embeddings", body) == {
        attr.GEN_AI_EMBEDDINGS_DIMENSION_COUNT: 256,
        attr.GEN_AI_REQUEST_ENCODING_FORMATS: ("base64",),
    }


def test_wrongly_typed_request_fields_are_skipped() -> None:
    body = {"max_tokens": "9", "temperature": True, "seed": 1.5, "stop": [1, 2], "stream": "yes"}
    assert request_attributes("openai_chat", body) == {attr.GEN_AI_REQUEST_STREAM: False}
    assert request_attributes("openai_chat", ["not", "an", "object"]) == {}


def test_content_is_captured_as_semconv_messages_cut_to_the_limit() -> None:
    body = {
        "system": "Be brief and precise.",
        "messages": [
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": [{"type": "text", "text": "Paris."}]},
        ],
    }
    cut = Truncator(10)
    found = request_attributes("anthropic_messages", body, capture=cut)
    assert json.loads(found[attr.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "What is th"}]},
        {"role": "assistant", "parts": [{"type": "text", "content": "Paris."}]},
    ]
    assert json.loads(found[attr.GEN_AI_SYSTEM_INSTRUCTIONS]) == [
        {"type": "text", "content": "Be brief a"}
    ]
    assert cut.truncated


@pytest.mark.parametrize(
    ("fmt", "body"),
    [
        ("openai_completions", {"prompt": ["a", "b"]}),
        ("ollama_generate", {"prompt": "ab"}),
        ("openai_responses", {"input": "ab"}),
        ("openai_responses", {"input": [{"role": "user", "content": "ab"}]}),
    ],
)
def test_prompts_are_captured_as_one_user_message(fmt: Format, body: dict[str, Any]) -> None:
    found = request_attributes(fmt, body, capture=Truncator(100))
    assert json.loads(found[attr.GEN_AI_INPUT_MESSAGES]) == [
        {"role": "user", "parts": [{"type": "text", "content": "ab"}]}
    ]


def test_no_content_without_capture() -> None:
    body = {"messages": [{"role": "user", "content": "secret plans"}]}
    assert "secret" not in json.dumps(request_attributes("openai_chat", body))


# --- responses ---------------------------------------------------------------------------------
def read_body(fmt: Format, body: object, capture: int | None = None) -> dict[str, Any]:
    reader = reader_for(fmt, capture)
    reader.body(body)
    return reader.facts.attributes(Truncator(capture) if capture is not None else None)


def read_events(
    fmt: Format, events: list[tuple[str | None, object]], capture: int | None = None
) -> tuple[list[bool], dict[str, Any]]:
    reader = reader_for(fmt, capture)
    outputs = [reader.event(name, data) for name, data in events]
    return outputs, reader.facts.attributes(Truncator(capture) if capture is not None else None)


def test_openai_chat_body() -> None:
    body = {
        "id": "chatcmpl-1",
        "model": "gpt-4o-2024",
        "choices": [
            {"index": 0, "message": {"content": "Hi there"}, "finish_reason": "stop"},
            {"index": 1, "message": {"content": "Hello"}, "finish_reason": "length"},
        ],
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 6},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    }
    found = read_body("openai_chat", body, capture=5)
    output = json.loads(found.pop(attr.GEN_AI_OUTPUT_MESSAGES))
    assert found == {
        attr.GEN_AI_RESPONSE_ID: "chatcmpl-1",
        attr.GEN_AI_RESPONSE_MODEL: "gpt-4o-2024",
        attr.GEN_AI_RESPONSE_FINISH_REASONS: ("stop", "length"),
        attr.GEN_AI_USAGE_INPUT_TOKENS: 10,
        attr.GEN_AI_USAGE_OUTPUT_TOKENS: 4,
        attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: 6,
        attr.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: 2,
    }
    assert output == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Hi th"}],
            "finish_reason": "stop",
        }
    ]


def test_token_counts_a_response_cannot_mean_are_not_recorded() -> None:
    """A negative count (read as 0, the cost came out low) or one beyond 64 bits."""
    body = {"model": "m", "usage": {"prompt_tokens": -5, "completion_tokens": 2**64}}
    found = read_body("openai_chat", body)
    assert attr.GEN_AI_USAGE_INPUT_TOKENS not in found
    assert attr.GEN_AI_USAGE_OUTPUT_TOKENS not in found


def test_openai_chat_stream_events_say_which_carry_output() -> None:
    events: list[tuple[str | None, object]] = [
        (
            None,
            {"id": "c", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        ),
        (None, {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}),
        (None, {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0}]}}]}),
        (
            None,
            {"choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "tool_calls"}]},
        ),
        (None, {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
    ]
    outputs, found = read_events("openai_chat", events)
    assert outputs == [False, True, True, False, False]
    assert found[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_calls",)
    assert found[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 2


def test_openai_completions_stream() -> None:
    events: list[tuple[str | None, object]] = [
        (None, {"id": "cmpl", "choices": [{"index": 0, "text": "A"}]}),
        (None, {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]}),
    ]
    outputs, found = read_events("openai_completions", events, capture=10)
    assert outputs == [True, False]
    assert json.loads(found[attr.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "A"


def test_embeddings_body_gives_the_model_and_input_tokens() -> None:
    body = {"data": [{"embedding": [0.1]}], "model": "e-3", "usage": {"prompt_tokens": 8}}
    assert read_body("openai_embeddings", body) == {
        attr.GEN_AI_RESPONSE_MODEL: "e-3",
        attr.GEN_AI_USAGE_INPUT_TOKENS: 8,
    }


def test_responses_api_body_and_stream() -> None:
    done = {
        "id": "resp_1",
        "model": "gpt-5",
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hi"}]}],
        "usage": {
            "input_tokens": 4,
            "output_tokens": 9,
            "input_tokens_details": {"cached_tokens": 1},
        },
    }
    found = read_body("openai_responses", done, capture=50)
    assert found[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("max_output_tokens",)
    assert found[attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 1
    assert json.loads(found[attr.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "Hi"
    events: list[tuple[str | None, object]] = [
        ("response.created", {"type": "response.created", "response": {"id": "resp_2"}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Hi"}),
        (
            "response.completed",
            {"type": "response.completed", "response": {**done, "status": "completed"}},
        ),
    ]
    outputs, found = read_events("openai_responses", events)
    assert outputs == [False, True, False]
    assert found[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert found[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 9


def test_anthropic_input_tokens_include_cache_reads_and_writes() -> None:
    body = {
        "id": "msg_1",
        "model": "claude-x",
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "ok"}],
        "usage": {
            "input_tokens": 10,
            "output_tokens": 3,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        },
    }
    found = read_body("anthropic_messages", body)
    assert found[attr.GEN_AI_USAGE_INPUT_TOKENS] == 130
    assert found[attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] == 100
    assert found[attr.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] == 20
    assert found[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


def test_anthropic_stream_events() -> None:
    start = {"id": "msg_2", "model": "claude-x", "usage": {"input_tokens": 5, "output_tokens": 1}}
    events: list[tuple[str | None, object]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0}),
        ("ping", {"type": "ping"}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}},
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "delta": {"type": "input_json_delta", "partial_json": "{"},
            },
        ),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use"},
                "usage": {"output_tokens": 7},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    outputs, found = read_events("anthropic_messages", events)
    assert outputs == [False, False, False, True, True, False, False]
    assert found[attr.GEN_AI_RESPONSE_ID] == "msg_2"
    assert found[attr.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert found[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert found[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("tool_use",)


def test_an_error_event_inside_a_stream_is_reported() -> None:
    reader = reader_for("anthropic_messages", None)
    reader.event("error", {"type": "error", "error": {"type": "overloaded_error"}})
    assert reader.facts.error_type == "overloaded_error"


def test_ollama_chat_stream_and_final_line() -> None:
    events: list[tuple[str | None, object]] = [
        (None, {"model": "llama3", "message": {"content": "Hi"}, "done": False}),
        (
            None,
            {
                "model": "llama3",
                "message": {"content": ""},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 12,
                "eval_count": 4,
            },
        ),
    ]
    outputs, found = read_events("ollama_chat", events)
    assert outputs == [True, False]
    assert found == {
        attr.GEN_AI_RESPONSE_MODEL: "llama3",
        attr.GEN_AI_RESPONSE_FINISH_REASONS: ("stop",),
        attr.GEN_AI_USAGE_INPUT_TOKENS: 12,
        attr.GEN_AI_USAGE_OUTPUT_TOKENS: 4,
    }


def test_ollama_generate_body() -> None:
    body = {"model": "llama3", "response": "Hi", "done": True, "eval_count": 2}
    found = read_body("ollama_generate", body, capture=10)
    assert found[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 2
    assert json.loads(found[attr.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "Hi"


def test_odd_bodies_give_no_facts_and_no_errors() -> None:
    formats: list[Format] = [
        "openai_chat",
        "anthropic_messages",
        "ollama_chat",
        "openai_responses",
        "opaque",
    ]
    bodies: list[object] = [None, [], "text", {"choices": "x", "usage": [1], "content": 3}]
    for fmt in formats:
        for body in bodies:
            assert read_body(fmt, body) == {}


def test_captured_output_stops_growing_at_the_limit() -> None:
    reader = reader_for("openai_chat", 5)
    for _ in range(1000):
        reader.event(None, {"choices": [{"index": 0, "delta": {"content": "abc"}}]})
    assert reader.facts.text_chars <= 8  # stops right after passing the limit


# --- byte streams ---------------------------------------------------------------------------
SSE = (
    b'event: message_start\ndata: {"a": 1}\n\n'
    b": keep-alive comment\n\n"
    b'data: {"b":\r\ndata: 2}\r\n\r\n'
    b"data: [DONE]\n\n"
)


def test_sse_events_come_out_the_same_however_the_bytes_are_cut() -> None:
    whole = list(SseDecoder().feed(SSE))
    assert whole == [("message_start", {"a": 1}), (None, {"b": 2})]
    decoder = SseDecoder()
    one_by_one = [event for i in range(len(SSE)) for event in decoder.feed(SSE[i : i + 1])]
    assert one_by_one == whole


def test_an_sse_event_is_yielded_as_soon_as_its_blank_line_arrives() -> None:
    decoder = SseDecoder()
    assert list(decoder.feed(b'data: {"x": 1}\n')) == []
    assert list(decoder.feed(b"\n")) == [(None, {"x": 1})]


def test_ndjson_lines_however_cut() -> None:
    data = b'{"a": 1}\n\n{"b": 2}\nnot json\n{"c": 3}\n'
    decoder = NdjsonDecoder()
    found = [e for i in range(0, len(data), 3) for e in decoder.feed(data[i : i + 3])]
    assert found == [(None, {"a": 1}), (None, {"b": 2}), (None, {"c": 3})]


def decode_in_pieces(encoding: str, packed: bytes) -> bytes:
    decode = decompressor(encoding)
    assert decode is not None
    return b"".join(decode(packed[i : i + 7]) for i in range(0, len(packed), 7))


def test_gzip_and_deflate_bodies_are_decoded_chunk_by_chunk() -> None:
    data = b'{"usage": {"prompt_tokens": 3}}' * 20
    assert decode_in_pieces("gzip", gzip.compress(data)) == data
    assert decode_in_pieces("deflate", zlib.compress(data)) == data
    raw = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    assert decode_in_pieces("deflate", raw.compress(data) + raw.flush()) == data
    assert decode_in_pieces("", data) == data
    assert decode_in_pieces("identity", data) == data


def test_an_unknown_encoding_is_not_read() -> None:
    assert decompressor("br") is None
    assert decompressor("gzip, zstd") is None
