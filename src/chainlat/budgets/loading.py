"""Budget files: discovery in a directory, reading, and parsing TOML, YAML and JSON.

Every error names the file and the line or key path (:mod:`chainlat.budgets.messages`).
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from chainlat._core.errors import BudgetFileError, reading, undecodable
from chainlat.budgets._values import show
from chainlat.budgets.messages import describe
from chainlat.budgets.model import Budgets, WorkflowBudget

if TYPE_CHECKING:
    import yaml

BUDGET_FILE_NAMES: Final = ("chainlat.toml", "chainlat.yaml", "chainlat.yml", "pyproject.toml")
"""What :func:`discover_budgets` looks for, in this order (pyproject.toml only with
a ``[tool.chainlat]`` table)."""


def discover_budgets(directory: str | os.PathLike[str] | None = None) -> Path | None:
    """The budget file in ``directory`` (default: the working directory), or None.

    Looks for ``chainlat.toml``, ``chainlat.yaml``, ``chainlat.yml`` and then a
    ``pyproject.toml`` with a ``[tool.chainlat]`` table, in that order; parent
    directories are not searched.
    """
    base = Path(directory) if directory is not None else Path.cwd()
    for name in BUDGET_FILE_NAMES:
        candidate = base / name
        if not candidate.is_file():
            continue
        if name != "pyproject.toml":
            return candidate
        try:
            text = candidate.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if re.search(r"^\s*\[\s*tool\s*\.\s*chainlat\s*[.\]]", text, re.MULTILINE):
            return candidate
    return None


def load_budgets(
    path: str | os.PathLike[str] | None = None,
    *,
    directory: str | os.PathLike[str] | None = None,
) -> Budgets:
    """Read and validate a budget file; with no path, the one found by :func:`discover_budgets`.

    Raises:
        BudgetFileError: the file is missing or malformed; the message names the
            file, the line or key path, and what was expected.

    Example::

        budgets = load_budgets("chainlat.toml")
        print(budgets.workflows["support-chat"].total)
    """
    if path is None:
        found = discover_budgets(directory)
        if found is None:
            where = Path(directory) if directory is not None else Path.cwd()
            raise BudgetFileError(
                f"{where}: no budget file found (looked for chainlat.toml, chainlat.yaml, "
                "chainlat.yml and [tool.chainlat] in pyproject.toml)"
            )
        path = found
    file = Path(path)
    with reading(file, BudgetFileError, "no such budget file", "is a directory, not a budget file"):
        raw = file.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, why = undecodable(exc)
        raise BudgetFileError(f"{file}:{line}: {why}") from None

    try:
        return _load_text(file, text)
    except RecursionError:
        # Nesting a few hundred levels deep exhausts a parser's (or the validator's) stack.
        raise BudgetFileError(f"{file}: nested too deeply to be a budget file") from None


def _load_text(file: Path, text: str) -> Budgets:
    suffix = file.suffix.lower()
    prefix: tuple[str, ...] = ()
    yaml_root: yaml.Node | None = None
    data: object
    if suffix == ".toml":
        data = _parse_toml(file, text)
        if file.name == "pyproject.toml":
            tool = data.get("tool") if isinstance(data, dict) else None
            section = tool.get("chainlat") if isinstance(tool, dict) else None
            if section is None:
                raise BudgetFileError(f"{file}: no [tool.chainlat] table")
            data, prefix = section, ("tool", "chainlat")
    elif suffix in (".yaml", ".yml"):
        from chainlat.budgets._yaml import parse_yaml  # YAML's parser, only for YAML

        data, yaml_root = parse_yaml(file, text)
    elif suffix == ".json":
        data = _parse_json(file, text)
    else:
        raise BudgetFileError(
            f"{file}: unknown budget file type {file.suffix or '(none)'!r}: "
            "expected .toml, .yaml, .yml or .json"
        )
    return parse_budgets(data, source=str(file), _prefix=prefix, _yaml_root=yaml_root)


def parse_budgets(
    data: object,
    *,
    source: str = "<inline>",
    _prefix: tuple[str, ...] = (),
    _yaml_root: yaml.Node | None = None,
) -> Budgets:
    """Validate budgets already parsed into Python objects (a dict as in the file).

    Raises:
        BudgetFileError: naming ``source`` and the key path of the first problem.
    """
    if data is None:
        data = {}
    if not isinstance(data, dict):
        where = ".".join(_prefix)
        raise BudgetFileError(
            f"{source}: {where + ': ' if where else ''}expected a table of keys, got {show(data)}"
        )
    try:
        budgets = Budgets.model_validate(data)
    except ValidationError as exc:
        raise BudgetFileError(describe(exc, Budgets, source, _prefix, _yaml_root)) from None
    budgets._source = source
    return budgets


def parse_workflow_budget(limits: dict[str, object], *, source: str) -> WorkflowBudget:
    """Validate one workflow's limits given inline (the pytest marker and fixture)."""
    try:
        return WorkflowBudget.model_validate(limits)
    except ValidationError as exc:
        raise BudgetFileError(describe(exc, WorkflowBudget, source, (), None)) from None


def _parse_toml(file: Path, text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\s*\(at line (\d+), column (\d+)\)\s*$", message)
        if match is not None:
            where = f"{file}:{match.group(1)}:{match.group(2)}"
            message = message[: match.start()]
        elif "(at end of document)" in message:
            where = f"{file}:{text.count(chr(10)) + 1}"
            message = message.replace("(at end of document)", "").strip()
        else:
            where = str(file)
        raise BudgetFileError(f"{where}: invalid TOML: {message}") from None


class _DuplicateKey(Exception):
    """A JSON object's key given twice (its line is found in the text afterwards)."""

    def __init__(self, key: object) -> None:
        super().__init__(key)
        self.key = key


def _parse_json(file: Path, text: str) -> object:
    """JSON, but a key given twice in one object is an error (``json`` keeps the last)."""
    decoder = json.JSONDecoder(object_pairs_hook=_unique_pairs)
    try:
        return decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise BudgetFileError(f"{file}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except _DuplicateKey as exc:
        line = _json_key_line(text, exc.key)
        where = f"{file}:{line}" if line is not None else str(file)
        raise BudgetFileError(
            f"{where}: duplicate key {show(exc.key)} (each key may appear once)"
        ) from None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


def _json_key_line(text: str, key: object) -> int | None:
    """The line of a key's second occurrence as written (the hook sees no positions)."""
    if not isinstance(key, str):
        return None
    spellings = {json.dumps(key), json.dumps(key, ensure_ascii=False)}
    starts = sorted(
        m.start()
        for spelling in spellings
        for m in re.finditer(re.escape(spelling) + r"\s*:", text)
    )
    if len(starts) < 2:
        return None
    return text.count("\n", 0, starts[1]) + 1
