"""What-if: the recorded runs re-estimated with a model swapped, a prompt shortened, a cache
added or a step dropped.

Method, for every recorded run:

1. **Changed steps are re-estimated from latency profiles** (:mod:`chainlat.analysis.profiles`,
   fitted from the same traces, or from a profile file) with the run's own token
   counts. The new duration is::

       queue + connect + network (as recorded) + new profile's prediction * residual

   Under ``--prompt-scale`` alone a call keeps its own residual: its recorded
   service time divided by its model's prediction for its tokens. Under a swap
   the new model's noise is its own: the call keeps its *rank* (how slow it was
   for its size among the old model's calls streamed like it, measured against
   the closest fit of those calls) and takes the new model's residual at that
   rank, from the new model's calls streamed like it (predicted by a profile
   fitted from those calls alone, when the profile was fitted from the runs);
   from a log-normal with the profile's ``residual_sigma`` for a model the runs
   never called. With fewer than five calls of the new model of that kind, the
   call keeps its own residual (said in a note). So a call that was slow
   for its size stays slow, and the spread of the estimate is the new model's
   (``docs/tradeoffs.md`` has the measurements behind each rule). ``--prompt-scale`` multiplies the
   call's input tokens (rounded); output tokens stay as recorded (a swapped model
   is assumed to answer at the same length). ``--cache-hit-rate`` turns a
   deterministic share of the step's calls (a hash of seed, trace and span id)
   into cache hits taking the profile's ``cache_hit_ms`` (for data and tool steps:
   the median of the step's recorded hits), else 0 ms; a recorded hit drawn as a
   miss is re-estimated from the profile with a residual of 1. ``--drop`` makes
   the step take no time. Failed calls and recorded cache hits keep their time
   under a swap or a prompt change.
2. **The timeline is rebuilt** (:func:`rebuild_timeline`) with the dependency rule
   below, and
3. **the chain total is recomputed** along the new critical path with the same
   rollup as a live run (:func:`chainlat._core.rollup.compute_rollup`).

Dependency rule, inferred from timestamps: among the children of one span, step
B *waited on* step A when A ended before B started (``A.end <= B.start``). In the
rebuilt run B starts at the latest new end among the steps it waited on, plus
the gap it had after the last of them ended (the glue code between them); a step
that waited on nothing keeps its offset from its parent's start. A parent ends
at its last child's new end plus the time it ran after its last child. A changed
step's own children are stretched with it. So steps that overlapped stay
parallel, a sequence stays a sequence, and a shorter step moves everything that
waited on it earlier. The rule is conservative: a step that merely happened to
end before another started counts as a dependency, so lengthening it can delay
a step that did not really wait for it. Queueing is not re-simulated: each call
keeps the queue and network time it had (see docs/tradeoffs.md for where this
breaks down).

Example::

    result = chainlat.whatif(["traces.jsonl"], swap={"chat gpt-4o": "gpt-4o-mini"})
    for w in result.workflows:
        print(w.workflow, w.before.p95, "->", w.after.p95)
"""

from __future__ import annotations

import hashlib
import math
import os
import statistics
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final, Literal

from chainlat._core.errors import InputError, SpecError
from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup
from chainlat._core.stats import percentile

if TYPE_CHECKING:
    from chainlat._core.prices import Prices
    from chainlat._core.runs import WorkflowRun
    from chainlat.analysis.profiles import LatencyProfile, ModelCall
    from chainlat.budgets import BudgetReport, Budgets
    from chainlat.traces import TraceSource

__all__ = [
    "Change",
    "Percentiles",
    "RunEstimate",
    "SpecError",
    "StepEffect",
    "StepOverride",
    "WhatIfResult",
    "WorkflowEffect",
    "parse_change",
    "rebuild_timeline",
    "whatif",
]

ChangeKind = Literal["swap", "prompt_scale", "cache_hit_rate", "drop"]
FLAGS: Final[dict[ChangeKind, str]] = {
    "swap": "--swap",
    "prompt_scale": "--prompt-scale",
    "cache_hit_rate": "--cache-hit-rate",
    "drop": "--drop",
}
_NS_PER_MS: Final = 1_000_000
KINDS: Final = ("inference", "data", "tool", "overhead")


# -- changes ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Change:
    """One what-if change to the steps named ``step`` (a span name, ``chat gpt-4o``)."""

    kind: ChangeKind
    step: str
    model: str | None = None
    """``swap``: the model to use instead."""
    value: float | None = None
    """``prompt_scale``: the factor on input tokens; ``cache_hit_rate``: the share of hits."""

    @property
    def spec(self) -> str:
        """The change as written on the command line."""
        if self.kind == "drop":
            right = ""
        elif self.kind == "swap":
            right = f"={self.model}"
        else:
            right = f"={self.value:g}"
        return f'{FLAGS[self.kind]} "{self.step}{right}"'


MAX_PROMPT_SCALE: Final = 1000.0
"""The largest ``--prompt-scale``: a prompt a thousand times longer is already no estimate."""


