"""The what-if estimator against measured runs of chainlat.sim, through a real `chainlat demo`.

The demo records both variants of the support agent. From the large-planner runs
alone, swapping the planning step's model (sim-large -> sim-small) must land
within the stated error of the small-planner runs measured in the same process:

    |estimated p50 / measured p50 - 1| <= 15 %     |estimated p95 / measured p95 - 1| <= 20 %

Measured over seeds 1-8 at 24 runs per variant, the errors were at most 5.4 %
(p50) and 11.0 % (p95), 2.0 % and 6.2 % on average: see docs/tradeoffs.md. The demo
records the variants taking turns run by run, so a burst of load on a shared CI
machine moves both alike; the bounds leave room for what remains (a p95 of 24 runs
is the second-largest, so one late run moves it).

The demo runs here one run at a time (``--concurrency 1``). Four at a time, a loaded
two-core machine makes the concurrent runs contend for the CPU and the simulator's
slots, a queueing that the per-run estimate does not model: with two busy processes
beside it the errors were 25 % to 36 %, against 4 % at most one at a time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import percentile
from chainlat.analysis.tradeoff import compare
from chainlat.analysis.whatif import whatif
from chainlat.demo.tradeoff import grade
from chainlat.traces import read_runs

P50_BOUND = 0.15
P95_BOUND = 0.20


ATTEMPTS = 3
SPREAD_LIMIT = 1.4
"""A batch whose p95 total exceeds 1.4 times its p50 was disturbed: the simulator's
jitter (sigma 0.1 per phase) cannot spread a four-step chain that far, a stalled
machine can (another process hogging both cores stretched one run to 1.4 s)."""


def _spread(runs: list[WorkflowRun], variant: str) -> float:
    totals = sorted(r.recomputed_rollup().total_ms for r in runs if r.variant == variant)
    return percentile(totals, 95) / percentile(totals, 50)


@pytest.fixture(scope="module")
def demo_traces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A real `chainlat demo` run (24 runs per variant) on an undisturbed machine.

    Up to three attempts: a batch with an outlier from machine load measures the
    machine, not the estimator. If every attempt is disturbed the test fails and
    says so.
    """
    spreads: list[tuple[float, float]] = []
    for attempt in range(ATTEMPTS):
        where = tmp_path_factory.mktemp(f"demo{attempt}")
        traces = where / "traces.jsonl"
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        done = subprocess.run(
            [sys.executable, "-m", "chainlat.cli", "demo", "--requests", "24", "--seed", "3",
             "--concurrency", "1", "--traces-file", str(traces)],
            cwd=where,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs = list(read_runs([traces], outcomes=True))
        spread = (_spread(runs, "large-planner"), _spread(runs, "small-planner"))
        if max(spread) <= SPREAD_LIMIT:
            return traces, done.stdout
        spreads.append(spread)
    pytest.fail(f"machine too busy to validate the estimator: p95/p50 per batch {spreads}")


def test_what_if_from_the_large_planner_runs_matches_the_measured_small_planner_runs(
    demo_traces: tuple[Path, str],
) -> None:
    runs = list(read_runs([demo_traces[0]], outcomes=True))
    result = whatif(runs, variant="large-planner", swap={"plan": "sim-small"})
    [estimate] = result.workflows
    measured = sorted(r.recomputed_rollup().total_ms for r in runs if r.variant == "small-planner")
    assert len(measured) == estimate.runs == 24
    p50_error = estimate.after.p50 / percentile(measured, 50) - 1
    p95_error = estimate.after.p95 / percentile(measured, 95) - 1
    assert abs(p50_error) <= P50_BOUND, (estimate.after, measured)
    assert abs(p95_error) <= P95_BOUND, (estimate.after, measured)


def test_the_demo_prints_the_trade_off_and_records_outcomes_in_the_traces(
    demo_traces: tuple[Path, str],
) -> None:
    traces, stdout = demo_traces
    assert "what-if from the large-planner runs" in stdout
    assert "estimate error" in stdout
    assert "latency against success rate" in stdout
    comparison = compare(traces)
    by_variant = {v.variant: v for v in comparison.variants}
    for name in ("large-planner", "small-planner"):
        success = by_variant[name].success
        assert success is not None and success.trials == 24
    assert by_variant["small-planner"].total.p95 < by_variant["large-planner"].total.p95


def test_simulated_grades_are_deterministic_for_a_seed(demo_traces: tuple[Path, str]) -> None:
    """grade() depends on the runs and the seed only: what the demo recorded, it gives again."""
    runs = list(read_runs([demo_traces[0]], outcomes=True))
    recorded = {r.trace_id: (r.success, r.score) for r in runs}
    assert len(recorded) == 48 and all(success is not None for success, _ in recorded.values())
    # Graded in another process (the demo's) from its own spans, graded here from the file.
    assert grade(runs, 3) == recorded
    # A second copy, read without the outcomes and in reverse order, grades the same.
    again = list(read_runs([demo_traces[0]]))[::-1]
    assert grade(again, 3) == recorded
    # The seed is what decides: another one grades the same runs differently.
    other = grade(runs, 4)
    assert other.keys() == recorded.keys() and other != recorded
