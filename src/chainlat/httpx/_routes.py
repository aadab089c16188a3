"""Which HTTP requests are model calls: routes, the request view matchers see, providers by host.

Pure and stdlib-only; the transports in ``chainlat.httpx`` build a `RequestInfo` from an
httpx (or httpx2) request and ask each matcher in turn. A `Route` is itself a matcher.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast

from chainlat.httpx._wire import loads
from chainlat.httpx.providers import WIRE_FORMATS, Format, wire_format

__all__ = [
    "DEFAULT_ROUTES",
    "MAX_BODY_BYTES",
    "SNIFF_BYTES",
    "Format",
    "Matcher",
    "RequestInfo",
    "Route",
    "loads",
    "match",
    "provider_for",
    "sniff_model",
]

MAX_BODY_BYTES: Final = 8 * 1024 * 1024
"""Request and response bodies above this size are not parsed (the call is still traced)."""

SNIFF_BYTES: Final = 64 * 1024
"""How much of each end of an unparsed request body is searched for its ``model``."""

# A top-level "model" key is usually near one end: first when the body is written by
# hand, after the messages when an SDK builds it. Inside a JSON string the quotes are
# escaped, so prompt text cannot fake the key; a nested object named "model" can.
_MODEL_KEY: Final = re.compile(rb'"model"\s*:\s*"((?:[^"\\]|\\.){1,256})"')

_NOT_LOADED: Final = object()


class RequestInfo:
    """What a matcher sees of one outgoing request; credentials and headers are left out.

    Attributes:
        method: ``POST``, ``GET``, ...
        scheme: ``https`` or ``http``.
        host: The host name, lower case.
        port: The port, the scheme's default when the URL has none.
        path: The URL path, without the query string.
    """

    __slots__ = ("_body", "_load", "_raw", "host", "method", "path", "port", "scheme")

    def __init__(
        self,
        method: str,
        scheme: str,
        host: str,
        port: int,
        path: str,
        load_body: Callable[[], bytes | None],
    ) -> None:
        self.method = method
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
        self._load = load_body
        self._raw: object = _NOT_LOADED
        self._body: object = _NOT_LOADED

    @property
    def raw_body(self) -> bytes | None:
        """The request body's bytes; None when absent or streamed."""
        if self._raw is _NOT_LOADED:
            self._raw = self._load()
        return self._raw  # type: ignore[return-value]

    @property
    def too_large(self) -> bool:
        """The body is over `MAX_BODY_BYTES`: it is not decoded, and ``body`` is None."""
        raw = self.raw_body
        return raw is not None and len(raw) > MAX_BODY_BYTES

    @property
    def body(self) -> Any:
        """The request body decoded as JSON; None when absent, streamed, too large or not JSON.

        Decoded at most once, on first use: a request no route matches is never parsed.
        """
        if self._body is _NOT_LOADED:
            self._body = _decode_json(self.raw_body)
        return self._body

    def __repr__(self) -> str:
        return f"RequestInfo({self.method} {self.scheme}://{self.host}:{self.port}{self.path})"


def _decode_json(raw: bytes | None) -> Any:
    if not raw or len(raw) > MAX_BODY_BYTES:
        return None
    return loads(raw)


def sniff_model(raw: bytes) -> str | None:
    """``model`` of a body too large to decode, from a search of its first and last bytes."""
    for part in (raw[:SNIFF_BYTES], raw[-SNIFF_BYTES:]):
        found = _MODEL_KEY.search(part)
        if found is not None:
            try:
                model = json.loads(b'"' + found.group(1) + b'"')
            except (ValueError, UnicodeDecodeError):
                return None
            return model if isinstance(model, str) and model else None
    return None


@dataclass(frozen=True)
class Route:
    """A kind of model call, recognised by the URL path (and optionally host and body keys).

    A route is a matcher: calling it with a `RequestInfo` returns the route when the
    request is a ``method`` request whose path ends with ``path`` (whole segments), on
    ``host`` when one is given, with a JSON object body holding every key in ``requires``.

    Example::

        chainlat.instrument_httpx(matchers=[
            Route("/llm/v2/chat", operation="chat", provider="acme", format="openai_chat"),
        ])

    Attributes:
        path: Path suffix such as ``/chat/completions``; a proxy prefix before it still matches.
        operation: ``gen_ai.operation.name``: ``chat``, ``text_completion``, ``embeddings``, ...
        provider: ``gen_ai.provider.name``; None guesses it from the host (``openai`` when unknown).
        format: How request and response bodies are read.
        host: Match only this host (case-insensitive); None matches any.
        requires: Keys the JSON body must hold, so that look-alike routes are not traced;
            not checked on a body over `MAX_BODY_BYTES`, which is not decoded.
        method: The HTTP method.
    """

    path: str
    operation: str = "chat"
    provider: str | None = None
    format: Format = "openai_chat"
    host: str | None = None
    requires: tuple[str, ...] = ()
    method: str = "POST"

    def __call__(self, request: RequestInfo) -> Route | None:
        if request.method != self.method or not request.path.endswith(self.path):
            return None
        if self.host is not None and request.host != self.host.lower():
            return None
        if self.requires and not request.too_large:
            # A body too large to decode cheaply is a model call on its route alone:
            # dropping the span of the biggest, slowest calls would be the worse mistake.
            body = request.body
            if not isinstance(body, dict) or not all(map(body.__contains__, self.requires)):
                return None
        return self


Matcher = Callable[[RequestInfo], "Route | None"]
"""Anything that says whether a request is a model call: a `Route`, or a function of your own."""

DEFAULT_ROUTES: Final[tuple[Route, ...]] = tuple(
    Route(r.path, r.operation, r.provider, format=cast("Format", wire.name), requires=r.requires)
    for wire in WIRE_FORMATS.values()
    for r in wire.routes
)
"""OpenAI-compatible, Anthropic and Ollama routes, tried after the user's matchers: each wire
format's own (``chainlat.httpx.providers``), in the registry's order."""

_PROVIDERS_BY_HOST: Final[Mapping[str, str]] = {
    "api.openai.com": "openai",
    "api.anthropic.com": "anthropic",
    "api.groq.com": "groq",
    "api.deepseek.com": "deepseek",
    "api.mistral.ai": "mistral_ai",
    "api.x.ai": "x_ai",
    "api.perplexity.ai": "perplexity",
    "api.moonshot.ai": "moonshot_ai",
    "generativelanguage.googleapis.com": "gcp.gemini",
}
_PROVIDERS_BY_SUFFIX: Final = ((".openai.azure.com", "azure.ai.openai"),)


def provider_for(route: Route, host: str) -> str:
    """``gen_ai.provider.name``: the route's own, else from the host, else the wire format's."""
    if route.provider is not None:
        return route.provider
    known = _PROVIDERS_BY_HOST.get(host)
    if known is not None:
        return known
    for suffix, name in _PROVIDERS_BY_SUFFIX:
        if host.endswith(suffix):
            return name
    return wire_format(route.format).provider


def match(matchers: Sequence[Matcher], request: RequestInfo) -> Route | None:
    """The first route a matcher returns for ``request``, or None."""
    for matcher in matchers:
        found = matcher(request)
        if found is not None:
            return found
    return None
