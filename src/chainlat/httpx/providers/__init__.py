"""The provider wire formats chainlat reads, by name: one module per provider's API.

Each module (`openai_api`, `anthropic_api`, `ollama_api`, `openai_audio`) holds its
formats' request reading, their answer and stream readers and their default routes, and
lists them in its ``FORMATS``, a tuple of `chainlat.httpx._wire.WireFormat`.
`WIRE_FORMATS` gathers them by name: a ``Route`` picks one by its ``format``, and the
transport asks the registry (through `wire_format`) and never branches on a format's name.

To read another provider's API: write its module here (a request reader, a ``Reader``
subclass, a ``FORMATS`` tuple), add its ``FORMATS`` to `WIRE_FORMATS` below and its name to
`Format`; ``tests/httpx_tracing/test_providers.py`` holds the two together, and
``chainlat._core.model_routes`` to the routes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from chainlat.httpx._wire import AttributeDict, Parameters, Reader, Truncator, WireFormat
from chainlat.httpx.providers import anthropic_api, ollama_api, openai_api, openai_audio

Format = Literal[
    "openai_chat",
    "openai_completions",
    "openai_embeddings",
    "openai_responses",
    "anthropic_messages",
    "ollama_chat",
    "ollama_generate",
    "openai_transcriptions",
    "openai_speech",
    "opaque",
]
"""How request and response bodies are read; ``opaque`` reads only ``model`` from the request."""

_OPAQUE_PARAMETERS: Final = Parameters()


def _opaque_request(body: dict[str, Any], capture: Truncator | None) -> AttributeDict:
    out: AttributeDict = {}
    _OPAQUE_PARAMETERS.read(body, out)
    return out


OPAQUE: Final = WireFormat("opaque", "openai", _opaque_request, Reader)
"""An API chainlat does not know: the request's ``model`` and sampling parameters, no
answer read (a name not in the registry is read this way too)."""

WIRE_FORMATS: Final[Mapping[str, WireFormat]] = {
    wire.name: wire
    for wire in (
        *openai_api.FORMATS,
        *anthropic_api.FORMATS,
        *ollama_api.FORMATS,
        *openai_audio.FORMATS,
        OPAQUE,
    )
}
"""Every wire format by name, in the order their default routes are tried."""


def wire_format(name: str) -> WireFormat:
    """The wire format called ``name``; `OPAQUE` for a name the registry does not hold."""
    return WIRE_FORMATS.get(name, OPAQUE)
