"""Imports across the package's rooms that reach past a room's door.

A room is a top-level part of ``chainlat`` (``_core``, ``_runtime``, ``traces``, ``cli``,
...; a top-level module such as ``testing.py`` is a room of its own). A name that starts
with ``_`` belongs to its module: no other module imports it or reaches it as an attribute
of that module (``spans._start_detached``, ``_parse.any_value``); a private member of an
object (``handle._finish``) stays inside the room that defines it. A module whose name
starts with ``_`` belongs to its room: other rooms do not import it (``chainlat.traces._parse``).
``_core`` and ``_runtime`` are rooms whose modules are their doors: the underscore says they
are not the public API, not that other rooms may not use them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "chainlat"


@dataclass(frozen=True)
class Reach:
    file: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}"


def _module_name(path: Path, package: Path) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _past_the_door(module: str, room: str) -> str | None:
    """The private part of ``module`` seen from ``room``, if any."""
    parts = module.split(".")
    if parts[0] != "chainlat" or len(parts) < 2 or parts[1] == room:
        return None
    for part in parts[2:]:
        if _private(part):
            return part
    return None


def _is_module(name: str, package: Path) -> bool:
    base = package.parent.joinpath(*name.split("."))
    return base.with_suffix(".py").exists() or (base / "__init__.py").exists()


_NAMEDTUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make"})


def _outside(node: ast.expr) -> bool:
    """An object of another library (``sys._getframe``): not a door of ours."""
    return isinstance(node, ast.Name) and node.id in _OUTSIDE_MODULES


_OUTSIDE_MODULES = frozenset({"sys", "os", "threading", "asyncio", "gc", "inspect", "types"})


def _is_self(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def _defined(tree: ast.Module) -> set[str]:
    """Every name the module defines or assigns, at any depth (its own private members)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries
    return names


def _room_defined(package: Path, room: str) -> set[str]:
    """The names the modules of a room define: a private member of an object of one module
    of the room may be used by another module of it (a handle's ``_finish`` by the room's
    door); other rooms get at it only through that door."""
    base = package / room
    paths = sorted(base.rglob("*.py")) if base.is_dir() else [package / f"{room}.py"]
    names: set[str] = set()
    for path in paths:
        if path.exists():
            names |= _defined(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return names


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def reaches(package: Path = PACKAGE) -> list[Reach]:
    """Every import or attribute use in ``package`` that passes another room's door."""
    found: list[Reach] = []
    for path in sorted(package.rglob("*.py")):
        module = _module_name(path, package)
        room = _room(module)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        foreign: dict[str, str] = {}  # local name -> what another module it names
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if (part := _past_the_door(alias.name, room)) is not None:
                        found.append(Reach(path, node.lineno, f"imports {alias.name} ({part})"))
                    if alias.asname and alias.name.startswith("chainlat."):
                        foreign[alias.asname] = alias.name
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(node, module, path.name == "__init__.py")
                if not source.startswith("chainlat"):
                    continue
                if (part := _past_the_door(source, room)) is not None:
                    found.append(Reach(path, node.lineno, f"imports from {source} ({part})"))
                    continue
                if source == "chainlat":
                    continue
                for alias in node.names:
                    if _private(alias.name) and not _is_module(f"{source}.{alias.name}", package):
                        found.append(Reach(path, node.lineno, f"imports {source}.{alias.name}"))
                    elif source != module:
                        foreign[alias.asname or alias.name] = f"{source}.{alias.name}"
        own = _defined(tree) | _room_defined(package, room)
        for node in ast.walk(tree):
            if (
                not isinstance(node, ast.Attribute)
                or not _private(node.attr)
                or node.attr in _NAMEDTUPLE_API
            ):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in foreign:
                found.append(Reach(path, node.lineno, f"uses {foreign[node.value.id]}.{node.attr}"))
            elif node.attr not in own and not _is_self(node.value) and not _outside(node.value):
                # A private member of an object made elsewhere (``handle._processor``).
                found.append(Reach(path, node.lineno, f"uses .{node.attr} of another module"))
    return found
