"""The run model: one finished workflow run, whatever it was read from.

Pure and stdlib only. A :class:`WorkflowRun` is built the same way from a live
workflow (the span processor's records) and from a trace (the readers'
:class:`TracedSpan`), so a run judged in the application and the same run judged
in CI get the same numbers. Budgets and statistics read its rollup and steps;
the trade-off analysis (profiles, what-if, compare) reads its span tree, variant
and outcome, which runs read from traces carry.

Outcomes recorded after the fact (``chainlat.record_outcome(trace_id=...)``) are
small ``record_outcome`` spans in the run's trace; :func:`runs_of_trace` merges
them onto the workflow: the workflow span they are a child of, else the trace's
only top-level workflow. An outcome on the workflow span itself comes first;
later outcome spans override it, in order of their end time.

Which spans are *steps* here follows the rollup: a span classified as
inference, data or tool counts, unless it sits inside a step of the same kind
(the HTTP-level model span inside a hand-written ``chainlat.inference`` is the
same call seen twice). A nested workflow counts as a step of the outer one.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from chainlat._core import attributes as attr
from chainlat._core import conventions
from chainlat._core.prices import Prices
from chainlat._core.rollup import (
    Rollup,
    SpanRecord,
    call_record,
    classify,
    compute_rollup,
    find_twins,
)

Attributes = Mapping[str, object]
NO_VARIANT: Final = "(none)"
"""The variant label of runs recorded without one."""

StepKindName = Literal["inference", "data", "tool", "workflow"]

_NS_PER_MS: Final = 1_000_000
_COUNTED: Final = frozenset({"inference", "data", "tool"})
_CHAIN_TOTAL_MS: Final = attr.CHAIN_TOTAL_MS
_STEP_KINDS: Final = frozenset({"inference", "data", "tool", "workflow"})


@dataclass(frozen=True, slots=True)
class StepTiming:
    """One step of a run: a model call, data stage, tool call or nested workflow."""

    name: str
    """The step's key in budgets and reports: its ``chainlat.step.name`` when it has one
    (``plan``), else its span name (``chat gpt-4o``, ``data retrieve-docs``)."""
    kind: StepKindName
    start_ns: int
    end_ns: int
    depth: int = 0
    """0 for a step directly in the workflow, 1 for a step inside that step, ..."""
    ttft_ms: float | None = None
    """Time to first token, for streamed model calls."""
    cache_hit: bool = False
    span_name: str = ""
    """The span name, also when the step has a step name."""
    model: str | None = None
    """The model of a model call, when known."""

    @property
    def duration_ms(self) -> float:
        """Wall time of the step."""
        return (self.end_ns - self.start_ns) / _NS_PER_MS


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


@dataclass(frozen=True, slots=True)
class WorkflowRun:
    """One finished run of a workflow: its rollup and its steps in start order."""

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
    spans: tuple[TracedSpan, ...] = field(default=(), repr=False, compare=False)
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
    def first_output_ms(self) -> float | None:
        """From the run's start to the first output the user saw; None without one."""
        return self.rollup.first_output_ms

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
        records = [s.record for s in kept]
        rec = root.record
        return cls(
            workflow=workflow,
            rollup=compute_rollup(rec, records, first_output_ns=marked_first_output(root)),
            steps=steps_of(rec, records),
            start_ns=rec.start_ns,
            end_ns=max(rec.end_ns, rec.start_ns),
            trace_id=trace_id,
            span_id=f"{rec.span_id:016x}",
            error=root.error,
            origin=origin or root.origin,
            root=root,
            spans=kept,
            variant=variant,
            success=success,
            score=score,
        )

    def recomputed_rollup(self, prices: Prices | None = None) -> Rollup:
        """The rollup computed afresh from the run's spans (the recorded one may be older);
        with ``prices``, its cost too."""
        marked = marked_first_output(self.root) if self.root is not None else None
        return compute_rollup(self.root_record, self.records, first_output_ns=marked, prices=prices)


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
            f"{self.workflow}: {self.target} {amount(self.actual_ms, self.unit)} > "
            f"limit {amount(self.limit_ms, self.unit, limit=True)}"
        )


