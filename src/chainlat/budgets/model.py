"""The budget file's model: pydantic models of the defaults, workflows, steps and prices.

Importing this module imports pydantic: :mod:`chainlat.budgets` does it only when a budget
is loaded or built.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    WithJsonSchema,
    model_validator,
)

from chainlat._core.prices import Price
from chainlat.budgets._values import (
    DURATION_SCHEMA,
    MONEY_SCHEMA,
    RATE_SCHEMA,
    check_cost_percentile_key,
    check_percentile_key,
    check_ttft_percentile_key,
    parse_duration,
    parse_money,
    parse_rate,
)

Rate = Annotated[float, BeforeValidator(parse_rate), WithJsonSchema(RATE_SCHEMA)]
"""A share of runs in percent, written ``"2%"`` or as a fraction ``0.02``."""
Money = Annotated[float, BeforeValidator(parse_money), WithJsonSchema(MONEY_SCHEMA)]
"""US dollars."""
CostPercentileKey = Annotated[str, AfterValidator(check_cost_percentile_key)]
Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema(DURATION_SCHEMA)]
"""A duration in milliseconds, written as ``"800ms"``, ``"1.2s"``, ``"250us"`` or a number."""
PercentileKey = Annotated[str, AfterValidator(check_percentile_key)]
TtftPercentileKey = Annotated[str, AfterValidator(check_ttft_percentile_key)]
Quantity = Literal[
    "total",
    "inference",
    "data",
    "tool",
    "overhead",
    "first_output",
    "speech_to_text",
    "text_to_speech",
    "first_output_speech_to_text",
    "first_output_text_to_speech",
    "first_output_end_of_turn",
]


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


class BudgetModel(BaseModel):
    # The string under each field describes it in the JSON Schema (schema.py reads them when
    # asked): pydantic's own reading of them (``use_attribute_docstrings``) would search the
    # stack and parse this file's classes each time a budget is first loaded.
    model_config = ConfigDict(extra="forbid", frozen=True)

    keys_help: ClassVar[str] = ""


Operation = Literal[
    "chat",
    "text_completion",
    "generate_content",
    "embeddings",
    "speech_to_text",
    "text_to_speech",
    "realtime",
]
"""A model call's ``gen_ai.operation.name``, as ``[workflows.X.operations.<operation>]`` keys."""


class OperationLimits(BudgetModel):
    """Limits on a percentile of every call of one operation in a workflow's runs."""

    keys_help: ClassVar[str] = "latency, first_output"

    latency: Duration | None = None
    """The calls' duration."""
    first_output: Duration | None = None
    """The calls' first output: the first audio byte (text to speech), the first
    transcript delta (speech to text), the first token (chat)."""


class OperationBudget(BudgetModel):
    """Limits on every call of one operation inside a workflow (``text_to_speech``)."""

    keys_help: ClassVar[str] = "latency, first_output, p50/p90/p95/p99 (any pNN)"

    latency: Duration | None = None
    """Limit on the duration of every call, in every run."""
    first_output: Duration | None = None
    """Limit on the first output of every call that streamed, in every run."""
    percentiles: dict[PercentileKey, OperationLimits] = Field(default_factory=dict)
    """``p95 = { latency = "400ms", first_output = "150ms" }``: percentiles over all the
    calls of the operation in the workflow's runs."""

    @model_validator(mode="before")
    @classmethod
    def _gather_percentiles(cls, data: object) -> object:
        return _gather(data, {"": "percentiles"})


def _quantity_limits_schema(schema: dict[str, Any]) -> None:
    schema["description"] = (
        "Limits on a percentile of the runs' total and critical-path split; "
        "a bare duration limits the total."
    )


class QuantityLimits(BudgetModel):
    """Limits on one percentile (or on each run) of a workflow's wall time and its split."""

    model_config = ConfigDict(json_schema_extra=_quantity_limits_schema)
    keys_help: ClassVar[str] = (
        "total, inference, data, tool, overhead, first_output, speech_to_text, "
        "text_to_speech, first_output_speech_to_text, first_output_text_to_speech, "
        "first_output_end_of_turn"
    )

    total: Duration | None = None
    inference: Duration | None = None
    data: Duration | None = None
    tool: Duration | None = None
    overhead: Duration | None = None
    first_output: Duration | None = None
    """The wait for the first output the user saw (``chainlat.chain.first_output_ms``)."""
    speech_to_text: Duration | None = None
    """Critical-path time in speech-to-text calls (``chainlat.chain.speech_to_text_ms``)."""
    text_to_speech: Duration | None = None
    """Critical-path time in text-to-speech calls (``chainlat.chain.text_to_speech_ms``)."""
    first_output_speech_to_text: Duration | None = None
    """The speech-to-text part of the wait for the first output (a voice turn's first audio)."""
    first_output_text_to_speech: Duration | None = None
    """The text-to-speech part of the wait for the first output."""
    first_output_end_of_turn: Duration | None = None
    """The end-of-turn part of the wait for the first output: from the end of the caller's
    words to the detection of their turn's end (``chainlat.chain.first_output.end_of_turn_ms``)."""

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


