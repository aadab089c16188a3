"""Each run's rollup as metrics (chainlat.chain.duration) and the budget counter
(chainlat.budget.exceeded), recorded only when configure() has a metrics reader."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)

import chainlat
from chainlat._runtime import hooks
from chainlat._runtime import metrics as chain_metrics
from chainlat.budgets import Budgets
from chainlat.testing import FakeClock

BUDGETS = Budgets.model_validate(
    {"workflows": {"answer": {"total": "100ms", "data": "30ms", "p95": {"tool": "7ms"}}}}
)


@pytest.fixture(autouse=True)
def _shutdown() -> Iterator[None]:
    yield
    chainlat.shutdown()


def _points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    assert data is not None
    return [
        point
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == name
        for point in m.data.data_points
    ]


def _attrs(point: Any) -> dict[str, object]:
    return dict(point.attributes or {})


def _first_outputs(reader: InMemoryMetricReader) -> dict[object, float]:
    """Each workflow's ``first_output`` point: its sum, by workflow name."""
    return {
        _attrs(p)["gen_ai.workflow.name"]: p.sum
        for p in _points(reader, "chainlat.chain.duration")
        if _attrs(p)["chainlat.chain.kind"] == "first_output"
    }


def _run(
    clock: FakeClock, provider: Any, data_ms: float, tool_ms: float, fail: bool = False
) -> None:
    try:
        with chainlat.workflow("answer", tracer_provider=provider):
            clock.advance(2)
            with chainlat.data_stage("docs", tracer_provider=provider):
                clock.advance(data_ms)
            with chainlat.tool("search", tracer_provider=provider):
                clock.advance(tool_ms)
            clock.advance(1)
            if fail:
                raise TimeoutError("upstream")
    except TimeoutError:
        pass


def test_each_run_records_its_total_and_split_with_every_limit_a_boundary() -> None:
    reader = InMemoryMetricReader()
    clock = FakeClock()
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock, budgets=BUDGETS
    )
    _run(clock, provider, data_ms=20, tool_ms=5)
    _run(clock, provider, data_ms=40, tool_ms=8)
    points = {
        str(_attrs(p)["chainlat.chain.kind"]): p
        for p in _points(reader, "chainlat.chain.duration")
        if isinstance(p, HistogramDataPoint)
    }
    assert sorted(points) == ["data", "inference", "overhead", "tool", "total"]
    assert points["total"].count == 2
    assert points["total"].sum == pytest.approx(28 + 51)
    assert points["data"].sum == pytest.approx(60)
    assert points["tool"].sum == pytest.approx(13)
    assert points["overhead"].sum == pytest.approx(6)
    assert points["inference"].sum == 0
    assert _attrs(points["data"]) == {
        "gen_ai.workflow.name": "answer",
        "chainlat.chain.kind": "data",
    }
    bounds = list(points["total"].explicit_bounds)
    assert {7.0, 30.0, 100.0} <= set(bounds) and 10.0 in bounds and bounds == sorted(bounds)


def test_budget_counter_starts_at_zero_and_counts_each_broken_limit() -> None:
    reader = InMemoryMetricReader()
    clock = FakeClock()
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock, budgets=BUDGETS
    )
    counts = {
        str(_attrs(p)["chainlat.budget.target"]): p.value
        for p in _points(reader, "chainlat.budget.exceeded")
        if isinstance(p, NumberDataPoint)
    }
    assert counts == {"total": 0, "data": 0}
    _run(clock, provider, data_ms=20, tool_ms=5)  # within: 28 ms, data 20 ms
    _run(clock, provider, data_ms=40, tool_ms=8)  # data 40 ms > 30
    _run(clock, provider, data_ms=95, tool_ms=8)  # data and total (106 ms) over
    counts = {
        str(_attrs(p)["chainlat.budget.target"]): p.value
        for p in _points(reader, "chainlat.budget.exceeded")
        if isinstance(p, NumberDataPoint)
    }
    assert counts == {"total": 1, "data": 2}


def test_a_failed_run_is_labelled_with_its_error_type() -> None:
    reader = InMemoryMetricReader()
    clock = FakeClock()
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock
    )
    _run(clock, provider, data_ms=20, tool_ms=5, fail=True)
    [total] = [
        p
        for p in _points(reader, "chainlat.chain.duration")
        if _attrs(p)["chainlat.chain.kind"] == "total"
    ]
    assert _attrs(total)["error.type"] == "TimeoutError"
    assert _points(reader, "chainlat.budget.exceeded") == []


def test_nothing_is_installed_without_a_metrics_reader() -> None:
    chainlat.configure(exporter="none", set_global=False, budgets=BUDGETS)
    assert chain_metrics.active() is None
    assert chain_metrics._record not in hooks.end_callbacks()