def parse_change(kind: ChangeKind, text: str) -> Change:
    """A change from its command-line form: ``chat gpt-4o=gpt-4o-mini``, ``data rerank``.

    Raises:
        SpecError: the text is malformed or the number out of range.
    """
    flag = FLAGS[kind]
    if kind == "drop":
        step = text.strip()
        if not step:
            raise SpecError(f'{flag} "{text}": expected a step name, like "data rerank"')
        return Change("drop", step)
    step, equals, right = text.rpartition("=")
    step, right = step.strip(), right.strip()
    example = {
        "swap": '"chat gpt-4o=gpt-4o-mini"',
        "prompt_scale": '"chat gpt-4o=0.5"',
        "cache_hit_rate": '"chat gpt-4o=0.3"',
    }[kind]
    if not equals or not step or not right:
        raise SpecError(f'{flag} "{text}": expected STEP=VALUE, like {example}')
    if kind == "swap":
        return Change("swap", step, model=right)
    try:
        number = float(right)
    except ValueError:
        raise SpecError(f'{flag} "{text}": {right!r} is not a number') from None
    return _checked(Change(kind, step, value=number), text)


def _checked(change: Change, text: str) -> Change:
    flag, value = FLAGS[change.kind], change.value
    assert value is not None
    # Bounded above: "1e308" is finite, but the token counts it scales are not (OverflowError).
    if change.kind == "prompt_scale" and not (math.isfinite(value) and value > 0):
        raise SpecError(f'{flag} "{text}": the scale must be above 0, got {value:g}')
    if change.kind == "prompt_scale" and value > MAX_PROMPT_SCALE:
        raise SpecError(
            f'{flag} "{text}": the scale must be at most {MAX_PROMPT_SCALE:g}, got {value:g}'
        )
    if change.kind == "cache_hit_rate" and not (0 <= value <= 1):
        raise SpecError(f'{flag} "{text}": the rate must be between 0 and 1, got {value:g}')
    return change


ChangeSpecs = Mapping[str, str] | Mapping[str, float] | Iterable[str]


def _changes(
    swap: Mapping[str, str] | Iterable[str],
    prompt_scale: Mapping[str, float] | Iterable[str],
    cache_hit_rate: Mapping[str, float] | Iterable[str],
    drop: Iterable[str],
) -> list[Change]:
    found: list[Change] = []
    for kind, specs in (
        ("swap", swap),
        ("prompt_scale", prompt_scale),
        ("cache_hit_rate", cache_hit_rate),
    ):
        assert kind in FLAGS
        if isinstance(specs, Mapping):
            for step, value in specs.items():
                if kind == "swap":
                    found.append(parse_change("swap", f"{step}={value}"))
                elif isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise SpecError(f'{FLAGS[kind]} "{step}={value}": expected a number')
                else:
                    change = Change(kind, step, value=float(value))
                    found.append(_checked(change, f"{step}={value}"))
        else:
            found.extend(parse_change(kind, text) for text in specs)
    if isinstance(drop, str):
        drop = [drop]
    found.extend(parse_change("drop", text) for text in drop)
    seen: dict[tuple[str, str], Change] = {}
    for change in found:
        key = (change.kind, change.step)
        if key in seen:
            raise SpecError(f"{change.spec}: {FLAGS[change.kind]} given twice for this step")
        seen[key] = change
    if any(c.kind == "drop" for c in found):
        dropped = {c.step for c in found if c.kind == "drop"}
        for change in found:
            if change.kind != "drop" and change.step in dropped:
                raise SpecError(f"{change.spec}: the step is also dropped")
    return found


# -- the timeline -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepOverride:
    """The new duration of one step, and what else changes on its span."""

    duration_ns: int
    name: str | None = None
    cache_hit: bool | None = None
    input_tokens: int | None = None
    ttft_ms: float | None = None
    """The new time to first token, for a streamed call."""


