"""OpenAI's wire formats: chat completions, completions, embeddings and responses.

Also what every OpenAI-compatible server speaks (vLLM, llama.cpp, Groq, DeepSeek, ...):
the provider is then named by the host (``chainlat.httpx._routes.provider_for``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from chainlat._core import attributes as attr
from chainlat.httpx._wire import (
    AttributeDict,
    DefaultRoute,
    Facts,
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
    prompt_of,
    read_ids,
    text_of,
)

if TYPE_CHECKING:
    from chainlat.httpx.providers._openai_chunks import ChatChunk

# --- requests -----------------------------------------------------------------------------
_CHAT: Final = Parameters(("max_completion_tokens", "max_tokens"), choice_count=True)
_COMPLETIONS: Final = Parameters(("max_tokens",), choice_count=True)
_EMBEDDINGS: Final = Parameters(choice_count=True)
_RESPONSES: Final = Parameters(("max_output_tokens",), choice_count=True)


def chat_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """A ``/chat/completions`` request's attributes."""
    out: AttributeDict = {attr.GEN_AI_REQUEST_STREAM: body.get("stream") is True}
    _CHAT.read(body, out)
    if capture is not None:
        out.update(content_attributes(messages_of(body), None, capture))
    return out


def completions_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """A ``/completions`` request's attributes."""
    out: AttributeDict = {attr.GEN_AI_REQUEST_STREAM: body.get("stream") is True}
    _COMPLETIONS.read(body, out)
    if capture is not None:
        out.update(content_attributes(prompt_of(body), None, capture))
    return out