Unit = Literal["ms", "%", "USD"]
"""What a limit's numbers are: milliseconds, percent of runs, US dollars."""


def amount(value: float, unit: str, *, limit: bool = False) -> str:
    """A measured value (one decimal) or a limit (as written) with its unit."""
    if unit == "USD":
        return f"${value:.6g}" if limit else f"${value:.4f}"
    if unit == "%":
        return f"{value:g}%" if limit else f"{value:.1f}%"
    return f"{value:g} ms" if limit else f"{value:.1f} ms"


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


def steps_of(root: SpanRecord, spans: Iterable[SpanRecord]) -> tuple[StepTiming, ...]:
    """The steps under a workflow span, in start order (ties: outer first)."""
    records = spans if isinstance(spans, list) else list(spans)
    twins = find_twins(root.span_id, records)
    if not twins:
        flat = _flat_steps(root.span_id, records)
        if flat is not None:
            return flat
    by_parent: dict[int, list[SpanRecord]] = {}
    for rec in records:
        if rec.parent_id is not None and rec.span_id != root.span_id:
            by_parent.setdefault(rec.parent_id, []).append(rec)
    found: list[StepTiming] = []
    position: dict[int, int] = {}  # span id -> index in ``found``, for twins
    # Each frame: a span, the kind of the innermost step around it ("" for
    # none), the depth a step found below it gets, and the index in ``found``
    # of the step that owns it (-1: the workflow itself).
    stack: list[tuple[SpanRecord, str, int, int]] = [(root, "", 0, -1)]
    seen = {root.span_id}
    while stack:
        parent, around, depth, owner = stack.pop()
        for rec in by_parent.get(parent.span_id, ()):
            if rec.span_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(rec.span_id)
            kind = rec.kind
            if twins and rec.span_id in twins:
                stack.append((rec, around, depth, owner))  # the same call, counted as its twin
                continue
            if kind == "workflow" or (kind in _COUNTED and kind != around):
                start_ns = rec.start_ns
                end_ns = rec.end_ns
                found.append(
                    StepTiming(
                        rec.step_name or rec.name,
                        kind,  # a step kind, checked above
                        start_ns,
                        end_ns if end_ns > start_ns else start_ns,
                        depth,
                        rec.ttft_ms,
                        rec.cache_hit,
                        rec.name,
                        rec.model,
                    )
                )
                position[rec.span_id] = len(found) - 1
                # As in the rollup, a nested workflow takes the kind around it.
                inner = kind if kind in _COUNTED else around
                stack.append((rec, inner, depth + 1, len(found) - 1))
                continue
            if kind is not None and kind == around and owner >= 0 and found[owner].kind == kind:
                # The same operation seen twice: its first token and cache hit
                # belong to the step around it.
                outer = found[owner]
                ttft = outer.ttft_ms
                if ttft is None and rec.ttft_ms is not None:
                    ttft = (rec.start_ns - outer.start_ns) / _NS_PER_MS + rec.ttft_ms
                if (
                    ttft != outer.ttft_ms
                    or (rec.cache_hit and not outer.cache_hit)
                    or (outer.model is None and rec.model is not None)
                ):
                    found[owner] = StepTiming(
                        outer.name,
                        outer.kind,
                        outer.start_ns,
                        outer.end_ns,
                        outer.depth,
                        ttft,
                        outer.cache_hit or rec.cache_hit,
                        outer.span_name,
                        outer.model or rec.model,
                    )
            stack.append((rec, around, depth, owner))
    if twins:
        _merge_twins(found, position, twins, records)
    if len(found) > 1:
        found.sort(key=_START_THEN_DEPTH)  # stable: ties keep the order found
    return tuple(found)