def rebuild_timeline(
    root: SpanRecord,
    spans: Iterable[SpanRecord],
    overrides: Mapping[int, StepOverride],
    dropped: Collection[int] = (),
) -> tuple[SpanRecord, list[SpanRecord]]:
    """The run's spans re-timed with some steps' durations changed and some dropped.

    Applies the dependency rule of this module's docstring; children are first
    clipped to their parent's interval, as in the rollup. Returns the new root and
    the new descendants (dropped steps and their subtrees left out), ready for
    :func:`~chainlat._core.rollup.compute_rollup`.
    """
    by_parent: dict[int, list[SpanRecord]] = {}
    for rec in spans:
        if rec.parent_id is not None and rec.span_id != root.span_id:
            by_parent.setdefault(rec.parent_id, []).append(rec)
    out: list[SpanRecord] = []
    seen: set[int] = {root.span_id}
    gone = set(dropped)

    def kids_of(rec: SpanRecord, start: int, end: int) -> list[tuple[SpanRecord, int, int]]:
        kids = []
        for kid in by_parent.get(rec.span_id, ()):
            if kid.span_id in seen:  # a cycle in a malformed trace
                continue
            seen.add(kid.span_id)
            kid_start = min(max(kid.start_ns, start), end)
            kids.append((kid, kid_start, max(min(kid.end_ns, end), kid_start)))
        kids.sort(key=lambda k: (k[1], k[2], k[0].span_id))
        return kids

    def emit(rec: SpanRecord, start: int, end: int, override: StepOverride | None) -> None:
        if override is None:
            out.append(replace(rec, start_ns=start, end_ns=end))
            return
        out.append(
            replace(
                rec,
                start_ns=start,
                end_ns=end,
                name=override.name or rec.name,
                cache_hit=rec.cache_hit if override.cache_hit is None else override.cache_hit,
                input_tokens=rec.input_tokens
                if override.input_tokens is None or rec.input_tokens is None
                else override.input_tokens,
                ttft_ms=rec.ttft_ms
                if override.ttft_ms is None or rec.ttft_ms is None
                else override.ttft_ms,
            )
        )

    def stretch(
        rec: SpanRecord,
        start: int,
        end: int,
        to: Callable[[int], int],
        visible: bool,
        override: StepOverride | None,
    ) -> None:
        for kid, kid_start, kid_end in kids_of(rec, start, end):
            if visible:
                # The same-kind spans inside a changed call are that call.
                inner = override if kid.kind == rec.kind else None
                emit(kid, to(kid_start), to(kid_end), inner)
            stretch(kid, kid_start, kid_end, to, visible, override)

    def place(rec: SpanRecord, start: int, end: int, new_start: int, visible: bool) -> int:
        override = overrides.get(rec.span_id)
        if rec.span_id in gone or override is not None:
            new_length = (
                0 if rec.span_id in gone else max(override.duration_ns if override else 0, 0)
            )
            factor = new_length / (end - start) if end > start else 0.0

            def to(t: int) -> int:
                return new_start + round((t - start) * factor)

            keep = visible and rec.span_id not in gone
            stretch(rec, start, end, to, keep, override)
            new_end = new_start + new_length
            if keep and rec is not root:
                emit(rec, new_start, new_end, override)
            return new_end
        kids = kids_of(rec, start, end)
        if not kids:
            new_end = new_start + (end - start)
        else:
            ends: list[int] = []
            for i, (kid, kid_start, kid_end) in enumerate(kids):
                waited = [j for j in range(i) if kids[j][2] <= kid_start]
                if waited:
                    last = max(kids[j][2] for j in waited)
                    kid_new_start = max(ends[j] for j in waited) + (kid_start - last)
                else:
                    kid_new_start = new_start + (kid_start - start)
                ends.append(place(kid, kid_start, kid_end, kid_new_start, visible))
            new_end = max(ends) + (end - max(k[2] for k in kids))
        if visible and rec is not root:
            emit(rec, new_start, new_end, None)
        return new_end

    root_end = max(root.end_ns, root.start_ns)
    new_root_end = place(root, root.start_ns, root_end, root.start_ns, True)
    return replace(root, end_ns=new_root_end), out


# -- estimating runs ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Percentiles:
    """Nearest-rank p50, p95 and p99 of a set of totals, in milliseconds."""

    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Percentiles:
        """The percentiles of a non-empty set of values."""
        ordered = sorted(values)
        return cls(percentile(ordered, 50), percentile(ordered, 95), percentile(ordered, 99))


@dataclass(frozen=True, slots=True)
class RunEstimate:
    """One recorded run and its re-estimate."""

    workflow: str
    variant: str | None
    trace_id: str
    before: Rollup
    after: Rollup
    changed_steps: int
    """Steps whose duration was re-estimated (or dropped) in this run."""
    run: WorkflowRun = field(repr=False, compare=False)
    after_root: SpanRecord = field(repr=False, compare=False)
    after_spans: tuple[SpanRecord, ...] = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class StepEffect:
    """One step name of a workflow, before and after."""

    step: str
    after_name: str
    """The name after a swap (``chat gpt-4o-mini``), ``(dropped)``, or the same name."""
    kind: str
    occurrences: int
    before_p50_ms: float
    after_p50_ms: float
    critical_before: float
    """Share of runs with the step on the critical path, before."""
    critical_after: float


@dataclass(frozen=True, slots=True)
class WorkflowEffect:
    """One workflow (and variant): its totals, split and steps before and after."""

    workflow: str
    variant: str | None
    runs: int
    before: Percentiles
    after: Percentiles
    share_before: dict[str, float]
    """Critical-path share of inference, data, tool and overhead: sum over runs / sum of totals."""
    share_after: dict[str, float]
    steps: tuple[StepEffect, ...]
    first_output_before: Percentiles | None = None
    """Of the time to first output (ms), for the runs that have one."""
    first_output_after: Percentiles | None = None
    cost_before: float | None = None
    """Mean US dollars per run, with prices; the swapped calls at their new model's price."""
    cost_after: float | None = None


@dataclass(frozen=True)
class WhatIfResult:
    """What :func:`whatif` found."""

    changes: tuple[Change, ...]
    workflows: tuple[WorkflowEffect, ...]
    runs: tuple[RunEstimate, ...] = field(repr=False)
    profiles: dict[str, LatencyProfile] = field(repr=False)
    """The profiles used: fitted from the runs, overridden by a profile file."""
    notes: tuple[str, ...] = ()
    """Assumptions the estimate had to make, one line each."""
    budget_before: BudgetReport | None = field(default=None, repr=False)
    """The verdict of the budgets on the recorded runs, when budgets were given."""
    budget_after: BudgetReport | None = field(default=None, repr=False)
    """The same on the estimated runs."""


