"""The run model: one finished workflow run, whatever it was read from.

Pure and stdlib only. A :class:`WorkflowRun` is built the same way from a live workflow
(the span processor's records) and from a trace (the readers' :class:`TracedSpan`), so a
run judged in the application and in CI gets the same numbers. Budgets and statistics read
its rollup and steps; the trade-off analysis (profiles, what-if, compare) reads its span
tree, variant and outcome, which runs read from traces carry. Which spans of a trace make
runs, and with which steps and outcomes, is :mod:`chainlat._core.trace_runs`.

Which spans are *steps* here follows the rollup: a span classified as
inference, data or tool counts, unless it sits inside a step of the same kind
(the HTTP-level model span inside a hand-written ``chainlat.inference`` is the
same call seen twice). A nested workflow counts as a step of the outer one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from chainlat._core import attributes as attr
from chainlat._core import voice
from chainlat._core.amounts import amount
from chainlat._core.conventions import classify
from chainlat._core.prices import Prices
from chainlat._core.recorded import inconsistency as inconsistency
from chainlat._core.records import apply_events
from chainlat._core.rollup import (
    Rollup,
    SpanRecord,
    call_record,
    compute_rollup,
)
from chainlat._core.steps import StepKindName as StepKindName
from chainlat._core.steps import StepTiming as StepTiming
from chainlat._core.steps import steps_of as steps_of

Attributes = Mapping[str, object]
NO_VARIANT: Final = "(none)"
"""The variant label of runs recorded without one."""


_NS_PER_MS: Final = 1_000_000


@dataclass(slots=True)
class TracedSpan:
    """One span of a trace: the rollup's record and the span's attributes.

    Treated as immutable; not frozen for the reader's speed (see ``SpanRecord``).
    """

    record: SpanRecord
    attributes: Attributes = field(default_factory=dict)
    error: bool = False
    """The span ended with status ERROR."""
    origin: str = ""
    """Where the span was read: ``traces.jsonl:17``, a Jaeger URL; empty for live spans."""


@dataclass(slots=True, unsafe_hash=True)
class WorkflowRun:
    """One finished run of a workflow: its rollup and its steps in start order.

    Treated as immutable, but not frozen, nor are its rollup and steps: a frozen dataclass
    sets each field through ``object.__setattr__``, and the 147 fields of a ten-span run
    read from a trace cost ``chainlat check`` a fifth of its instructions (BENCHMARKS.md).
    They are hashed by value all the same, as frozen ones are.
    """

    workflow: str
    """``gen_ai.workflow.name``."""
    rollup: Rollup
    steps: tuple[StepTiming, ...]
    start_ns: int
    end_ns: int
    trace_id: str = ""
    """Hex trace id, when known."""
    span_id: str = ""
    """Hex span id of the workflow span, when known."""
    error: bool = False
    """The workflow span ended with status ERROR."""
    origin: str = ""
    """Where the run was seen: ``traces.jsonl:17``, a Jaeger URL, a test id."""
    root: TracedSpan | None = field(default=None, repr=False, compare=False)
    """The workflow span with its attributes, for runs read from traces."""
    spans: Sequence[TracedSpan] = field(default=(), repr=False, compare=False)
    """The workflow span's descendants, in any order, for runs read from traces."""
    variant: str | None = None
    """``chainlat.variant``: the configuration the run was made with."""
    success: bool | None = None
    """``chainlat.outcome.success``, merged from outcome spans; None when not recorded."""
    score: float | None = None
    """``chainlat.outcome.score``, merged from outcome spans; None when not recorded."""
    nested: bool = False
    """The workflow ran inside another workflow (it is a step of that run too)."""
    incomplete: str | None = None
    """Why a reader could not read the run whole (its root span is its own parent); None
    when it could. Budgets do not pass the limits of such a run's workflow."""
    rebuilt: str = ""
    """Why the rollup recorded on the workflow span was not used and the rollup was rebuilt
    from the spans (``chainlat.chain.total_ms -100 is negative``); empty when it was used or
    none was recorded."""
    unknown_start: str | None = None
    """Why the run, a voice turn, starts where the caller did not stop speaking, the end of
    their words not being in its trace (`chainlat._core.turn_start`; a turn placed by a
    ``semantic_vad`` server's stop says so itself, ``chainlat.workflow.start_unknown``):
    what counts from its start (`chainlat._core.voice.UNKNOWN_START_QUANTITIES`) is then a
    bound, not a measurement (lower when the start is late, upper when early), and not
    judged (docs/attributes.md, rule 16); None when the start is the end of the words."""

    @property
    def total_ms(self) -> float:
        """Wall time of the run."""
        return self.rollup.total_ms

    @property
    def sampling(self) -> tuple[float, bool]:
        """How many runs this one stands for (1/p of the sampling probability recorded on its
        workflow span, else 1), and whether a sampler kept it without recording one (so
        percentiles over such runs are biased)."""
        if self.root is None:
            return 1.0, False
        attributes = self.root.attributes
        p = attributes.get(attr.SAMPLING_PROBABILITY)
        if isinstance(p, str):
            try:
                p = float(p)
            except ValueError:
                p = None
        if isinstance(p, (int, float)) and not isinstance(p, bool) and 0 < p <= 1:
            return 1.0 / p, False
        return 1.0, attr.TAIL_SAMPLING_POLICY in attributes

    @property
    def interrupted(self) -> bool:
        """Whether the run is a voice turn the caller interrupted (barge-in): its answer was
        cut, its latency is no answer's (left out unless ``include_interrupted``)."""
        return self.root is not None and voice.is_interrupted(self.root.attributes)

    @property
    def first_output_ms(self) -> float | None:
        """From the run's start to the first output the user saw; None without one."""
        return self.rollup.first_output_ms

    @property
    def first_output_bound(self) -> bool:
        """Whether the first output is a bound, not a measurement: it depends on a call's
        unrecorded end or on a first token not known, or counts from a start that is no end
        of the caller's words (docs/attributes.md, rules 13, 15, 16 and 17)."""
        return self.rollup.bound_in("first_output") or self.unknown_start is not None

    @property
    def cost_usd(self) -> float | None:
        """What the run's model calls cost, when prices were known."""
        return self.rollup.cost_usd

    @property
    def variant_label(self) -> str:
        """The variant, or ``(none)``."""
        return self.variant if self.variant is not None else NO_VARIANT

    @property
    def records(self) -> list[SpanRecord]:
        """The descendants' records, for :func:`~chainlat._core.rollup.compute_rollup`."""
        return [s.record for s in self.spans]

    @property
    def root_record(self) -> SpanRecord:
        """The workflow span's record (rebuilt from the run's times when not kept)."""
        if self.root is not None:
            return self.root.record
        span_id = int(self.span_id, 16) if self.span_id else 0
        return SpanRecord(span_id, None, self.workflow, self.start_ns, self.end_ns, "workflow")

    @classmethod
    def from_spans(
        cls,
        workflow: str,
        root: TracedSpan,
        spans: Iterable[TracedSpan],
        *,
        trace_id: str = "",
        variant: str | None = None,
        success: bool | None = None,
        score: float | None = None,
        origin: str = "",
    ) -> WorkflowRun:
        """A run from its workflow span and descendants, with the rollup computed from them."""
        kept = tuple(spans)
        return built_run(
            workflow,
            root.record,
            [s.record for s in kept],
            traced=root,
            spans=kept,
            trace_id=trace_id,
            error=root.error,
            origin=origin or root.origin,
            variant=variant,
            success=success,
            score=score,
        )

    def recomputed_rollup(self, prices: Prices | None = None) -> Rollup:
        """The rollup computed afresh from the run's spans (the recorded one may be older);
        with ``prices``, its cost too."""
        marked = marked_first_output(self.root) if self.root is not None else None
        return compute_rollup(
            self.root_record,
            self.records,
            first_output_ns=marked,
            prices=prices,
            end_of_turn_ns=self.end_of_turn_ns,
        )

    @property
    def end_of_turn_ns(self) -> int | None:
        """For a voice turn whose trace says when its end was decided: that instant (the
        run starts at the end of the caller's words, `chainlat._core.turn_start`), kept in
        the rollup as the end-of-turn part of the first output's wait."""
        waited = self.rollup.first_output_end_of_turn_ms
        return None if waited is None else self.start_ns + round(waited * _NS_PER_MS)


