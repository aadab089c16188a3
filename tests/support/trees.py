"""Random span trees for the rollup's property tests."""

from __future__ import annotations

import random

from chainlat._core.rollup import SpanKindLabel, SpanRecord

KINDS: tuple[SpanKindLabel | None, ...] = (None, "inference", "data", "tool", "workflow")


def random_tree(rng: random.Random, *, malformed: bool) -> tuple[SpanRecord, list[SpanRecord]]:
    root = SpanRecord(1, None, "invoke_workflow w", 0, rng.randint(0, 1000), "workflow")
    records: list[SpanRecord] = []
    used: set[tuple[int, int]] = set()
    for index in range(rng.randint(0, 30)):
        span_id = index + 2
        parent: int | None = rng.choice([1, *[r.span_id for r in records]])
        start = rng.randint(-50, 1050)
        end = start + rng.randint(1, 400)
        if malformed:
            end = start + rng.randint(-100, 400)  # negative durations too
            if rng.random() < 0.1:
                parent = rng.choice([None, rng.randint(40, 60)])  # missing parent
            if rng.random() < 0.05:
                span_id = rng.randint(1, index + 2)  # duplicate ids, the root's, cycles
        elif (start, end) in used:
            continue  # distinct intervals: ties would make the path depend on input order
        used.add((start, end))
        records.append(
            SpanRecord(
                span_id,
                parent,
                f"step-{index}",
                start,
                end,
                rng.choice(KINDS),
                cache_hit=rng.random() < 0.2,
                input_tokens=rng.choice([None, rng.randint(0, 500)]),
                output_tokens=rng.choice([None, rng.randint(0, 500)]),
                ttft_ms=rng.choice([None, rng.uniform(0, 500)]),
                user_facing=rng.random() < 0.1,
            )
        )
    return root, records