def _draw(seed: int, trace_id: str, span_id: int) -> float:
    digest = hashlib.blake2b(f"{seed}:{trace_id}:{span_id:016x}".encode(), digest_size=8)
    return int.from_bytes(digest.digest(), "big") / 2.0**64


def _counted_steps(run: WorkflowRun) -> dict[int, SpanRecord]:
    """The run's steps by span id: spans of a kind, not nested in a step of the same kind."""
    children: dict[int, list[SpanRecord]] = {}
    for span in run.spans:
        if span.record.parent_id is not None:
            children.setdefault(span.record.parent_id, []).append(span.record)
    steps: dict[int, SpanRecord] = {}
    stack: list[tuple[SpanRecord, str | None]] = [(run.root_record, None)]
    while stack:
        rec, around = stack.pop()
        for kid in children.get(rec.span_id, ()):
            if kid.kind is not None and (kid.kind == "workflow" or kid.kind != around):
                steps[kid.span_id] = kid
                stack.append((kid, kid.kind if kid.kind != "workflow" else around))
            else:
                stack.append((kid, around))
    return steps


def _renamed(name: str, old_model: str, new_model: str) -> str:
    if name.endswith(" " + old_model):
        return name[: -len(old_model)] + new_model
    return name


class _Estimator:
    def __init__(
        self,
        changes: Sequence[Change],
        profiles: Mapping[str, LatencyProfile],
        seed: int,
        hit_ms_by_step: Mapping[str, float],
        noise: _Noise | None = None,
        prices: Prices | None = None,
    ) -> None:
        self.noise = noise or _Noise()
        self.prices = prices
        self.by_step: dict[str, list[Change]] = {}
        for change in changes:
            self.by_step.setdefault(change.step, []).append(change)
        self.profiles = profiles
        self.seed = seed
        self.hit_ms_by_step = hit_ms_by_step
        self.notes: dict[str, int] = {}

    def note(self, text: str) -> None:
        self.notes[text] = self.notes.get(text, 0) + 1

    def run(self, run: WorkflowRun) -> RunEstimate:
        from chainlat.analysis.profiles import calls_of

        steps = _counted_steps(run)
        calls = {c.span_id: c for c in calls_of(run)}
        overrides: dict[int, StepOverride] = {}
        dropped: set[int] = set()
        for span_id, rec in steps.items():
            changes = self.by_step.get(rec.label)
            if not changes:
                continue
            if any(c.kind == "drop" for c in changes):
                dropped.add(span_id)
                continue
            call = calls.get(span_id)
            override = (
                self.call(run, call, changes) if call is not None else self.step(run, rec, changes)
            )
            if override is not None:
                overrides[span_id] = override
        new_root, new_spans = rebuild_timeline(run.root_record, run.records, overrides, dropped)
        return RunEstimate(
            workflow=run.workflow,
            variant=run.variant,
            trace_id=run.trace_id,
            before=run.recomputed_rollup(prices=self.prices),
            after=compute_rollup(new_root, new_spans),
            changed_steps=len(overrides) + len(dropped),
            run=run,
            after_root=new_root,
            after_spans=tuple(new_spans),
        )

    def step(self, run: WorkflowRun, rec: SpanRecord, changes: list[Change]) -> StepOverride | None:
        rate = next((c.value for c in changes if c.kind == "cache_hit_rate"), None)
        if rate is None:
            return None
        if _draw(self.seed, run.trace_id, rec.span_id) >= rate:
            if rec.cache_hit:
                self.note(f'"{rec.label}": recorded cache hits drawn as misses keep their time')
            return StepOverride(rec.end_ns - rec.start_ns, cache_hit=rec.cache_hit)
        hit_ms = self.hit_ms_by_step.get(rec.label)
        if hit_ms is None:
            self.note(f'"{rec.label}": no recorded cache hit; a hit is taken to cost 0 ms')
            hit_ms = 0.0
        return StepOverride(round(hit_ms * _NS_PER_MS), cache_hit=True)

    def call(self, run: WorkflowRun, call: ModelCall, changes: list[Change]) -> StepOverride | None:
        swap = next((c.model for c in changes if c.kind == "swap"), None)
        scale = next((c.value for c in changes if c.kind == "prompt_scale"), None)
        rate = next((c.value for c in changes if c.kind == "cache_hit_rate"), None)
        model = swap or call.model
        new_name = _renamed(call.step, call.model, model) if swap else None
        old = self.profiles.get(call.model)
        new = self.profiles[model]
        tokens_in, tokens_out = call.input_tokens, call.output_tokens
        if tokens_in is None or tokens_out is None:
            self.note(f'"{call.step}": calls without token counts are estimated at typical sizes')
            ref = old or new
            if tokens_in is None:
                low, high = ref.input_tokens_range or (0, 0)
                tokens_in = (low + high) // 2
            if tokens_out is None:
                low, high = ref.output_tokens_range or (1, 1)
                tokens_out = (low + high) // 2
        new_in = max(round(tokens_in * scale), 0) if scale is not None else tokens_in
        predicted = new.service_ms(new_in, tokens_out)

        hit = rate is not None and _draw(self.seed, run.trace_id, call.span_id) < rate
        if hit:
            hit_ms = new.cache_hit_ms
            if hit_ms is None:
                hit_ms = self.hit_ms_by_step.get(call.step)
            if hit_ms is None:
                self.note(f"{model}: no cache_hit_ms in its profile; a cache hit costs 0 ms")
                hit_ms = 0.0
            return StepOverride(
                round(hit_ms * _NS_PER_MS),
                name=new_name,
                cache_hit=True,
                input_tokens=new_in,
            )
        if call.cache_hit:
            if rate is None:
                self.note(f'"{call.step}": recorded cache hits keep their time')
                return StepOverride(
                    round(call.duration_ms * _NS_PER_MS), name=new_name, input_tokens=new_in
                )
            self.note(f'"{call.step}": recorded cache hits drawn as misses get no residual')
            return StepOverride(
                round((call.env_ms + predicted) * _NS_PER_MS),
                name=new_name,
                cache_hit=False,
                input_tokens=new_in,
            )
        if call.error:
            self.note(f'"{call.step}": failed calls keep their time')
            return StepOverride(round(call.duration_ms * _NS_PER_MS), name=new_name)
        if swap is None and scale is None:
            return None  # a cache miss with nothing else changed
        residual = 1.0
        expected = old.service_ms(tokens_in, tokens_out) if old is not None else 0.0
        if old is None:
            self.note(f"{call.model}: no profile, so its calls get no residual")
        elif expected > 0 and call.service_ms > 0:
            residual = call.service_ms / expected
        if model != call.model:
            # Streamed and non-streamed calls of the new model apart, when it has enough of
            # each: a profile fitted from one kind mispredicts the other (see _Noise).
            streamed = call.ttft_ms is not None
            own = self.noise.profiles.get((model, streamed))
            fitted_on = own.input_tokens_range if own is not None else None
            if own is not None and fitted_on and fitted_on[0] <= new_in <= fitted_on[1]:
                new = own  # within the sizes it was fitted on, every slope is safe to use
            predicted = new.service_ms(new_in, tokens_out)
            residual = self.new_residual(run, call, model, new, residual)
        new_ms = call.env_ms + predicted * residual
        ttft = call.env_ms + new.ttft_ms(new_in) * residual if call.ttft_ms is not None else None
        return StepOverride(
            round(new_ms * _NS_PER_MS), name=new_name, input_tokens=new_in, ttft_ms=ttft
        )

    def new_residual(
        self,
        run: WorkflowRun,
        call: ModelCall,
        model: str,
        profile: LatencyProfile,
        recorded: float,
    ) -> float:
        """The swapped call's residual on the new model: its rank, the new model's noise.

        A call slow for its size on the old model stays as slow among the new
        model's calls: the residual at the same quantile of the new model's own
        residuals, from its calls streamed (or not) like this one; for a model the
        runs never called, of a log-normal with its profile's ``residual_sigma``.
        When the new model has fewer than ``MIN_NOISE_CALLS`` calls of this kind,
        the call keeps its own residual (measured against the closest fit of the
        old model's calls when its profile was fitted from them): the new model's
        calls of the other kind are slower or faster, and noisier or not, by an
        amount the runs cannot tell (docs/tradeoffs.md).
        """
        key = (run.trace_id, call.span_id)
        rank = self.noise.ranks.get(key)
        streamed = call.ttft_ms is not None
        same = self.noise.residuals.get((model, streamed), [])
        if rank is not None and len(same) >= MIN_NOISE_CALLS:
            return math.exp(_quantile(same, rank))
        if rank is not None and model not in self.noise.called and profile.residual_sigma:
            return math.exp(profile.residual_sigma * statistics.NormalDist().inv_cdf(rank))
        if model in self.noise.called:
            mode = "streamed" if streamed else "not streamed"
            self.note(
                f"{model}: fewer than {MIN_NOISE_CALLS} calls {mode} in the runs; swapped "
                f"calls {mode} keep their recorded residual (see docs/tradeoffs.md)"
            )
        closest = self.noise.closest.get(key)
        return recorded if closest is None else math.exp(closest)


