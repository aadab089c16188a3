"""``chainlat diff``: a 30 % slowdown of one step is flagged, run-to-run noise is not."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from chainlat.analysis.diff import diff_runs, holm, mann_whitney_u, tail_test
from chainlat.cli import main
from chainlat.traces import read_runs
from support.tracegen import Profile, write_profile

RUNS = 60


def test_mann_whitney_u_matches_a_hand_computed_example() -> None:
    # after = [4, 5, 6] against before = [1, 2, 3]: every pair is larger, U = 9
    u, p = mann_whitney_u([1.0, 2.0, 3.0], [4.0, 5.0, 6.0])
    assert u == 9.0
    # normal approximation: z = (|9 - 4.5| - 0.5) / sqrt(3 * 3 * 7 / 12)
    assert p == pytest.approx(0.0809, abs=1e-4)
    assert mann_whitney_u([1.0, 1.0], [1.0, 1.0]) == (2.0, 1.0)  # all tied: no evidence


def test_holm_adjustment() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_tail_test_sees_a_slower_tail_with_the_same_median() -> None:
    rng = random.Random(1)
    before = [rng.gauss(100, 5) for _ in range(400)]
    after = [v if i % 10 else v * 2 for i, v in enumerate(before)]  # every 10th run doubled
    assert tail_test(before, after) < 1e-3
    assert mann_whitney_u(before, after)[1] > 0.01  # the location test alone misses it


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_a_30_percent_slower_step_is_flagged_and_noise_is_not(tmp_path: Path, seed: int) -> None:
    baseline = write_profile(tmp_path / "before.jsonl", Profile(), runs=RUNS, seed=seed)
    slower = Profile(slowdown={"retrieve": 1.3})
    current = write_profile(tmp_path / "after.jsonl", slower, runs=RUNS, seed=seed + 100)
    result = diff_runs(read_runs([baseline]), read_runs([current]))
    by_item = {c.item: c for c in result.comparisons}
    # The answer streams after the retrieval: the user's wait for its first token grows too
    # (by 15-18 % over seeds 1-7, well past the 10 % threshold).
    assert {c.item for c in result.regressions} == {"data", "data retrieve-docs", "first_output"}
    step = by_item["data retrieve-docs"]
    assert step.verdict == "slower"
    assert step.p50_change is not None and 0.2 < step.p50_change < 0.4
    for unchanged in ("chat gpt-4o", "execute_tool lookup-order", "inference", "tool", "overhead"):
        assert not by_item[unchanged].beyond_noise, by_item[unchanged]
        assert not by_item[unchanged].regression


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_two_samples_of_the_same_profile_show_no_change(tmp_path: Path, seed: int) -> None:
    a = write_profile(tmp_path / "a.jsonl", Profile(noise=0.15), runs=RUNS, seed=seed)
    b = write_profile(tmp_path / "b.jsonl", Profile(noise=0.15), runs=RUNS, seed=seed + 50)
    result = diff_runs(read_runs([a]), read_runs([b]))
    assert [c for c in result.comparisons if c.beyond_noise] == []
    assert result.judged == 9  # 5 quantities, the first output, 3 steps


def test_too_few_runs_are_reported_but_not_judged(tmp_path: Path) -> None:
    a = write_profile(tmp_path / "a.jsonl", Profile(), runs=5, seed=1)
    b = write_profile(tmp_path / "b.jsonl", Profile(slowdown={"chat": 3}), runs=5, seed=2)
    result = diff_runs(read_runs([a]), read_runs([b]))
    assert {c.verdict for c in result.comparisons} == {"too few samples"}
    assert result.regressions == []


def test_diff_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = write_profile(tmp_path / "before.jsonl", Profile(), runs=RUNS, seed=21)
    same = write_profile(tmp_path / "same.jsonl", Profile(), runs=RUNS, seed=22)
    slower = write_profile(
        tmp_path / "slower.jsonl", Profile(slowdown={"chat": 1.3}), runs=RUNS, seed=23
    )
    assert main(["diff", str(before), str(same)]) == 0
    assert "OK: no regression in 9 comparisons" in capsys.readouterr().out
    assert main(["diff", str(before), str(slower), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    flagged = {(c["workflow"], c["item"]) for c in data["comparisons"] if c["regression"]}
    assert ("support-chat", "chat gpt-4o") in flagged
    assert ("support-chat", "data retrieve-docs") not in flagged
    # a 30 % slowdown passes a 50 % threshold: real, but not a regression by that rule
    assert main(["diff", str(before), str(slower), "--threshold", "50%"]) == 0
    out = capsys.readouterr().out
    assert "SLOWER" not in out and "slower" in out
    assert main(["diff", str(before), str(slower), "--format", "markdown"]) == 1
    assert "**SLOWER (REGRESSION)**" in capsys.readouterr().out


def test_diff_command_bad_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = write_profile(tmp_path / "before.jsonl", Profile(), runs=10, seed=1)
    assert main(["diff", str(before), str(tmp_path / "nope.jsonl")]) == 2
    assert capsys.readouterr().err == f"chainlat: {tmp_path / 'nope.jsonl'}: no such file\n"
    assert main(["diff", str(before), str(before), "--threshold", "lots"]) == 2
    assert "--threshold 'lots'" in capsys.readouterr().err


def test_compare_and_comparison_have_one_owner() -> None:
    """``compare``/``Comparison`` are the variant comparison's; a diff has rows of its own."""
    import chainlat
    from chainlat.analysis import diff, tradeoff

    assert not hasattr(diff, "compare") and not hasattr(diff, "Comparison")
    assert chainlat.compare is tradeoff.compare and chainlat.Comparison is tradeoff.Comparison
    assert diff.DiffResult.__dataclass_fields__["comparisons"].type == "list[DiffRow]"