def _flat_steps(root_id: int, records: list[SpanRecord]) -> tuple[StepTiming, ...] | None:
    """The steps of a workflow whose spans are all its children (the common shape), as
    :func:`steps_of` finds them, in one loop; None for any other shape."""
    ids = set()
    for rec in records:
        if rec.parent_id != root_id or rec.span_id == root_id:
            return None
        ids.add(rec.span_id)
    if len(ids) != len(records):
        return None  # a span id twice: the general walk keeps the first
    found: list[StepTiming] = []
    append = found.append
    for rec in records:
        kind = rec.kind
        if kind is None or kind not in _STEP_KINDS:
            continue
        start_ns = rec.start_ns
        end_ns = rec.end_ns
        append(
            StepTiming(
                rec.step_name or rec.name,
                kind,  # a step kind, checked above
                start_ns,
                end_ns if end_ns > start_ns else start_ns,
                0,
                rec.ttft_ms,
                rec.cache_hit,
                rec.name,
                rec.model,
            )
        )
    if len(found) > 1:
        found.sort(key=_START_THEN_DEPTH)
    return tuple(found)


def _more_steps(steps: Sequence[StepTiming], recorded: Rollup) -> bool:
    """Whether the trace holds more model calls, data stages or tools than ``recorded``
    counted: spans the live rollup never saw."""
    inference = data = tool = 0
    for step in steps:
        kind = step.kind
        if kind == "inference":
            inference += 1
        elif kind == "data":
            data += 1
        elif kind == "tool":
            tool += 1
    return (
        inference > recorded.inference_count
        or data > recorded.data_count
        or tool > recorded.tool_count
    )


def _merge_twins(
    found: list[StepTiming],
    position: Mapping[int, int],
    twins: Mapping[int, SpanRecord],
    records: Iterable[SpanRecord],
) -> None:
    """Give each counted call the extent, first token and cache hit its twin saw."""
    for rec in records:
        primary = twins.get(rec.span_id)
        i = position.get(primary.span_id) if primary is not None else None
        if i is None:
            continue
        step = found[i]
        start_ns = min(step.start_ns, rec.start_ns)
        # A first token is timed from the step's start, which the twin may move earlier.
        if step.ttft_ms is not None:
            ttft: float | None = step.ttft_ms + (step.start_ns - start_ns) / _NS_PER_MS
        elif rec.ttft_ms is not None:
            ttft = (rec.start_ns - start_ns) / _NS_PER_MS + rec.ttft_ms
        else:
            ttft = None
        # A step name given to either span names the call (the framework's span may
        # be the one counted, while the application named the wire-level call, or back).
        named = step.name != step.span_name
        found[i] = StepTiming(
            step.name if named or rec.step_name is None else rec.step_name,
            step.kind,
            start_ns,
            max(step.end_ns, rec.end_ns),
            step.depth,
            ttft,
            step.cache_hit or rec.cache_hit,
            step.span_name,
            step.model or rec.model,
        )


_START_THEN_DEPTH: Final = operator.attrgetter("start_ns", "depth")


def build_run(
    workflow: str,
    root: SpanRecord,
    spans: Iterable[SpanRecord],
    *,
    rollup: Rollup | None = None,
    trace_id: str = "",
    error: bool = False,
    origin: str = "",
) -> WorkflowRun:
    """A run from its workflow span and descendants; the rollup is computed when not given."""
    records = list(spans)
    if rollup is None:
        rollup = compute_rollup(root, records)
    return WorkflowRun(
        workflow=workflow,
        rollup=rollup,
        steps=steps_of(root, records),
        start_ns=root.start_ns,
        end_ns=max(root.end_ns, root.start_ns),
        trace_id=trace_id,
        span_id=f"{root.span_id:016x}",
        error=error,
        origin=origin,
    )


def record_of(
    span_id: int,
    parent_id: int | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: Attributes,
) -> SpanRecord:
    """The rollup's record of a span, from its attributes."""
    return call_record(span_id, parent_id, name, start_ns, end_ns, classify(attributes), attributes)


