"""A wire format's two readings asked by its name: a request body's attributes, an answer's reader.

The formats themselves are in :mod:`chainlat.httpx.providers` (one module per provider's
API) and what they are made of in :mod:`chainlat.httpx._wire`; these functions put the
registry's look-up and the request body's check in front of them.
"""

from __future__ import annotations

from chainlat.httpx._wire import AttributeDict, Reader, Truncator
from chainlat.httpx.providers import Format, wire_format

__all__ = ["Reader", "Truncator", "reader_for", "request_attributes"]


def request_attributes(
    fmt: Format, body: object, *, capture: Truncator | None = None
) -> AttributeDict:
    """``gen_ai.request.*`` attributes (and, with ``capture``, the input messages) of a body."""
    if not isinstance(body, dict):
        return {}
    wire = wire_format(fmt)
    return wire.request(body, None if wire.content_never_recorded else capture)


def reader_for(fmt: Format, capture_chars: int | None) -> Reader:
    """A fresh reader for one response in ``fmt``."""
    return wire_format(fmt).reader(capture_chars)
