"""YAML budget files: PyYAML's safe loader, a key given twice refused. Imported only to read
a ``.yaml`` or ``.yml`` file, so that a TOML or JSON budget file starts no YAML parser."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from chainlat._core.errors import BudgetFileError
from chainlat.budgets._values import show

# libyaml's parser when PyYAML has it: the pure-Python one takes seconds on a small file
# nested a thousand levels deep.
try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # PyYAML built without libyaml
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


class _UniqueKeyLoader(_SafeLoader):
    """YAML's safe loader, but a key given twice in one mapping is an error, as in TOML:
    PyYAML's own keeps the last, so a duplicated workflow silently loses its limits.
    Keys merged in with ``<<`` may still be overridden, as YAML means them to."""

    def __init__(self, file: Path, text: str) -> None:
        super().__init__(text)
        self.file = file

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                continue  # an unhashable key: the constructor reports it
            if duplicate:
                raise BudgetFileError(
                    f"{self.file}:{key_node.start_mark.line + 1}: duplicate key {show(key)} "
                    "(each key may appear once)"
                )
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def parse_yaml(file: Path, text: str) -> tuple[object, yaml.Node | None]:
    """The document in ``text`` and its node tree (for the lines of later errors)."""
    loader = _UniqueKeyLoader(file, text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(file)
        problem = " ".join(str(exc.problem or exc.context or "syntax error").split())
        raise BudgetFileError(f"{where}: invalid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise BudgetFileError(f"{file}: invalid YAML: {' '.join(str(exc).split())}") from None
    finally:
        loader.dispose()
    return data, root
