"""Runs a reader could not read whole: their workflow's limits are not judged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chainlat.cli import main
from chainlat.traces import ReadCounters, read_runs
from tracegen import DATA_DIR

BUDGETS = """\
[workflows.support-chat]
total = "10s"
[workflows.support-chat.steps."chat gpt-4o"]
max = "10s"
"""


def _late_file(tmp_path: Path) -> Path:
    """The root first, its two children three lines later."""
    path = tmp_path / "late.jsonl"
    lines = (DATA_DIR / "collector-traces.jsonl").read_text().splitlines()
    path.write_text("\n".join([lines[1], "", "", lines[0]]) + "\n")
    return path


def test_the_reader_counts_late_spans_by_the_workflow_of_their_trace(tmp_path: Path) -> None:
    counters = ReadCounters()
    list(read_runs([_late_file(tmp_path)], settle_lines=1, counters=counters))
    assert (counters.late_spans, counters.late_workflows) == (3, {"support-chat": 3})


def test_a_span_dropped_after_the_settle_window_leaves_its_workflow_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(BUDGETS)
    args = ["check", str(_late_file(tmp_path)), "--budgets", str(budgets), "--format", "json"]
    code = main([*args, "--settle-lines", "1"])
    out, err = capsys.readouterr()
    assert code == 2, err
    document = json.loads(out)
    assert document["summary"] == "FAILED: 0 of 2 limits broken, 2 not judged"
    assert {v["reason"] for v in document["verdicts"]} == {"incomplete_run"}
    assert "3 spans of its runs arrived after their trace was judged" in err
    assert main([*args, "--settle-lines", "8"]) == 0
