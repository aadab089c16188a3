"""Provider wire formats, read: span attributes from request bodies, facts from responses.

Pure and stdlib-only. `request_attributes` reads a decoded request body; a `Reader`
takes a whole response body (`Reader.body`) or the events of a stream one at a time
(`Reader.event`, which says whether the event carried output: that is a *chunk* for
time to first token and time per output chunk). Byte streams are cut into events by
``_decoders``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat._core.errors import warn_once
from chainlat.httpx._routes import Format

AttributeDict = dict[str, Any]


# --- small readers over untyped JSON ------------------------------------------------------
def _get(value: object, *path: str) -> Any:
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


_MAX_TOKENS: Final = 2**63 - 1
"""The largest token count OTLP carries (a signed 64-bit integer)."""


_second: Final = itemgetter(1)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _text_of(content: object) -> str:
    """The text of a message content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (_get(p, "text") if isinstance(p, dict) else None for p in content)
        return "".join(p for p in parts if isinstance(p, str))
    return ""


class Truncator:
    """Cuts captured text to ``max_chars`` per string and remembers whether it had to."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.truncated = False

    def __call__(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        self.truncated = True
        return text[: self.max_chars]


def _messages_json(messages: list[tuple[str, str]], cut: Truncator) -> str:
    return json.dumps(
        [
            {"role": role, "parts": [{"type": "text", "content": cut(text)}]}
            for role, text in messages
        ],
        ensure_ascii=False,
    )


# --- requests -----------------------------------------------------------------------------
def request_model(body: object) -> str | None:
    """``model`` of a request body, when it names one."""
    if not isinstance(body, dict):
        return None
    model = body.get("model")
    return model if isinstance(model, str) and model else None


def request_stream(fmt: Format, body: object) -> bool:
    """Whether the request asks for a streamed answer (Ollama streams unless told not to)."""
    value = body.get("stream") if isinstance(body, dict) else None
    if fmt in ("ollama_chat", "ollama_generate"):
        return value is not False
    return value is True


_MAX_TOKENS_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "openai_chat": ("max_completion_tokens", "max_tokens"),
    "openai_completions": ("max_tokens",),
    "openai_responses": ("max_output_tokens",),
    "anthropic_messages": ("max_tokens",),
    "ollama_chat": ("num_predict",),
    "ollama_generate": ("num_predict",),
}


_NUMBER_PARAMETERS: Final = (
    (attr.GEN_AI_REQUEST_TEMPERATURE, "temperature"),
    (attr.GEN_AI_REQUEST_TOP_P, "top_p"),
    (attr.GEN_AI_REQUEST_FREQUENCY_PENALTY, "frequency_penalty"),
    (attr.GEN_AI_REQUEST_PRESENCE_PENALTY, "presence_penalty"),
)
_INT_PARAMETERS: Final = ((attr.GEN_AI_REQUEST_TOP_K, "top_k"), (attr.GEN_AI_REQUEST_SEED, "seed"))
_PARAMETER_NAMES: Final = frozenset(
    {name for names in _MAX_TOKENS_KEYS.values() for name in names}
    | {name for _, name in _NUMBER_PARAMETERS + _INT_PARAMETERS}
)


def request_attributes(
    fmt: Format, body: object, *, capture: Truncator | None = None
) -> AttributeDict:
    """``gen_ai.request.*`` attributes (and, with ``capture``, the input messages) of a body."""
    out: AttributeDict = {}
    if not isinstance(body, dict):
        return out
    if fmt != "opaque" and fmt != "openai_embeddings":
        out[attr.GEN_AI_REQUEST_STREAM] = request_stream(fmt, body)
    options = body.get("options") if fmt.startswith("ollama") else body
    if not isinstance(options, dict):
        options = {}
    # Per request, so the checks of _int and _number are written out, and skipped when
    # the body sets none of these parameters.
    if not _PARAMETER_NAMES.isdisjoint(options):
        get = options.get
        for key in _MAX_TOKENS_KEYS.get(fmt, ()):
            value = get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                out[attr.GEN_AI_REQUEST_MAX_TOKENS] = value
                break
        for key, name in _NUMBER_PARAMETERS:
            value = get(name)
            if (
                value is not None
                and isinstance(value, (int, float))
                and not isinstance(value, bool)
            ):
                out[key] = float(value)
        for key, name in _INT_PARAMETERS:
            value = get(name)
            if value is not None and isinstance(value, int) and not isinstance(value, bool):
                out[key] = value
    stop = options.get("stop_sequences" if fmt == "anthropic_messages" else "stop")
    if isinstance(stop, str):
        out[attr.GEN_AI_REQUEST_STOP_SEQUENCES] = (stop,)
    elif isinstance(stop, list) and stop and all(isinstance(s, str) for s in stop):
        out[attr.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(stop)
    count = body.get("n")
    if count is not None and _int(count) is not None and count != 1 and fmt.startswith("openai"):
        out[attr.GEN_AI_REQUEST_CHOICE_COUNT] = count
    if fmt == "openai_embeddings":
        dimensions = _int(body.get("dimensions"))
        if dimensions is not None:
            out[attr.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = dimensions
        encoding = _str(body.get("encoding_format"))
        if encoding is not None:
            out[attr.GEN_AI_REQUEST_ENCODING_FORMATS] = (encoding,)
    if capture is not None:
        out.update(_input_content(fmt, body, capture))
    return out


def _input_content(fmt: Format, body: dict[str, Any], cut: Truncator) -> AttributeDict:
    out: AttributeDict = {}
    messages: list[tuple[str, str]] = []
    if fmt in ("openai_chat", "anthropic_messages", "ollama_chat"):
        for message in _list(body.get("messages")):
            role = _str(_get(message, "role")) or "user"
            messages.append((role, _text_of(_get(message, "content"))))
    elif fmt in ("openai_completions", "ollama_generate"):
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = "".join(p for p in prompt if isinstance(p, str))
        if isinstance(prompt, str):
            messages.append(("user", prompt))
    elif fmt == "openai_responses":
        given = body.get("input")
        if isinstance(given, str):
            messages.append(("user", given))
        elif isinstance(given, list):
            for item in given:
                item_role = _str(_get(item, "role"))
                if item_role is not None:
                    messages.append((item_role, _text_of(_get(item, "content"))))
    if messages:
        out[attr.GEN_AI_INPUT_MESSAGES] = _messages_json(messages, cut)
    system: str | None = None
    if fmt == "anthropic_messages":
        system = _text_of(body.get("system"))
    elif fmt == "openai_responses":
        system = _str(body.get("instructions"))
    elif fmt == "ollama_generate":
        system = _str(body.get("system"))
    if system:
        out[attr.GEN_AI_SYSTEM_INSTRUCTIONS] = json.dumps(
            [{"type": "text", "content": cut(system)}], ensure_ascii=False
        )
    return out


# --- responses ----------------------------------------------------------------------------
_TOKEN_KEYS: Final = (
    attr.GEN_AI_USAGE_INPUT_TOKENS,
    attr.GEN_AI_USAGE_OUTPUT_TOKENS,
    attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    attr.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
    attr.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
)


@dataclass
class Facts:
    """What a response said about itself."""

    response_id: str | None = None
    response_model: str | None = None
    finish_reasons: dict[int, str] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_creation_tokens: int | None = None
    reasoning_tokens: int | None = None
    error_type: str | None = None
    """An error reported inside a successful HTTP response (a stream's ``error`` event)."""
    text: list[str] = field(default_factory=list)
    text_chars: int = 0

    def attributes(self, capture: Truncator | None) -> AttributeDict:
        out: AttributeDict = {}
        if self.response_id is not None:
            out[attr.GEN_AI_RESPONSE_ID] = self.response_id
        if self.response_model is not None:
            out[attr.GEN_AI_RESPONSE_MODEL] = self.response_model
        if self.finish_reasons:
            out[attr.GEN_AI_RESPONSE_FINISH_REASONS] = tuple(
                map(_second, sorted(self.finish_reasons.items()))
            )
        counts = (
            self.input_tokens,
            self.output_tokens,
            self.cache_read_tokens,
            self.cache_creation_tokens,
            self.reasoning_tokens,
        )
        for key, value in zip(_TOKEN_KEYS, counts, strict=True):
            if value is not None:
                if 0 <= value <= _MAX_TOKENS:
                    out[key] = value
                else:  # a negative count would make the cost come out low
                    warn_once(
                        f"response.{key}", "chainlat: %s=%d in a response; not recorded", key, value
                    )
        if capture is not None and (self.text or self.finish_reasons):
            message: dict[str, Any] = {
                "role": "assistant",
                "parts": [{"type": "text", "content": capture("".join(self.text))}],
            }
            if self.finish_reasons:
                message["finish_reason"] = self.finish_reasons[min(self.finish_reasons)]
            out[attr.GEN_AI_OUTPUT_MESSAGES] = json.dumps([message], ensure_ascii=False)
        return out


class Reader:
    """Reads one provider's responses into `Facts`; subclasses per format."""

    def __init__(self, capture_chars: int | None) -> None:
        self.facts = Facts()
        self._capture_chars = capture_chars

    def _keep_text(self, text: object) -> None:
        # Only with capture on, and never more than the limit: a long stream stays cheap.
        limit = self._capture_chars
        if limit is None or not isinstance(text, str) or self.facts.text_chars > limit:
            return
        self.facts.text.append(text)
        self.facts.text_chars += len(text)

    def body(self, data: object) -> None:
        """A whole (not streamed) response body."""

    def event(self, name: str | None, data: object) -> bool:
        """One stream event (``name`` is the SSE ``event:`` field); True if it carried output."""
        return False


def _openai_usage(facts: Facts, usage: object) -> None:
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


def _ids(facts: Facts, data: object) -> None:
    if not isinstance(data, dict):
        return
    value = data.get("id")
    if isinstance(value, str) and value:
        facts.response_id = value
    value = data.get("model")
    if isinstance(value, str) and value:
        facts.response_model = value


class OpenAIChatReader(Reader):
    def body(self, data: object) -> None:
        if not isinstance(data, dict):
            return  # nothing to read (as each look-up below would find)
        _ids(self.facts, data)
        for index, choice in enumerate(_list(data.get("choices"))):
            self._finish(index, choice)
            if index == 0 and self._capture_chars is not None:
                self._keep_text(_get(choice, "message", "content"))
        _openai_usage(self.facts, data.get("usage"))

    def _finish(self, index: int, choice: object) -> None:
        if not isinstance(choice, dict):
            return
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason:
            self.facts.finish_reasons[_int(choice.get("index")) or index] = reason

    def event(self, name: str | None, data: object) -> bool:
        # Runs once per streamed chunk: the readers above, unrolled (one look-up per field).
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
            _openai_usage(facts, usage)
        return output


class OpenAICompletionsReader(OpenAIChatReader):
    def body(self, data: object) -> None:
        _ids(self.facts, data)
        for index, choice in enumerate(_list(_get(data, "choices"))):
            self._finish(index, choice)
            if index == 0:
                self._keep_text(_get(choice, "text"))
        _openai_usage(self.facts, _get(data, "usage"))

    def event(self, name: str | None, data: object) -> bool:
        _ids(self.facts, data)
        output = False
        for index, choice in enumerate(_list(_get(data, "choices"))):
            self._finish(index, choice)
            text = _get(choice, "text")
            if text:
                output = True
                if (_int(_get(choice, "index")) or 0) == 0:
                    self._keep_text(text)
        _openai_usage(self.facts, _get(data, "usage"))
        return output


class OpenAIEmbeddingsReader(Reader):
    def body(self, data: object) -> None:
        self.facts.response_model = _str(_get(data, "model"))
        self.facts.input_tokens = _int(_get(data, "usage", "prompt_tokens"))


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
        _ids(facts, data)
        status = _str(_get(data, "status"))
        if status == "completed":
            facts.finish_reasons[0] = "stop"
        elif status is not None:
            facts.finish_reasons[0] = _str(_get(data, "incomplete_details", "reason")) or status
        _openai_usage(facts, _get(data, "usage"))
        if self._capture_chars is not None and not facts.text:
            for item in _list(_get(data, "output")):
                if _get(item, "type") == "message":
                    for part in _list(_get(item, "content")):
                        if _get(part, "type") == "output_text":
                            self._keep_text(_get(part, "text"))

    def event(self, name: str | None, data: object) -> bool:
        kind = _get(data, "type") or name
        if kind in _RESPONSES_OUTPUT_EVENTS:
            if kind == "response.output_text.delta":
                self._keep_text(_get(data, "delta"))
            return bool(_get(data, "delta"))
        response = _get(data, "response")
        if isinstance(response, dict):
            self.body(response)
        if kind == "error":
            self.facts.error_type = _str(_get(data, "code")) or "error"
        return False


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
            value = _int(usage.get(name))
            if value is not None:
                setattr(facts, key, value)
        uncached = _int(usage.get("input_tokens"))
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
        _ids(self.facts, data)
        reason = _str(_get(data, "stop_reason"))
        if reason is not None:
            self.facts.finish_reasons[0] = reason
        for part in _list(_get(data, "content")):
            if _get(part, "type") == "text":
                self._keep_text(_get(part, "text"))
        self._usage(_get(data, "usage"))

    def event(self, name: str | None, data: object) -> bool:
        kind = _get(data, "type") or name
        if kind == "content_block_delta":
            delta = _get(data, "delta")
            if _get(delta, "type") == "text_delta":
                self._keep_text(_get(delta, "text"))
            return any(_get(delta, k) for k in ("text", "partial_json", "thinking"))
        if kind == "message_start":
            message = _get(data, "message")
            _ids(self.facts, message)
            self._usage(_get(message, "usage"))
        elif kind == "message_delta":
            reason = _str(_get(data, "delta", "stop_reason"))
            if reason is not None:
                self.facts.finish_reasons[0] = reason
            self._usage(_get(data, "usage"))
        elif kind == "error":
            self.facts.error_type = _str(_get(data, "error", "type")) or "error"
        return False


class OllamaReader(Reader):
    def __init__(self, capture_chars: int | None, key: str) -> None:
        super().__init__(capture_chars)
        self._key = key  # "message" (chat) or "response" (generate)

    def _text(self, data: object) -> object:
        return (
            _get(data, "message", "content") if self._key == "message" else _get(data, "response")
        )

    def _final(self, data: object) -> None:
        facts = self.facts
        facts.response_model = _str(_get(data, "model")) or facts.response_model
        if _get(data, "done") is True:
            facts.finish_reasons[0] = _str(_get(data, "done_reason")) or "stop"
            facts.input_tokens = _int(_get(data, "prompt_eval_count"))
            facts.output_tokens = _int(_get(data, "eval_count"))
        error = _str(_get(data, "error"))
        if error is not None:
            facts.error_type = "error"

    def body(self, data: object) -> None:
        self._keep_text(self._text(data))
        self._final(data)

    def event(self, name: str | None, data: object) -> bool:
        text = self._text(data)
        self._keep_text(text)
        self._final(data)
        return bool(text) or bool(_get(data, "message", "tool_calls"))


def reader_for(fmt: Format, capture_chars: int | None) -> Reader:
    """A fresh reader for one response in ``fmt``."""
    if fmt == "openai_chat":
        return OpenAIChatReader(capture_chars)
    if fmt == "openai_completions":
        return OpenAICompletionsReader(capture_chars)
    if fmt == "openai_embeddings":
        return OpenAIEmbeddingsReader(capture_chars)
    if fmt == "openai_responses":
        return OpenAIResponsesReader(capture_chars)
    if fmt == "anthropic_messages":
        return AnthropicReader(capture_chars)
    if fmt == "ollama_chat":
        return OllamaReader(capture_chars, "message")
    if fmt == "ollama_generate":
        return OllamaReader(capture_chars, "response")
    return Reader(capture_chars)
