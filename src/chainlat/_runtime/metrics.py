"""Each run's rollup as metrics, for budgets that Prometheus enforces continuously.

When ``configure()`` has a metrics reader, every workflow run records, as it ends:

- ``chainlat.chain.duration`` (histogram, ms) once per kind the run has: ``total``,
  ``inference``, ``data``, ``tool``, ``overhead`` (its critical-path split) and
  ``first_output`` when the run measured one; labels ``gen_ai.workflow.name``,
  ``chainlat.chain.kind``, for a failed run ``error.type``, and for a voice turn the
  caller interrupted (barge-in) ``gen_ai.agent.invocation.end_reason = "interrupted"``,
  so that the rules can leave it out of the percentiles as ``chainlat check`` does;
- ``chainlat.budget.exceeded`` (counter, runs), when runtime budgets are enforced: one
  per broken per-run limit, labelled ``gen_ai.workflow.name`` and
  ``chainlat.budget.target`` (``total``, ``steps."chat gpt-4o".max``). Every budgeted
  (workflow, limit) starts at 0, so the first broken run is an increase Prometheus sees.

The histogram's bucket boundaries are the GenAI conventions' grid (10 ms doubling
to 81.92 s) plus every millisecond limit of the budgets, so "at most this share of
runs over the limit" is read from a boundary, exactly. :mod:`chainlat.prometheus`
turns a budget file into the Prometheus rules over these series.

Nothing is recorded without a metrics reader: the hook is not even installed.
Recording costs one histogram point per kind and run (a few microseconds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from opentelemetry.trace import StatusCode

from chainlat._core import attributes as attr
from chainlat._core import voice
from chainlat._core.errors import internal_errors
from chainlat._core.turn_start import said_unknown_start
from chainlat._runtime.interface import WorkflowHandle, on_workflow_end

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, MeterProvider

    from chainlat.budgets import Budgets

CHAIN_DURATION: Final = "chainlat.chain.duration"
CHAIN_KIND: Final = "chainlat.chain.kind"
BUDGET_EXCEEDED: Final = "chainlat.budget.exceeded"
BASE_BUCKETS_MS: Final = tuple(round(s * 1000, 6) for s in attr.DURATION_BUCKETS_S)

_SPLIT: Final = ("inference", "data", "tool", "overhead")
_FIRST_OUTPUT_MS: Final = "chainlat.chain.first_output_ms"


class ChainMetrics:
    """The instruments, and what one ended run records in them."""

    def __init__(self, meter_provider: MeterProvider, budgets: Budgets | None) -> None:
        meter = meter_provider.get_meter(attr.TRACER_NAME)
        self.boundaries_ms = list(BASE_BUCKETS_MS)
        if budgets is not None:
            from chainlat.budgets.targets import chain_boundaries

            self.boundaries_ms = chain_boundaries(budgets, BASE_BUCKETS_MS)
        self.duration: Histogram = meter.create_histogram(
            CHAIN_DURATION,
            unit="ms",
            description="Wall time of each workflow run and its critical-path split.",
            explicit_bucket_boundaries_advisory=self.boundaries_ms,
        )
        self.exceeded: Counter = meter.create_counter(
            BUDGET_EXCEEDED,
            unit="{run}",
            description="Runs that broke a per-run limit of their latency budget.",
        )
        if budgets is not None:
            from chainlat.budgets.targets import per_run_targets

            for workflow, budget in budgets.workflows.items():
                for target, _ in per_run_targets(budget):
                    self.exceeded.add(0, _target_labels(workflow, target))

    def record(self, handle: WorkflowHandle) -> None:
        """Record an ending workflow run (its rollup is set, its span still open)."""
        rollup = handle.rollup
        if rollup is None:
            return
        from chainlat._runtime.budgets import workflow_name

        span = handle.span
        name = workflow_name(handle)
        labels: dict[str, str] = {attr.GEN_AI_WORKFLOW_NAME: name}
        attributes: Mapping[str, object] = getattr(span, "attributes", None) or {}
        status = getattr(span, "status", None)
        if status is not None and status.status_code is StatusCode.ERROR:
            error = attributes.get(attr.ERROR_TYPE)
            labels[attr.ERROR_TYPE] = error if isinstance(error, str) and error else "_OTHER"
        if voice.is_interrupted(attributes):
            # Only interrupted turns carry it (as only failed runs carry error.type): the
            # other end reasons would split the series for nothing the rules read.
            labels[attr.GEN_AI_AGENT_INVOCATION_END_REASON] = "interrupted"
        record = self.duration.record
        record(rollup.total_ms, {**labels, CHAIN_KIND: "total"})
        for kind in _SPLIT:
            record(rollup.kind_ms(kind), {**labels, CHAIN_KIND: kind})
        first_output = _first_output_ms(handle)
        if first_output is not None:
            record(first_output, {**labels, CHAIN_KIND: "first_output"})
        if attributes.get(attr.BUDGET_OK) is False:
            for event in getattr(span, "events", ()):
                if event.name != attr.BUDGET_EXCEEDED_EVENT:
                    continue
                target = (event.attributes or {}).get(attr.BUDGET_TARGET)
                if isinstance(target, str):
                    self.exceeded.add(1, _target_labels(name, target))


def _target_labels(workflow: str, target: str) -> dict[str, str]:
    return {attr.GEN_AI_WORKFLOW_NAME: workflow, attr.BUDGET_TARGET: target}


def _first_output_ms(handle: WorkflowHandle) -> float | None:
    rollup = handle.rollup
    attributes = getattr(handle.span, "attributes", None) or {}
    if (rollup is not None and rollup.bound_in("first_output")) or said_unknown_start(attributes):
        return None  # a bound, not a measurement (docs/attributes.md, rules 13, 15, 16 and 17)
    value = getattr(rollup, "first_output_ms", None)
    if value is None:
        value = attributes.get(_FIRST_OUTPUT_MS)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


_active: ChainMetrics | None = None
_remove: Callable[[], None] | None = None
"""Removes the workflow-end callback; None while nothing is recorded."""


def _record(handle: WorkflowHandle) -> None:
    active = _active
    if active is None:
        return
    try:
        active.record(handle)
    except Exception:
        with internal_errors("recording chain metrics"):
            raise


def install(meter_provider: MeterProvider | None, budgets: Budgets | None) -> None:
    """Record chain metrics through ``meter_provider`` from now on (None: stop).

    The hook runs after the runtime budget check, which it reads the verdict of.
    """
    global _active, _remove
    if _remove is not None:
        _remove()
        _remove = None
    if meter_provider is None:
        _active = None
        return
    _active = ChainMetrics(meter_provider, budgets)
    _remove = on_workflow_end(_record)


def active() -> ChainMetrics | None:
    """The chain metrics being recorded, if any."""
    return _active
