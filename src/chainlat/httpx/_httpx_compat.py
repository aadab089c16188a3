"""Every private name of httpx (and of the model SDKs' clients) the instrumentation uses.

Checked on httpx 0.27.0 (the declared floor) and 0.29.0, httpx2 2.17.0, openai 1.40.0 and
3.63.0, anthropic 2.17.0. Each accessor answers "not what we expected" (None) rather than
fail when a name is missing, so that the instrumentation takes the public path instead;
the OpenTelemetry names live in ``chainlat._runtime.otel_compat``.
"""

from __future__ import annotations

from typing import Any


def header_triples(headers: Any) -> list[tuple[bytes, bytes, bytes]] | None:
    """The (name, lower-case name, value) triples an httpx ``Headers`` keeps, to read (and
    append to) without its per-call copies; None for anything else.

    ``Headers._list``: such triples in httpx 0.27.0, 0.29.0 and httpx2 2.17.0.
    """
    triples = getattr(headers, "_list", None)
    if type(triples) is list and (not triples or len(triples[0]) == 3):
        return triples
    return None


def held_client(client: object) -> object:
    """The HTTP client a model SDK's client holds (``_client`` of openai 1.40.0 and 3.63.0,
    anthropic 2.17.0: an httpx client or the SDK's subclass of one), or None."""
    return getattr(client, "_client", None)


def transports(client: Any) -> tuple[Any, dict[Any, Any]]:
    """An httpx client's transport and its mounts (URL pattern -> transport or None):
    ``Client._transport`` and ``Client._mounts`` (the same for ``AsyncClient``) in httpx
    0.27.0, 0.29.0 and httpx2 2.17.0, read on every request, so replacing them wraps
    every request the client sends."""
    return client._transport, dict(client._mounts)


def set_transports(client: Any, transport: Any, mounts: dict[Any, Any]) -> None:
    """Replace an httpx client's transport and mounts (see :func:`transports`)."""
    client._transport = transport
    client._mounts = mounts
