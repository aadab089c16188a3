"""Runs kept by a sampler: weighted by 1/probability when it is recorded, flagged when not."""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._core.stats import Samples
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.cli import main
from chainlat.testing import capture


def test_weighted_nearest_rank() -> None:
    samples = Samples()
    # A tail sampler kept every slow run (p = 1) and one fast run in ten (p = 0.1):
    # the fast one stands for ten.
    samples.add(100.0, weight=10.0)
    for slow in (900.0, 950.0, 1000.0):
        samples.add(slow)
    assert samples.weighted
    assert samples.percentile(50) == 100.0  # 10 of 13 at or below 100: p50 is 100
    assert samples.percentile(80) == 900.0  # 10/13 < 0.80 <= 11/13
    assert samples.percentile(90) == 950.0  # 11/13 < 0.90 <= 12/13
    assert samples.percentile(99) == 1000.0
    unweighted = Samples([100.0, 900.0, 950.0, 1000.0])
    assert not unweighted.weighted
    assert unweighted.percentile(50) == 900.0  # the bias the weights undo
    summary = samples.summary()
    assert (summary.count, summary.p50, summary.max) == (4, 100.0, 1000.0)
    assert summary.mean == pytest.approx((1000 + 900 + 950 + 1000) / 13)


def _traces(path: Path, attributes: list[dict[str, object]]) -> None:
    with capture(fake_clock=True, sequential_ids=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
        for ms, extra in zip((100, 900, 950, 1000), attributes, strict=True):
            with chainlat.workflow("chat", tracer_provider=cap.provider) as run:
                for key, value in extra.items():
                    run.set_attribute(key, value)  # type: ignore[arg-type]
                cap.clock.advance(ms)


def test_check_weights_recorded_probabilities(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    keep_all: dict[str, object] = {"chainlat.sampling.probability": 1.0}
    _traces(traces, [{"chainlat.sampling.probability": 0.1}, keep_all, keep_all, keep_all])
    budgets = tmp_path / "b.toml"
    budgets.write_text('[workflows.chat]\np50 = "200ms"\n')
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 0
    err = capsys.readouterr().err
    assert "chat: percentiles weighted by 1/chainlat.sampling.probability" in err


def test_check_warns_when_the_sampler_recorded_no_probability(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    _traces(traces, [{"tailsampling.policy": "baseline"}, {}, {}, {}])
    budgets = tmp_path / "b.toml"
    budgets.write_text('[workflows.chat]\np50 = "200ms"\n')
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 1
    err = capsys.readouterr().err
    assert "chat: 1 of 4 runs were kept by a tail sampler that recorded no sampling" in err
    assert "biased" in err


def test_a_probability_below_what_opentelemetry_expresses_is_clamped_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """p = 1e-300 would make one run stand for 1e300: it counts as 2^56 runs (OpenTelemetry's
    smallest probability), and the warning names the run that decides the percentiles."""
    from chainlat._core.stats import MAX_SAMPLING_WEIGHT, aggregate
    from chainlat.traces import read_runs

    traces = tmp_path / "t.jsonl"
    _traces(traces, [{"chainlat.sampling.probability": 1e-300}, {}, {}, {}])
    chat = aggregate(read_runs([str(traces)])).workflows["chat"]
    assert (chat.heaviest_weight, MAX_SAMPLING_WEIGHT) == (2.0**56, 2.0**56)
    assert chat.weight_total == 2.0**56 + 3
    (first, *_) = read_runs([str(traces)])
    assert chat.dominant == (first.trace_id, 2.0**56 / (2.0**56 + 3))
    budgets = tmp_path / "b.toml"
    budgets.write_text('[workflows.chat]\np95 = "500ms"\n')
    main(["check", str(traces), "--budgets", str(budgets)])
    err = capsys.readouterr().err
    assert (
        f"chainlat: warning: chat: run {first.trace_id} stands for 100.0% of the runs by its "
        "chainlat.sampling.probability: it alone decides the percentiles"
    ) in err
