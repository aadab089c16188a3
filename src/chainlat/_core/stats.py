"""Percentiles and per-workflow aggregation of runs. Pure, stdlib only.

Percentile method: **nearest rank**. The p-th percentile of n values is the
value at rank ``ceil(p/100 * n)`` in ascending order: the smallest observed
value with at least p % of the values at or below it. It is always a value
that was observed, never an interpolation, so "p95 <= 800 ms" reads exactly
as "at least 95 % of runs took 800 ms or less". With few values the high
percentiles are the maximum (p99 of 50 runs is the slowest run).

Memory: one double (8 bytes, in an ``array``) per sample, per quantity, and one more
per sample for its weight when a sampler's weights are recorded; runs and spans are
not kept. Percentiles stay exact: the samples are sorted in place when one is asked for.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Final

from chainlat._core import voice

if TYPE_CHECKING:
    from chainlat._core.chain import Rollup
    from chainlat._core.runs import StepKindName, WorkflowRun
    from chainlat._core.steps import StepTiming

PERCENTILES: Final = (50.0, 90.0, 95.0, 99.0)
"""The percentiles every statistics table shows."""
QUANTITIES: Final = ("total", "inference", "data", "tool", "overhead")
"""The per-run quantities of a workflow: wall time and its critical-path split."""
FIRST_OUTPUT: Final = "first_output"
"""The quantity of the wait for the first output, sampled for the runs that have one."""
_NS_PER_MS: Final = 1_000_000
FIRST_OUTPUT_PARTS: Final = (
    "speech_to_text",
    "model",
    "text_to_speech",
    "end_of_turn",
    "data",
    "tool",
    "overhead",
)
"""The wait for a voice run's first output by stage (docs/voice.md, the split): they sum to
the wait when the trace says when the turn was decided; otherwise ``end_of_turn`` is not
known and that wait is in ``overhead``."""
FIRST_OUTPUT_SPLIT: Final = "first_output_split"
"""The key of the split's parts in ``WorkflowStats.unrecorded``."""
_SPEECH_PART_QUANTITY: Final = {
    "speech_to_text": "first_output_speech_to_text",
    "text_to_speech": "first_output_text_to_speech",
    "end_of_turn": "first_output_end_of_turn",
}


def first_output_parts(rollup: Rollup) -> dict[str, float] | None:
    """The wait for a voice run's first output by stage (`FIRST_OUTPUT_PARTS`), the one
    definition every renderer and the demo show; None for a run without a first output, or
    without a speech call and an end of turn.

    ``model`` is the language model's share, ``first_output_inference_ms`` less its speech
    parts; ``overhead`` is ``first_output_overhead_ms`` less the end-of-turn wait, which is
    a part of it; ``end_of_turn`` is absent when the trace does not say when the turn was
    decided. A speech-to-speech turn (a realtime model, no speech call) has no speech
    parts: its split is the end of turn, the model (the realtime response, the network
    included: docs/voice.md), data, tool and overhead. The speech parts and the end of
    turn are the values the budget keys ``first_output_speech_to_text``,
    ``first_output_text_to_speech`` and ``first_output_end_of_turn`` judge.
    """
    stt = rollup.first_output_speech_to_text_ms
    tts = rollup.first_output_text_to_speech_ms
    end_of_turn = rollup.first_output_end_of_turn_ms
    cascade = stt is not None and tts is not None
    speech_to_speech = stt is None and tts is None and end_of_turn is not None
    if rollup.first_output_ms is None or not (cascade or speech_to_speech):
        return None
    parts = {
        "speech_to_text": stt,
        "model": (rollup.first_output_inference_ms or 0.0) - (stt or 0.0) - (tts or 0.0),
        "text_to_speech": tts,
        "end_of_turn": end_of_turn,
        "data": rollup.first_output_data_ms or 0.0,
        "tool": rollup.first_output_tool_ms or 0.0,
        "overhead": (rollup.first_output_overhead_ms or 0.0) - (end_of_turn or 0.0),
    }
    return {part: value for part, value in parts.items() if value is not None}


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0 < q <= 100) of values sorted ascending."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} out of (0, 100]")
    # Exact arithmetic: 0.95 * 20 must be rank 19, not 19.000000000000004 -> 20.
    rank = math.ceil(Fraction(str(q)) * n / 100)
    return sorted_values[max(rank, 1) - 1]


def format_percentile(q: float) -> str:
    """``p95``, ``p99.9``."""
    return f"p{q:g}"


