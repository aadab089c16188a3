"""Latency budget files: the models, loading and discovery, and the verdict on a set of runs.

A budget file declares, per workflow (by ``gen_ai.workflow.name``), limits on
each run and on percentiles over many runs::

    # chainlat.toml (or the same keys under [tool.chainlat] in pyproject.toml)
    min_runs = 20

    [workflows.support-chat]
    total = "800ms"                      # every run
    data = "250ms"
    p95 = { total = "700ms", data = "200ms" }
    p50 = "400ms"                        # a bare duration limits the total

    [workflows.support-chat.steps."chat gpt-4o"]
    max = "600ms"
    p95 = "500ms"
    ttft_p95 = "250ms"

Durations are ``"800ms"``, ``"1.2s"``, ``"250us"`` (also ``ns``, ``m``) or plain
numbers of milliseconds. Everything here is pure: :func:`evaluate` takes runs
(from :mod:`chainlat.traces`, the pytest plugin or a live workflow) and returns
a :class:`BudgetReport`; nothing is read from OpenTelemetry.

Example::

    budgets = chainlat.budgets.load_budgets("chainlat.toml")
    report = chainlat.budgets.evaluate(chainlat.traces.read_runs(["traces.jsonl"]), budgets)
    print(report.ok, [str(v) for v in report.broken])
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from chainlat._core.errors import SHOWN_CHARS, BudgetFileError, shorten, shown
from chainlat._core.exits import EXIT_BROKEN, EXIT_INPUT, EXIT_OK
from chainlat._core.prices import Price
from chainlat._core.runs import (
    BudgetViolation,
    StepTiming,
    Unit,
    WorkflowRun,
    cost_of,
    step_key,
)
from chainlat._core.stats import FIRST_OUTPUT, Samples, Stats, WorkflowStats

__all__ = [
    "ABSENT_REASONS",
    "UNJUDGED_REASONS",
    "BudgetReport",
    "Budgets",
    "LimitVerdict",
    "NotJudgedReason",
    "QuantityLimits",
    "StepBudget",
    "VerdictStatus",
    "WorkflowBudget",
    "apply_opt_outs",
    "check_run",
    "discover_budgets",
    "evaluate",
    "json_schema",
    "load_budgets",
    "parse_budgets",
    "parse_duration",
    "parse_workflow_budget",
    "unknown_keys",
]

BUDGET_FILE_NAMES: Final = ("chainlat.toml", "chainlat.yaml", "chainlat.yml", "pyproject.toml")
"""What :func:`discover_budgets` looks for, in this order (pyproject.toml only with
a ``[tool.chainlat]`` table)."""

_UNIT_MS: Final = {
    "ns": 1e-6,
    "us": 1e-3,
    "µs": 1e-3,
    "μs": 1e-3,
    "ms": 1.0,
    "s": 1000.0,
    "m": 60_000.0,
    "min": 60_000.0,
}
_DURATION_RE: Final = re.compile(r"^\s*(-?)\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|μs|ms|s|min|m)\s*$")
_DURATION_HINT: Final = (
    'expected a duration like "800ms", "1.2s", "250us" or a number of milliseconds'
)
_DURATION_SCHEMA: Final[dict[str, Any]] = {
    "description": 'A duration: "800ms", "1.2s", "250us", "90ns", "2m", or milliseconds.',
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*(\d+(\.\d*)?|\.\d+)\s*(ns|us|µs|μs|ms|s|min|m)\s*$"},
    ],
}
_PERCENTILE_RE: Final = re.compile(r"^p(\d+(?:\.\d+)?)$")
_PERCENTILE_KEY_SCHEMA: Final = r"^p([1-9][0-9]?(\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)$"


def parse_duration(value: object) -> float:
    """A budget duration in milliseconds.

    Example::

        assert parse_duration("1.2s") == 1200.0
        assert parse_duration("250us") == 0.25
        assert parse_duration(800) == 800.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PydanticCustomError("duration", f"{_DURATION_HINT}, got {_show(value)}")
    if isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match is None:
            raise PydanticCustomError("duration", f"{_DURATION_HINT}, got {_show(value)}")
        sign, number, unit = match.groups()
        ms = float(number) * _UNIT_MS[unit] * (-1 if sign else 1)
    else:
        ms = float(value)
    if math.isnan(ms) or math.isinf(ms):
        raise PydanticCustomError("duration", f"{_DURATION_HINT}, got {_show(value)}")
    if ms < 0:
        raise PydanticCustomError(
            "negative_duration", f"a limit cannot be negative, got {_show(value)}"
        )
    return ms


def _show(value: object) -> str:
    if isinstance(value, str):
        return shorten(json.dumps(value[: 4 * SHOWN_CHARS], ensure_ascii=False))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def _percentile_value(key: str, prefix: str) -> float:
    match = _PERCENTILE_RE.match(key[len(prefix) :]) if key.startswith(prefix) else None
    if match is None:
        raise PydanticCustomError(
            "percentile_key", f"expected a percentile key like {prefix}p95, got {shown(key)}"
        )
    q = float(match.group(1))
    if not 0 < q < 100:
        raise PydanticCustomError(
            "percentile_range",
            f"percentile out of range: {key} (expected {prefix}p1 ... {prefix}p99.9; "
            f"{'use max for the slowest run' if not prefix else 'use ttft to limit every call'})",
        )
    return q


def _check_percentile_key(key: str) -> str:
    _percentile_value(key, "")
    return key


def _check_ttft_percentile_key(key: str) -> str:
    _percentile_value(key, "ttft_")
    return key


