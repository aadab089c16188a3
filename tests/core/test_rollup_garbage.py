"""A rollup leaves nothing for the cyclic garbage collector: its tree's nodes point back at
each other while it is computed, and are unlinked before it returns, so that they go by
their reference counts (on the export thread, once per workflow)."""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator

import pytest

from chainlat._core import rollup as rollup_module
from chainlat._core.rollup import compute_rollup
from support.trees import random_tree


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.mark.parametrize("malformed", [False, True])
def test_random_trees_leave_no_cycles(collector_off: None, malformed: bool) -> None:
    rng = random.Random(20261205 + malformed)
    trees = [random_tree(rng, malformed=malformed) for _ in range(200)]
    gc.collect()
    for root, records in trees:
        compute_rollup(root, records)
        compute_rollup(root, records, pieces=[])  # the general phases, drawn as pieces
    assert gc.collect() == 0


def test_the_unlinking_is_what_frees_them(
    collector_off: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without it, the same trees leave their nodes to the collector."""
    monkeypatch.setattr(rollup_module, "_release", lambda top, stand_ins: None)
    rng = random.Random(20261205)
    trees = [random_tree(rng, malformed=False) for _ in range(50)]
    gc.collect()
    for root, records in trees:
        compute_rollup(root, records)
    assert gc.collect() > 0