@dataclass(frozen=True, slots=True)
class Summary:
    """Count, the standard percentiles and the maximum of one set of samples (ms)."""

    count: int
    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    mean: float | None

    def get(self, q: float) -> float | None:
        """The value of a standard percentile (50, 90, 95, 99) or of 100 (the maximum)."""
        return {50.0: self.p50, 90.0: self.p90, 95.0: self.p95, 99.0: self.p99, 100.0: self.max}[q]


class Samples:
    """Durations in milliseconds, each flagged as a cache hit or not, and weighted.

    A sample's weight is how many runs it stands for: 1, or 1/p for a run a sampler kept
    with probability p. Percentiles are then weighted nearest rank: the smallest value
    with at least q % of the total weight at or below it (with all weights 1, the plain
    nearest rank).

    Stored compactly: the cache hits and the other samples in an ``array('d')`` each (8
    bytes a sample, and 8 more for a weight once one is not 1), sorted in place the first
    time a percentile is asked for; no Python float is kept per sample.
    """

    __slots__ = ("_hits", "_hits_weights", "_merged", "_plain", "_plain_weights", "_sorted_at")

    def __init__(self, values: Iterable[float] = ()) -> None:
        self._plain = array("d", values)
        self._hits = array("d")
        self._plain_weights: array[float] | None = None  # None while every weight is 1
        self._hits_weights: array[float] | None = None
        # Samples are only ever added: the sorted order and the merged array are known
        # fresh by the count they were made at, so that adding one marks nothing.
        self._sorted_at = -1
        self._merged: array[float] | None = None

    def add(self, value_ms: float, cached: bool = False, weight: float = 1.0) -> None:
        """Add one sample."""
        if weight == 1.0 and self._plain_weights is None:  # the common case, first
            if cached:
                self._hits.append(value_ms)
            else:
                self._plain.append(value_ms)
            return
        if weight != 1.0 and self._plain_weights is None:
            self._plain_weights = array("d", [1.0]) * len(self._plain)
            self._hits_weights = array("d", [1.0]) * len(self._hits)
        if cached:
            self._hits.append(value_ms)
            if self._hits_weights is not None:
                self._hits_weights.append(weight)
        else:
            self._plain.append(value_ms)
            if self._plain_weights is not None:
                self._plain_weights.append(weight)

    @property
    def weighted(self) -> bool:
        """Some sample stands for more than one run."""
        return self._plain_weights is not None

    def __len__(self) -> int:
        return len(self._plain) + len(self._hits)

    def _sort(self) -> None:
        """Sort both groups in place (with their weights): their order is read nowhere."""
        if self._sorted_at == len(self):
            return
        if self._plain_weights is None or self._hits_weights is None:
            self._plain = _sorted_array(self._plain)
            self._hits = _sorted_array(self._hits)
        else:
            self._plain, self._plain_weights = _sorted_pairs(self._plain, self._plain_weights)
            self._hits, self._hits_weights = _sorted_pairs(self._hits, self._hits_weights)
        self._sorted_at = len(self)

    def _values(self, exclude_cached: bool) -> array[float]:
        """The samples sorted ascending (without the cache hits when asked)."""
        self._sort()
        if exclude_cached or not self._hits:
            return self._plain
        if not self._plain:
            return self._hits
        if self._merged is None or len(self._merged) != len(self):
            self._merged = _sorted_array(self._plain + self._hits)
        return self._merged

    def sorted(self, *, exclude_cached: bool = False) -> list[float]:
        """The samples in ascending order, without the cache hits when asked."""
        return self._values(exclude_cached).tolist()

    def count(self, *, exclude_cached: bool = False) -> int:
        """How many samples (without the cache hits when asked)."""
        return len(self._plain) if exclude_cached else len(self)

    def effective_count(self, *, exclude_cached: bool = False) -> float:
        """How many samples the weighted ones are worth (Kish's effective sample size,
        ``(Σw)² / Σw²``): the count when every weight is 1, about 1 when one sample holds
        nearly all the weight, however many stand beside it."""
        if self._plain_weights is None:
            return float(self.count(exclude_cached=exclude_cached))
        weights = self._weight_arrays(exclude_cached)
        squares = math.fsum(w * w for w in weights)
        return math.fsum(weights) ** 2 / squares if squares > 0 else 0.0

    def nonfinite(self, *, exclude_cached: bool = False) -> float | None:
        """The smallest NaN or infinite sample in sorted order, None when all are finite."""
        values = self._values(exclude_cached)
        if _all_finite(values):
            return None
        return next((v for v in values if not math.isfinite(v)), None)

    def _weighted_mean(self) -> float:
        total = math.fsum(self._weight_arrays(False))
        return math.fsum(v * w for v, w in self._pairs(False)) / total

    def _weight_arrays(self, exclude_cached: bool) -> list[float]:
        assert self._plain_weights is not None and self._hits_weights is not None
        found = list(self._plain_weights)
        if not exclude_cached:
            found.extend(self._hits_weights)
        return found

    def _pairs(self, exclude_cached: bool) -> list[tuple[float, float]]:
        assert self._plain_weights is not None and self._hits_weights is not None
        pairs = list(zip(self._plain, self._plain_weights, strict=True))
        if not exclude_cached:
            pairs.extend(zip(self._hits, self._hits_weights, strict=True))
        return pairs

    def _weighted_percentile(self, q: float, exclude_cached: bool) -> float | None:
        pairs = sorted(self._pairs(exclude_cached))
        if not pairs:
            return None
        if not 0 < q <= 100:
            raise ValueError(f"percentile {q} out of (0, 100]")
        target = Fraction(str(q)) / 100 * sum(Fraction(w) for _, w in pairs)
        reached = Fraction(0)
        for value, weight in pairs:
            reached += Fraction(weight)
            if reached >= target:
                return value
        return pairs[-1][0]

    def percentile(self, q: float, *, exclude_cached: bool = False) -> float | None:
        """Nearest-rank percentile (weighted, when samples are), None without samples."""
        if self._plain_weights is not None:
            return self._weighted_percentile(q, exclude_cached)
        values = self._values(exclude_cached)
        return percentile(values, q) if values else None

    def max(self, *, exclude_cached: bool = False) -> float | None:
        """The largest sample, None without samples."""
        values = self._values(exclude_cached)
        return values[-1] if values else None

    def summary(self, *, exclude_cached: bool = False) -> Summary:
        """Count, p50/p90/p95/p99, maximum and mean."""
        values = self._values(exclude_cached)
        if not values:
            return Summary(0, None, None, None, None, None, None)
        if self._plain_weights is not None:
            p50, p90, p95, p99 = (
                self._weighted_percentile(q, exclude_cached) or 0.0 for q in PERCENTILES
            )
            return Summary(len(values), p50, p90, p95, p99, values[-1], self._weighted_mean())
        p50, p90, p95, p99 = (percentile(values, q) for q in PERCENTILES)
        return Summary(len(values), p50, p90, p95, p99, values[-1], math.fsum(values) / len(values))