_RATE_HINT: Final = 'expected a share of runs like "2%" or a fraction from 0 to 1'
_RATE_RE: Final = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")
_RATE_SCHEMA: Final[dict[str, Any]] = {
    "description": 'A share of runs: "2%", "0.5%", or a fraction from 0 to 1.',
    "anyOf": [
        {"type": "number", "minimum": 0, "maximum": 1},
        {"type": "string", "pattern": r"^\s*(\d+(\.\d*)?|\.\d+)\s*%\s*$"},
    ],
}
_MONEY_HINT: Final = 'expected US dollars like "0.01", "$0.01" or a number'
_MONEY_RE: Final = re.compile(r"^\s*\$?\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:USD)?\s*$")
_MONEY_SCHEMA: Final[dict[str, Any]] = {
    "description": 'US dollars: 0.01, "0.01", "$0.01".',
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\$?\s*(\d+(\.\d*)?|\.\d+)\s*(USD)?\s*$"},
    ],
}


def parse_rate(value: object) -> float:
    """A share of runs, in percent: ``"2%"`` and ``0.02`` are both 2.0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PydanticCustomError("rate", f"{_RATE_HINT}, got {_show(value)}")
    if isinstance(value, str):
        match = _RATE_RE.match(value)
        if match is None:
            raise PydanticCustomError("rate", f"{_RATE_HINT}, got {_show(value)}")
        percent = float(match.group(1))
    else:
        if not (math.isfinite(value) and 0 <= value <= 1):
            raise PydanticCustomError(
                "rate", f'{_RATE_HINT} (write "{_show(value)}%" for percent), got {_show(value)}'
            )
        percent = float(value) * 100
    if percent > 100:
        raise PydanticCustomError("rate", f"a share of runs is at most 100%, got {_show(value)}")
    return percent


def parse_money(value: object) -> float:
    """US dollars: ``"0.01"``, ``"$0.01"``, ``0.01``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise PydanticCustomError("money", f"{_MONEY_HINT}, got {_show(value)}")
    if isinstance(value, str):
        match = _MONEY_RE.match(value)
        if match is None:
            raise PydanticCustomError("money", f"{_MONEY_HINT}, got {_show(value)}")
        dollars = float(match.group(1))
    else:
        dollars = float(value)
    if not math.isfinite(dollars) or dollars < 0:
        raise PydanticCustomError("money", f"{_MONEY_HINT} (0 or more), got {_show(value)}")
    return dollars


def _check_cost_percentile_key(key: str) -> str:
    _percentile_value(key, "cost_")
    return key


Rate = Annotated[float, BeforeValidator(parse_rate), WithJsonSchema(_RATE_SCHEMA)]
"""A share of runs in percent, written ``"2%"`` or as a fraction ``0.02``."""
Money = Annotated[float, BeforeValidator(parse_money), WithJsonSchema(_MONEY_SCHEMA)]
"""US dollars."""
CostPercentileKey = Annotated[str, AfterValidator(_check_cost_percentile_key)]
Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema(_DURATION_SCHEMA)]
"""A duration in milliseconds, written as ``"800ms"``, ``"1.2s"``, ``"250us"`` or a number."""
PercentileKey = Annotated[str, AfterValidator(_check_percentile_key)]
TtftPercentileKey = Annotated[str, AfterValidator(_check_ttft_percentile_key)]
Quantity = Literal["total", "inference", "data", "tool", "overhead", "first_output"]


def _gather(data: object, groups: dict[str, str]) -> object:
    """Move ``p95``-style keys (by prefix) into the internal mapping field of that prefix."""
    if not isinstance(data, dict):
        return data
    out: dict[str, Any] = {}
    for key, value in data.items():
        target = None
        if isinstance(key, str):
            for prefix, field_name in groups.items():
                rest = key[len(prefix) :]
                if key.startswith(prefix) and rest[:1] == "p" and rest[1:2].isdigit():
                    target = field_name
                    break
        if target is None:
            out[key] = value
        else:
            out.setdefault(target, {})[key] = value
    return out


