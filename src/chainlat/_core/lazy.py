"""Names a package exports but imports when first asked for (a module ``__getattr__``, PEP
562): how ``chainlat``, ``chainlat.budgets`` and ``chainlat.report`` keep a heavy module (the
OpenTelemetry SDK, pydantic, the HTML page) off their own import."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(
    package: str, modules: Mapping[str, str], namespace: dict[str, Any]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose globals are ``namespace``.

    Each name of ``modules`` is imported from its module (relative to ``package`` when it
    starts with a dot) when first asked for, and kept in ``namespace``, so that later reads
    are plain global reads. ``__dir__`` lists the globals and ``__all__``.
    """

    def lazy_getattr(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        namespace[name] = value
        return value

    def lazy_dir() -> list[str]:
        return sorted({*namespace, *namespace.get("__all__", ())})

    return lazy_getattr, lazy_dir
