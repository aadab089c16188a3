"""Stream events read from their bytes (``Reader.raw_event``), as the transport reads them.

A chat completions chunk is decoded only into the fields chainlat reads
(``providers/_openai_chunks.py``); every chunk must be read exactly as decoding it whole and
reading the dict (``Reader.event``) reads it: the same output flag, the same facts, the same
attributes. Every other format's events are decoded whole, then read by ``event``.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from chainlat._core import attributes as attr
from chainlat.httpx._decoders import SseDecoder
from chainlat.httpx._formats import Truncator, reader_for
from chainlat.httpx._routes import Format, loads
from chainlat.httpx.providers._openai_chunks import ChatChunk, decode_chunk


def _chunk(choices: list[Any], **extra: Any) -> bytes:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m-1",
        "system_fingerprint": "fp",
        "choices": choices,
        **extra,
    }
    return json.dumps(body, separators=(",", ":")).encode()


DECODED_CHUNKS: list[bytes] = [
    _chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
    _chunk([{"index": 0, "delta": {"content": "Hel"}, "logprobs": None, "finish_reason": None}]),
    # Spacing and key order as another server writes them.
    b'{ "choices" : [ { "finish_reason" : null , "delta" : { "content" : "lo" } ,\n'
    b'"index" : 0 } ] , "model" : "m-2" , "id" : "chatcmpl-2" }',
    # A key written with an escape, a duplicate key (the last one counts, as in a dict).
    b'{"choices":[{"index":0,"delta":{"\\u0063ontent":" there","content":"!"}}]}',
    _chunk([{"index": 0, "delta": {"content": None, "refusal": "no"}}]),
    _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1"}]}}]),
    _chunk([{"index": 0, "delta": {"reasoning_content": "hm"}}]),
    _chunk([{"index": 0, "delta": {"reasoning": "hm"}}]),
    _chunk([{"index": 1, "delta": {"content": "second choice"}}]),
    _chunk([{"index": 0, "delta": {}, "finish_reason": "length"}]),
    _chunk([{"index": 1, "delta": {}, "finish_reason": "stop"}]),
    _chunk([{"index": 0, "delta": {}, "finish_reason": ""}]),
    _chunk(
        [],
        usage={
            "prompt_tokens": 9,
            "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 2},
            "completion_tokens_details": {"reasoning_tokens": 1},
        },
    ),
    _chunk([], usage=None),
    b'{"model":null,"choices":[{"index":null,"delta":null,"finish_reason":null}]}',
]
"""Chunks in the shapes the chunk structs decode (``decode_chunk``): read by the shortcut."""

REFUSED_CHUNKS: list[bytes] = [
    # Shapes the chunk structs refuse: decoded whole, read by ``event``.
    _chunk([{"index": True, "delta": {"content": "index is no int"}}]),
    _chunk([{"index": 1.0, "delta": {"content": "nor is this one"}}]),
    _chunk([{"delta": {"content": [{"type": "text", "text": "parts"}]}}]),
    _chunk([{"index": 0, "delta": {}, "finish_reason": 5}]),
    _chunk([{"index": 0, "delta": "text"}]),
    _chunk([None, {"index": 0, "delta": {"content": "after a null choice"}}]),
    b'{"choices":{"0":{"delta":{"content":"x"}}}}',
    b'{"choices":[],"usage":{"prompt_tokens":NaN,"completion_tokens":3}}',
    b'[{"choices":[]}]',
    b'"text"',
    b"null",
    b"[DONE]",
    b"not json",
    b'{"id":7,"model":"","choices":null}',
]
"""Chunks in other shapes, and events that are no chunk."""

CHAT_CHUNKS: list[bytes] = DECODED_CHUNKS + REFUSED_CHUNKS
"""Chunks of every shape read: what the stream is made of, and what could be misread."""


def _read_raw(fmt: Format, events: list[tuple[str | None, bytes]], capture: int | None) -> Any:
    reader = reader_for(fmt, capture)
    outputs = [reader.raw_event(name, raw) for name, raw in events]
    return outputs, reader.facts, reader.facts.attributes(Truncator(capture or 0))


def _read_decoded(fmt: Format, events: list[tuple[str | None, bytes]], capture: int | None) -> Any:
    reader = reader_for(fmt, capture)
    outputs = []
    for name, raw in events:
        data = loads(raw)
        outputs.append(data is not None and reader.event(name, data))
    return outputs, reader.facts, reader.facts.attributes(Truncator(capture or 0))


@pytest.mark.parametrize("capture", [None, 100])
@pytest.mark.parametrize("index", range(len(CHAT_CHUNKS)))
def test_each_chat_chunk_is_read_as_decoding_it_whole_reads_it(
    index: int, capture: int | None
) -> None:
    events: list[tuple[str | None, bytes]] = [(None, CHAT_CHUNKS[index])]
    assert _read_raw("openai_chat", events, capture) == _read_decoded(
        "openai_chat", events, capture
    )


@pytest.mark.parametrize("capture", [None, 100])
def test_a_whole_chat_stream_is_read_as_decoding_every_chunk_reads_it(capture: int | None) -> None:
    events: list[tuple[str | None, bytes]] = [(None, raw) for raw in CHAT_CHUNKS]
    raw = _read_raw("openai_chat", events, capture)
    assert raw == _read_decoded("openai_chat", events, capture)
    outputs, facts, found = raw
    assert outputs[:9] == [False, True, True, True, True, True, True, True, True]
    assert facts.response_id == "chatcmpl-1"  # the last chunk that named one
    assert facts.finish_reasons == {0: "length", 1: "stop"}
    # The last usage, the NaN chunk's (read by json.loads): no input count, 3 output tokens.
    assert attr.GEN_AI_USAGE_INPUT_TOKENS not in found
    assert found[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 3
    if capture:
        assert "".join(facts.text) == "Hello!index is no intnor is this oneafter a null choice"


def test_the_usual_chunks_are_read_without_decoding_them_whole() -> None:
    # The shortcut is taken for the usual shapes, and refused for the others (else the
    # tests above would compare a reading with itself).
    for raw in DECODED_CHUNKS:
        assert isinstance(decode_chunk(raw), ChatChunk)
    for raw in REFUSED_CHUNKS:
        with pytest.raises((msgspec.DecodeError, msgspec.ValidationError)):
            decode_chunk(raw)
    content = decode_chunk(DECODED_CHUNKS[2])
    assert content.choices is not None
    assert content.choices[0].delta is not None
    assert content.choices[0].delta.content == "lo"
    assert content.model == "m-2"


def test_chat_chunks_split_across_reads_are_read_as_whole_ones() -> None:
    # Each line of an event's data on a data line of its own (the third chunk has two).
    sse = b"".join(
        b"".join(b"data: " + line + b"\r\n" for line in raw.split(b"\n")) + b"\r\n"
        for raw in DECODED_CHUNKS
    )
    sse += b": keep-alive\n\ndata: [DONE]\n\n"
    whole = SseDecoder().feed_raw(sse)
    assert whole == [(None, raw) for raw in DECODED_CHUNKS] + [(None, b"[DONE]")]
    for size in (1, 7, 64):
        decoder = SseDecoder()
        pieces = [e for i in range(0, len(sse), size) for e in decoder.feed_raw(sse[i : i + size])]
        assert pieces == whole
    assert _read_raw("openai_chat", whole, 100) == _read_decoded("openai_chat", whole, 100)


def test_completions_chunks_are_not_read_as_chat_chunks() -> None:
    events: list[tuple[str | None, bytes]] = [
        (None, b'{"id":"cmpl","choices":[{"index":0,"text":"A"}]}'),
        (None, b'{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}'),
        (None, b"[DONE]"),
    ]
    outputs, facts, _ = _read_raw("openai_completions", events, 10)
    assert outputs == [True, False, False]
    assert facts.text == ["A"]
    assert facts.finish_reasons == {0: "stop"}


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def test_anthropic_events_from_their_bytes() -> None:
    start = {"id": "msg_2", "model": "claude-x", "usage": {"input_tokens": 5, "output_tokens": 1}}
    sse = _sse(
        [
            ("message_start", {"type": "message_start", "message": start}),
            ("ping", {"type": "ping"}),
            (
                "content_block_delta",
                {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}},
            ),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 7},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )
    decoder = SseDecoder()
    events = [e for i in range(0, len(sse), 5) for e in decoder.feed_raw(sse[i : i + 5])]
    assert [name for name, _ in events] == [
        "message_start",
        "ping",
        "content_block_delta",
        "message_delta",
        "message_stop",
    ]
    raw = _read_raw("anthropic_messages", events, 10)
    assert raw == _read_decoded("anthropic_messages", events, 10)
    outputs, facts, found = raw
    assert outputs == [False, False, True, False, False]
    assert facts.text == ["Hi"]
    assert found[attr.GEN_AI_USAGE_INPUT_TOKENS] == 5
    assert found[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert found[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("end_turn",)


def test_responses_api_events_from_their_bytes() -> None:
    done = {
        "id": "resp_1",
        "model": "gpt-5",
        "status": "completed",
        "usage": {"input_tokens": 4, "output_tokens": 9},
    }
    sse = _sse(
        [
            ("response.created", {"type": "response.created", "response": {"id": "resp_1"}}),
            ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Hi"}),
            (
                "response.function_call_arguments.delta",
                {"type": "response.function_call_arguments.delta", "delta": "{"},
            ),
            ("response.completed", {"type": "response.completed", "response": done}),
        ]
    )
    events = SseDecoder().feed_raw(sse)
    raw = _read_raw("openai_responses", events, 10)
    assert raw == _read_decoded("openai_responses", events, 10)
    outputs, facts, found = raw
    assert outputs == [False, True, True, False]
    assert facts.text == ["Hi"]
    assert found[attr.GEN_AI_RESPONSE_FINISH_REASONS] == ("stop",)
    assert found[attr.GEN_AI_USAGE_OUTPUT_TOKENS] == 9


MIXED_SSE = (
    b'data: {"a":1}\n\n'
    b'data: {"b":2}\n\ndata:{"c":3}\n\n'  # two events in one read; no space after "data:"
    b'event: named\ndata: {"d":4}\n\n'
    b": a comment\n\n"
    b'data: {"e":\ndata: 5}\n\n'  # two data lines, joined by a line end
    b'data: {"f":6}\r\n\r\n'
    b"\n\n"
    b'id: 7\ndata: {"g":7}\n\n'
    b"data:\n\n"  # an empty data field: an event whose data is empty
    b'data: {"h":8}\n\n'
)
MIXED_EVENTS: list[tuple[str | None, bytes]] = [
    (None, b'{"a":1}'),
    (None, b'{"b":2}'),
    (None, b'{"c":3}'),
    ("named", b'{"d":4}'),
    (None, b'{"e":\n5}'),
    (None, b'{"f":6}'),
    (None, b'{"g":7}'),
    (None, b""),
    (None, b'{"h":8}'),
]


def test_sse_events_however_the_reads_are_cut_at_event_ends() -> None:
    # Every way of cutting the stream at its "\n\n"s: reads of whole events, of several,
    # and of an event's end after a read that began it.
    ends = [i + 2 for i in range(len(MIXED_SSE)) if MIXED_SSE[i : i + 2] == b"\n\n"]
    for first in range(len(ends)):
        for size in (1, 3, len(MIXED_SSE)):
            decoder = SseDecoder()
            cut = ends[first]
            found = decoder.feed_raw(MIXED_SSE[:cut])
            rest = MIXED_SSE[cut:]
            found += [
                e for i in range(0, len(rest), size) for e in decoder.feed_raw(rest[i:][:size])
            ]
            assert found == MIXED_EVENTS, (first, size)
    by_event = SseDecoder()  # one read per "\n\n"-ended piece
    starts = [0, *ends[:-1]]
    pieces = [MIXED_SSE[start:end] for start, end in zip(starts, ends, strict=True)]
    assert [e for piece in pieces for e in by_event.feed_raw(piece)] == MIXED_EVENTS
    assert SseDecoder().feed_raw(MIXED_SSE) == MIXED_EVENTS


def test_a_read_ending_an_event_begun_before_it_is_read_as_the_event_s_end() -> None:
    decoder = SseDecoder()
    assert decoder.feed_raw(b"event: late\ndata: {") == []
    # Ends with a blank line, but the event began in the read before: not a whole event.
    assert decoder.feed_raw(b'"x":1}\n\n') == [("late", b'{"x":1}')]
    assert decoder.feed_raw(b'data: {"y":2}\n\n') == [(None, b'{"y":2}')]
    # A read that looks like a whole event, after a read that began a line or an event.
    assert decoder.feed_raw(b"event: named\n") == []
    assert decoder.feed_raw(b'data: {"z":3}\n\n') == [("named", b'{"z":3}')]
    assert decoder.feed_raw(b"data: [1,") == []
    assert decoder.feed_raw(b"data: 2]\n\n") == [(None, b"[1,data: 2]")]
    assert decoder.feed_raw(b'data: {"a":1}\n') == []
    assert decoder.feed_raw(b'data: {"b":2}\n\n') == [(None, b'{"a":1}\n{"b":2}')]


def test_an_over_long_event_in_a_read_of_whole_events_is_skipped_and_counted() -> None:
    decoder = SseDecoder(max_bytes=20)
    found = decoder.feed_raw(b'data: {"a":1}\n\ndata: "' + b"x" * 30 + b'"\n\ndata: {"b":2}\n\n')
    assert found == [(None, b'{"a":1}'), (None, b'{"b":2}')]
    assert decoder.skipped == 1
    assert decoder.feed_raw(b'data: {"c":3}\n\n') == [(None, b'{"c":3}')]