def _percentile_schema(value_schema: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    return {f"^{prefix}{_PERCENTILE_KEY_SCHEMA[1:]}": value_schema}


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    keys_help: ClassVar[str] = ""


def _quantity_limits_schema(schema: dict[str, Any]) -> None:
    schema["description"] = (
        "Limits on a percentile of the runs' total and critical-path split; "
        "a bare duration limits the total."
    )


class QuantityLimits(_Model):
    """Limits on one percentile (or on each run) of a workflow's wall time and its split."""

    model_config = ConfigDict(json_schema_extra=_quantity_limits_schema)
    keys_help: ClassVar[str] = "total, inference, data, tool, overhead, first_output"

    total: Duration | None = None
    inference: Duration | None = None
    data: Duration | None = None
    tool: Duration | None = None
    overhead: Duration | None = None
    first_output: Duration | None = None
    """The wait for the first output the user saw (``chainlat.chain.first_output_ms``)."""

    @model_validator(mode="before")
    @classmethod
    def _bare_duration_is_total(cls, data: object) -> object:
        if isinstance(data, (dict, QuantityLimits)):
            return data
        return {"total": parse_duration(data)}

    def items(self) -> list[tuple[Quantity, float]]:
        """The limits that are set, in the order total, inference, data, tool, overhead."""
        found: list[tuple[Quantity, float]] = []
        for quantity in typing.get_args(Quantity):
            limit = getattr(self, quantity)
            if limit is not None:
                found.append((quantity, limit))
        return found


class StepBudget(_Model):
    """Limits on one step of a workflow, keyed by its span name (``chat gpt-4o``)."""

    keys_help: ClassVar[str] = (
        "max, ttft, p50/p90/p95/p99 (any pNN), ttft_p95 (any ttft_pNN), optional"
    )

    max: Duration | None = None
    """Limit on every occurrence of the step, in every run."""
    ttft: Duration | None = None
    """Limit on the time to first token of every occurrence (streamed model calls)."""
    percentiles: dict[PercentileKey, Duration] = Field(default_factory=dict)
    """``p95 = "500ms"``: a percentile of the step's durations over all occurrences."""
    ttft_percentiles: dict[TtftPercentileKey, Duration] = Field(default_factory=dict)
    """``ttft_p95 = "250ms"``: a percentile of the time to first token."""
    optional: StrictBool = False
    """The step runs only sometimes: no run having it is not an error."""

    @model_validator(mode="before")
    @classmethod
    def _gather_percentiles(cls, data: object) -> object:
        return _gather(data, {"ttft_": "ttft_percentiles", "": "percentiles"})


class WorkflowBudget(_Model):
    """The budget of one workflow: per-run limits, percentile limits and per-step limits."""

    keys_help: ClassVar[str] = (
        "total, inference, data, tool, overhead, first_output, p50/p90/p95/p99 (any pNN), "
        "error_rate, cost, cost_p95 (any cost_pNN), min_runs, exclude_cache_hits, "
        "include_errors, optional, steps"
    )

    total: Duration | None = None
    """Limit on the wall time of every run."""
    inference: Duration | None = None
    """Limit on the critical-path time in model calls, every run."""
    data: Duration | None = None
    tool: Duration | None = None
    overhead: Duration | None = None
    first_output: Duration | None = None
    """Limit on the wait for the first output, every run that has one."""
    percentiles: dict[PercentileKey, QuantityLimits] = Field(default_factory=dict)
    """``p95 = {total = "800ms"}`` or ``p95 = "800ms"``."""
    error_rate: Rate | None = None
    """Limit on the share of runs that failed (status ERROR): ``"2%"``."""
    cost: Money | None = None
    """Limit on what each run's model calls cost, in US dollars (needs prices)."""
    cost_percentiles: dict[CostPercentileKey, Money] = Field(default_factory=dict)
    """``cost_p95 = "0.02"``: a percentile of the runs' cost."""
    min_runs: Annotated[StrictInt, Field(ge=1)] | None = None
    """Runs needed before a percentile verdict counts (default: the file's)."""
    exclude_cache_hits: StrictBool | None = None
    """Leave runs and steps answered from a cache out of the percentiles (default: the file's)."""
    include_errors: StrictBool | None = None
    """Count failed runs in the latency percentiles (default: the file's, false)."""
    optional: StrictBool = False
    """The workflow runs only sometimes: no run of it is not an error."""
    steps: dict[str, StepBudget] = Field(default_factory=dict)
    """Per-step limits, by step name (``chainlat.step.name``), else span name."""

    @model_validator(mode="before")
    @classmethod
    def _gather_percentiles(cls, data: object) -> object:
        return _gather(data, {"cost_": "cost_percentiles", "": "percentiles"})

    def run_limits(self) -> QuantityLimits:
        """The per-run limits on the total, the split and the first output."""
        return QuantityLimits(
            total=self.total,
            inference=self.inference,
            data=self.data,
            tool=self.tool,
            overhead=self.overhead,
            first_output=self.first_output,
        )


class ModelPrice(_Model):
    """US dollars per million tokens of one model: ``[prices."gpt-4o"]``."""

    keys_help: ClassVar[str] = "input_per_mtok, output_per_mtok, cache_read_per_mtok"

    input_per_mtok: Money
    output_per_mtok: Money
    cache_read_per_mtok: Money | None = None
    """Input tokens read from the prompt cache (default: the input price)."""

    def price(self) -> Price:
        """As the rollup takes it."""
        return Price(self.input_per_mtok, self.output_per_mtok, self.cache_read_per_mtok)


class Budgets(_Model):
    """A budget file: defaults and one :class:`WorkflowBudget` per workflow name.

    Example::

        budgets = Budgets.model_validate({"workflows": {"chat": {"total": "800ms"}}})
        assert budgets.workflows["chat"].total == 800.0
    """

    keys_help: ClassVar[str] = (
        "version, min_runs, exclude_cache_hits, include_errors, prices, workflows"
    )

    version: Literal[1] = 1
    """The format version; 1."""
    min_runs: Annotated[StrictInt, Field(ge=1)] = 1
    """Default runs needed before a percentile verdict counts."""
    exclude_cache_hits: StrictBool = False
    """Default for leaving cache hits out of percentiles."""
    include_errors: StrictBool = False
    """Default for counting failed runs in the latency percentiles."""
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    """Model prices, by model name, for cost per call, run and variant. Never built in:
    prices change."""
    workflows: dict[str, WorkflowBudget] = Field(default_factory=dict)
    """Budgets by workflow name (``gen_ai.workflow.name``)."""

    _source: str = PrivateAttr(default="<inline>")

    @property
    def source(self) -> str:
        """The file the budgets came from, or ``<inline>``."""
        return self._source

    def min_runs_for(self, workflow: str) -> int:
        """Runs needed before a percentile verdict on ``workflow`` counts."""
        budget = self.workflows.get(workflow)
        if budget is not None and budget.min_runs is not None:
            return budget.min_runs
        return self.min_runs

    def includes_errors(self, workflow: str) -> bool:
        """Whether failed runs count in ``workflow``'s latency percentiles."""
        budget = self.workflows.get(workflow)
        if budget is not None and budget.include_errors is not None:
            return budget.include_errors
        return self.include_errors

    def model_prices(self) -> dict[str, Price] | None:
        """The ``[prices]`` table as the rollup takes it; None when the file has none."""
        return {m: p.price() for m, p in self.prices.items()} if self.prices else None

    def excludes_cache_hits(self, workflow: str) -> bool:
        """Whether cache hits are left out of ``workflow``'s percentiles."""
        budget = self.workflows.get(workflow)
        if budget is not None and budget.exclude_cache_hits is not None:
            return budget.exclude_cache_hits
        return self.exclude_cache_hits


# --- loading ----------------------------------------------------------------------------


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
    try:
        raw = file.read_bytes()
    except FileNotFoundError:
        raise BudgetFileError(f"{file}: no such budget file") from None
    except IsADirectoryError:
        raise BudgetFileError(f"{file}: is a directory, not a budget file") from None
    except OSError as exc:
        raise BudgetFileError(f"{file}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise BudgetFileError(f"{file}:{line}: not UTF-8 text") from None

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
        data, yaml_root = _parse_yaml(file, text)
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
            f"{source}: {where + ': ' if where else ''}expected a table of keys, got {_show(data)}"
        )
    try:
        budgets = Budgets.model_validate(data)
    except ValidationError as exc:
        raise BudgetFileError(_describe(exc, Budgets, source, _prefix, _yaml_root)) from None
    budgets._source = source
    return budgets


def parse_workflow_budget(limits: dict[str, object], *, source: str) -> WorkflowBudget:
    """Validate one workflow's limits given inline (the pytest marker and fixture)."""
    try:
        return WorkflowBudget.model_validate(limits)
    except ValidationError as exc:
        raise BudgetFileError(_describe(exc, WorkflowBudget, source, (), None)) from None


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
    def __init__(self, key: object, line: int) -> None:
        super().__init__(key, line)
        self.key, self.line = key, line


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
                raise _DuplicateKey(key, key_node.start_mark.line + 1)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _parse_yaml(file: Path, text: str) -> tuple[object, yaml.Node | None]:
    loader = _UniqueKeyLoader(text)
    try:
        root = loader.get_single_node()
        data = loader.construct_document(root) if root is not None else None
    except _DuplicateKey as exc:
        raise BudgetFileError(
            f"{file}:{exc.line}: duplicate key {_show(exc.key)} (each key may appear once)"
        ) from None
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
            f"{where}: duplicate key {_show(exc.key)} (each key may appear once)"
        ) from None


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key, 0)
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


