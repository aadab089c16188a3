"""The messages of budget files: a validation error as one line naming the file, the line
and the key path, key paths as written, and "did you mean" suggestions for names.

pydantic and YAML are imported only to describe an error of theirs.
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Final, Union

from chainlat._core.errors import shown
from chainlat._core.runs import step_key
from chainlat.budgets._values import show

if TYPE_CHECKING:
    import yaml
    from pydantic import BaseModel, ValidationError

    from chainlat.budgets.model import BudgetModel

_INTERNAL_LOC: Final = frozenset({"percentiles", "ttft_percentiles", "[key]"})


def describe(
    exc: ValidationError,
    model: type[BaseModel],
    source: str,
    prefix: tuple[str, ...],
    yaml_root: yaml.Node | None,
) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    fields = tuple(str(p) for p in first["loc"] if p != "[key]")
    loc = tuple(p for p in fields if p not in _INTERNAL_LOC)
    message = _message(first, model, fields)
    path = key_path_of(prefix + loc)
    line = _yaml_line(yaml_root, loc) if yaml_root is not None else None
    where = f"{source}:{line}" if line is not None else source
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {path + ': ' if path else ''}{message}{more}"


def _message(error: Any, model: type[BaseModel], fields: tuple[str, ...]) -> str:
    """``fields``: the error's location by field names, the gathered tables included."""
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(model, fields[:-1])
        expected = f" (expected one of: {owner.keys_help})" if owner is not None else ""
        return f"unknown key{expected}"
    if kind in ("duration", "negative_duration", "percentile_range", "percentile_key"):
        return str(error["msg"])
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {show(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {show(value)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a table of keys, got {show(value)}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = error.get("ctx", {}).get("ge", error.get("ctx", {}).get("gt"))
        return f"must be at least {bound}, got {show(value)}"
    if kind == "literal_error":
        return (
            f"expected {error.get('ctx', {}).get('expected', 'another value')}, got {show(value)}"
        )
    if kind in ("string_type",):
        return f"expected a string, got {show(value)}"
    return f"{error['msg']}, got {show(value)}"


def _model_at(model: type[BaseModel], loc: Sequence[str]) -> type[BudgetModel] | None:
    """The model class that holds the keys at ``loc``, walking fields and dict values."""
    from pydantic import BaseModel

    from chainlat.budgets.model import BudgetModel

    current: object = model
    pending_dict = False
    for part in loc:
        if pending_dict:
            pending_dict = False
            continue  # the key of a dict entry (a workflow or step name)
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = current.model_fields.get(part)
        if info is None:
            return None
        current, pending_dict = _unwrap(info.annotation)
    if pending_dict or not (isinstance(current, type) and issubclass(current, BudgetModel)):
        return None
    return current


def _unwrap(annotation: object) -> tuple[object, bool]:
    """The model inside ``X | None``, ``Annotated[X, ...]`` or ``dict[str, X]``; and if a dict."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                return _unwrap(arg)
    if origin is dict:
        inner, _ = _unwrap(typing.get_args(annotation)[1])
        return inner, True
    return annotation, False


_BARE_KEY: Final = re.compile(r"^[A-Za-z0-9_-]+$")


def key_path_of(parts: Sequence[str]) -> str:
    return ".".join(p if _BARE_KEY.match(p) else json.dumps(p, ensure_ascii=False) for p in parts)


def _yaml_line(root: yaml.Node, loc: Sequence[str]) -> int | None:
    import yaml

    node: yaml.Node | None = root
    line: int | None = None
    for part in loc:
        if not isinstance(node, yaml.MappingNode):
            break
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and str(key_node.value) == part:
                line = key_node.start_mark.line + 1
                node = value_node
                break
        else:
            break
    return line


def suggest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return " (did you mean " + " or ".join(shown(c) for c in close) + "?)"
    if names:
        listed = ", ".join(shown(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
        return f" (seen: {listed}; set optional = true if it runs only sometimes)"
    return ""


def target_of(*parts: str) -> str:
    """A limit's key path inside its workflow's budget, from its parts."""
    return ".".join(parts)


def step_target(step: str, limit: str) -> str:
    """The key path of a step's limit inside its workflow's budget (``steps."x".max``)."""
    return target_of("steps", step_key(step), limit)


def operation_target(operation: str, limit: str) -> str:
    """The key path of an operation's limit inside its workflow's budget
    (``operations.text_to_speech.p95.first_output``)."""
    return target_of("operations", operation, limit)
