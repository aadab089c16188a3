"""The table is what runs: the rows' order is the classifier's, and its rules are rows."""

from __future__ import annotations

import itertools

import pytest

from chainlat._core import conventions
from chainlat._core.attributes import STEP_KIND
from chainlat._core.conventions import (
    ANY_VALUE,
    CONVENTIONS,
    Convention,
    classify,
    is_run_root,
)


def _keys_in_order() -> list[str]:
    keys: dict[str, None] = {}
    for convention in CONVENTIONS:
        keys.update(dict.fromkeys((*convention.kinds, *convention.suffixes)))
    return list(keys)


def _a_value(key: str, kind: str) -> str | None:
    """A value a row gives ``kind`` for ``key``; None if no row does."""
    for convention in CONVENTIONS:
        for value, found in convention.kinds.get(key, {}).items():
            if found == kind:
                return "any value" if value == ANY_VALUE else value
    return None


def test_of_two_classifying_keys_the_earlier_rows_decides() -> None:
    """Every pair of keys, each with a value of a different kind: the first key's kind wins."""
    keys = _keys_in_order()
    assert keys[0] == STEP_KIND
    checked = 0
    for first, second in itertools.combinations(keys, 2):
        for kind_a, kind_b in (("inference", "tool"), ("data", "inference"), ("tool", "data")):
            a, b = _a_value(first, kind_a), _a_value(second, kind_b)
            if a is None or b is None:
                continue
            overridden = any(
                a in convention.overrides.get(first, ()) and second in convention.kinds
                for convention in CONVENTIONS
            )
            expected = kind_b if overridden else kind_a
            assert classify({first: a, second: b}) == expected, (first, a, second, b)
            checked += 1
    assert checked > 50


def test_a_placeholder_never_makes_a_run_whichever_row_classified_it() -> None:
    placeholders = [pair for convention in CONVENTIONS for pair in convention.placeholders]
    assert placeholders
    for key in _keys_in_order()[1:]:  # chainlat's own kind is exempt: its processor knew
        value = _a_value(key, "workflow")
        if value is None:
            continue
        assert classify({key: value}) == "workflow"
        for placeholder_key, placeholder_value in placeholders:
            span = {key: value, placeholder_key: placeholder_value}
            assert classify(span) is None, key
            assert not is_run_root(span, "s", top_level=True), key


def test_a_rows_chain_is_a_run_only_at_the_top() -> None:
    chains = [(k, v) for c in CONVENTIONS for k, vs in c.chain_roots.items() for v in vs]
    assert len(chains) == 2
    for key, value in chains:
        assert classify({key: value}) is None
        assert is_run_root({key: value}, "chain", top_level=True)
        assert not is_run_root({key: value}, "chain", top_level=False)


@pytest.mark.parametrize(
    ("keys", "source"),
    [
        (
            ("openinference.span.kind", "langsmith.span.kind", "gen_ai.operation.name"),
            "openinference",
        ),
        (("langsmith.span.kind", "traceloop.span.kind"), "langsmith"),
        (("traceloop.span.kind", "http.request.method"), "traceloop"),
        (("llm.request.type", "http.request.method"), "traceloop"),
        (("http.request.method", "chainlat.step.kind"), "http"),
        (("http.method", "gen_ai.operation.name"), "http"),
        (("chainlat.step.kind", "lk.response.ttfb", "gen_ai.operation.name"), "chainlat"),
        (("lk.response.ttfb", "gen_ai.operation.name"), "livekit"),
        (("gen_ai.operation.name", "ai.operationId"), "gen_ai"),
        (("ai.operationId", "haystack.component.type"), "ai-sdk"),
        (("haystack.component.type",), "haystack"),
        (("genkit:type", "genkit:name"), "genkit"),
        (("mastra.span.type", "gen_ai.operation.name"), "mastra"),
        (("gen_ai.request.model",), "other"),
    ],
)
def test_a_spans_source_is_the_first_mark_it_holds_by_rank(
    keys: tuple[str, ...], source: str
) -> None:
    """The rows' ``marks`` in ``mark_rank`` order, the wire at ``WIRE_RANK``: a vendor's
    key before the wire, the wire before chainlat's kind, LiveKit's before the generic."""
    assert conventions.source_of(dict.fromkeys(keys, "x")) == source


def test_a_new_rows_mark_is_a_source_by_its_rank() -> None:
    """A convention's source is one row of data: its marks, its rank, its source name."""
    before = Convention(name="newcomer", checked=("newcomer==1.0",), kinds={}, marks=("nc.kind",))
    after = Convention(
        name="late", checked=("late==1.0",), kinds={}, marks=("late.kind",), mark_rank=9
    )
    table = (*CONVENTIONS, before, after)
    first = conventions._marks(table, after_wire=False)
    last = conventions._marks(table, after_wire=True)
    assert first[0] == ("openinference.span.kind", "openinference")
    assert first[1] == ("nc.kind", "newcomer")  # rank 0, after openinference in table order
    assert last[-1] == ("late.kind", "late")
    assert [source for _, source in conventions._marks(CONVENTIONS, after_wire=True)] == [
        "chainlat",
        "livekit",
        "mastra",
        "openlit",
        "gen_ai",
        "ai-sdk",
        "haystack",
        "genkit",
        "mlflow",  # last: MLflow puts its key on every span it sees (``null`` on others')
    ]