# --- error messages -------------------------------------------------------------------------

_INTERNAL_LOC: Final = frozenset({"percentiles", "ttft_percentiles", "[key]"})


def _describe(
    exc: ValidationError,
    model: type[BaseModel],
    source: str,
    prefix: tuple[str, ...],
    yaml_root: yaml.Node | None,
) -> str:
    errors = exc.errors(include_url=False)
    first = errors[0]
    loc = tuple(str(p) for p in first["loc"] if p not in _INTERNAL_LOC)
    message = _message(first, model, loc)
    path = _key_path(prefix + loc)
    line = _yaml_line(yaml_root, loc) if yaml_root is not None else None
    where = f"{source}:{line}" if line is not None else source
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {path + ': ' if path else ''}{message}{more}"


def _message(error: Any, model: type[BaseModel], loc: tuple[str, ...]) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "extra_forbidden":
        owner = _model_at(model, loc[:-1])
        expected = f" (expected one of: {owner.keys_help})" if owner is not None else ""
        return f"unknown key{expected}"
    if kind in ("duration", "negative_duration", "percentile_range", "percentile_key"):
        return str(error["msg"])
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number, got {_show(value)}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false, got {_show(value)}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a table of keys, got {_show(value)}"
    if kind in ("greater_than_equal", "greater_than"):
        bound = error.get("ctx", {}).get("ge", error.get("ctx", {}).get("gt"))
        return f"must be at least {bound}, got {_show(value)}"
    if kind == "literal_error":
        return (
            f"expected {error.get('ctx', {}).get('expected', 'another value')}, got {_show(value)}"
        )
    if kind in ("string_type",):
        return f"expected a string, got {_show(value)}"
    return f"{error['msg']}, got {_show(value)}"


def _model_at(model: type[BaseModel], loc: Sequence[str]) -> type[_Model] | None:
    """The model class that holds the keys at ``loc``, walking fields and dict values."""
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
    if pending_dict or not (isinstance(current, type) and issubclass(current, _Model)):
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


def _key_path(parts: Sequence[str]) -> str:
    return ".".join(p if _BARE_KEY.match(p) else json.dumps(p, ensure_ascii=False) for p in parts)


def _yaml_line(root: yaml.Node, loc: Sequence[str]) -> int | None:
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


# --- checking runs -------------------------------------------------------------------------


def _target(*parts: str) -> str:
    return ".".join(parts)


def _step_target(step: str, limit: str) -> str:
    return _target("steps", step_key(step), limit)


def _occurrences(run: WorkflowRun, step: str) -> list[StepTiming]:
    return [s for s in run.steps if s.name == step]


def _run_checks(budget: WorkflowBudget) -> list[tuple[str, float, _Measure]]:
    checks: list[tuple[str, float, _Measure]] = []
    for quantity, limit in budget.run_limits().items():
        checks.append((quantity, limit, _QuantityMeasure(quantity)))
    for step, limits in budget.steps.items():
        if limits.max is not None:
            checks.append((_step_target(step, "max"), limits.max, _StepMeasure(step, False)))
        if limits.ttft is not None:
            checks.append((_step_target(step, "ttft"), limits.ttft, _StepMeasure(step, True)))
    return checks


class _Measure:
    def of(self, run: WorkflowRun) -> float | None:
        """The run's worst value of this measure, None when the run does not have it."""
        raise NotImplementedError


@dataclass(frozen=True)
class _QuantityMeasure(_Measure):
    quantity: str

    def of(self, run: WorkflowRun) -> float | None:
        if self.quantity == FIRST_OUTPUT:
            return run.rollup.first_output_ms
        return run.rollup.kind_ms(self.quantity)


@dataclass(frozen=True)
class _StepMeasure(_Measure):
    step: str
    ttft: bool

    def of(self, run: WorkflowRun) -> float | None:
        values = [s.ttft_ms if self.ttft else s.duration_ms for s in _occurrences(run, self.step)]
        found = [v for v in values if v is not None]
        return max(found) if found else None