_SORT_CHUNK: Final = 1 << 16


def _sorted_array(values: array[float]) -> array[float]:
    """``values`` sorted, as a new array; ``values`` is left reordered.

    A long one is sorted a chunk at a time, each chunk written back in place, and the
    sorted chunks are merged into the new array through views of ``values``: no more than
    a chunk's worth of Python floats exists at once, and sorting takes one more copy of
    the samples, not two (a copy per chunk beside the merged result)."""
    if len(values) <= _SORT_CHUNK or not _all_finite(values):
        # NaN has no place in an order: sorted() as a whole, as ever, places it.
        return array("d", sorted(values))
    starts = range(0, len(values), _SORT_CHUNK)
    for start in starts:
        place = slice(start, start + _SORT_CHUNK)
        values[place] = array("d", sorted(values[place]))
    with memoryview(values) as view:
        chunks = [view[start : start + _SORT_CHUNK] for start in starts]
        merged = array("d", heapq.merge(*chunks))
        for chunk in chunks:
            chunk.release()
    return merged


def _all_finite(values: array[float]) -> bool:
    """No NaN or infinity among ``values`` (a C loop; False also when the sum overflows)."""
    try:
        return math.isfinite(math.fsum(values))
    except OverflowError:
        return False


def _sorted_pairs(values: array[float], weights: array[float]) -> tuple[array[float], array[float]]:
    pairs = sorted(zip(values, weights, strict=True))
    return array("d", (v for v, _ in pairs)), array("d", (w for _, w in pairs))


@dataclass(slots=True)
class StepStats:
    """Every occurrence of one step (by span name) across the runs of a workflow."""

    name: str
    kind: StepKindName
    duration: Samples = field(default_factory=Samples)
    ttft: Samples = field(default_factory=Samples)
    """Time to first token, for the occurrences that streamed."""


MAX_SAMPLING_WEIGHT: Final = float(2**56)
"""The most runs one sampled run can stand for: 1/p for the smallest probability
OpenTelemetry's consistent sampling can express (2^-56)."""