def embeddings_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """An ``/embeddings`` request's attributes (its input is never captured: no message)."""
    out: AttributeDict = {}
    _EMBEDDINGS.read(body, out)
    dimensions = as_int(body.get("dimensions"))
    if dimensions is not None:
        out[attr.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimensions
    encoding = as_str(body.get("encoding_format"))
    if encoding is not None:
        out[attr.GEN_AI_REQUEST_ENCODING_FORMATS] = (encoding,)
    return out


def responses_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    """A ``/responses`` request's attributes: its ``input`` and ``instructions`` captured."""
    out: AttributeDict = {attr.GEN_AI_REQUEST_STREAM: body.get("stream") is True}
    _RESPONSES.read(body, out)
    if capture is not None:
        messages: list[tuple[str, str]] = []
        given = body.get("input")
        if isinstance(given, str):
            messages.append(("user", given))
        elif isinstance(given, list):
            for item in given:
                item_role = as_str(get_path(item, "role"))
                if item_role is not None:
                    messages.append((item_role, text_of(get_path(item, "content"))))
        out.update(content_attributes(messages, as_str(body.get("instructions")), capture))
    return out


# --- responses ----------------------------------------------------------------------------
def openai_usage(facts: Facts, usage: object) -> None:
    if not isinstance(usage, dict):
        return
    # ``type(value) is int`` is `_int` written out (a decoded JSON int is an int, never a
    # subclass but bool): once per call, four times.
    get = usage.get
    value = get("prompt_tokens", get("input_tokens"))
    facts.input_tokens = value if type(value) is int else None
    value = get("completion_tokens", get("output_tokens"))
    facts.output_tokens = value if type(value) is int else None
    details = get("prompt_tokens_details") or get("input_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    facts.cache_read_tokens = value if type(value) is int else None
    details = get("completion_tokens_details") or get("output_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    facts.reasoning_tokens = value if type(value) is int else None


class OpenAIChatReader(Reader):
    def body(self, data: object) -> None:
        if not isinstance(data, dict):
            return  # nothing to read (as each look-up below would find)
        read_ids(self.facts, data)
        for index, choice in enumerate(as_list(data.get("choices"))):
            self._finish(index, choice)
            if index == 0 and self._capture_chars is not None:
                self._keep_text(get_path(choice, "message", "content"))
        openai_usage(self.facts, data.get("usage"))

    def _finish(self, index: int, choice: object) -> None:
        if not isinstance(choice, dict):
            return
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self.facts.finish_reasons[as_int(choice.get("index")) or index] = reason

    def raw_event(self, name: str | None, raw: bytes) -> bool:
        # Runs once per streamed chunk: decoded into the fields read, and read as `event`
        # reads them; a chunk of another shape is decoded whole and read by `event`.
        if raw == b"[DONE]":
            return False  # the stream's end: not JSON, no event
        decode = _decode_chunk[0]
        if decode is None:
            decode = _chunk_decoder()
        try:
            chunk = decode(raw)
        except Exception:
            return super().raw_event(name, raw)
        return self._chunk(chunk)

    def _chunk(self, chunk: ChatChunk) -> bool:
        """`event` over a decoded `ChatChunk`, whose types spare its checks: an id, a model,
        a finish reason and a content are strings or None, an index an int (never a bool)
        or None."""
        facts = self.facts
        value = chunk.id
        if value:
            facts.response_id = value
        value = chunk.model
        if value:
            facts.response_model = value
        output = False
        choices = chunk.choices
        if choices:
            for index, choice in enumerate(choices):
                position = choice.index
                reason = choice.finish_reason
                if reason:
                    facts.finish_reasons[position or index] = reason
                delta = choice.delta
                if delta is None:
                    continue
                content = delta.content
                if content:
                    output = True
                    if not position and self._capture_chars is not None:  # choice 0's text
                        self._keep_text(content)
                elif (
                    delta.tool_calls or delta.refusal or delta.reasoning_content or delta.reasoning
                ):
                    output = True
        usage = chunk.usage
        if usage is not None:
            openai_usage(facts, usage)
        return output

    def event(self, name: str | None, data: object) -> bool:
        # A chunk `raw_event` could not decode into a `ChatChunk` (and any event given
        # decoded): the readers above, unrolled (one look-up per field).
        if not isinstance(data, dict):
            return False
        facts = self.facts
        value = data.get("id")
        if isinstance(value, str) and value:
            facts.response_id = value
        value = data.get("model")
        if isinstance(value, str) and value:
            facts.response_model = value
        output = False
        choices = data.get("choices")
        if isinstance(choices, list):
            for index, choice in enumerate(choices):
                if not isinstance(choice, dict):
                    continue
                position = choice.get("index")
                if not isinstance(position, int) or isinstance(position, bool):
                    position = None
                reason = choice.get("finish_reason")
                if isinstance(reason, str) and reason:
                    facts.finish_reasons[position or index] = reason
                delta = choice.get("delta")
                if isinstance(delta, dict):
                    content = delta.get("content")
                    if content:
                        output = True
                        if (position or 0) == 0:
                            self._keep_text(content)
                    if not output and (
                        delta.get("tool_calls")
                        or delta.get("refusal")
                        or delta.get("reasoning_content")
                        or delta.get("reasoning")
                    ):
                        output = True
        usage = data.get("usage")
        if usage is not None:
            openai_usage(facts, usage)
        return output


_decode_chunk: list[Callable[[bytes], ChatChunk] | None] = [None]
"""``_openai_chunks.decode_chunk``, once the first chunk imported it."""


def _chunk_decoder() -> Callable[[bytes], ChatChunk]:
    from chainlat.httpx.providers._openai_chunks import decode_chunk

    _decode_chunk[0] = decode_chunk
    return decode_chunk


class OpenAICompletionsReader(OpenAIChatReader):
    def body(self, data: object) -> None:
        read_ids(self.facts, data)
        for index, choice in enumerate(as_list(get_path(data, "choices"))):
            self._finish(index, choice)
            if index == 0:
                self._keep_text(get_path(choice, "text"))
        openai_usage(self.facts, get_path(data, "usage"))

    def raw_event(self, name: str | None, raw: bytes) -> bool:
        # Not the chat chunk's shortcut: a completions chunk's output is its choices' text.
        return Reader.raw_event(self, name, raw)

    def event(self, name: str | None, data: object) -> bool:
        read_ids(self.facts, data)
        output = False
        for index, choice in enumerate(as_list(get_path(data, "choices"))):
            self._finish(index, choice)
            text = get_path(choice, "text")
            if text:
                output = True
                if (as_int(get_path(choice, "index")) or 0) == 0:
                    self._keep_text(text)
        openai_usage(self.facts, get_path(data, "usage"))
        return output


class OpenAIEmbeddingsReader(Reader):
    def body(self, data: object) -> None:
        self.facts.response_model = as_str(get_path(data, "model"))
        self.facts.input_tokens = as_int(get_path(data, "usage", "prompt_tokens"))


_RESPONSES_OUTPUT_EVENTS: Final = frozenset(
    {
        "response.output_text.delta",
        "response.refusal.delta",
        "response.reasoning_text.delta",
        "response.reasoning_summary_text.delta",
        "response.function_call_arguments.delta",
    }
)


class OpenAIResponsesReader(Reader):
    def body(self, data: object) -> None:
        facts = self.facts
        read_ids(facts, data)
        status = as_str(get_path(data, "status"))
        if status == "completed":
            facts.finish_reasons[0] = "stop"
        elif status is not None:
            facts.finish_reasons[0] = (
                as_str(get_path(data, "incomplete_details", "reason")) or status
            )
        openai_usage(facts, get_path(data, "usage"))
        if self._capture_chars is not None and not facts.text:
            for item in as_list(get_path(data, "output")):
                if get_path(item, "type") == "message":
                    for part in as_list(get_path(item, "content")):
                        if get_path(part, "type") == "output_text":
                            self._keep_text(get_path(part, "text"))

    def event(self, name: str | None, data: object) -> bool:
        kind = get_path(data, "type") or name
        if kind in _RESPONSES_OUTPUT_EVENTS:
            if kind == "response.output_text.delta":
                self._keep_text(get_path(data, "delta"))
            return bool(get_path(data, "delta"))
        response = get_path(data, "response")
        if isinstance(response, dict):
            self.body(response)
        if kind == "error":
            self.facts.error_type = as_str(get_path(data, "code")) or "error"
        return False


FORMATS: Final = (
    WireFormat(
        "openai_chat",
        "openai",
        chat_request,
        OpenAIChatReader,
        (DefaultRoute("/chat/completions", "chat", ("messages",)),),
    ),
    WireFormat(
        "openai_completions",
        "openai",
        completions_request,
        OpenAICompletionsReader,
        (DefaultRoute("/completions", "text_completion", ("prompt",)),),
    ),
    WireFormat(
        "openai_embeddings",
        "openai",
        embeddings_request,
        OpenAIEmbeddingsReader,
        (DefaultRoute("/embeddings", "embeddings", ("input",)),),
    ),
    WireFormat(
        "openai_responses",
        "openai",
        responses_request,
        OpenAIResponsesReader,
        (DefaultRoute("/responses", "chat", ("model",)),),
    ),
)
"""OpenAI's formats, in the order their routes are tried (``/chat/completions`` before
``/completions``, which it ends with)."""
