"""The lower bound in benchmarks/least_check.py is only a bound if it works out the same
figures as ``chainlat check``: held here, on a benchmark file, with each duty added."""

from __future__ import annotations

from pathlib import Path

import pytest

from chainlat.budgets import evaluate, load_budgets
from chainlat.traces import FileSource, ReadCounters
from support.bench_scripts import bench_script

bench_check = bench_script("bench_check")
least_check = bench_script("least_check")

# The bench budgets' limits, by target, and the skeleton's figure for each.
FIGURE_OF = {
    "total": "total_max",
    "p95.total": "total_p95",
    "p95.inference": "inference_p95",
    'steps."chat gpt-4o".p95': "step_p95",
    'steps."chat gpt-4o".ttft_p95': "ttft_p95",
}


@pytest.fixture(scope="module")
def bench_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("least")
    path = folder / "check.jsonl"
    bench_check.generate(path, 600, seed=3)
    budgets = folder / "budgets.toml"
    budgets.write_text(bench_check.BUDGETS)
    return path, budgets


@pytest.mark.parametrize("duty", [None, *least_check.DUTIES])
def test_the_skeleton_works_out_the_figures_chainlat_check_judges(
    bench_file: tuple[Path, Path], duty: str | None
) -> None:
    path, budgets = bench_file
    report = evaluate(FileSource(path).runs(ReadCounters()), load_budgets(budgets))
    judged = {v.target: v.actual_ms for v in report.verdicts}
    assert set(judged) == set(FIGURE_OF)
    figures = least_check.least(path, duty)
    assert {FIGURE_OF[target]: actual for target, actual in judged.items()} == figures


def test_the_reader_duty_refuses_a_line_the_quick_reader_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_bytes(b'{"resourceSpans": [{"instrumentationLibrarySpans": []}]}\n')
    with pytest.raises(ValueError, match=r"other\.jsonl:1: not in the common layout"):
        least_check.least(path, "reader")