def _outcome(attributes: Attributes) -> tuple[bool | None, float | None]:
    success = attributes.get(attr.OUTCOME_SUCCESS)
    score = attributes.get(attr.OUTCOME_SCORE)
    number: float | None = None
    if isinstance(score, (int, float)) and not isinstance(score, bool) and math.isfinite(score):
        number = float(score)
    return (success if isinstance(success, bool) else None), number


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


def _with_first_output(recorded: Rollup, computed: Rollup) -> Rollup:
    return replace(
        recorded,
        first_output_ms=computed.first_output_ms,
        first_output_inference_ms=computed.first_output_inference_ms,
        first_output_data_ms=computed.first_output_data_ms,
        first_output_tool_ms=computed.first_output_tool_ms,
        first_output_overhead_ms=computed.first_output_overhead_ms,
    )


def is_outcome(span: TracedSpan) -> bool:
    """A ``record_outcome`` span: an outcome graded after the run, not a step."""
    return span.record.name == attr.OUTCOME_SPAN_NAME and span.record.kind is None


def workflow_name(span: TracedSpan) -> str:
    """The name of the workflow a run-root span ran: one rule for every command."""
    return conventions.workflow_name_of(span.attributes, span.record.name)


def runs_of_trace(
    trace_id: str, spans: Iterable[TracedSpan], *, origin: str = "", roots: bool = False
) -> list[WorkflowRun]:
    """Every workflow run of one trace, with outcomes merged, in start order.

    A run is made by every span classified ``workflow`` (chainlat's workflow, GenAI
    ``invoke_workflow`` / ``invoke_agent``, OpenLLMetry workflows and agents,
    OpenInference agents), by a top-level span that a convention marks as a run
    root (an OpenInference CHAIN without a parent), and with ``roots`` by every local
    root of the trace (a span whose parent is not in it: ``POST /chat``), so that a
    plain service with model calls can be budgeted. A workflow nested in another is
    a run of its own (``nested=True``: budgets judge it) and a step of the outer run.
    Runs get their recorded rollup when the workflow span carries one
    (``chainlat.chain.*``), else one computed from the spans. Linear in the spans of
    the trace for workflows that do not nest.
    """
    every = list(spans)
    by_id: dict[int, TracedSpan] = {}
    children: dict[int, list[TracedSpan]] = {}
    workflows: list[TracedSpan] = []
    late: list[TracedSpan] = []
    untyped: list[TracedSpan] = []  # no kind: a run root or an outcome, perhaps
    outcome_name = attr.OUTCOME_SPAN_NAME
    for span in every:
        rec = span.record
        by_id[rec.span_id] = span
        parent_id = rec.parent_id
        if parent_id is not None:
            siblings = children.get(parent_id)
            if siblings is None:
                children[parent_id] = [span]
            else:
                siblings.append(span)
        kind = rec.kind
        if kind == "workflow":
            workflows.append(span)
        elif kind is None:
            untyped.append(span)
            if rec.name == outcome_name:
                late.append(span)
    for span in untyped:
        rec = span.record
        if (rec.parent_id is None or rec.parent_id not in by_id) and (
            (roots and not is_outcome(span)) or is_run_root(span)
        ):
            workflows.append(span)
    cycles = _parent_cycles(every, by_id) if roots else {}
    workflows.extend(by_id[span_id] for span_id in cycles)
    if not workflows:
        return []
    if len(workflows) > 1:
        workflows.sort(key=lambda s: (s.record.start_ns, s.record.span_id))
    run_ids = {w.record.span_id for w in workflows}
    nested = {id(w): _inside_run(w, by_id, run_ids) for w in workflows}
    tops = [w for w in workflows if not nested[id(w)]]

    outcomes = {w.record.span_id: _outcome(w.attributes) for w in workflows}
    late.sort(key=lambda s: s.record.end_ns)
    for span in late:
        parent_id = span.record.parent_id
        if parent_id is not None and parent_id in outcomes:
            target = parent_id
        elif len(tops) == 1:
            target = tops[0].record.span_id
        else:
            continue
        success, score = _outcome(span.attributes)
        old_success, old_score = outcomes[target]
        outcomes[target] = (
            success if success is not None else old_success,
            score if score is not None else old_score,
        )

    runs: list[WorkflowRun] = []
    for top in workflows:
        descendants: list[TracedSpan] = []
        records: list[SpanRecord] = []
        stack = [top.record.span_id]
        seen = set(stack)
        while stack:
            for child in children.get(stack.pop(), ()):
                rec = child.record
                child_id = rec.span_id
                if child_id in seen:  # a cycle in a malformed trace
                    continue
                seen.add(child_id)
                if rec.kind is None and rec.name == outcome_name:  # is_outcome(child)
                    continue
                descendants.append(child)
                records.append(rec)
                stack.append(child_id)
        root = top.record
        recorded = (
            Rollup.from_attributes(top.attributes) if _CHAIN_TOTAL_MS in top.attributes else None
        )
        steps = steps_of(root, records)
        if recorded is not None and _more_steps(steps, recorded):
            # Steps the live rollup never saw: spans written after the workflow ended, with
            # times inside it (LiteLLM logs a streamed call from a worker thread, later).
            recorded = None
        if recorded is not None and recorded.first_output_ms is None and records:
            # Recorded before chainlat measured the first output: that part from the spans.
            recorded = _with_first_output(
                recorded, compute_rollup(root, records, first_output_ns=marked_first_output(top))
            )
        variant = top.attributes.get(attr.VARIANT)
        success, score = outcomes[root.span_id]
        runs.append(
            WorkflowRun(
                workflow=workflow_name(top),
                rollup=recorded
                if recorded is not None
                else compute_rollup(root, records, first_output_ns=marked_first_output(top)),
                steps=steps,
                start_ns=root.start_ns,
                end_ns=max(root.end_ns, root.start_ns),
                trace_id=trace_id,
                span_id=f"{root.span_id:016x}",
                error=top.error,
                origin=origin or top.origin,
                root=top,
                spans=tuple(descendants),
                variant=str(variant) if variant is not None else None,
                success=success,
                score=score,
                nested=nested[id(top)],
                incomplete=cycles.get(root.span_id),
            )
        )
    return runs


