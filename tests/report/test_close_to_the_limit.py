"""A value close to its limit reads on the side of it that the verdict says, in every format:
``410.04 ms > 410 ms``, never ``410.0 ms > 410 ms``; and so does a change beside the
threshold of ``chainlat diff``."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chainlat._core.amounts import agreeing, amount, over
from chainlat._core.runs import BudgetViolation
from chainlat.cli import main
from chainlat.report.common import pct, threshold_text
from support.tracegen import ChatRun, write_runs


@pytest.mark.parametrize(
    ("value", "unit", "limit", "shown"),
    [
        (9.846803, "ms", 9.8, "9.85 ms"),  # over: one decimal would read 9.8
        (409.96, "ms", 409.99, "409.96 ms"),  # kept: one decimal would read 410.0
        (410.0, "ms", 410.0, "410.0 ms"),  # equal is kept, and reads equal
        (523.4, "ms", 800.0, "523.4 ms"),  # far from it: one decimal
        (800.000_004, "ms", 800.0, "800.000004 ms"),  # 4 ns over
        (1.000_000_000_01, "ms", 1.0, "1.00000000001 ms"),  # under 0.1 ns: the exact form
        (2.04, "%", 2.0, "2.04%"),
        (1.96, "%", 1.99, "1.96%"),
        (0.010_04, "USD", 0.01, "$0.01004"),
        (0.009_996, "USD", 0.009_999, "$0.009996"),
    ],
)
def test_a_value_beside_its_limit_shows_the_decimals_that_tell_them_apart(
    value: float, unit: str, limit: float, shown: str
) -> None:
    assert amount(value, unit, against=limit) == shown


def test_without_a_limit_and_for_non_finite_values_the_decimals_are_fixed() -> None:
    assert amount(9.846803, "ms") == "9.8 ms"
    assert amount(0.010_04, "USD") == "$0.0100"
    assert amount(2.04, "%") == "2.0%"
    assert amount(math.inf, "ms", against=9.8) == "inf ms"
    assert amount(9.8, "ms", limit=True) == "9.8 ms"


def test_a_violation_reads_over_its_limit() -> None:
    violation = BudgetViolation("support-chat", "total", 410.0, 410.04)
    assert str(violation) == "support-chat: total 410.04 ms > limit 410 ms"
    assert over(410.04, 410.0, "ms") == "410.04 ms > 410 ms"
    assert over(0.010_04, 0.01, "USD") == "$0.01004 > $0.01"


# One run: glue 10 ms + retrieval 99.96 ms + model call 300.08 ms = 410.04 ms, exactly
# (a fake clock): over a 410 ms total, and under a 99.99 ms limit on data that one
# decimal would round to 100.0.
RUN = ChatRun(retrieve_ms=99.96, chat_ms=300.08)
BUDGETS = '[workflows.support-chat]\ntotal = "410ms"\ndata = "99.99ms"\n'


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(BUDGETS)
    return write_runs(tmp_path / "t.jsonl", [RUN]), budgets


def test_text_and_markdown_tables_and_the_waterfall_agree_with_the_verdicts(
    files: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    traces, budgets = files
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 1
    text = capsys.readouterr().out
    rows = [[c.strip() for c in line.split("│")] for line in text.splitlines() if "│" in line]
    assert ["total (each run)", "410 ms", "410.04 ms", "1/1 over", "BROKEN"] in rows
    assert ["data (each run)", "99.99 ms", "99.96 ms", "0/1 over", "ok"] in rows
    assert "<-- total 410.04 ms > 410 ms" in text
    assert main(["check", str(traces), "--budgets", str(budgets), "--format", "markdown"]) == 1
    markdown = capsys.readouterr().out
    assert "| `total (each run)` | 410 ms | 410.04 ms | 1/1 over | **BROKEN** |" in markdown
    assert "| `data (each run)` | 99.99 ms | 99.96 ms | 0/1 over | ok |" in markdown


def test_junit_messages_agree_with_the_verdicts(
    files: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, budgets = files
    junit = tmp_path / "junit.xml"
    code = main(["check", str(traces), "--budgets", str(budgets), "--junit", str(junit)])
    capsys.readouterr()
    assert code == 1
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    failure = cases["total"].find("failure")
    assert failure is not None
    assert failure.get("message") == (
        "workflows.support-chat.total: 410.04 ms > 410 ms (1 of 1 run over)"
    )
    kept = cases["data"].find("system-out")
    assert kept is not None and kept.text == "workflows.support-chat.data: 99.96 ms <= 99.99 ms"


# --- chainlat diff: a change beside its threshold, a p-value beside alpha -----------------


def test_a_change_and_a_p_value_read_on_their_side_of_the_threshold_and_alpha() -> None:
    assert pct(0.5004, against=0.5) == "+50.04%"  # a regression: one decimal reads +50.0%
    assert pct(0.4996, against=0.4999) == "+49.96%"  # none: one decimal reads +50.0%
    assert pct(-0.2, against=0.1) == "-20.0%"
    assert pct(0.5004) == "+50.0%"
    assert agreeing(0.00996, 0.01, ".{}g", 2) == "0.00996"  # beyond noise: not "0.01"
    assert agreeing(0.012, 0.01, ".{}g", 2) == "0.012"
    assert threshold_text(0.125) == "12.5%"  # not "12%"
    assert threshold_text(0.1) == "10%"


def test_diff_shows_the_threshold_as_given_and_changes_on_its_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Totals 400 + i ms before, and 1.5004 times that after: p50 and p95 +50.04 %.
    before = write_runs(tmp_path / "a.jsonl", [ChatRun(chat_ms=290 + i) for i in range(20)])
    after = write_runs(
        tmp_path / "b.jsonl", [ChatRun(chat_ms=1.5004 * (400 + i) - 110) for i in range(20)]
    )
    assert main(["diff", str(before), str(after), "--threshold", "50"]) == 1
    out = capsys.readouterr().out
    (total,) = [line for line in out.splitlines() if "│ total " in line]
    cells = [c.strip() for c in total.split("│")]
    assert (cells[4], cells[6], cells[8]) == ("+50.04%", "+50.04%", "SLOWER (REGRESSION)")
    assert "slower by more than 50%" in out
    assert main(["diff", str(before), str(after), "--threshold", "49.96"]) == 1
    assert "slower by more than 49.96%" in capsys.readouterr().out
