"""The wait for the first output read off the total's walk equals the second walk's.

When no two children of one span overlap, `compute_rollup` reads the first-output
split off the critical path it walked for the total instead of walking again to the
cut. Seeded random trees, sequential ones (where the shortcut applies, with touching
and zero-length spans, nesting and transparent spans) and the fuzz tests' overlapping
ones, rolled up both ways, must give the same rollup, field for field.
"""

from __future__ import annotations

import random

import pytest

from chainlat._core import critical_path
from chainlat._core.rollup import SpanKindLabel, SpanRecord, compute_rollup
from support.trees import random_tree

KINDS: tuple[SpanKindLabel | None, ...] = (None, "inference", "data", "tool", "workflow")
CASES = 400


def sequential_tree(rng: random.Random) -> tuple[SpanRecord, list[SpanRecord]]:
    """Children laid end to end (or touching, or with gaps) under every span."""
    records: list[SpanRecord] = []
    next_id = iter(range(2, 10_000))

    def children(parent_id: int, start: int, end: int, depth: int) -> None:
        t = start
        for _ in range(rng.randint(0, 5 if depth == 0 else 3)):
            if t >= end:
                break
            begin = t + rng.choice([0, 0, rng.randint(0, 40)])  # touching, or a gap
            finish = min(end, begin + rng.choice([0, rng.randint(1, 200)]))  # zero-length too
            span_id = next(next_id)
            records.append(
                SpanRecord(
                    span_id,
                    parent_id,
                    f"step-{span_id}",
                    begin,
                    finish,
                    rng.choice(KINDS),
                    ttft_ms=rng.choice([None, None, rng.uniform(0, 0.2)]),
                    user_facing=rng.random() < 0.1,
                    input_tokens=rng.choice([None, rng.randint(0, 99)]),
                )
            )
            if depth < 2 and finish > begin:
                children(span_id, begin, finish, depth + 1)
            t = finish
        return None

    root = SpanRecord(1, None, "invoke_workflow w", 0, rng.randint(0, 1000), "workflow")
    children(1, 0, root.end_ns, 0)
    rng.shuffle(records)
    return root, records


def both_ways(
    monkeypatch: pytest.MonkeyPatch, root: SpanRecord, records: list[SpanRecord], **kwargs: object
) -> tuple[object, object]:
    monkeypatch.setattr(critical_path, "SHORTCUT", False)
    walked_twice = compute_rollup(root, list(records), **kwargs)  # type: ignore[arg-type]
    monkeypatch.setattr(critical_path, "SHORTCUT", True)
    walked_once = compute_rollup(root, list(records), **kwargs)  # type: ignore[arg-type]
    return walked_twice, walked_once


def test_sequential_trees_give_the_same_rollup_in_one_walk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(20261203)
    second_walks = 0
    real_wait = critical_path.wait_segments

    def counted(*args: object) -> object:
        nonlocal second_walks
        second_walks += 1
        return real_wait(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(critical_path, "wait_segments", counted)
    with_output = 0
    for _ in range(CASES):
        root, records = sequential_tree(rng)
        mark = rng.choice([None, rng.randint(-10, root.end_ns + 10)])
        before = second_walks
        twice, once = both_ways(monkeypatch, root, records, first_output_ns=mark)
        assert once == twice
        if twice.first_output_ms is not None:  # type: ignore[attr-defined]
            with_output += 1
            # The second walk ran only with the shortcut off: these trees are disjoint.
            assert second_walks == before + 1
    assert with_output > CASES // 2  # the comparison is not vacuous


@pytest.mark.parametrize("malformed", [False, True])
def test_overlapping_trees_give_the_same_rollup(
    monkeypatch: pytest.MonkeyPatch, malformed: bool
) -> None:
    rng = random.Random(20261204 + malformed)
    for _ in range(CASES):
        root, records = random_tree(rng, malformed=malformed)
        mark = rng.choice([None, rng.randint(-10, 1100)])
        twice, once = both_ways(monkeypatch, root, records, first_output_ns=mark)
        assert once == twice
