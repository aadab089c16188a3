"""The rollup on random span trees: it never fails, and its invariants always hold.

The rollup runs at the end of every workflow and on every trace a user hands to
the CLI, malformed ones included (negative durations, children outside their
parent, missing parents, cycles, duplicate ids); it is also written for speed.
Seeded, so that a failure reproduces; bounded in count.
"""

from __future__ import annotations

import random

import pytest

from chainlat._core.attributes import SPEECH_OPERATIONS
from chainlat._core.rollup import SpanKindLabel, SpanRecord, compute_rollup
from support.trees import random_tree

KINDS: tuple[SpanKindLabel | None, ...] = (None, "inference", "data", "tool", "workflow")
CASES = 400


@pytest.mark.parametrize("malformed", [False, True])
def test_split_always_sums_to_the_total_and_counts_agree(malformed: bool) -> None:
    rng = random.Random(20261202 + malformed)
    for _ in range(CASES):
        root, records = random_tree(rng, malformed=malformed)
        rollup = compute_rollup(root, records)
        parts = [rollup.inference_ms, rollup.data_ms, rollup.tool_ms, rollup.overhead_ms]
        assert all(part >= 0 for part in parts)
        assert sum(parts) == pytest.approx(rollup.total_ms, abs=1e-9)
        assert rollup.total_ms == max(root.end_ns - root.start_ns, 0) / 1e6
        assert rollup.step_count >= rollup.inference_count + rollup.data_count + rollup.tool_count
        assert rollup.cache_hits <= rollup.inference_count
        # A call without counts is counted once, and a run whose totals are nothing, with no
        # cache hit or speech call, counted none of its calls (rule 21).
        assert 0 <= rollup.uncounted_calls <= rollup.inference_count
        speech = any(r.operation in SPEECH_OPERATIONS for r in records)
        if not (rollup.input_tokens or rollup.output_tokens or rollup.cache_hits or speech):
            assert rollup.uncounted_calls == rollup.inference_count
        for kind_sum, kind_path in (
            (rollup.inference_sum_ms, rollup.inference_ms),
            (rollup.data_sum_ms, rollup.data_ms),
            (rollup.tool_sum_ms, rollup.tool_ms),
        ):
            assert kind_sum >= kind_path - 1e-9  # the path is part of the sum
        names = {r.name for r in records}
        assert set(rollup.critical_path) <= names
        # Every record has its own name, and the path never visits a step twice: not
        # even through the cycles and duplicate ids of malformed traces.
        assert len(rollup.critical_path) == len(set(rollup.critical_path))
        # The wait for the first output lies inside the run, and its split sums to it.
        split = rollup.first_output_split()
        if rollup.first_output_ms is None:
            assert split is None
        else:
            assert split is not None
            assert 0 <= rollup.first_output_ms <= rollup.total_ms
            assert all(part >= 0 for part in split.values())
            assert sum(split.values()) == pytest.approx(rollup.first_output_ms, abs=1e-9)


def well_formed_tree(rng: random.Random) -> tuple[SpanRecord, list[SpanRecord]]:
    """Children inside their parents, every start and end distinct: no ties to break."""
    times = iter(rng.sample(range(1, 100_000), 200))
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100_000, "workflow")
    records: list[SpanRecord] = []
    for index in range(rng.randint(0, 30)):
        parent = rng.choice([root, *records])
        inside = sorted(
            t for t in (next(times), next(times)) if parent.start_ns < t < parent.end_ns
        )
        if len(inside) < 2:
            continue
        start, end = inside
        records.append(
            SpanRecord(index + 2, parent.span_id, f"step-{index}", start, end, rng.choice(KINDS))
        )
    return root, records


def test_input_order_does_not_matter() -> None:
    rng = random.Random(7)
    for _ in range(CASES):
        root, records = well_formed_tree(rng)
        shuffled = records[:]
        rng.shuffle(shuffled)
        assert compute_rollup(root, shuffled) == compute_rollup(root, records)


def test_a_flat_chain_is_exact() -> None:
    """Sequential steps directly under the workflow: every gap is overhead."""
    rng = random.Random(11)
    for _ in range(CASES):
        t = 0
        records: list[SpanRecord] = []
        expected = {"inference": 0, "data": 0, "tool": 0, "overhead": 0}
        for index in range(rng.randint(1, 12)):
            gap, duration = rng.randint(0, 50), rng.randint(1, 200)
            kind: SpanKindLabel = rng.choice(("inference", "data", "tool"))
            records.append(SpanRecord(index + 2, 1, f"s{index}", t + gap, t + gap + duration, kind))
            expected["overhead"] += gap
            expected[kind] += duration
            t += gap + duration
        tail = rng.randint(0, 50)
        expected["overhead"] += tail
        rollup = compute_rollup(SpanRecord(1, None, "w", 0, t + tail, "workflow"), records)
        assert rollup.inference_ms * 1e6 == pytest.approx(expected["inference"])
        assert rollup.data_ms * 1e6 == pytest.approx(expected["data"])
        assert rollup.tool_ms * 1e6 == pytest.approx(expected["tool"])
        assert rollup.overhead_ms * 1e6 == pytest.approx(expected["overhead"])
        assert rollup.critical_path == tuple(r.name for r in records)
        assert rollup.parallelism == pytest.approx(
            sum(r.end_ns - r.start_ns for r in records) / (t + tail)
        )