MIN_NOISE_CALLS: Final = 5
"""Calls of a model, of one mode, from which its own residuals are taken as its noise."""


@dataclass(frozen=True)
class _Noise:
    """How the calls of each model deviate from its profile, for swaps.

    Streamed and non-streamed calls apart: on one machine a streamed call of the
    same size takes longer (the client reads every chunk, the stream's tail), so a
    profile fitted from one kind mispredicts the other by as much.
    """

    profiles: dict[tuple[str, bool], LatencyProfile] = field(default_factory=dict)
    """By (model, streamed): the closest fit of those calls alone (every slope kept), for
    models fitted from the runs with enough calls of that kind; it predicts a swapped
    call of that kind within the prompt sizes it was fitted on."""
    residuals: dict[tuple[str, bool], list[float]] = field(default_factory=dict)
    """By (model, streamed): log(service time / prediction) of those calls, sorted; the
    prediction of the closest fit of those calls, or of the given profile."""
    called: set[str] = field(default_factory=set)
    """Models with usable calls in the runs."""
    ranks: dict[tuple[str, int], float] = field(default_factory=dict)
    """Each usable call's quantile (0..1) among its model's calls streamed like it, by
    (trace id, span id)."""
    closest: dict[tuple[str, int], float] = field(default_factory=dict)
    """Each usable call's log residual against the closest fit of its model's calls
    streamed like it (:func:`fit_profile` ``in_sample``: every slope kept), for models
    fitted from the runs: a prompt-size effect the profile had to leave out is not the
    call's own slowness."""