def _parent_cycles(spans: list[TracedSpan], by_id: Mapping[int, TracedSpan]) -> dict[int, str]:
    """One span of each cycle of parents (a span that is its own parent, or a ring of them):
    no root leads to them, so ``roots`` makes it a run, marked incomplete, rather than let a
    request vanish."""
    found: dict[int, str] = {}
    done: set[int] = set()
    for span in spans:
        path: list[int] = []
        on_path: dict[int, int] = {}
        span_id: int | None = span.record.span_id
        while span_id is not None and span_id in by_id and span_id not in done:
            if span_id in on_path:
                ring = path[on_path[span_id] :]
                first = min(ring, key=lambda i: (by_id[i].record.start_ns, i))
                found[first] = (
                    "its root span is its own parent"
                    if len(ring) == 1
                    else f"its root span is part of a cycle of {len(ring)} parents"
                )
                break
            on_path[span_id] = len(path)
            path.append(span_id)
            span_id = by_id[span_id].record.parent_id
        done.update(path)
    return found


def is_run_root(span: TracedSpan) -> bool:
    """A top-level span that a convention marks as a run (an OpenInference CHAIN root)."""
    return conventions.is_run_root(span.attributes, span.record.name, top_level=True)


def _inside_run(span: TracedSpan, by_id: Mapping[int, TracedSpan], run_ids: set[int]) -> bool:
    seen = {span.record.span_id}
    parent_id = span.record.parent_id
    while parent_id is not None and parent_id not in seen:
        parent = by_id.get(parent_id)
        if parent is None:
            return False
        if parent_id in run_ids:
            return True
        seen.add(parent_id)
        parent_id = parent.record.parent_id
    return False
