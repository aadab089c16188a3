"""What every provider wire format is made of: its entry in the registry and its reading tools.

Pure and stdlib-only (JSON is decoded by msgspec, imported on the first body). A
`WireFormat` is one way of writing a model call on the wire (OpenAI's chat completions,
Anthropic's messages, ...): how its request body becomes span attributes, and a `Reader`
for its answer, which takes a whole response body (`Reader.body`) or the events of a
stream one at a time (`Reader.raw_event`, the event's bytes, decoded for `Reader.event`,
which says whether the event carried output: that is a *chunk* for time to first token
and time per output chunk). Byte streams are cut into events by ``_decoders``. Each
format lives in a module of :mod:`chainlat.httpx.providers`, which lists them all by name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Final

from chainlat._core import attributes as attr
from chainlat._core.errors import warn_once

AttributeDict = dict[str, Any]


# --- small readers over untyped JSON ------------------------------------------------------
_decode: Callable[[bytes], Any] | None = None


def loads(raw: bytes) -> Any:
    """``raw`` decoded as JSON; None when it is not JSON."""
    global _decode
    if _decode is None:
        import msgspec  # on the first body: `import chainlat` does not pay for it

        _decode = msgspec.json.decode
    try:
        # msgspec decodes in a fraction of json.loads' time; what it refuses (NaN, a
        # UTF-16 body, a lone surrogate) json.loads still gets, as before.
        return _decode(raw)
    except Exception:
        pass
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None  # "[DONE]", keep-alive comments and anything else that is not JSON


def get_path(value: object, *path: str) -> Any:
    """``value[path[0]][path[1]]...``; None where a step is no object."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


_MAX_TOKENS: Final = 2**63 - 1
"""The largest token count OTLP carries (a signed 64-bit integer)."""


_second: Final = itemgetter(1)


def as_int(value: object) -> int | None:
    """``value`` if it is an int (a bool is not), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def as_list(value: object) -> list[Any]:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: object) -> str | None:
    """``value`` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def text_of(content: object) -> str:
    """The text of a message content: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = (get_path(p, "text") if isinstance(p, dict) else None for p in content)
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


# --- requests -----------------------------------------------------------------------------
def request_model(body: object) -> str | None:
    """``model`` of a request body, when it names one."""
    if not isinstance(body, dict):
        return None
    model = body.get("model")
    return model if isinstance(model, str) and model else None


_NUMBER_PARAMETERS: Final = (
    (attr.GEN_AI_REQUEST_TEMPERATURE, "temperature"),
    (attr.GEN_AI_REQUEST_TOP_P, "top_p"),
    (attr.GEN_AI_REQUEST_FREQUENCY_PENALTY, "frequency_penalty"),
    (attr.GEN_AI_REQUEST_PRESENCE_PENALTY, "presence_penalty"),
)
_INT_PARAMETERS: Final = ((attr.GEN_AI_REQUEST_TOP_K, "top_k"), (attr.GEN_AI_REQUEST_SEED, "seed"))


@dataclass(frozen=True)
class Parameters:
    """Where one wire format writes its sampling parameters, and how they are read.

    Attributes:
        max_tokens: The keys of the output-token limit, the first present winning.
        stop: The key of the stop sequences.
        options: The key of the object holding the parameters (Ollama's ``options``);
            None when they sit in the body itself.
        choice_count: The body's ``n`` is the number of choices (OpenAI's formats).
    """

    max_tokens: tuple[str, ...] = ()
    stop: str = "stop"
    options: str | None = None
    choice_count: bool = False
    names: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = {name for _, name in _NUMBER_PARAMETERS + _INT_PARAMETERS}
        object.__setattr__(self, "names", frozenset(names | set(self.max_tokens)))

    def read(self, body: dict[str, Any], out: AttributeDict) -> None:
        """Add the ``gen_ai.request.*`` parameters ``body`` sets to ``out``."""
        options = body if self.options is None else body.get(self.options)
        if not isinstance(options, dict):
            options = {}
        # Per request, so the checks of as_int are written out, and skipped when the body
        # sets none of these parameters.
        if not self.names.isdisjoint(options):
            get = options.get
            for key in self.max_tokens:
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
        stop = options.get(self.stop)
        if isinstance(stop, str):
            out[attr.GEN_AI_REQUEST_STOP_SEQUENCES] = (stop,)
        elif isinstance(stop, list) and stop and all(isinstance(s, str) for s in stop):
            out[attr.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(stop)
        if self.choice_count:
            count = body.get("n")
            if count is not None and as_int(count) is not None and count != 1:
                out[attr.GEN_AI_REQUEST_CHOICE_COUNT] = count


def messages_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of a body's ``messages`` list (a role missing is the user's)."""
    messages: list[tuple[str, str]] = []
    for message in as_list(body.get("messages")):
        role = as_str(get_path(message, "role")) or "user"
        messages.append((role, text_of(get_path(message, "content"))))
    return messages


