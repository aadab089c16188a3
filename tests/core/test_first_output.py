"""Time to first output: which instant, and the critical-path split of the wait for it."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics.export import HistogramDataPoint

import chainlat
from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans
from support.records import MS, rec


def roll(end_ms: float, *spans: SpanRecord, mark_ms: float | None = None) -> Rollup:
    root = rec(1, None, "invoke_workflow w", 0, end_ms, "workflow")
    marked = round(mark_ms * MS) if mark_ms is not None else None
    return compute_rollup(root, spans, first_output_ns=marked)


def split(r: Rollup) -> tuple[float | None, dict[str, float] | None]:
    return r.first_output_ms, r.first_output_split()


def test_default_is_the_first_token_of_the_last_streamed_call() -> None:
    r = roll(
        200,
        rec(2, 1, "data retrieve", 0, 30, "data"),
        rec(3, 1, "chat plan", 30, 80, "inference", ttft_ms=10.0),
        rec(4, 1, "execute_tool lookup", 82, 100, "tool"),
        rec(5, 1, "chat answer", 100, 190, "inference", ttft_ms=40.0),
    )
    assert split(r) == (
        140.0,
        {"inference": 50.0 + 40.0, "data": 30.0, "tool": 18.0, "overhead": 2.0},
    )


def test_a_user_facing_call_wins_over_the_last_streamed_one() -> None:
    r = roll(
        200,
        rec(2, 1, "chat greet", 0, 50, "inference", ttft_ms=15.0, user_facing=True),
        rec(3, 1, "chat answer", 60, 190, "inference", ttft_ms=40.0),
    )
    assert split(r) == (15.0, {"inference": 15.0, "data": 0.0, "tool": 0.0, "overhead": 0.0})


def test_the_application_mark_wins_over_every_rule() -> None:
    r = roll(
        200,
        rec(2, 1, "chat answer", 10, 190, "inference", ttft_ms=40.0, user_facing=True),
        mark_ms=195,
    )
    assert split(r) == (
        195.0,
        {"inference": 180.0, "data": 0.0, "tool": 0.0, "overhead": 15.0},
    )


def test_without_a_streamed_call_the_last_call_to_end_gives_the_output() -> None:
    r = roll(
        100,
        rec(2, 1, "chat a", 0, 60, "inference", streamed=False),
        rec(3, 1, "chat b", 5, 70, "inference", streamed=False),
        rec(4, 1, "execute_tool post", 70, 95, "tool"),
    )
    assert split(r) == (70.0, {"inference": 65.0, "data": 0.0, "tool": 0.0, "overhead": 5.0})
    assert r.unusable == ()


def test_no_model_call_no_first_output() -> None:
    r = roll(50, rec(2, 1, "data d", 0, 40, "data"))
    assert split(r) == (None, None)
    assert Rollup.from_attributes(r.to_attributes()) == r


def test_the_wait_follows_the_critical_path_to_the_output_under_concurrency() -> None:
    # A slow data stage runs beside the answer and ends after its first token: the
    # wait for the output is the answer's path, not the data stage's.
    r = roll(
        300,
        rec(2, 1, "chat plan", 0, 50, "inference"),
        rec(3, 1, "data audit", 50, 280, "data"),
        rec(4, 1, "chat answer", 60, 250, "inference", ttft_ms=30.0),
    )
    assert split(r) == (90.0, {"inference": 80.0, "data": 0.0, "tool": 0.0, "overhead": 10.0})
    # The total's critical path goes through the audit instead.
    assert r.critical_path == ("chat plan", "data audit")


def test_a_call_seen_twice_gives_its_earliest_first_token() -> None:
    # The wire-level span inside a hand-written inference span knows the first token.
    r = roll(
        100,
        rec(2, 1, "chat answer", 10, 90, "inference"),
        rec(3, 2, "chat m", 12, 88, "inference", ttft_ms=20.0),
    )
    assert r.first_output_ms == 32.0


def test_the_split_sums_to_the_wait_and_round_trips_through_attributes() -> None:
    r = roll(
        120,
        rec(2, 1, "data d", 3, 20, "data"),
        rec(3, 1, "chat answer", 25, 110, "inference", ttft_ms=12.5),
    )
    parts = r.first_output_split()
    assert parts is not None and r.first_output_ms == 37.5
    assert sum(parts.values()) == pytest.approx(r.first_output_ms)
    assert Rollup.from_attributes(r.to_attributes()) == r


def test_run_first_output_marks_the_instant_on_the_workflow(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("voice", tracer_provider=p) as run:
        with chainlat.data_stage("fetch", tracer_provider=p):
            clock.advance(20)
        with chainlat.inference("m", tracer_provider=p) as call:
            clock.advance(30)
            call.first_token()
            clock.advance(5)
            run.first_output()
            clock.advance(50)
            run.first_output()  # only the first mark counts
        clock.advance(10)
    assert run.rollup is not None
    assert split(run.rollup) == (
        55.0,
        {"inference": 35.0, "data": 20.0, "tool": 0.0, "overhead": 0.0},
    )
    root = cap.span("invoke_workflow voice")
    attributes = root.attributes or {}
    assert attributes["chainlat.chain.first_output_ms"] == 55.0
    assert attributes["chainlat.workflow.first_output_ms"] == 55.0
    assert [e.name for e in root.events] == ["chainlat.first_output"]
    # Read back from the trace, and recomputed from its spans, the run says the same.
    (traced,) = runs_from_spans(cap.spans())
    assert traced.first_output_ms == 55.0
    assert traced.recomputed_rollup() == traced.rollup


def test_user_facing_call_and_default_rule_at_runtime(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("chat", tracer_provider=p) as run:
        with chainlat.inference("m", user_facing=True, tracer_provider=p) as call:
            clock.advance(12)
            call.first_token()
            clock.advance(30)
        with chainlat.inference("m", tracer_provider=p) as call:
            clock.advance(7)
            call.first_token()
            clock.advance(1)
    assert run.rollup is not None and run.rollup.first_output_ms == 12.0
    assert (cap.span("invoke_workflow chat").attributes or {})["chainlat.step.kind"] == "workflow"


def test_first_output_histogram_is_recorded(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("chat", tracer_provider=p):
        with chainlat.inference("m", tracer_provider=p) as call:
            clock.advance(250)
            call.first_token()
            clock.advance(10)
    data = cap.metric_reader.get_metrics_data()
    assert data is not None
    points = [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "gen_ai.workflow.time_to_first_output"
        for point in metric.data.data_points
    ]
    assert all(isinstance(p, HistogramDataPoint) for p in points)
    assert [(p.count, p.sum) for p in points if isinstance(p, HistogramDataPoint)] == [(1, 0.25)]


def test_a_bad_mark_is_logged_and_replaced_by_now(cap: Capture) -> None:
    with chainlat.workflow("w", tracer_provider=cap.provider) as run:
        cap.clock.advance(3)
        run.first_output(at_ns="soon")  # type: ignore[arg-type]
    assert run.rollup is not None and run.rollup.first_output_ms == 3.0