@dataclass(frozen=True, slots=True)
class BudgetViolation:
    """One limit a run (or a set of runs) broke.

    ``target`` is the limit's key path inside the workflow's budget, as written
    in the budget file: ``total``, ``p95.data``, ``steps."chat gpt-4o".ttft``.
    """

    workflow: str
    target: str
    limit_ms: float
    """The limit; in ``unit`` (milliseconds for every latency limit)."""
    actual_ms: float
    unit: Unit = "ms"

    def __str__(self) -> str:
        return (
            f"{self.workflow}: {self.target} "
            f"{amount(self.actual_ms, self.unit, against=self.limit_ms)} > "
            f"limit {amount(self.limit_ms, self.unit, limit=True)}"
        )


Unit = Literal["ms", "%", "USD"]
"""What a limit's numbers are: milliseconds, percent of runs, US dollars."""


def cost_of(run: WorkflowRun, prices: Prices | None) -> float | None:
    """What a run's model calls cost: as recorded, else from its spans and ``prices``."""
    if run.rollup.cost_usd is not None or not prices or not run.spans:
        return run.rollup.cost_usd
    return compute_rollup(run.root_record, run.records, prices=prices).cost_usd


def step_key(name: str) -> str:
    """A step name as it appears in a key path: quoted when it is not a bare key."""
    bare = name.replace("-", "").replace("_", "")
    if bare.isascii() and bare.isalnum():
        return name
    escaped = name.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def build_run(
    workflow: str,
    root: SpanRecord,
    spans: Iterable[SpanRecord],
    *,
    rollup: Rollup | None = None,
    trace_id: str = "",
    error: bool = False,
    origin: str = "",
    unknown_start: str | None = None,
) -> WorkflowRun:
    """A run from its workflow span and descendants; the rollup is computed when not given.
    ``unknown_start``: why its start is no known end of the caller's words (rule 16)."""
    return built_run(
        workflow,
        root,
        list(spans),
        rollup=rollup,
        trace_id=trace_id,
        error=error,
        origin=origin,
        unknown_start=unknown_start,
    )


