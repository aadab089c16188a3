"""Which HTTP requests are model calls, by their URL alone: the wire in any language.

``chainlat.instrument_httpx()`` recognises a model call by its route and its body
(``chainlat.httpx._routes``). A trace written by another program has no body to read, but
any HTTP instrumentation of OpenTelemetry's HTTP conventions (Node's undici and http, Go's
net/http, Java's, Python's httpx and requests) writes the request's method and URL on a
CLIENT span: :func:`model_operation` finds the model route among them, so that span is the
wire-level twin of the framework's model call, and times it as chainlat's own wire span does
(docs/attributes.md, rule 14).

The table is the path half of ``chainlat.httpx._routes.DEFAULT_ROUTES`` (a test holds the
two together): a route's path ends the URL's path on whole segments, so a proxy's prefix
(``/openai/v1/chat/completions``) still matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final
from urllib.parse import urlsplit

from chainlat._core.attributes import HTTP_METHOD, HTTP_REQUEST_METHOD, HTTP_URL, URL_FULL

MODEL_ROUTES: Final[tuple[tuple[str, str], ...]] = (
    ("/chat/completions", "chat"),
    ("/completions", "text_completion"),
    ("/embeddings", "embeddings"),
    ("/responses", "chat"),
    ("/v1/messages", "chat"),
    ("/api/chat", "chat"),
    ("/api/generate", "text_completion"),
    ("/audio/transcriptions", "speech_to_text"),
    ("/audio/translations", "speech_to_text"),
    ("/audio/speech", "text_to_speech"),
)
"""(path suffix, ``gen_ai.operation.name``) of every POST route a model server answers: the
OpenAI-compatible ones, Anthropic's Messages, Ollama's chat and generate, the audio routes."""

METHOD_KEYS: Final = (HTTP_REQUEST_METHOD, HTTP_METHOD)
URL_KEYS: Final = (URL_FULL, HTTP_URL)
"""Where an HTTP client span's URL is: the stable conventions' key, then the older one. Only
a client span writes the full URL (a server span writes ``url.path`` or ``http.target``), so
a model server's own spans in the same trace are not taken for the client's call."""


def model_operation(attributes: Mapping[str, object]) -> str | None:
    """The model call an HTTP client span made, as its ``gen_ai.operation.name``; None
    when the span is no POST to a model route (or no HTTP span at all).

    Example:
        >>> model_operation({"http.request.method": "POST",
        ...                  "url.full": "http://127.0.0.1:8000/v1/chat/completions"})
        'chat'
    """
    method = attributes.get(HTTP_REQUEST_METHOD)
    if method is None:
        method = attributes.get(HTTP_METHOD)
    if method != "POST":
        return None
    for key in URL_KEYS:
        value = attributes.get(key)
        if isinstance(value, str) and value:
            return _operation_of_path(_path_of(value))
    return None


def _path_of(url: str) -> str:
    """The path of a full URL."""
    try:
        return urlsplit(url).path
    except ValueError:  # a malformed URL (an unclosed IPv6 bracket): no route
        return ""


def _operation_of_path(path: str) -> str | None:
    # Each suffix starts with "/", so it matches whole segments; the table's order puts
    # /chat/completions before /completions.
    path = path.rstrip("/")
    for suffix, operation in MODEL_ROUTES:
        if path.endswith(suffix):
            return operation
    return None
