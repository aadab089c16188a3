"""What the common options mean for the commands that lacked them: ``diff`` and ``compare``
filter by variant, ``diff`` never pools variants, ``compare`` and ``report --html`` find the
budget file in the working directory as ``check`` does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chainlat._core.exits import EXIT_BROKEN, EXIT_INPUT, EXIT_OK
from chainlat.testing import Capture
from support.cli import run, write_variant_runs

PRICES = '[prices."big"]\ninput_per_mtok = 10.0\noutput_per_mtok = 30.0\n'


@pytest.fixture
def baseline(cap: Capture, tmp_path: Path) -> Path:
    """Ten runs per variant: ``large`` about 1,234 ms, ``small`` about 456 ms."""
    return write_variant_runs(cap, tmp_path / "baseline.jsonl")


def test_diff_does_not_pool_the_runs_of_several_variants(
    baseline: Path, cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pooled, a file with more runs of the fast variant looks faster than one with fewer:
    diff refuses, naming the variants and ``--variant``."""
    cap.clear()
    current = write_variant_runs(cap, tmp_path / "current.jsonl", runs=10, chat_ms=(1_234, 456))
    code, out, err = run(capsys, "diff", baseline, current)
    assert code == EXIT_INPUT
    assert out == ""
    assert err == (
        f"chainlat: {baseline}: the runs of 'agent' are of 2 variants ('large', 'small'); "
        "diff compares one at a time: choose it with --variant NAME\n"
    )


def test_diff_compares_one_variant_with_variant(
    baseline: Path, cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``small`` got 30 % slower while ``large`` did not change: judged per variant."""
    cap.clear()
    current = write_variant_runs(cap, tmp_path / "current.jsonl", chat_ms=(1_234, 600))
    code, out, err = run(
        capsys, "diff", baseline, current, "--variant", "large", "--format", "json"
    )
    assert code == EXIT_OK, err
    total = next(c for c in json.loads(out)["comparisons"] if c["item"] == "total")
    assert (total["n_before"], total["n_after"]) == (10, 10)
    assert total["verdict"] == "unchanged"
    code, out, err = run(
        capsys, "diff", baseline, current, "--variant", "small", "--format", "json"
    )
    assert code == EXIT_BROKEN, err
    total = next(c for c in json.loads(out)["comparisons"] if c["item"] == "total")
    assert total["verdict"] == "slower" and total["regression"]
    assert total["p50_after_ms"] - total["p50_before_ms"] == pytest.approx(600 - 456)


def test_compare_finds_the_budget_files_prices_in_the_working_directory(
    baseline: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "compare", baseline, "--format", "json")
    assert code == EXIT_OK, err
    assert {v["variant"]: v["cost_mean_usd"] for v in json.loads(out)["variants"]} == {
        "large": None,
        "small": None,
    }
    (tmp_path / "chainlat.toml").write_text('[workflows.agent]\np95 = "5s"\n\n' + PRICES)
    code, out, err = run(capsys, "compare", baseline, "--format", "json")
    assert code == EXIT_OK, err
    costs = {v["variant"]: v["cost_mean_usd"] for v in json.loads(out)["variants"]}
    # big: (100 + 10 i) input and (11 + i) output tokens, i = 0..9, at $10 and $30 per M.
    expected = sum((100 + 10 * i) * 10 + (11 + i) * 30 for i in range(10)) / 10 / 1e6
    assert costs["large"] == pytest.approx(expected)
    assert costs["small"] is None  # no price for model "small"


def _verdicts(page: Path) -> list[int | None]:
    """The explorer's limits broken per run: None for a run no budget covers."""
    data = page.read_text().split('id="chainlat-runs">')[1].split("</script>")[0]
    verdicts: list[int | None] = json.loads(data)["runs"]["verdict"]
    return verdicts


@pytest.mark.parametrize("command", ["report", "compare"])
def test_the_html_page_marks_the_runs_by_the_budget_file_found_as_check_finds_it(
    command: str,
    baseline: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``total = "1s"``: each ``large`` run (1,2xx ms) broke one limit, ``small`` none."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "chainlat.toml").write_text('[workflows.agent]\ntotal = "1s"\n')
    code, _out, err = run(capsys, command, baseline, "--html", "page.html")
    assert code == EXIT_OK, err
    marked = _verdicts(tmp_path / "page.html")
    assert (marked.count(0), marked.count(1)) == (10, 10)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _out, err = run(capsys, command, baseline, "--html", "page.html")
    assert code == EXIT_OK, err
    assert _verdicts(elsewhere / "page.html") == [None] * 20