def _over(actual: float, limit: float) -> bool:
    """Whether a measured value breaks a limit. A value that is not a finite number (a
    recorded rollup of ``"NaN"``) breaks every limit: it cannot be shown to keep one, and a
    gate that passed it would pass a run it never measured."""
    return not (math.isfinite(actual) and actual <= limit)


def _worse(actual: float, than: float | None) -> bool:
    if than is None:
        return True
    if not math.isfinite(actual):
        return math.isfinite(than)
    return math.isfinite(than) and actual > than


def check_run(run: WorkflowRun, budget: WorkflowBudget) -> list[BudgetViolation]:
    """The per-run limits of ``budget`` that ``run`` broke (percentiles are not judged here).

    A step's ``max`` and ``ttft`` apply to each of its occurrences; the
    violation reports the worst one. A value that is not a finite number breaks the limit.

    Example::

        broken = check_run(run, budgets.workflows["support-chat"])
        assert not broken, "; ".join(map(str, broken))
    """
    violations: list[BudgetViolation] = []
    for target, limit, measure in _run_checks(budget):
        actual = measure.of(run)
        if actual is not None and _over(actual, limit):
            violations.append(BudgetViolation(run.workflow, target, limit, actual))
    if budget.cost is not None and run.cost_usd is not None and _over(run.cost_usd, budget.cost):
        violations.append(BudgetViolation(run.workflow, "cost", budget.cost, run.cost_usd, "USD"))
    return violations


# --- the verdict over many runs ---------------------------------------------------------------

VerdictStatus = Literal["ok", "broken", "not_judged"]
"""What became of one limit: kept (``ok``), broken, or not judged (see its ``reason``)."""

NotJudgedReason = Literal[
    "unknown_workflow",
    "unknown_step",
    "no_runs",
    "not_enough_runs",
    "no_data",
    "no_price",
    "no_tokens",
    "impossible_value",
    "not_expressible",
    "no_series",
    "not_finite",
    "incomplete_run",
]
"""Why a limit was not judged: a name no run has (``unknown_workflow``, ``unknown_step``), too
few runs or samples (``no_runs``, ``not_enough_runs``, ``no_data``), a cost without a price or
token counts (``no_price``, ``no_tokens``), a recorded value that cannot be true
(``impossible_value``), a limit a Prometheus source cannot read (``not_expressible``,
``no_series``, ``not_finite``), or a run a reader could not read whole (``incomplete_run``)."""

ABSENT_REASONS: Final[frozenset[NotJudgedReason]] = frozenset({"unknown_workflow", "unknown_step"})
"""Reasons ``--allow-missing`` opts out of: a budgeted name no run has."""
UNJUDGED_REASONS: Final[frozenset[NotJudgedReason]] = (
    frozenset(typing.get_args(NotJudgedReason)) - ABSENT_REASONS
)
"""Reasons ``--allow-unjudged`` opts out of: every other one."""


@dataclass(frozen=True, slots=True)
class LimitVerdict:
    """The verdict on one limit of one workflow's budget."""

    workflow: str
    target: str
    """The limit's key path inside the workflow's budget (``p95.total``, ``steps."x".max``)."""
    limit_ms: float
    actual_ms: float | None
    """Per-run limits: the worst run's value; percentiles: the percentile over the runs."""
    status: VerdictStatus
    runs: int
    """Runs (or step occurrences, for a step percentile) judged."""
    broken_runs: int = 0
    """Per-run limits: how many runs broke it."""
    percentile: float | None = None
    """For percentile limits: which one (95.0)."""
    min_runs: int = 1
    worst_run: WorkflowRun | None = field(default=None, compare=False)
    """Per-run limits: the run with the worst value."""
    unit: Unit = "ms"
    """What ``limit_ms`` and ``actual_ms`` are in: ms, % (error_rate) or USD (cost)."""
    reason: NotJudgedReason | None = None
    """Why the limit was not judged (``status == "not_judged"``); None otherwise."""
    why: str | None = None
    """One line saying why it was not judged and what to do (or which flag opts out)."""
    allowed: bool = False
    """The user opted out for this limit (``optional = true``, ``--allow-missing``,
    ``--allow-unjudged``): shown, but it does not fail the gate."""
    unjudged_runs: int = 0
    """Per-run limits: runs that have the measure but whose value could not be judged (a
    call without a price, a run a reader could not read whole)."""

    @property
    def kind(self) -> Literal["run", "percentile", "share"]:
        """What the limit holds: every run, a percentile over the runs, or the share of runs
        that failed (``error_rate``)."""
        if self.percentile is not None:
            return "percentile"
        return "share" if self.target == "error_rate" else "run"

    @property
    def key_path(self) -> str:
        """The limit's full key path in the budget file."""
        return _key_path(("workflows", self.workflow)) + "." + self.target

    def violation(self) -> BudgetViolation | None:
        """This verdict as a violation, when broken."""
        if self.status != "broken" or self.actual_ms is None:
            return None
        return BudgetViolation(self.workflow, self.target, self.limit_ms, self.actual_ms, self.unit)


