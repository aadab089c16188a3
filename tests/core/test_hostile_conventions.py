"""The new conventions under hostile traces: a run of thousands of Vercel AI SDK calls (each
``ai.streamText`` a transparent span around its ``doStream``, so a stand-in of the rollup's
tree) is rolled up in work linear in its spans."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from chainlat._core import rollup as rollup_module
from chainlat._core.critical_path import Node
from chainlat._core.records import SpanRecord
from chainlat._core.rollup import compute_rollup

T0 = 1_700_000_000_000_000_000
MS = 1_000_000

unlinked: Counter[int] = Counter()


class Counted(Node):
    """A node that counts how often it is unlinked (its parent set to None)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "parent" and value is None:
            unlinked[id(self)] += 1
        object.__setattr__(self, name, value)


def test_each_node_is_unlinked_once_however_many_stand_ins_share_its_parents_children() -> None:
    """1,000 stand-ins whose children are the workflow's 2,000: each node unlinked once. They
    were walked again for each stand-in, 2,000,000 unlinks: a run of 8,000 AI SDK calls
    took 27 s of its 35 s in it (chainlat report, 2 cores)."""
    root = SpanRecord(span_id=1, parent_id=None, name="w", start_ns=T0, end_ns=T0 + MS)
    top = Counted(root, T0, T0 + MS, "overhead", None)
    kids: list[Node] = [Counted(root, T0, T0 + MS, "inference", None, top) for _ in range(2000)]
    top.kids = kids
    stand_ins: list[Node] = [
        Counted(root, T0, T0 + MS, "overhead", None, top, None, kids) for _ in range(1000)
    ]
    unlinked.clear()
    rollup_module._release(top, stand_ins)
    assert set(unlinked.values()) == {1}
    assert len(unlinked) == 1 + len(kids) + len(stand_ins)


def _ai_sdk_run(calls: int) -> tuple[SpanRecord, list[SpanRecord]]:
    """A workflow of ``calls`` AI SDK calls one after another, each ``ai.streamText`` around
    its ``ai.streamText.doStream``, as the reader records them."""
    root = SpanRecord(
        span_id=1, parent_id=None, name="invoke_workflow w", start_ns=T0, end_ns=T0 + calls * MS
    )
    records = []
    for index in range(calls):
        start = T0 + index * MS
        outer = SpanRecord(
            span_id=10 + 2 * index,
            parent_id=1,
            name="ai.streamText",
            start_ns=start,
            end_ns=start + MS,
        )
        inner = SpanRecord(
            span_id=11 + 2 * index,
            parent_id=outer.span_id,
            name="ai.streamText.doStream",
            start_ns=start,
            end_ns=start + MS // 2,
            kind="inference",
            model="m",
        )
        records += [outer, inner]
    return root, records


def test_a_run_of_many_ai_sdk_calls_rolls_up_all_of_them() -> None:
    root, records = _ai_sdk_run(3000)
    rollup = compute_rollup(root, records)
    assert rollup.inference_count == 3000
    assert rollup.inference_ms == 3000 * 0.5


reads = [0]
_ID_SLOT: Any = vars(SpanRecord)["span_id"]  # the slot: the counted property reads it


class CountedRecord(SpanRecord):
    """A span record that counts the reads of its span id."""

    __slots__ = ()

    @property
    def span_id(self) -> int:
        reads[0] += 1
        return int(_ID_SLOT.__get__(self))

    @span_id.setter
    def span_id(self, value: int) -> None:
        _ID_SLOT.__set__(self, value)


@pytest.mark.parametrize("apart_ns", [MS, 0], ids=["one after another", "all at one instant"])
def test_the_steps_of_thousands_of_calls_of_one_name_are_matched_to_spans_in_n_log_n(
    apart_ns: int,
) -> None:
    """The report matches each step to its span among the spans of its name: 4,000 calls of
    one name read all of them for each step (8,000,000 reads), now from a search (a few
    reads each); chainlat report of one run of 8,000 AI SDK calls spent 7.4 s there."""
    from types import SimpleNamespace

    from chainlat.report._critical import step_spans

    calls = 4000
    records = [
        CountedRecord(10 + i, 1, "ai.streamText.doStream", T0 + i * apart_ns, T0 + i * MS + MS)
        for i in range(calls)
    ]
    steps = [SimpleNamespace(name=r.name, start_ns=r.start_ns, end_ns=r.end_ns) for r in records]
    run = SimpleNamespace(
        root=object(), spans=[SimpleNamespace(record=r) for r in records], steps=steps
    )
    expected = list(range(10, 10 + calls))
    reads[0] = 0
    assert step_spans(run) == expected  # type: ignore[arg-type]
    assert reads[0] < 10 * calls


