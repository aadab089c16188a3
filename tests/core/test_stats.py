"""Nearest-rank percentiles and the per-workflow aggregation."""

from __future__ import annotations

import math
import random
import tracemalloc
from fractions import Fraction

import pytest

from chainlat._core.rollup import Rollup
from chainlat._core.runs import StepTiming, WorkflowRun
from chainlat._core.stats import Samples, aggregate, percentile


def test_nearest_rank_picks_an_observed_value() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 50) == 10.0
    assert percentile(values, 95) == 19.0  # rank ceil(0.95 * 20) = 19, not 20
    assert percentile(values, 90) == 18.0
    assert percentile(values, 99) == 20.0
    assert percentile(values, 100) == 20.0


def test_high_percentiles_of_few_values_are_the_maximum() -> None:
    assert percentile([1.0, 2.0, 3.0], 99) == 3.0
    assert percentile([5.0], 50) == 5.0


def test_percentile_arithmetic_is_exact_for_decimal_percentiles() -> None:
    values = [float(v) for v in range(1, 1001)]
    assert percentile(values, 99.9) == 999.0


@pytest.mark.parametrize("q", [0, -1, 100.5])
def test_percentile_outside_range_is_refused(q: float) -> None:
    with pytest.raises(ValueError, match="out of"):
        percentile([1.0], q)


def test_samples_can_leave_cache_hits_out() -> None:
    samples = Samples()
    for value, cached in [(10.0, True), (100.0, False), (200.0, False), (1.0, True)]:
        samples.add(value, cached=cached)
    assert samples.percentile(50) == 10.0
    assert samples.percentile(50, exclude_cached=True) == 100.0
    assert samples.count(exclude_cached=True) == 2
    summary = samples.summary()
    assert (summary.count, summary.max) == (4, 200.0)
    assert summary.mean == pytest.approx(77.75)


def _run(total: float, *steps: tuple[str, float]) -> WorkflowRun:
    rollup = Rollup(total, inference_ms=total / 2, data_ms=0.0, tool_ms=0.0, overhead_ms=total / 2)
    timings = tuple(
        StepTiming(name, "inference", 0, int(ms * 1e6), ttft_ms=ms / 4) for name, ms in steps
    )
    return WorkflowRun("chat", rollup, timings, 0, int(total * 1e6))


def test_aggregate_groups_by_workflow_quantity_and_step() -> None:
    stats = aggregate(
        [_run(100.0, ("chat a", 40.0)), _run(300.0, ("chat a", 80.0), ("chat b", 5.0))]
    )
    chat = stats.workflows["chat"]
    assert chat.runs == 2
    assert chat.quantities["total"].sorted() == [100.0, 300.0]
    assert chat.quantities["inference"].sorted() == [50.0, 150.0]
    assert chat.steps["chat a"].duration.sorted() == [40.0, 80.0]
    assert chat.steps["chat a"].ttft.sorted() == [10.0, 20.0]
    assert list(chat.steps) == ["chat a", "chat b"]
    assert chat.slowest is not None and chat.slowest.total_ms == 300.0


def _reference_percentile(pairs: list[tuple[float, float]], q: float) -> float:
    """Weighted nearest rank over (value, weight) pairs, written out plainly."""
    ordered = sorted(pairs)
    target = Fraction(str(q)) / 100 * sum(Fraction(w) for _, w in ordered)
    reached = Fraction(0)
    for value, weight in ordered:
        reached += Fraction(weight)
        if reached >= target:
            return value
    return ordered[-1][0]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("n", [1, 7, 1000, 70_000, 200_000])
def test_compact_samples_give_the_exact_percentiles_of_every_sample(n: int, weighted: bool) -> None:
    """Samples kept as arrays and sorted in place (a chunk at a time past 65,536) give the
    nearest rank of all values, with and without the cache hits, as a plain sort does."""
    rng = random.Random(n)
    rows = [
        (
            float(rng.randrange(1_000_000)) / 1000,
            rng.random() < 0.3,
            rng.choice((1.0, 4.0, 10.0)) if weighted else 1.0,
        )
        for _ in range(n if not weighted else min(n, 1000))
    ]
    samples = Samples()
    for value, cached, weight in rows:
        samples.add(value, cached=cached, weight=weight)
    for exclude in (False, True):
        kept = [(v, w) for v, c, w in rows if not (exclude and c)]
        assert samples.count(exclude_cached=exclude) == len(kept)
        assert samples.sorted(exclude_cached=exclude) == sorted(v for v, _ in kept)
        if not kept:
            continue
        ordered = sorted(v for v, _ in kept)
        for q in (0.1, 50, 90, 95, 99, 99.9, 100):
            expected = _reference_percentile(kept, q) if weighted else percentile(ordered, q)
            assert samples.percentile(q, exclude_cached=exclude) == expected
        summary = samples.summary(exclude_cached=exclude)
        assert summary.max == ordered[-1]
        assert summary.p95 == samples.percentile(95, exclude_cached=exclude)
    samples.add(-1.0)  # a sample after a percentile was asked for: sorted again
    assert samples.percentile(0.0001) == -1.0
    assert samples.count() == len(rows) + 1


def test_sorting_many_samples_takes_one_more_copy_of_them_not_two() -> None:
    """A percentile over 300,000 samples (five chunks) sorts them with at most 1.5 times
    their own 2.4 MB more at the peak: the merged array and a chunk's Python floats, not a
    sorted copy of every chunk beside the merged one as well (2 times). Bytes allocated,
    counted by tracemalloc: the same on every run."""
    rng = random.Random(0)
    samples = Samples(rng.random() * 1000 for _ in range(300_000))
    own = 300_000 * 8
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        p95 = samples.percentile(95)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert p95 == percentile(samples.sorted(), 95)
    assert peak <= 1.5 * own, f"sorting took {peak / own:.2f} times the samples' size"


def test_a_nonfinite_sample_is_found_whatever_the_order() -> None:
    samples = Samples([3.0, math.inf, 1.0])
    samples.add(2.0, cached=True)
    assert samples.nonfinite() == math.inf
    assert Samples([1.0, 2.0]).nonfinite() is None
    assert Samples([1e308, 1e308]).nonfinite() is None  # the sum overflows, no value does


@pytest.mark.parametrize("weight", [1.0, 2.0])
def test_samples_added_after_a_percentile_was_read_are_in_the_next_one(weight: float) -> None:
    """The sorted order and the merged hits are remade once a sample comes after them."""
    samples = Samples()
    rng = random.Random(7)
    seen: list[float] = []
    for _ in range(40):
        value = rng.uniform(0, 100)
        cached = rng.random() < 0.3
        samples.add(value, cached, weight)
        seen.append(value)
        assert samples.max() == max(seen)
        assert samples.sorted() == sorted(seen)
        assert samples.percentile(50) == percentile(sorted(seen), 50)
    samples.add(-1.0, False, weight)
    assert samples.sorted(exclude_cached=False)[0] == -1.0