@dataclass(slots=True)
class BudgetReport:
    """Every limit's verdict, with the statistics they were computed from.

    Example::

        report = evaluate(runs, budgets)
        print(report.summary)
        raise SystemExit(report.exit_code)
    """

    verdicts: list[LimitVerdict]
    stats: Stats
    budgets_source: str = "<inline>"

    @property
    def broken(self) -> list[LimitVerdict]:
        """The limits that were broken."""
        return [v for v in self.verdicts if v.status == "broken"]

    @property
    def unjudged(self) -> list[LimitVerdict]:
        """The limits that could not be judged and were not opted out of: they fail the gate."""
        return [v for v in self.verdicts if v.status == "not_judged" and not v.allowed]

    @property
    def allowed(self) -> list[LimitVerdict]:
        """The limits that could not be judged and were opted out of."""
        return [v for v in self.verdicts if v.status == "not_judged" and v.allowed]

    @property
    def exit_code(self) -> int:
        """``EXIT_BROKEN`` (1) if a limit is broken, else ``EXIT_INPUT`` (2) if one could not
        be judged and was not opted out of, or if no limit was judged at all, else
        ``EXIT_OK`` (0): a gate that judged nothing never passes."""
        if self.broken:
            return EXIT_BROKEN
        if self.unjudged or not self.judged:
            return EXIT_INPUT
        return EXIT_OK

    @property
    def ok(self) -> bool:
        """Every limit judged and kept, or opted out of: the exit code is 0."""
        return self.exit_code == EXIT_OK

    @property
    def judged(self) -> bool:
        """At least one limit was judged (kept or broken)."""
        return any(v.status in ("ok", "broken") for v in self.verdicts)

    @property
    def summary(self) -> str:
        """The one line every format ends with; it says ``OK`` only when the exit code is 0.

        ``FAILED: 1 of 7 limits broken, 2 not judged``, ``FAILED: no limit judged, 3 not
        judged (allowed)`` or ``OK: all 7 limits judged and kept``.
        """
        total = len(self.verdicts)
        allowed = len(self.allowed)
        opted = f", {allowed} not judged (allowed)" if allowed else ""
        if self.exit_code != EXIT_OK:
            if not self.broken and not self.unjudged:
                return f"FAILED: no limit judged{opted or ' (no limits)'}"
            return (
                f"FAILED: {len(self.broken)} of {_limits(total)} broken, "
                f"{len(self.unjudged)} not judged{opted}"
            )
        if not allowed:
            return f"OK: all {_limits(total)} judged and kept"
        return f"OK: {total - allowed} of {_limits(total)} judged and kept{opted}"

    def verdicts_of(self, workflow: str) -> list[LimitVerdict]:
        """The verdicts on one workflow's limits."""
        return [v for v in self.verdicts if v.workflow == workflow]


def _limits(n: int) -> str:
    return f"{n} limit" + ("" if n == 1 else "s")


@dataclass(slots=True)
class _RunTally:
    judged: int = 0
    broken: int = 0
    worst: float | None = None
    worst_run: WorkflowRun | None = None


def evaluate(
    runs: Iterable[WorkflowRun],
    budgets: Budgets,
    *,
    allow: Iterable[NotJudgedReason] = (),
) -> BudgetReport:
    """Judge runs against budgets: per-run limits on each run, percentiles over all of them.

    Streams ``runs`` once, keeping one float per sample (see :mod:`chainlat._core.stats`).
    A limit that cannot be judged is ``not_judged`` with its ``reason`` (a workflow or step
    no run has, fewer than ``min_runs`` samples, no sample at all, ...) and fails the gate
    unless ``allow`` names its reason or the budget marks the workflow or step
    ``optional``. A measured value that is not a finite number (NaN, infinity) is never
    within a limit: the run breaks each per-run limit it is measured against, and a
    percentile over samples holding one is broken, with that value as its actual.

    Example::

        report = evaluate(read_runs(["traces.jsonl"]), load_budgets("chainlat.toml"))
        print(report.summary)
    """
    checks = {name: _run_checks(budget) for name, budget in budgets.workflows.items()}
    tallies: dict[tuple[str, str], _RunTally] = {}
    stats = Stats(include_errors=budgets.includes_errors)
    prices = budgets.model_prices()
    for run in runs:
        cost = cost_of(run, prices)
        stats.add(run, cost)
        budget = budgets.workflows.get(run.workflow)
        if budget is None:
            continue
        measured = [
            (target, limit, measure.of(run)) for target, limit, measure in checks[run.workflow]
        ]
        if budget.cost is not None:
            measured.append(("cost", budget.cost, cost))
        for target, limit, actual in measured:
            if actual is None:
                continue
            tally = tallies.setdefault((run.workflow, target), _RunTally())
            tally.judged += 1
            if _over(actual, limit):
                tally.broken += 1
            if _worse(actual, tally.worst):
                tally.worst, tally.worst_run = actual, run

    verdicts: list[LimitVerdict] = []
    for name, budget in budgets.workflows.items():
        found = _run_verdicts(name, budget, checks[name], tallies)
        workflow_stats = stats.workflows.get(name)
        found.extend(_percentile_verdicts(name, budget, budgets, workflow_stats))
        if budget.error_rate is not None:
            found.append(_error_rate_verdict(name, budget.error_rate, budgets, workflow_stats))
        verdicts.extend(_absent(found, name, budget, stats, budgets.source))
    return BudgetReport(apply_opt_outs(verdicts, budgets, allow), stats, budgets.source)


def _run_verdicts(
    name: str,
    budget: WorkflowBudget,
    checks: list[tuple[str, float, _Measure]],
    tallies: dict[tuple[str, str], _RunTally],
) -> list[LimitVerdict]:
    run_limits: list[tuple[str, float, Unit]] = [
        (target, limit, "ms") for target, limit, _ in checks
    ]
    if budget.cost is not None:
        run_limits.append(("cost", budget.cost, "USD"))
    found: list[LimitVerdict] = []
    for target, limit, unit in run_limits:
        tally = tallies.get((name, target), _RunTally())
        if tally.judged == 0:
            found.append(_no_data(name, target, limit, unit))
            continue
        found.append(
            LimitVerdict(
                name,
                target,
                limit,
                tally.worst,
                "broken" if tally.broken else "ok",
                tally.judged,
                tally.broken,
                worst_run=tally.worst_run if tally.broken else None,
                unit=unit,
            )
        )
    return found


def _no_data(
    name: str, target: str, limit: float, unit: Unit, percentile: float | None = None
) -> LimitVerdict:
    return LimitVerdict(
        name,
        target,
        limit,
        None,
        "not_judged",
        0,
        percentile=percentile,
        unit=unit,
        reason="no_data",
        why=f"no run of {shown(name)} has a value for {target}",
    )


