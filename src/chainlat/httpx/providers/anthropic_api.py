"""Anthropic's Messages API (``/v1/messages``): requests, answers and their event stream."""

from __future__ import annotations

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
    as_list,
    as_str,
    content_attributes,
    get_path,
    messages_of,
    read_ids,
    text_of,
)

_MESSAGES: Final = Parameters(("max_tokens",), stop="stop_sequences")


def messages_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """A ``/v1/messages`` request's attributes: its ``messages`` and ``system`` captured."""
    out: AttributeDict = {attr.GEN_AI_REQUEST_STREAM: body.get("stream") is True}
    _MESSAGES.read(body, out)
    if capture is not None:
        out.update(content_attributes(messages_of(body), text_of(body.get("system")), capture))
    return out


class AnthropicReader(Reader):
    def __init__(self, capture_chars: int | None) -> None:
        super().__init__(capture_chars)
        self._uncached_input: int | None = None

    def _usage(self, usage: object) -> None:
        if not isinstance(usage, dict):
            return
        facts = self.facts
        for key, name in (
            ("cache_read_tokens", "cache_read_input_tokens"),
            ("cache_creation_tokens", "cache_creation_input_tokens"),
            ("output_tokens", "output_tokens"),
        ):
            value = as_int(usage.get(name))
            if value is not None:
                setattr(facts, key, value)
        uncached = as_int(usage.get("input_tokens"))
        if uncached is not None:
            self._uncached_input = uncached
        # The conventions count every input token; Anthropic reports cache reads and
        # writes apart from input_tokens, so they are added back.
        if self._uncached_input is not None:
            facts.input_tokens = (
                self._uncached_input
                + (facts.cache_read_tokens or 0)
                + (facts.cache_creation_tokens or 0)
            )

    def body(self, data: object) -> None:
        read_ids(self.facts, data)
        reason = as_str(get_path(data, "stop_reason"))
        if reason is not None:
            self.facts.finish_reasons[0] = reason
        for part in as_list(get_path(data, "content")):
            if get_path(part, "type") == "text":
                self._keep_text(get_path(part, "text"))
        self._usage(get_path(data, "usage"))

    def event(self, name: str | None, data: object) -> bool:
        kind = get_path(data, "type") or name
        if kind == "content_block_delta":
            delta = get_path(data, "delta")
            if get_path(delta, "type") == "text_delta":
                self._keep_text(get_path(delta, "text"))
            return any(get_path(delta, k) for k in ("text", "partial_json", "thinking"))
        if kind == "message_start":
            message = get_path(data, "message")
            read_ids(self.facts, message)
            self._usage(get_path(message, "usage"))
        elif kind == "message_delta":
            reason = as_str(get_path(data, "delta", "stop_reason"))
            if reason is not None:
                self.facts.finish_reasons[0] = reason
            self._usage(get_path(data, "usage"))
        elif kind == "error":
            self.facts.error_type = as_str(get_path(data, "error", "type")) or "error"
        return False


FORMATS: Final = (
    WireFormat(
        "anthropic_messages",
        "anthropic",
        messages_request,
        AnthropicReader,
        (DefaultRoute("/v1/messages", "chat", ("messages",), provider="anthropic"),),
    ),
)