def built_run(
    workflow: str,
    root: SpanRecord,
    records: list[SpanRecord],
    *,
    rollup: Rollup | None = None,
    steps: tuple[StepTiming, ...] | None = None,
    traced: TracedSpan | None = None,
    spans: Sequence[TracedSpan] = (),
    trace_id: str = "",
    error: bool = False,
    origin: str = "",
    variant: str | None = None,
    success: bool | None = None,
    score: float | None = None,
    nested: bool = False,
    rebuilt: str = "",
    incomplete: str | None = None,
    end_of_turn_ns: int | None = None,
    first_output_ns: int | None = None,
    unknown_start: str | None = None,
) -> WorkflowRun:
    """The one builder of a run, live or read (``traced``: the workflow span read from a
    trace, kept on the run with its descendants ``spans``); the rollup and the steps are
    computed from the records when not given (``end_of_turn_ns``: as for
    `compute_rollup`; ``first_output_ns``: the application's mark, when the caller read
    it, else read from ``traced``)."""
    if rollup is None:
        marked = first_output_ns
        if marked is None and traced is not None:
            marked = marked_first_output(traced)
        rollup = compute_rollup(
            root, records, first_output_ns=marked, end_of_turn_ns=end_of_turn_ns
        )
    return WorkflowRun(
        workflow=workflow,
        rollup=rollup,
        steps=steps if steps is not None else steps_of(root, records),
        start_ns=root.start_ns,
        end_ns=max(root.end_ns, root.start_ns),
        trace_id=trace_id,
        span_id=f"{root.span_id:016x}",
        error=error,
        origin=origin,
        root=traced,
        spans=spans,
        variant=variant,
        success=success,
        score=score,
        nested=nested,
        rebuilt=rebuilt,
        incomplete=incomplete,
        unknown_start=unknown_start,
    )


def record_of(
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: Attributes,
    events: Sequence[tuple[str, int]] = (),
) -> SpanRecord:
    """The rollup's record of a span, from its attributes and its events (name, time in ns)."""
    record = call_record(
        span_id, parent_id, name, start_ns, end_ns, classify(attributes), attributes
    )
    if events:
        apply_events(record, events)
    return record


def marked_first_output(root: TracedSpan) -> int | None:
    """The first output the application marked on a workflow span (``run.first_output()``)."""
    value = root.attributes.get(attr.WORKFLOW_FIRST_OUTPUT_MS)
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return root.record.start_ns + round(value * _NS_PER_MS)