def _noise(
    runs: Sequence[WorkflowRun],
    profiles: Mapping[str, LatencyProfile],
    fitted: Collection[str],
) -> _Noise:
    from chainlat.analysis.profiles import calls_of, fit_profile

    by_mode: dict[tuple[str, bool], list[tuple[str, ModelCall]]] = {}
    for run in runs:
        for call in calls_of(run):
            if (
                not call.cache_hit
                and not call.error
                and call.input_tokens is not None
                and call.output_tokens is not None
                and call.service_ms > 0
            ):
                key = (call.model, call.ttft_ms is not None)
                by_mode.setdefault(key, []).append((run.trace_id, call))
    noise = _Noise(called={model for model, _ in by_mode})
    for (model, streamed), calls in by_mode.items():
        # Against the closest fit: against a profile flattened by the three-standard-errors
        # rule, long prompts would rank as slow calls and widen the noise.
        closest = fit_profile((c for _, c in calls), in_sample=True)
        if model not in fitted or closest is None:
            closest = profiles.get(model)
        elif len(calls) >= MIN_NOISE_CALLS:
            noise.profiles[(model, streamed)] = closest
        if closest is None:
            continue
        logs = (_log_residual(closest, c) for _, c in calls)
        noise.residuals[(model, streamed)] = sorted(v for v in logs if v is not None)
        ranked = sorted(
            (log, trace_id, call.span_id)
            for trace_id, call in calls
            if (log := _log_residual(closest, call)) is not None
        )
        for i, (log, trace_id, span_id) in enumerate(ranked):
            noise.ranks[(trace_id, span_id)] = (i + 0.5) / len(ranked)
            if model in fitted:
                noise.closest[(trace_id, span_id)] = log
    return noise


def _log_residual(profile: LatencyProfile, call: ModelCall) -> float | None:
    predicted = profile.service_ms(call.input_tokens or 0, call.output_tokens or 0)
    return math.log(call.service_ms / predicted) if predicted > 0 else None


def _quantile(ordered: Sequence[float], rank: float) -> float:
    """The value at quantile ``rank`` (0..1) of sorted values, the i-th at (i + 0.5) / n."""
    position = min(max(rank * len(ordered) - 0.5, 0.0), len(ordered) - 1.0)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _validate(
    changes: Sequence[Change],
    runs: Sequence[WorkflowRun],
    profiles: Mapping[str, LatencyProfile],
    where: str,
) -> None:
    from chainlat.analysis.profiles import calls_of

    seen: dict[str, str] = {}
    models: dict[str, set[str]] = {}
    with_tokens: dict[str, bool] = {}
    for run in runs:
        for rec in _counted_steps(run).values():
            seen.setdefault(rec.label, rec.kind or "")
        for call in calls_of(run):
            models.setdefault(call.step, set()).add(call.model)
            with_tokens[call.step] = with_tokens.get(call.step, False) or (
                call.input_tokens is not None
            )
    for change in changes:
        kind = seen.get(change.step)
        if kind is None:
            names = ", ".join(sorted(seen)[:8]) or "none"
            raise SpecError(
                f'{change.spec}: no step named "{change.step}" in {where} (steps seen: {names})'
            )
        if change.kind in ("swap", "prompt_scale") and kind != "inference":
            raise SpecError(
                f'{change.spec}: "{change.step}" is a {kind} step; '
                f"{FLAGS[change.kind]} applies to model calls"
            )
        if change.kind == "prompt_scale" and not with_tokens.get(change.step, False):
            raise SpecError(f'{change.spec}: the calls of "{change.step}" recorded no input tokens')
        needed: set[str] = set()
        if change.kind == "swap":
            assert change.model is not None
            needed = {change.model}
        elif change.kind == "prompt_scale":
            needed = models.get(change.step, set())
        for model in sorted(needed):
            if model not in profiles:
                known = ", ".join(sorted(profiles)) or "none"
                raise SpecError(
                    f"{change.spec}: no latency profile for model {model!r} (profiles: {known});"
                    " record runs that use it, or write one in a profile file (--profiles)"
                )