def prompt_of(body: dict[str, Any]) -> list[tuple[str, str]]:
    """A body's ``prompt`` (a string, or a list of strings joined) as one user message."""
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        prompt = "".join(p for p in prompt if isinstance(p, str))
    return [("user", prompt)] if isinstance(prompt, str) else []


def content_attributes(
    messages: list[tuple[str, str]], system: str | None, cut: Truncator
) -> AttributeDict:
    """The captured input: ``gen_ai.input.messages`` and ``gen_ai.system_instructions``."""
    out: AttributeDict = {}
    if messages:
        out[attr.GEN_AI_INPUT_MESSAGES] = json.dumps(
            [
                {"role": role, "parts": [{"type": "text", "content": cut(text)}]}
                for role, text in messages
            ],
            ensure_ascii=False,
        )
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


def read_ids(facts: Facts, data: object) -> None:
    """A response's ``id`` and ``model``, when it names them."""
    if not isinstance(data, dict):
        return
    value = data.get("id")
    if isinstance(value, str) and value:
        facts.response_id = value
    value = data.get("model")
    if isinstance(value, str) and value:
        facts.response_model = value


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

    def raw_event(self, name: str | None, raw: bytes) -> bool:
        """One stream event as its bytes (an SSE event's data, an NDJSON line): decoded as
        JSON and given to `event`; not JSON (``[DONE]``, a keep-alive) or ``null``, no event.

        The transport calls this one; a format whose chunks can be read for less than a
        whole decode overrides it, and reads every event exactly as `event` would.
        """
        data = loads(raw)
        return data is not None and self.event(name, data)

    def output_bytes(self, count: int) -> None:
        """``count`` more bytes of output arrived as the raw body (a `WireFormat.raw_output`)."""


# --- the entry of one format in the registry ----------------------------------------------
RequestReader = Callable[[dict[str, Any], "Truncator | None"], AttributeDict]
"""A request body (a JSON object, or a form's text fields) -> its span attributes; with a
`Truncator`, the captured input too."""


@dataclass(frozen=True)
class DefaultRoute:
    """A route `chainlat.instrument_httpx()` matches for a format by default (see ``Route``)."""

    path: str
    operation: str
    requires: tuple[str, ...] = ()
    provider: str | None = None


@dataclass(frozen=True)
class WireFormat:
    """One provider wire format: its name in a ``Route``, and how its calls are read.

    Attributes:
        name: The ``Route.format`` that picks it.
        provider: ``gen_ai.provider.name`` when neither the route nor the host names one.
        request: The request's span attributes, from its decoded JSON object (or form).
        reader: A fresh `Reader` for one answer, given how many characters to capture
            (None: capture is off).
        routes: The routes matched by default, tried in this order (after the user's).
        content_never_recorded: The request's content is never captured (the audio routes'
            audio and text to speak): ``request`` is called without a `Truncator`, also
            for a body that is not an object (read as an empty one), and never marked unread.
        read_form: The request is a multipart form: its text fields, read from the request
            without its files, are the body `request` reads.
        raw_output: An answer that is not JSON is output bytes (audio), each chunk timed
            and counted by `Reader.output_bytes`.
    """

    name: str
    provider: str
    request: RequestReader
    reader: Callable[[int | None], Reader]
    routes: tuple[DefaultRoute, ...] = ()
    content_never_recorded: bool = False
    read_form: Callable[[Any], dict[str, str]] | None = None
    raw_output: bool = False
