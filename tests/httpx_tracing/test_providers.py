"""The provider wire formats' registry (chainlat.httpx.providers): one entry per format."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import get_args

import chainlat.httpx
from chainlat.httpx import DEFAULT_ROUTES, Route
from chainlat.httpx._formats import reader_for, request_attributes
from chainlat.httpx._routes import provider_for
from chainlat.httpx.providers import OPAQUE, WIRE_FORMATS, Format, wire_format


def test_every_format_a_route_can_name_is_in_the_registry() -> None:
    """The ``Format`` type and the registry name the same formats."""
    assert set(get_args(Format)) == set(WIRE_FORMATS)


def test_each_entry_is_filed_under_its_own_name() -> None:
    assert all(name == wire.name for name, wire in WIRE_FORMATS.items())


def test_the_default_routes_are_the_formats_own_in_the_registrys_order() -> None:
    """A format brings its routes: DEFAULT_ROUTES is made of them, nothing else."""
    expected = [(r.path, wire.name) for wire in WIRE_FORMATS.values() for r in wire.routes]
    assert [(r.path, r.format) for r in DEFAULT_ROUTES] == expected
    paths = [r.path for r in DEFAULT_ROUTES]
    # /chat/completions ends with /completions: it must be tried first.
    assert paths.index("/chat/completions") < paths.index("/completions")


def test_a_name_the_registry_does_not_hold_is_read_as_opaque() -> None:
    assert wire_format("acme_rpc") is OPAQUE
    body = {"model": "m", "temperature": 0.5, "stream": True}
    assert request_attributes("acme_rpc", body) == request_attributes("opaque", body)  # type: ignore[arg-type]
    assert type(reader_for("acme_rpc", None)) is type(reader_for("opaque", None))  # type: ignore[arg-type]


def test_a_routes_provider_falls_back_to_its_formats() -> None:
    """On an unknown host a route without a provider is named by its wire format's."""
    for name, wire in WIRE_FORMATS.items():
        route = Route("/x", format=name)  # type: ignore[arg-type]
        assert provider_for(route, "llm.internal") == wire.provider
    assert {wire.provider for wire in WIRE_FORMATS.values()} == {"openai", "anthropic", "ollama"}


def test_the_transport_and_the_routes_never_branch_on_a_formats_name() -> None:
    """No format's name is spelled in _call.py or _routes.py: they ask the registry."""
    package = Path(chainlat.httpx.__file__).parent
    for name in ("_call.py", "_routes.py"):
        tree = ast.parse((package / name).read_text())
        spelled = {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        # The routes' default format is the one exception: a Route's field default.
        allowed = {"openai_chat"} if name == "_routes.py" else set()
        assert spelled & set(WIRE_FORMATS) == allowed, name
