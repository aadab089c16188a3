"""A chat completions stream chunk decoded into only the fields chainlat reads.

A chunk of ``/chat/completions`` (``"object": "chat.completion.chunk"``) carries its id,
model, creation time, system fingerprint, and per choice its delta, log-probabilities and
finish reason; `OpenAIChatReader.event` reads the id, the model, each choice's index,
finish reason and the parts of its delta that are output, and the usage. msgspec decodes
a chunk into the structs below: the fields read become attributes, every other field is
skipped without building it (no dict per object, no string per key), which costs less
than half of decoding the whole chunk and reading the dicts.

The structs' types are the shapes a chunk is written in: a string id, model, finish reason
and content, an int index, a list of choice objects, a delta object. A chunk in any other
shape (a number for an id, ``true`` for an index, a list for a content, ``choices`` not a
list of objects, no JSON object at all) fails to decode here, and is decoded whole and
read by ``event`` as before: each field is then checked as ``event`` checks it. The
parts of the delta that only say whether it is output, and the usage, are left untyped.
Imported on the first chunk: ``import chainlat`` does not import msgspec.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec


class ChatDelta(msgspec.Struct, gc=False):
    """The parts of a choice's ``delta`` that are output."""

    content: str | None = None
    tool_calls: Any = None
    refusal: Any = None
    reasoning_content: Any = None
    reasoning: Any = None


class ChatChoice(msgspec.Struct, gc=False):
    """One choice of a chunk: its index, finish reason and delta."""

    index: int | None = None
    finish_reason: str | None = None
    delta: ChatDelta | None = None


class ChatChunk(msgspec.Struct, gc=False):
    """One chunk of a chat completions stream, as far as chainlat reads it."""

    id: str | None = None
    model: str | None = None
    choices: list[ChatChoice] | None = None
    usage: Any = None


decode_chunk: Final = msgspec.json.Decoder(ChatChunk).decode
"""``raw`` -> its `ChatChunk`; raises (``msgspec.DecodeError``, ``msgspec.ValidationError``)
when ``raw`` is no JSON object or a field read has another shape."""