def _effects(
    estimates: Sequence[RunEstimate], changes: Sequence[Change], prices: Prices | None = None
) -> list[WorkflowEffect]:
    groups: dict[tuple[str, str | None], list[RunEstimate]] = {}
    for estimate in estimates:
        groups.setdefault((estimate.workflow, estimate.variant), []).append(estimate)
    swaps = {c.step: c.model for c in changes if c.kind == "swap" and c.model is not None}
    drops = {c.step for c in changes if c.kind == "drop"}
    effects = []
    for (workflow, variant), members in groups.items():
        step_before: dict[str, list[float]] = {}
        step_after: dict[str, list[float]] = {}
        kinds: dict[str, str] = {}
        renamed: dict[str, str] = {}
        for estimate in members:
            after_by_id = {r.span_id: r for r in estimate.after_spans}
            for span_id, rec in _counted_steps(estimate.run).items():
                kinds.setdefault(rec.label, rec.kind or "")
                step_before.setdefault(rec.label, []).append((rec.end_ns - rec.start_ns) / 1e6)
                new = after_by_id.get(span_id)
                if new is not None:
                    step_after.setdefault(rec.label, []).append((new.end_ns - new.start_ns) / 1e6)
                    renamed.setdefault(rec.label, new.label)
        steps = []
        for name, durations in step_before.items():
            after = step_after.get(name, [])
            after_name = "(dropped)" if name in drops else renamed.get(name, name)
            if name in swaps and after_name == name:
                after_name = f"{name} -> {swaps[name]}"
            steps.append(
                StepEffect(
                    step=name,
                    after_name=after_name,
                    kind=kinds[name],
                    occurrences=len(durations),
                    before_p50_ms=percentile(sorted(durations), 50),
                    after_p50_ms=percentile(sorted(after), 50) if after else 0.0,
                    critical_before=sum(name in e.before.critical_path for e in members)
                    / len(members),
                    critical_after=sum(after_name in e.after.critical_path for e in members)
                    / len(members),
                )
            )
        effects.append(
            WorkflowEffect(
                workflow=workflow,
                variant=variant,
                runs=len(members),
                before=Percentiles.of(e.before.total_ms for e in members),
                after=Percentiles.of(e.after.total_ms for e in members),
                share_before=_shares([e.before for e in members]),
                share_after=_shares([e.after for e in members]),
                steps=tuple(steps),
                first_output_before=_first_outputs(e.before for e in members),
                first_output_after=_first_outputs(e.after for e in members),
                cost_before=_mean([_cost_before(e, prices) for e in members]),
                cost_after=_mean([_cost_after(e, swaps, prices) for e in members]),
            )
        )
    return effects


def _first_outputs(rollups: Iterable[Rollup]) -> Percentiles | None:
    found = [r.first_output_ms for r in rollups if r.first_output_ms is not None]
    return Percentiles.of(found) if found else None


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean, when every value is known: a partial mean would compare unlike runs."""
    if not values or any(v is None for v in values):
        return None
    return math.fsum(v for v in values if v is not None) / len(values)


def _cost_before(estimate: RunEstimate, prices: Prices | None) -> float | None:
    """The run's cost: as recorded, else from the "before" rollup, computed with ``prices``."""
    recorded = estimate.run.rollup.cost_usd
    if recorded is not None or not prices or not estimate.run.spans:
        return recorded
    return estimate.before.cost_usd


def _cost_after(
    estimate: RunEstimate, swaps: Mapping[str, str], prices: Prices | None
) -> float | None:
    """The estimated run's cost: each swapped call at its new model's price."""
    if not prices:
        return None
    labels = {i: rec.label for i, rec in _counted_steps(estimate.run).items()}
    spans = [
        replace(rec, model=swaps[labels[rec.span_id]]) if labels.get(rec.span_id) in swaps else rec
        for rec in estimate.after_spans
    ]
    return compute_rollup(estimate.after_root, spans, prices=prices).cost_usd


def _shares(rollups: Sequence[Rollup]) -> dict[str, float]:
    total = math.fsum(r.total_ms for r in rollups)
    return {k: (math.fsum(r.kind_ms(k) for r in rollups) / total if total else 0.0) for k in KINDS}