@dataclass(slots=True)
class WorkflowStats:
    """The runs of one workflow, as samples per quantity and per step.

    A failed run (status ERROR) is counted in ``runs`` and ``errors`` and, unless
    ``include_errors``, left out of every sample: a run that failed fast would
    otherwise make the percentiles look better. A voice turn interrupted by barge-in is
    counted in ``interrupted`` and, unless ``include_interrupted``, left out too: its
    first output may never have come, and its end is the caller's, not the agent's.
    """

    name: str
    runs: int = 0
    errors: int = 0
    quantities: dict[str, Samples] = field(
        default_factory=lambda: {
            q: Samples() for q in (*QUANTITIES, FIRST_OUTPUT, *voice.SPEECH_QUANTITIES)
        }
    )
    """``total``, ``inference``, ``data``, ``tool``, ``overhead`` and ``first_output``; a
    run with a cache hit is flagged cached in each."""
    steps: dict[str, StepStats] = field(default_factory=dict)
    """By step name, in order of first appearance."""
    slowest: WorkflowRun | None = None
    """The run with the largest total."""
    include_errors: bool = False
    cost: Samples = field(default_factory=Samples)
    """US dollars per run, for the runs whose cost is known."""
    seen_steps: set[str] = field(default_factory=set)
    """Every step name seen, failed runs included."""
    biased: int = 0
    """Runs a sampler kept without recording its probability: they cannot be weighted."""
    interrupted: int = 0
    """Voice turns that ended by barge-in (``gen_ai.agent.invocation.end_reason``)."""
    include_interrupted: bool = False
    weight_total: float = 0.0
    """The runs the samples stand for (the sum of their weights)."""
    heaviest_weight: float = 0.0
    heaviest_trace_id: str = ""
    """The run in the samples that stands for the most runs, and its trace."""
    unrecorded: dict[str, int] = field(default_factory=dict)
    """Per quantity, and per step name, the sampled runs whose value is a bound: it depends
    on a model call whose end the trace does not record (``Rollup.unrecorded``)."""
    operations: dict[str, StepStats] = field(default_factory=dict)
    """Every model call by operation (``text_to_speech``), in order of first appearance;
    only with ``count_operations`` (the samples of limits by operation)."""
    count_operations: bool = False
    split_samples: dict[str, Samples] = field(
        default_factory=lambda: {p: Samples() for p in ("model", "data", "tool", "overhead")}
    )
    """The parts of `first_output_split` that are no quantity of their own."""

    @property
    def first_output_split(self) -> dict[str, Samples]:
        """The wait for the first output of the voice runs by stage (`first_output_parts`),
        each part's samples: the speech parts and the end of turn are the quantities their
        budget keys judge (the same samples, not copies); empty without a voice run. The
        speech parts are left out when no run has them (speech-to-speech turns), not shown
        as no samples; the end of turn stays, its count saying how many traces said it."""
        if not len(self.split_samples["model"]):
            return {}
        quantities = self.quantities
        split = {
            part: (
                quantities[_SPEECH_PART_QUANTITY[part]]
                if part in _SPEECH_PART_QUANTITY
                else self.split_samples[part]
            )
            for part in FIRST_OUTPUT_PARTS
        }
        return {
            part: samples
            for part, samples in split.items()
            if len(samples) or part not in ("speech_to_text", "text_to_speech")
        }

    @property
    def dominant(self) -> tuple[str, float] | None:
        """The trace id of a run whose weight is more than half of all the samples' weight
        (so it alone decides the percentiles on its side), with its share; else None."""
        if self.sampled < 2 or not self.heaviest_weight * 2 > self.weight_total:
            return None
        return self.heaviest_trace_id, self.heaviest_weight / self.weight_total

    @property
    def sampled(self) -> int:
        """Runs in the latency samples."""
        return len(self.quantities["total"])

    def _add_unrecorded(self, rollup: Rollup, unknown_start: bool) -> None:
        unrecorded = self.unrecorded
        for key in (*QUANTITIES, FIRST_OUTPUT, *voice.SPEECH_QUANTITIES, FIRST_OUTPUT_SPLIT):
            if rollup.bound_in(key) or (unknown_start and key in voice.UNKNOWN_START_QUANTITIES):
                unrecorded[key] = unrecorded.get(key, 0) + 1
        for name in set(rollup.unrecorded):
            unrecorded[name] = unrecorded.get(name, 0) + 1

    def add(self, run: WorkflowRun, cost_usd: float | None = None) -> None:
        """Count one run (``cost_usd``: its cost, when known otherwise than from the run)."""
        self.runs += 1
        self.errors += run.error
        weight, biased = run.sampling
        # OpenTelemetry's sampling cannot express a probability below 2^-56 (its 56-bit
        # threshold): a smaller one recorded is a bug or a forgery, not 1e300 runs.
        weight = min(weight, MAX_SAMPLING_WEIGHT)
        self.biased += biased
        if run.error and not self.include_errors:
            self.seen_steps.update([step.name for step in run.steps])
            return
        if run.interrupted:
            self.interrupted += 1
            if not self.include_interrupted:
                self.seen_steps.update([step.name for step in run.steps])
                return
        self.weight_total += weight
        if weight > self.heaviest_weight:
            self.heaviest_weight, self.heaviest_trace_id = weight, run.trace_id
        rollup = run.rollup
        cached = rollup.cache_hits > 0
        quantities = self.quantities
        quantities["total"].add(rollup.total_ms, cached, weight)
        quantities["inference"].add(rollup.inference_ms, cached, weight)
        quantities["data"].add(rollup.data_ms, cached, weight)
        quantities["tool"].add(rollup.tool_ms, cached, weight)
        quantities["overhead"].add(rollup.overhead_ms, cached, weight)
        if rollup.first_output_ms is not None:
            quantities[FIRST_OUTPUT].add(rollup.first_output_ms, cached, weight)
        if rollup.speech_to_text_ms is not None or rollup.first_output_end_of_turn_ms is not None:
            for quantity in voice.SPEECH_QUANTITIES:
                part = voice.speech_ms(rollup, quantity)
                if part is not None:
                    quantities[quantity].add(part, cached, weight)
            split = first_output_parts(rollup)
            if split is not None:
                for name, samples in self.split_samples.items():
                    samples.add(split[name], cached, weight)
        cost = cost_usd if cost_usd is not None else rollup.cost_usd
        if cost is not None:
            self.cost.add(cost, cached, weight)
        if rollup.unrecorded or rollup.unusable_parts or run.unknown_start is not None:
            self._add_unrecorded(rollup, run.unknown_start is not None)
        steps = self.steps
        seen = self.seen_steps.add
        operations = self.operations if self.count_operations else None
        for step in run.steps:
            stats = steps.get(step.name)
            if stats is None:  # a name first seen: every name in steps is in seen_steps
                seen(step.name)
                stats = steps[step.name] = StepStats(step.name, step.kind)
            stats.duration.add((step.end_ns - step.start_ns) / _NS_PER_MS, step.cache_hit, weight)
            if step.ttft_ms is not None:
                stats.ttft.add(step.ttft_ms, step.cache_hit, weight)
            if operations is not None and step.operation is not None and step.kind == "inference":
                _add_call(operations, step, weight)
        if self.slowest is None or run.total_ms > self.slowest.total_ms:
            self.slowest = run


