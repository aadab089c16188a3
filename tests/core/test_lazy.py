"""``lazy_names``: a package's names imported when first asked for, then kept as globals."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from chainlat._core.lazy import lazy_names


def test_a_name_is_imported_when_first_asked_for_and_kept() -> None:
    namespace: dict[str, Any] = {"__all__": ["dedent", "JSONDecoder"], "kept": 1}
    getattr_, dir_ = lazy_names(
        "json", {"JSONDecoder": ".decoder", "dedent": "textwrap"}, namespace
    )
    assert dir_() == ["JSONDecoder", "__all__", "dedent", "kept"]
    assert "dedent" not in namespace
    import json.decoder
    import textwrap

    assert getattr_("JSONDecoder") is json.decoder.JSONDecoder  # relative to the package
    assert getattr_("dedent") is textwrap.dedent  # absolute
    assert namespace["JSONDecoder"] is json.decoder.JSONDecoder
    assert namespace["dedent"] is textwrap.dedent


def test_an_unknown_name_raises_attribute_error_naming_the_package() -> None:
    getattr_, _ = lazy_names("some.package", {}, {})
    with pytest.raises(AttributeError, match=r"^module 'some\.package' has no attribute 'x'$"):
        getattr_("x")


def test_a_module_is_not_imported_before_its_name_is_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    getattr_, _ = lazy_names("chainlat", {"rgb_to_hsv": "colorsys"}, {})
    assert "colorsys" not in sys.modules
    assert getattr_("rgb_to_hsv")(1.0, 0.0, 0.0) == (0.0, 1.0, 1.0)
    assert "colorsys" in sys.modules