def _hit_ms_by_step(runs: Sequence[WorkflowRun]) -> dict[str, float]:
    hits: dict[str, list[float]] = {}
    for run in runs:
        for rec in _counted_steps(run).values():
            if rec.cache_hit:
                hits.setdefault(rec.label, []).append((rec.end_ns - rec.start_ns) / 1e6)
    return {name: sorted(values)[len(values) // 2] for name, values in hits.items()}


Source = str | os.PathLike[str]


def whatif(
    runs: Iterable[WorkflowRun] | Source | Sequence[Source | TraceSource],
    *,
    swap: Mapping[str, str] | Iterable[str] = (),
    prompt_scale: Mapping[str, float] | Iterable[str] = (),
    cache_hit_rate: Mapping[str, float] | Iterable[str] = (),
    drop: Iterable[str] = (),
    profiles: Mapping[str, LatencyProfile] | Source | None = None,
    budgets: Budgets | Source | None = None,
    workflow: str | None = None,
    variant: str | None = None,
    seed: int = 0,
    roots: bool = False,
    prices: Prices | None = None,
) -> WhatIfResult:
    """Re-estimate recorded runs under model swaps, prompt scales, cache hit rates and drops.

    Example::

        result = chainlat.whatif("traces.jsonl", swap={"chat gpt-4o": "gpt-4o-mini"})
        print(result.workflows[0].before.p95, "->", result.workflows[0].after.p95)

    Args:
        runs: Trace files (OTLP JSON lines, Jaeger JSON), trace sources (a
            :class:`chainlat.traces.JaegerSource`), or runs already read.
        swap: Step name to new model (``{"chat gpt-4o": "gpt-4o-mini"}``), or
            ``"STEP=MODEL"`` strings.
        prompt_scale: Step name to a factor > 0 on its input tokens.
        cache_hit_rate: Step name to the share (0..1) of its calls served from a cache.
        drop: Step names to remove.
        profiles: Latency profiles (or a profile file) that override the ones
            fitted from the runs; needed for a model the runs never called.
        budgets: A :class:`chainlat.budgets.Budgets` (or budget file) to judge the
            runs against, before and after.
        workflow: Only the runs of this workflow.
        variant: Only the runs of this variant (``chainlat.variant``).
        seed: Seed of the cache-hit draws.
        roots: Also make a run of every trace's root span that is not a workflow
            (:func:`chainlat.traces.read_runs`).
        prices: Model prices: the mean cost per run before and after (a swapped call
            at its new model's price, with the tokens it recorded).

    Raises:
        SpecError: a change names no step of the runs, a model without a profile,
            or a number out of range.
        InputError: a file cannot be read; no run to estimate.
    """
    # pydantic is imported here, not with chainlat: `import chainlat` stays cheap.
    from chainlat.analysis.profiles import fit_profiles, load_profiles

    changes = _changes(swap, prompt_scale, cache_hit_rate, drop)
    if not changes:
        raise SpecError(
            "nothing to change: give --swap, --prompt-scale, --cache-hit-rate or --drop"
        )
    selected, where = _select(runs, workflow, variant, roots)
    table = fit_profiles(selected)
    fitted = set(table)
    if profiles is not None:
        given = (
            load_profiles(profiles) if isinstance(profiles, (str, os.PathLike)) else dict(profiles)
        )
        table.update(given)
        fitted -= set(given)
    _validate(changes, selected, table, where)
    swapped = any(c.kind == "swap" for c in changes)
    noise = _noise(selected, table, fitted) if swapped else None
    estimator = _Estimator(changes, table, seed, _hit_ms_by_step(selected), noise, prices)
    estimates = [estimator.run(run) for run in selected]
    notes = tuple(
        f"{text} ({count} call{'s' if count != 1 else ''})"
        for text, count in estimator.notes.items()
    )
    before_report = after_report = None
    if budgets is not None:
        before_report, after_report = _judge(estimates, budgets)
    return WhatIfResult(
        changes=tuple(changes),
        workflows=tuple(_effects(estimates, changes, prices)),
        runs=tuple(estimates),
        profiles=table,
        notes=notes,
        budget_before=before_report,
        budget_after=after_report,
    )


def _select(
    runs: Iterable[WorkflowRun] | Source | Sequence[Source | TraceSource],
    workflow: str | None,
    variant: str | None,
    roots: bool = False,
) -> tuple[list[WorkflowRun], str]:
    from chainlat._core.runs import WorkflowRun

    if isinstance(runs, (str, os.PathLike)):
        runs = [runs]
    items = list(runs)
    if all(isinstance(r, WorkflowRun) for r in items):
        trees = [r for r in items if isinstance(r, WorkflowRun)]
        where = "the runs given"
    else:
        from chainlat.traces import load_runs, source_name

        sources = [r for r in items if not isinstance(r, WorkflowRun)]
        trees = [r for r in load_runs(sources, roots=roots) if not r.nested]
        where = ", ".join(source_name(s) for s in sources)
    selected = [
        t
        for t in trees
        if not t.nested
        and (workflow is None or t.workflow == workflow)
        and (variant is None or t.variant_label == variant)
    ]
    if not selected:
        what = " and ".join(
            f"{key} {value!r}"
            for key, value in (("workflow", workflow), ("variant", variant))
            if value is not None
        )
        raise InputError(f"{where}: no workflow run{' of ' + what if what else ''} to estimate")
    return selected, where


def _judge(
    estimates: Sequence[RunEstimate], budgets: Budgets | Source
) -> tuple[BudgetReport, BudgetReport]:
    from chainlat import budgets as budget_module
    from chainlat._core.runs import build_run

    if isinstance(budgets, (str, os.PathLike)):
        budgets = budget_module.load_budgets(budgets)
    before = [
        build_run(
            e.workflow, e.run.root_record, e.run.records, rollup=e.before, trace_id=e.trace_id
        )
        for e in estimates
    ]
    after = [
        build_run(e.workflow, e.after_root, e.after_spans, rollup=e.after, trace_id=e.trace_id)
        for e in estimates
    ]
    return budget_module.evaluate(before, budgets), budget_module.evaluate(after, budgets)