class StepBudget(BudgetModel):
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


class WorkflowBudget(BudgetModel):
    """The budget of one workflow: per-run limits, percentile limits and per-step limits."""

    keys_help: ClassVar[str] = (
        "total, inference, data, tool, overhead, first_output, speech_to_text, "
        "text_to_speech, first_output_speech_to_text, first_output_text_to_speech, "
        "first_output_end_of_turn, p50/p90/p95/p99 (any pNN), error_rate, cost, "
        "cost_p95 (any cost_pNN), min_runs, "
        "exclude_cache_hits, include_errors, include_interrupted, optional, steps, operations"
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
    speech_to_text: Duration | None = None
    """Limit on the critical-path time in speech-to-text calls, every voice run."""
    text_to_speech: Duration | None = None
    first_output_speech_to_text: Duration | None = None
    first_output_text_to_speech: Duration | None = None
    first_output_end_of_turn: Duration | None = None
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
    include_interrupted: StrictBool | None = None
    """Count turns interrupted by barge-in in the latency percentiles and the per-run limits
    (default: the file's, false)."""
    optional: StrictBool = False
    """The workflow runs only sometimes: no run of it is not an error."""
    steps: dict[str, StepBudget] = Field(default_factory=dict)
    """Per-step limits, by step name (``chainlat.step.name``), else span name."""
    operations: dict[Operation, OperationBudget] = Field(default_factory=dict)
    """Limits on every call of an operation (``text_to_speech``), whatever its step."""

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
            speech_to_text=self.speech_to_text,
            text_to_speech=self.text_to_speech,
            first_output_speech_to_text=self.first_output_speech_to_text,
            first_output_text_to_speech=self.first_output_text_to_speech,
            first_output_end_of_turn=self.first_output_end_of_turn,
        )


class ModelPrice(BudgetModel):
    """US dollars per million tokens of one model: ``[prices."gpt-4o"]``."""

    keys_help: ClassVar[str] = "input_per_mtok, output_per_mtok, cache_read_per_mtok"

    input_per_mtok: Money
    output_per_mtok: Money
    cache_read_per_mtok: Money | None = None
    """Input tokens read from the prompt cache (default: the input price)."""

    def price(self) -> Price:
        """As the rollup takes it."""
        return Price(self.input_per_mtok, self.output_per_mtok, self.cache_read_per_mtok)


class Budgets(BudgetModel):
    """A budget file: defaults and one :class:`WorkflowBudget` per workflow name.

    Example::

        budgets = Budgets.model_validate({"workflows": {"chat": {"total": "800ms"}}})
        assert budgets.workflows["chat"].total == 800.0
    """

    keys_help: ClassVar[str] = (
        "version, min_runs, exclude_cache_hits, include_errors, include_interrupted, prices, "
        "workflows"
    )

    version: Literal[1] = 1
    """The format version; 1."""
    min_runs: Annotated[StrictInt, Field(ge=1)] = 1
    """Default runs needed before a percentile verdict counts."""
    exclude_cache_hits: StrictBool = False
    """Default for leaving cache hits out of percentiles."""
    include_errors: StrictBool = False
    """Default for counting failed runs in the latency percentiles."""
    include_interrupted: StrictBool = False
    """Default for counting interrupted voice turns in the latency percentiles and the per-run
    limits."""
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

    def includes_interrupted(self, workflow: str) -> bool:
        """Whether turns interrupted by barge-in count in ``workflow``'s latency percentiles."""
        budget = self.workflows.get(workflow)
        if budget is not None and budget.include_interrupted is not None:
            return budget.include_interrupted
        return self.include_interrupted

    def limits_operations(self, workflow: str) -> bool:
        """Whether ``workflow`` has limits by operation (its model calls sampled so)."""
        budget = self.workflows.get(workflow)
        return budget is not None and bool(budget.operations)

    def model_prices(self) -> dict[str, Price] | None:
        """The ``[prices]`` table as the rollup takes it; None when the file has none."""
        return {m: p.price() for m, p in self.prices.items()} if self.prices else None

    def excludes_cache_hits(self, workflow: str) -> bool:
        """Whether cache hits are left out of ``workflow``'s percentiles."""
        budget = self.workflows.get(workflow)
        if budget is not None and budget.exclude_cache_hits is not None:
            return budget.exclude_cache_hits
        return self.exclude_cache_hits
