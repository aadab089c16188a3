"""The end of ``chainlat demo``: simulated outcomes, the what-if estimate checked against the
measured small-planner runs, and latency against success rate.

The simulator's answers are filler words, so nothing real can be graded: each
run gets a **simulated** outcome, drawn from a generator seeded with the demo's
seed, the variant and the run's place in its batch (so a given seed always
grades the same way). A run succeeds with probability 0.92 with the large
planner and 0.80 with the small one; its score is a Beta-distributed quality
around 0.85 and 0.74. These numbers are made up to show the method; only the
latencies are measured.
"""

from __future__ import annotations

import dataclasses
import random
from typing import TYPE_CHECKING, Final

from rich.markup import escape

import chainlat
from chainlat._core.errors import InputError
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import percentile
from chainlat.analysis.tradeoff import compare
from chainlat.analysis.whatif import whatif
from chainlat.traces.sdk import runs_from_spans

if TYPE_CHECKING:
    from collections.abc import Sequence

    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from rich.console import Console

SIMULATED_SUCCESS: Final = {"large-planner": (0.92, 17.0, 3.0), "small-planner": (0.80, 14.8, 5.2)}
"""Per variant: probability of success, and the Beta(a, b) of the score."""
SWAP: Final = {"plan": "sim-small"}


def grade(runs: Sequence[WorkflowRun], seed: int) -> dict[str, tuple[bool, float]]:
    """Simulated outcomes by trace id, deterministic for a seed (see the module docstring)."""
    grades: dict[str, tuple[bool, float]] = {}
    for variant, (p_success, a, b) in SIMULATED_SUCCESS.items():
        rng = random.Random(f"{seed}:{variant}:outcomes")
        members = sorted(
            (r for r in runs if r.variant == variant), key=lambda r: r.root_record.start_ns
        )
        for run in members:
            success = rng.random() < p_success
            score = round(rng.betavariate(a, b), 3)
            grades[run.trace_id] = (success, score)
    return grades


def tradeoff_section(
    console: Console,
    spans: Sequence[ReadableSpan],
    *,
    provider: TracerProvider,
    seed: int,
) -> None:
    """Grade the runs (recording outcomes into their traces), then print the trade-off."""
    from rich.table import Table

    runs = [r for r in runs_from_spans(spans) if not r.nested]
    grades = grade(runs, seed)
    graded = []
    for run in runs:
        found = grades.get(run.trace_id)
        if found is None:
            graded.append(run)
            continue
        success, score = found
        chainlat.record_outcome(
            run.trace_id,
            success=success,
            score=score,
            span_id=run.root_record.span_id,
            tracer_provider=provider,
        )
        graded.append(dataclasses.replace(run, success=success, score=score))
    large = [r for r in graded if r.variant == "large-planner"]
    small = [r for r in graded if r.variant == "small-planner"]
    if not large or not small:
        return

    console.rule("what-if from the large-planner runs: sim-small in the planning step")
    try:
        estimate = whatif(large, swap=SWAP)
    except InputError as exc:  # e.g. no call of sim-small recorded its usage
        console.print(f"[red]no estimate:[/] {escape(str(exc))}")
        return
    [effect] = estimate.workflows
    measured = sorted(r.recomputed_rollup().total_ms for r in small)
    table = Table(title_justify="left")
    for column in ("", "p50 total", "p95 total"):
        table.add_column(column, justify="left" if not column else "right")
    table.add_row("recorded, large", f"{effect.before.p50:.0f} ms", f"{effect.before.p95:.0f} ms")
    table.add_row(
        "[bold]estimated[/], small",
        f"{effect.after.p50:.0f} ms",
        f"{effect.after.p95:.0f} ms",
    )
    m50, m95 = percentile(measured, 50), percentile(measured, 95)
    table.add_row("[bold]measured[/], small", f"{m50:.0f} ms", f"{m95:.0f} ms")
    table.add_row(
        "estimate error",
        f"{(effect.after.p50 / m50 - 1) * 100:+.1f} %",
        f"{(effect.after.p95 / m95 - 1) * 100:+.1f} %",
    )
    console.print(table)
    console.print(
        "the same from a shell: chainlat whatif TRACES --variant large-planner --swap "
        '"plan=sim-small"',
        soft_wrap=True,
    )

    console.rule("latency against success rate (simulated outcomes)")
    comparison = compare(graded)
    table = Table(title_justify="left")
    for column in ("variant", "runs", "p95", "1st out p95", "success", "cost/run", "Pareto"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for v in comparison.variants:
        p = v.success
        table.add_row(
            v.variant,
            str(v.runs),
            f"{v.total.p95:.0f} ms",
            "-" if v.first_output is None else f"{v.first_output.p95:.0f} ms",
            "-" if p is None else f"{p.successes}/{p.trials} {p.rate:.0%}",
            "-" if v.cost_mean is None else f"${v.cost_mean:.5f}",
            "yes" if v.pareto else "",
        )
    console.print(table)