def _no_samples(
    name: str,
    target: str,
    limit: float,
    unit: Unit,
    q: float,
    samples: Samples | None,
    stats: WorkflowStats | None,
) -> LimitVerdict:
    """A percentile without a sample: every run left out (failed, or a cache hit), or no
    run with a value for it."""
    verdict = _no_data(name, target, limit, unit, q)
    if samples is not None and len(samples):
        why = f"every sample of {target} is a cache hit, left out by exclude_cache_hits"
        return replace(verdict, reason="no_runs", why=why)
    if stats is not None and stats.runs and stats.errors == stats.runs:
        why = (
            f"all {stats.runs} runs of {shown(name)} failed, and failed runs are not in the "
            "percentiles (include_errors = true counts them)"
        )
        return replace(verdict, reason="no_runs", why=why)
    return verdict


def _absent(
    verdicts: list[LimitVerdict],
    name: str,
    budget: WorkflowBudget,
    stats: Stats,
    source: str,
) -> list[LimitVerdict]:
    """The verdicts of a workflow (or step) that no run has, as not judged: a misspelled key
    would otherwise pass as "no data"."""
    seen = stats.workflows
    workflow = seen.get(name)
    if workflow is None:
        why = f"no run of workflow {shown(name)}{_suggest(name, list(seen))}"
        return [_unknown(v, "unknown_workflow", why) for v in verdicts]
    prefixes = {_step_target(step, ""): step for step in budget.steps}
    out: list[LimitVerdict] = []
    for verdict in verdicts:
        step = next((s for p, s in prefixes.items() if verdict.target.startswith(p)), None)
        if step is None or step in workflow.seen_steps:
            out.append(verdict)
            continue
        why = (
            f"no run of {shown(name)} has a step {shown(step)}"
            f"{_suggest(step, sorted(workflow.seen_steps))}"
        )
        out.append(_unknown(verdict, "unknown_step", why))
    return out


def _unknown(verdict: LimitVerdict, reason: NotJudgedReason, why: str) -> LimitVerdict:
    return replace(
        verdict,
        actual_ms=None,
        status="not_judged",
        runs=0,
        broken_runs=0,
        worst_run=None,
        reason=reason,
        why=why,
    )


_OPT_OUT: Final = {
    **{reason: "--allow-missing" for reason in ABSENT_REASONS},
    **{reason: "--allow-unjudged" for reason in UNJUDGED_REASONS},
}


def apply_opt_outs(
    verdicts: Iterable[LimitVerdict], budgets: Budgets, allow: Iterable[NotJudgedReason] = ()
) -> list[LimitVerdict]:
    """Each not-judged verdict marked ``allowed`` when ``allow`` names its reason or the
    budget marks its workflow or step ``optional``; the others' ``why`` names the flag that
    would opt out (for sources other than :func:`evaluate`, such as Prometheus).

    Example::

        verdicts = apply_opt_outs(verdicts, budgets, allow=ABSENT_REASONS)
    """
    allowed = frozenset(allow)
    return [_opted_out(v, budgets, allowed) for v in verdicts]


def _opted_out(
    verdict: LimitVerdict, budgets: Budgets, allow: frozenset[NotJudgedReason]
) -> LimitVerdict:
    """A not-judged verdict marked allowed when the user opted out of its reason, else its
    ``why`` naming the way to opt out."""
    if verdict.status != "not_judged" or verdict.reason is None:
        return verdict
    if verdict.reason in allow or _optional(verdict, budgets):
        return replace(verdict, allowed=True)
    why = verdict.why or verdict.reason
    hint = (
        "set optional = true if it runs only sometimes, or "
        if verdict.reason in ABSENT_REASONS and "optional = true" not in why
        else ""
    )
    return replace(verdict, why=f"{why}; {hint}{_OPT_OUT[verdict.reason]} to pass without it")


def _optional(verdict: LimitVerdict, budgets: Budgets) -> bool:
    """``optional = true`` on the workflow, or on the step, of a limit that no run has."""
    if verdict.reason not in ABSENT_REASONS:
        return False
    budget = budgets.workflows.get(verdict.workflow)
    if budget is None:
        return False
    if budget.optional:
        return True
    return any(
        limits.optional and verdict.target.startswith(_step_target(step, ""))
        for step, limits in budget.steps.items()
    )


def unknown_keys(
    report: BudgetReport, budgets: Budgets, *, workflows_not_run: bool = True
) -> list[str]:
    """Budget keys naming a workflow or a step that no run has, each as a one-line message
    with the closest names seen: a misspelled key would otherwise pass as "no data".

    The same facts are in the report's verdicts (reasons ``unknown_workflow`` and
    ``unknown_step``); this lists them by key. ``optional = true`` on a workflow or step
    says it runs only sometimes. Without ``workflows_not_run``, only the steps of workflows
    that ran are looked at (a test session that ran a subset of the tests).

    Example::

        problems = unknown_keys(evaluate(runs, budgets), budgets)
        assert not problems, "; ".join(problems)
    """
    found: list[str] = []
    seen = report.stats.workflows
    for name, budget in budgets.workflows.items():
        stats = seen.get(name)
        if stats is None:
            if not budget.optional and workflows_not_run:
                where = _key_path(("workflows", name))
                found.append(
                    f"{budgets.source}: {where}: no run of workflow {shown(name)}"
                    f"{_suggest(name, list(seen))}"
                )
            continue
        for step, limits in budget.steps.items():
            if step in stats.seen_steps or limits.optional:
                continue
            where = _key_path(("workflows", name, "steps", step))
            found.append(
                f"{budgets.source}: {where}: no run of {shown(name)} has a step "
                f"{shown(step)}{_suggest(step, sorted(stats.seen_steps))}"
            )
    return found