def test_the_hook_runs_after_the_budget_check_and_goes_at_shutdown() -> None:
    reader = InMemoryMetricReader()
    chainlat.configure(exporter="none", metric_readers=[reader], set_global=False, budgets=BUDGETS)
    callbacks = hooks.end_callbacks()
    assert callbacks[-1] is chain_metrics._record
    assert callbacks.count(chain_metrics._record) == 1
    chainlat.shutdown()
    assert chain_metrics._record not in hooks.end_callbacks()


def test_first_output_is_recorded_when_the_run_marks_one() -> None:
    """``run.first_output()`` at 12 ms: a ``first_output`` point of 12 ms, and its per-run
    limit counted when broken."""
    reader = InMemoryMetricReader()
    clock = FakeClock()
    budgets = Budgets.model_validate({"workflows": {"voice": {"first_output": "10ms"}}})
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock, budgets=budgets
    )
    with chainlat.workflow("voice", tracer_provider=provider) as run:
        clock.advance(12)
        run.first_output()
        clock.advance(30)
    [point] = [
        p
        for p in _points(reader, "chainlat.chain.duration")
        if _attrs(p)["chainlat.chain.kind"] == "first_output"
    ]
    assert (point.count, point.sum) == (1, 12.0)
    assert 10.0 in list(point.explicit_bounds)
    [counted] = _points(reader, "chainlat.budget.exceeded")
    assert (_attrs(counted)["chainlat.budget.target"], counted.value) == ("first_output", 1)


def test_a_first_output_that_is_a_bound_is_not_recorded() -> None:
    """A call of another instrumentation that says nothing of streaming answers last (rule
    17 of docs/attributes.md): the run's first output is a bound, so no ``first_output``
    point; the same workflow around a call of chainlat's own API records one, at its end."""
    reader = InMemoryMetricReader()
    clock = FakeClock()
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock
    )
    foreign = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    with chainlat.workflow("foreign", tracer_provider=provider):
        clock.advance(5)
        span = foreign.start_span("chat gpt-4o", attributes={"gen_ai.operation.name": "chat"})
        clock.advance(40)
        span.end()
    with chainlat.workflow("own", tracer_provider=provider):
        clock.advance(5)
        with chainlat.inference("gpt-4o", tracer_provider=provider):
            clock.advance(40)
    first = _first_outputs(reader)
    assert first == {"own": 45.0}


def test_a_turn_whose_start_is_no_end_of_the_words_records_no_first_output() -> None:
    """A turn that says its start is no end of the caller's words (rule 16 of
    docs/attributes.md, ``chainlat.workflow.start_unknown``): its first output counts from
    that start, a bound, so no ``first_output`` point; the same turn without it records one."""
    from chainlat._core import attributes as attr

    reader = InMemoryMetricReader()
    clock = FakeClock()
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock
    )
    for name in ("unknown", "known"):
        with chainlat.workflow(name, tracer_provider=provider) as turn:
            if name == "unknown":
                turn.set_attribute(attr.WORKFLOW_START_UNKNOWN, "semantic_vad")
            clock.advance(30)
            turn.first_output()
            clock.advance(10)
    first = _first_outputs(reader)
    assert first == {"known": 30.0}


def test_an_interrupted_turn_is_labelled_with_its_end_reason_and_only_it() -> None:
    """A voice turn ended ``interrupted`` (barge-in) records every kind with
    ``gen_ai.agent.invocation.end_reason = "interrupted"``, which the rules leave out of the
    percentiles; a completed turn and a turn with no end reason carry no such label."""
    reader = InMemoryMetricReader()
    clock = FakeClock()
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock
    )
    for reason, ms in (("interrupted", 900), ("completed", 40), (None, 30)):
        with chainlat.workflow("voice", tracer_provider=provider) as turn:
            clock.advance(ms)
            if reason is not None:
                turn.end_reason(reason)
    points = [
        p for p in _points(reader, "chainlat.chain.duration") if isinstance(p, HistogramDataPoint)
    ]
    cut = [p for p in points if "gen_ai.agent.invocation.end_reason" in _attrs(p)]
    assert sorted(str(_attrs(p)["chainlat.chain.kind"]) for p in cut) == [
        "data",
        "inference",
        "overhead",
        "tool",
        "total",
    ]
    assert {_attrs(p)["gen_ai.agent.invocation.end_reason"] for p in cut} == {"interrupted"}
    [cut_total] = [p for p in cut if _attrs(p)["chainlat.chain.kind"] == "total"]
    assert (cut_total.count, cut_total.sum) == (1, 900.0)
    [kept_total] = [
        p for p in points if p not in cut and _attrs(p)["chainlat.chain.kind"] == "total"
    ]
    assert _attrs(kept_total) == {"gen_ai.workflow.name": "voice", "chainlat.chain.kind": "total"}
    assert (kept_total.count, kept_total.sum) == (2, 70.0)
