"""Weighted percentiles are judged on their effective sample size (Kish: (Σw)²/Σw²) against
``min_runs``: one run that stands for nearly all the weight is one run, however many were
read beside it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._core.stats import Samples
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.cli import main
from chainlat.testing import capture


def test_effective_count_is_kish() -> None:
    samples = Samples()
    for value in (100.0, 200.0, 300.0):
        samples.add(value)
    assert samples.effective_count() == 3.0  # unweighted: the count
    samples.add(400.0, weight=3.0)
    assert samples.effective_count() == pytest.approx(36 / 12)
    even = Samples()
    for value in (1.0, 2.0, 3.0, 4.0):
        even.add(value, weight=1 / 0.3)
    assert even.effective_count() == pytest.approx(4.0)


def _traces(path: Path) -> None:
    """21 runs of ``chat``: the first, 100 ms, kept with probability 1e-300; twenty of
    900 ms kept with none recorded."""
    with capture(fake_clock=True, sequential_ids=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
        for n in range(21):
            with chainlat.workflow("chat", tracer_provider=cap.provider) as run:
                if n == 0:
                    run.set_attribute("chainlat.sampling.probability", 1e-300)
                cap.clock.advance(100 if n == 0 else 900)


@pytest.mark.parametrize(
    "options", [[], ["--format", "json"], ["--format", "markdown"], ["--junit", "JUNIT"]]
)
def test_a_run_that_alone_decides_a_percentile_leaves_it_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    _traces(traces)
    budgets = tmp_path / "b.toml"
    budgets.write_text('min_runs = 20\n[workflows.chat]\np95 = "500ms"\n')
    options = [str(tmp_path / "junit.xml") if o == "JUNIT" else o for o in options]
    assert main(["check", str(traces), "--budgets", str(budgets), *options]) == 2
    out = capsys.readouterr().out
    if options[:2] == ["--format", "json"]:
        (verdict,) = json.loads(out)["verdicts"]
        assert (verdict["status"], verdict["reason"]) == ("not_judged", "not_enough_runs")
        assert "effective sample size 1.0" in verdict["why"]
    elif options and options[0] == "--junit":
        assert 'name="exit_code" value="2"' in (tmp_path / "junit.xml").read_text()
    else:
        assert "FAILED: 0 of 1 limit broken, 1 not judged" in out