def _suggest(name: str, names: list[str]) -> str:
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return " (did you mean " + " or ".join(shown(c) for c in close) + "?)"
    if names:
        listed = ", ".join(shown(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
        return f" (seen: {listed}; set optional = true if it runs only sometimes)"
    return ""


def _too_few(count: int, min_runs: int) -> str:
    return f"{count} of the {min_runs} runs min_runs asks for: record more runs or lower min_runs"


def _error_rate_verdict(
    name: str, limit: float, budgets: Budgets, stats: WorkflowStats | None
) -> LimitVerdict:
    min_runs = budgets.min_runs_for(name)
    if stats is None or stats.runs == 0:
        return _no_data(name, "error_rate", limit, "%")
    rate = 100.0 * stats.errors / stats.runs
    status: VerdictStatus
    reason: NotJudgedReason | None = None
    why = None
    if stats.runs < min_runs:
        status, reason, why = "not_judged", "not_enough_runs", _too_few(stats.runs, min_runs)
    else:
        status = "broken" if rate > limit else "ok"
    return LimitVerdict(
        name,
        "error_rate",
        limit,
        rate,
        status,
        stats.runs,
        broken_runs=stats.errors,
        min_runs=min_runs,
        unit="%",
        reason=reason,
        why=why,
    )


def _percentile_verdicts(
    name: str, budget: WorkflowBudget, budgets: Budgets, stats: WorkflowStats | None
) -> list[LimitVerdict]:
    min_runs = budgets.min_runs_for(name)
    exclude = budgets.excludes_cache_hits(name)
    found: list[LimitVerdict] = []

    def judge(
        target: str, q: float, limit: float, samples: Samples | None, unit: Unit = "ms"
    ) -> None:
        count = samples.count(exclude_cached=exclude) if samples is not None else 0
        if samples is None or not count:
            found.append(_no_samples(name, target, limit, unit, q, samples, stats))
            return
        actual = samples.percentile(q, exclude_cached=exclude)
        assert actual is not None
        odd = samples.nonfinite(exclude_cached=exclude)
        status: VerdictStatus
        reason: NotJudgedReason | None = None
        why = None
        if odd is not None:
            # No percentile of a set holding NaN means anything: broken, whatever min_runs.
            actual, status = odd, "broken"
        elif count < min_runs:
            status, reason, why = "not_judged", "not_enough_runs", _too_few(count, min_runs)
        else:
            status = "broken" if _over(actual, limit) else "ok"
        found.append(
            LimitVerdict(
                name,
                target,
                limit,
                actual,
                status,
                count,
                percentile=q,
                min_runs=min_runs,
                unit=unit,
                reason=reason,
                why=why,
            )
        )

    for key in sorted(budget.percentiles, key=lambda k: _percentile_value(k, "")):
        q = _percentile_value(key, "")
        for quantity, limit in budget.percentiles[key].items():
            samples = stats.quantities[quantity] if stats is not None else None
            judge(_target(key, quantity), q, limit, samples)
    for key in sorted(budget.cost_percentiles, key=lambda k: _percentile_value(k, "cost_")):
        q = _percentile_value(key, "cost_")
        cost = stats.cost if stats is not None else None
        judge(key, q, budget.cost_percentiles[key], cost, "USD")
    for step, limits in budget.steps.items():
        step_stats = stats.steps.get(step) if stats is not None else None
        for key in sorted(limits.percentiles, key=lambda k: _percentile_value(k, "")):
            q = _percentile_value(key, "")
            samples = step_stats.duration if step_stats is not None else None
            judge(_step_target(step, key), q, limits.percentiles[key], samples)
        for key in sorted(limits.ttft_percentiles, key=lambda k: _percentile_value(k, "ttft_")):
            q = _percentile_value(key, "ttft_")
            samples = step_stats.ttft if step_stats is not None else None
            judge(_step_target(step, key), q, limits.ttft_percentiles[key], samples)
    return found


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a budget file (draft 2020-12), for editors and CI linters.

    Example::

        import json
        print(json.dumps(chainlat.budgets.json_schema(), indent=2))
    """
    schema = Budgets.model_json_schema()
    # The pNN keys are gathered into internal mappings by the models; in the file
    # they are plain keys, so the schema shows them as pattern properties.
    defs = schema["$defs"]
    step = defs["StepBudget"]
    step["properties"].pop("percentiles")
    step["properties"].pop("ttft_percentiles")
    step["patternProperties"] = {
        **_percentile_schema(_DURATION_SCHEMA),
        **_percentile_schema(_DURATION_SCHEMA, "ttft_"),
    }
    step["description"] = (
        "Limits on one step, by span name: max (each occurrence), pNN (a percentile "
        "of all occurrences), ttft and ttft_pNN (time to first token of model calls)."
    )
    workflow = defs["WorkflowBudget"]
    workflow["properties"].pop("percentiles")
    workflow["properties"].pop("cost_percentiles")
    workflow["patternProperties"] = {
        **_percentile_schema({"anyOf": [_DURATION_SCHEMA, {"$ref": "#/$defs/QuantityLimits"}]}),
        **_percentile_schema(_MONEY_SCHEMA, "cost_"),
    }
    workflow["description"] = (
        "The budget of one workflow: per-run limits (total, inference, data, tool, "
        "overhead, first_output, cost), percentile limits over many runs (p50, p90, p95, "
        "p99 or any pNN; cost_pNN), the share of failed runs (error_rate), and per-step "
        "limits."
    )
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "chainlat latency budgets"
    schema["description"] = (
        "Latency budgets for multi-step AI workflows (chainlat.toml, [tool.chainlat] in "
        'pyproject.toml, or chainlat.yaml). Durations are strings like "800ms", "1.2s", '
        '"250us", or numbers of milliseconds.'
    )
    return schema
