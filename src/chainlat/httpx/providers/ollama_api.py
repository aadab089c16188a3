"""Ollama's native API: ``/api/chat`` and ``/api/generate``, streamed as NDJSON by default."""

from __future__ import annotations

from functools import partial
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat.httpx._wire import (
    AttributeDict,
    DefaultRoute,
    Parameters,
    Reader,
    Truncator,
    WireFormat,
    as_int,
    as_str,
    content_attributes,
    get_path,
    messages_of,
    prompt_of,
)

_OPTIONS: Final = Parameters(("num_predict",), options="options")


def chat_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """An ``/api/chat`` request's attributes (streamed unless ``stream`` is false)."""
    out: AttributeDict = {attr.GEN_AI_REQUEST_STREAM: body.get("stream") is not False}
    _OPTIONS.read(body, out)
    if capture is not None:
        out.update(content_attributes(messages_of(body), None, capture))
    return out


def generate_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """An ``/api/generate`` request's attributes: its ``prompt`` and ``system`` captured."""
    out: AttributeDict = {attr.GEN_AI_REQUEST_STREAM: body.get("stream") is not False}
    _OPTIONS.read(body, out)
    if capture is not None:
        out.update(content_attributes(prompt_of(body), as_str(body.get("system")), capture))
    return out


class OllamaReader(Reader):
    def __init__(self, capture_chars: int | None, key: str) -> None:
        super().__init__(capture_chars)
        self._key = key  # "message" (chat) or "response" (generate)

    def _text(self, data: object) -> object:
        return (
            get_path(data, "message", "content")
            if self._key == "message"
            else get_path(data, "response")
        )

    def _final(self, data: object) -> None:
        facts = self.facts
        facts.response_model = as_str(get_path(data, "model")) or facts.response_model
        if get_path(data, "done") is True:
            facts.finish_reasons[0] = as_str(get_path(data, "done_reason")) or "stop"
            facts.input_tokens = as_int(get_path(data, "prompt_eval_count"))
            facts.output_tokens = as_int(get_path(data, "eval_count"))
        error = as_str(get_path(data, "error"))
        if error is not None:
            facts.error_type = "error"

    def body(self, data: object) -> None:
        self._keep_text(self._text(data))
        self._final(data)

    def event(self, name: str | None, data: object) -> bool:
        text = self._text(data)
        self._keep_text(text)
        self._final(data)
        return bool(text) or bool(get_path(data, "message", "tool_calls"))


FORMATS: Final = (
    WireFormat(
        "ollama_chat",
        "ollama",
        chat_request,
        partial(OllamaReader, key="message"),
        (DefaultRoute("/api/chat", "chat", ("messages",), provider="ollama"),),
    ),
    WireFormat(
        "ollama_generate",
        "ollama",
        generate_request,
        partial(OllamaReader, key="response"),
        (DefaultRoute("/api/generate", "text_completion", ("prompt",), provider="ollama"),),
    ),
)