source_reads = [0]
_SOURCE_SLOT: Any = vars(SpanRecord)["source"]


class SourceCounted(SpanRecord):
    """A span record that counts the reads of its source."""

    __slots__ = ()

    @property
    def source(self) -> str | None:
        source_reads[0] += 1
        value = _SOURCE_SLOT.__get__(self)
        return value if isinstance(value, str) else None

    @source.setter
    def source(self, value: str | None) -> None:
        _SOURCE_SLOT.__set__(self, value)


def test_calls_each_with_its_wire_span_inside_are_looked_at_once_for_twins() -> None:
    """3,000 framework calls, each with the HTTP span of its request inside it (the HTTP-wire
    rule's shape): the wire spans are their calls seen twice already, the calls left are of
    one source, so no two are twins, and no pair of them is looked at (there were 4,500,000:
    chainlat report of 8,000 such calls took 11 s, 1.4 s now)."""
    from chainlat._core.twins import find_twins

    records: list[SpanRecord] = []
    for index in range(3000):
        start = T0 + index * MS
        call = SourceCounted(
            10 + 2 * index,
            1,
            "chat m",
            start,
            start + MS,
            kind="inference",
            model="m",
            source="gen_ai",
        )
        wire = SourceCounted(
            11 + 2 * index,
            call.span_id,
            "POST",
            start,
            start + MS // 2,
            kind="inference",
            model="m",
            source="http",
        )
        records += [call, wire]
    source_reads[0] = 0
    assert find_twins(1, records) == {}
    assert source_reads[0] < 10 * len(records)


def _calls_beside_their_wires(
    count: int, record: type[SpanRecord]
) -> tuple[list[SpanRecord], list[SpanRecord]]:
    """``count`` framework calls one after another under the workflow (span 1), each with
    the HTTP span of its request beside it, inside its interval (a wire span the framework
    did not make current)."""
    calls: list[SpanRecord] = []
    wires: list[SpanRecord] = []
    for index in range(count):
        start = T0 + index * MS
        calls.append(
            record(
                10 + 2 * index, 1, "chat m", start, start + MS,
                kind="inference", model="m", source="gen_ai", input_tokens=5,
            )
        )  # fmt: skip
        wires.append(
            record(
                11 + 2 * index, 1, "POST", start + 10, start + MS - 10,
                kind="inference", model="m", source="http",
            )
        )  # fmt: skip
    return calls, wires


def test_calls_each_with_its_wire_span_beside_it_are_paired_looking_at_few_pairs() -> None:
    """3,000 framework calls, each with the HTTP span of its request beside it (a wire span
    the framework did not make current): each wire span is its call's twin, found among the
    calls that overlap it, and a call with no overlapping twin is compared with the wire
    spans under its parent only (every call was compared with every other, twice: 2,000
    such calls took 13 s in chainlat report, 8,000 took 300 s; 0.7 s and 4.7 s now)."""
    from chainlat._core.twins import find_twins

    calls, wires = _calls_beside_their_wires(3000, SourceCounted)
    records = [r for pair in zip(calls, wires, strict=True) for r in pair]
    source_reads[0] = 0
    twins = find_twins(1, records)
    assert {wire: call.span_id for wire, call in twins.items()} == {
        11 + 2 * index: 10 + 2 * index for index in range(3000)
    }
    assert source_reads[0] < 20 * len(records)


class ScanCounted(list[SpanRecord]):
    """A parent's children that count every child an iteration hands out."""

    visits = 0

    def __iter__(self) -> Any:
        for item in super().__iter__():
            ScanCounted.visits += 1
            yield item


def test_wire_spans_beside_their_calls_move_under_them_in_one_pass_of_the_siblings() -> None:
    """3,000 framework calls, each with its wire span beside it under the workflow: each wire
    span moves under its call, and the workflow's children are walked a bounded number of
    times (each move scanned and deleted from them: 8,000 such calls spent 4.7 s there)."""
    from chainlat._core.twins import find_twins, timed_by_wire

    calls, wires = _calls_beside_their_wires(3000, SpanRecord)
    records = [r for pair in zip(calls, wires, strict=True) for r in pair]
    twins = find_twins(1, records)
    by_parent: dict[int, list[SpanRecord]] = {1: ScanCounted(records)}
    ScanCounted.visits = 0
    timed = timed_by_wire(1, records, wires, twins, by_parent)
    assert timed == {call.span_id for call in calls}
    assert by_parent[1] == calls
    assert all(by_parent[call.span_id] == [wire] for call, wire in zip(calls, wires, strict=True))
    assert twins == {}
    assert ScanCounted.visits <= 3 * len(records)
