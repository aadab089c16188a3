"""The one-pass rollup of a flat workflow (`tree.flat_tree`) equals the general phases'.

A workflow whose spans are all its own steps, one after another, is rolled up in one pass
instead of through the plan, the tree and the critical-path walk. Seeded random workflows
of that shape (touching steps and gaps, every kind, tokens, cache hits and reads, first
tokens marked or not, user-facing calls, step names, prices, an application's mark) are
rolled up both ways, and with the first-output walk both ways too: the rollups must be
equal, field for field. Each rule of the shape, broken once, sends the workflow back to
the general phases, before the one pass has changed anything.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest

from chainlat._core import critical_path, tree
from chainlat._core.chain import Rollup
from chainlat._core.critical_path import Node
from chainlat._core.prices import Price
from chainlat._core.rollup import SpanKindLabel, SpanRecord, compute_rollup

CASES = 500
STEP_KINDS: tuple[SpanKindLabel, ...] = ("inference", "data", "tool")
MODELS = ("gpt-4o", "gpt-4o-mini", "claude-3-5-haiku")
PRICES = {
    "gpt-4o": Price(2.5, 10.0, 1.25),
    "gpt-4o-mini": Price(0.15, 0.6),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08),
}


def flat_workflow(rng: random.Random) -> tuple[SpanRecord, list[SpanRecord]]:
    """Steps of the workflow itself, end to end or with gaps, in shuffled order."""
    records: list[SpanRecord] = []
    t = rng.choice([0, rng.randint(0, 30)])
    for span_id in range(2, 2 + rng.randint(0, 12)):
        start = t + rng.choice([0, 0, rng.randint(1, 40)])
        end = start + rng.randint(1, 300)
        kind = rng.choice(STEP_KINDS)
        record = SpanRecord(
            span_id, 1, f"step-{span_id}", start, end, kind, cache_hit=rng.random() < 0.2
        )
        record.step_name = rng.choice([None, None, f"named-{span_id % 3}"])
        if kind == "inference":
            record.source = "chainlat"
            record.model = rng.choice(MODELS)
            record.input_tokens = rng.choice([None, rng.randint(0, 900)])
            record.output_tokens = rng.choice([None, rng.randint(0, 900)])
            record.cache_read_tokens = rng.choice([None, None, rng.randint(0, 300)])
            record.ttft_ms = rng.choice([None, rng.uniform(0, (end - start) / 1e6)])
            record.ttft_marked = record.ttft_ms is not None and rng.random() < 0.5
            record.user_facing = rng.random() < 0.15
            record.operation = rng.choice(["chat", "text_completion", None])
        records.append(record)
        t = end
    root = SpanRecord(1, None, "invoke_workflow w", 0, t + rng.choice([0, rng.randint(1, 50)]))
    root.kind = "workflow"
    rng.shuffle(records)
    return root, records


def general(
    monkeypatch: pytest.MonkeyPatch, root: SpanRecord, records: list[SpanRecord], **kw: object
) -> Rollup:
    monkeypatch.setattr(tree, "FLAT", False)
    try:
        return compute_rollup(root, list(records), **kw)  # type: ignore[arg-type]
    finally:
        monkeypatch.setattr(tree, "FLAT", True)


def took_flat(root: SpanRecord, records: list[SpanRecord]) -> bool:
    top = Node(root, root.start_ns, max(root.end_ns, root.start_ns), "overhead", None)
    return tree.flat_tree(top, list(records), tree.TreeCounts()) is not None


@pytest.mark.parametrize("shortcut", [True, False])
def test_flat_workflows_give_the_general_phases_rollup(
    monkeypatch: pytest.MonkeyPatch, shortcut: bool
) -> None:
    monkeypatch.setattr(critical_path, "SHORTCUT", shortcut)
    rng = random.Random(20261204 + shortcut)
    flat = with_output = with_cost = 0
    for _ in range(CASES):
        root, records = flat_workflow(rng)
        kw: dict[str, object] = {}
        if rng.random() < 0.3:
            kw["first_output_ns"] = rng.randint(-10, root.end_ns + 10)
        if rng.random() < 0.5:
            kw["prices"] = PRICES
        expected = general(monkeypatch, root, records, **kw)
        found = compute_rollup(root, list(records), **kw)  # type: ignore[arg-type]
        assert found == expected, (root, records, kw)
        # In start order too, as a workflow's steps end and are kept (one pass, no sort).
        ordered = sorted(records, key=lambda r: r.start_ns)
        assert compute_rollup(root, ordered, **kw) == general(monkeypatch, root, ordered, **kw)  # type: ignore[arg-type]
        flat += took_flat(root, records) and took_flat(root, ordered)
        with_output += found.first_output_ms is not None
        with_cost += found.cost_usd is not None
    # Not vacuous: every case took the one pass, and the rules it shares were exercised.
    assert flat == CASES
    assert with_output > CASES // 2
    assert with_cost > CASES // 10


def _overlapping(records: list[SpanRecord]) -> list[SpanRecord]:
    first = min(records, key=lambda r: r.start_ns)
    second = min((r for r in records if r is not first), key=lambda r: r.start_ns)
    return [replace(second, start_ns=first.end_ns - 1) if r is second else r for r in records]


def _first(records: list[SpanRecord], **changes: object) -> list[SpanRecord]:
    return [replace(records[0], **changes), *records[1:]]  # type: ignore[arg-type]


BROKEN: dict[str, Callable[[list[SpanRecord]], list[SpanRecord]]] = {
    "overlapping steps": _overlapping,
    "a zero-length step": lambda rs: _first(rs, end_ns=rs[0].start_ns),
    "a step past the workflow's end": lambda rs: _first(rs, end_ns=10**9),
    "a step before the workflow's start": lambda rs: _first(rs, start_ns=-5),
    "a nested span": lambda rs: _first(rs, parent_id=rs[1].span_id),
    "a transparent span": lambda rs: _first(rs, kind=None),
    "a nested workflow": lambda rs: _first(rs, kind="workflow"),
    "another convention's call": lambda rs: _first(rs, kind="inference", source="gen_ai"),
    "a wire-level call": lambda rs: _first(rs, kind="inference", source="http"),
    "another convention's tool": lambda rs: _first(rs, kind="tool", source="openinference"),
    "a speech call": lambda rs: _first(
        rs, kind="inference", source="chainlat", operation="speech_to_text"
    ),
    "an unrecorded end": lambda rs: _first(rs, unrecorded_end=True),
    "a duplicate id": lambda rs: _first(rs, span_id=rs[1].span_id),
    "the workflow's own id": lambda rs: _first(rs, span_id=1),
}


@pytest.mark.parametrize("how", sorted(BROKEN))
def test_any_other_shape_goes_through_the_general_phases(
    monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    rng = random.Random(how)
    cases = 0
    while cases < 40:
        root, records = flat_workflow(rng)
        if len(records) < 2:
            continue
        cases += 1
        assert took_flat(root, records)
        broken = BROKEN[how](records)
        top = Node(root, root.start_ns, root.end_ns, "overhead", None)
        tally = tree.TreeCounts()
        assert tree.flat_tree(top, list(broken), tally) is None
        assert top.kids == [] and tally == tree.TreeCounts()  # nothing done before it said no
        assert compute_rollup(root, list(broken)) == general(monkeypatch, root, broken)


def test_a_drawn_walk_goes_through_the_general_phases() -> None:
    root, records = flat_workflow(random.Random(7))
    pieces: list[critical_path.PathPiece] = []
    drawn = compute_rollup(root, list(records), pieces=pieces)
    assert drawn == compute_rollup(root, list(records))
    assert sum(p.end_ns - p.start_ns for p in pieces) == root.end_ns - root.start_ns
