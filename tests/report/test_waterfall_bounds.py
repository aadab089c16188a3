"""The text waterfall stays linear in the steps: 20,000 nested steps make a bounded text that
says what it left out (the indentation alone used to make it quadratic: 802 MB of text)."""

from __future__ import annotations

from chainlat._core.rollup import Rollup
from chainlat._core.runs import StepTiming, WorkflowRun
from chainlat.report import waterfall

STEPS = 20_000


def _nested_run() -> WorkflowRun:
    steps = tuple(StepTiming(f"tool t{i}", "tool", i, 2 * STEPS - i, depth=i) for i in range(STEPS))
    rollup = Rollup(total_ms=0.04, inference_ms=0.0, data_ms=0.0, tool_ms=0.04, overhead_ms=0.0)
    return WorkflowRun("chat", rollup, steps, 0, 2 * STEPS)


def test_twenty_thousand_nested_steps_make_a_bounded_waterfall_that_says_so() -> None:
    text = waterfall(_nested_run())
    lines = text.splitlines()
    assert len(lines) < 2_100
    assert max(len(line) for line in lines) < 300
    assert "... 18000 more steps not shown (the first 2000" in text
    assert "[1999] tool t1999" in text  # deep steps say their depth rather than indent it


def test_a_megabyte_name_is_cut_in_the_waterfall_saying_so() -> None:
    run = WorkflowRun(
        "w" * 1_000_000,
        Rollup(total_ms=1.0, inference_ms=0.0, data_ms=0.0, tool_ms=1.0, overhead_ms=0.0),
        (StepTiming("t" * 1_000_000, "tool", 0, 1_000_000),),
        0,
        1_000_000,
    )
    text = waterfall(run)
    assert len(text) < 2_000
    assert "more chars]" in text