def _add_call(operations: dict[str, StepStats], step: StepTiming, weight: float) -> None:
    assert step.operation is not None
    stats = operations.get(step.operation)
    if stats is None:
        stats = operations[step.operation] = StepStats(step.operation, "inference")
    stats.duration.add((step.end_ns - step.start_ns) / _NS_PER_MS, step.cache_hit, weight)
    if step.ttft_ms is not None:
        stats.ttft.add(step.ttft_ms, step.cache_hit, weight)


@dataclass(slots=True)
class Stats:
    """Samples of every workflow seen, in order of first appearance."""

    workflows: dict[str, WorkflowStats] = field(default_factory=dict)
    include_errors: Callable[[str], bool] | None = None
    """Whether a workflow's failed runs count in its samples (default: they do not)."""
    include_interrupted: Callable[[str], bool] | None = None
    """Whether a workflow's interrupted voice turns count in its samples (default: no)."""
    count_operations: Callable[[str], bool] | None = None
    """Whether a workflow's model calls are sampled by operation too (default: no)."""

    def add(self, run: WorkflowRun, cost_usd: float | None = None) -> None:
        """Count one run."""
        stats = self.workflows.get(run.workflow)
        if stats is None:
            errors = self.include_errors is not None and self.include_errors(run.workflow)
            interrupted = self.include_interrupted is not None and self.include_interrupted(
                run.workflow
            )
            by_operation = self.count_operations is not None and self.count_operations(run.workflow)
            stats = self.workflows[run.workflow] = WorkflowStats(
                run.workflow,
                include_errors=errors,
                include_interrupted=interrupted,
                count_operations=by_operation,
            )
        stats.add(run, cost_usd)

    @property
    def runs(self) -> int:
        """Runs of all workflows."""
        return sum(w.runs for w in self.workflows.values())


def aggregate(runs: Iterable[WorkflowRun]) -> Stats:
    """Samples of every run, grouped by workflow and step."""
    stats = Stats()
    for run in runs:
        stats.add(run)
    return stats
