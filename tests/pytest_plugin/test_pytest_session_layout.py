"""The session summary of ``--chainlat-budgets`` in a CI log: 80 columns, nothing wrapped
mid-cell, counts pluralised."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# Long step names, as real model ids make them; timings far from every limit.
WORKFLOWS = """
import time
import chainlat

def answer(retrieve_s=0.002):
    with chainlat.workflow("support-chat"):
        with chainlat.data_stage("retrieve-docs"):
            time.sleep(retrieve_s)
        with chainlat.inference("gpt-4o-mini-2024-07-18") as call:
            time.sleep(0.002)
            call.first_token()
        with chainlat.tool("lookup-order-status"):
            pass
"""

BUDGETS = """
[workflows.support-chat]
total = "5s"
p95 = { total = "4s", data = "1s" }
[workflows.support-chat.steps."data retrieve-docs"]
max = "3s"
[workflows.support-chat.steps."chat gpt-4o-mini-2024-07-18"]
ttft_p95 = "2s"
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(workflows=WORKFLOWS)
    pytester.makefile(".toml", chainlat=BUDGETS)
    pytester.makepyfile(
        test_app="""
        from workflows import answer

        def test_one():
            answer()
        """
    )
    return pytester


def summary(result: pytest.RunResult) -> list[str]:
    lines = result.outlines
    start = next(i for i, line in enumerate(lines) if "chainlat latency budgets" in line)
    end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("====="))
    return lines[start + 1 : end]


def test_the_session_summary_fits_80_columns_with_every_row_whole(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--chainlat-budgets=chainlat.toml"
    )
    result.assert_outcomes(passed=1)
    lines = summary(result)
    assert all(len(line) <= 80 for line in lines), "\n".join(lines)
    # Every row is whole on one line (a name too long for its column sits on its own line,
    # its values on the next): a wrapped cell would split "(critical path)" or a step name.
    text = "\n".join(lines)
    for row in (
        "inference (critical path)",
        "overhead (critical path)",
        "chat gpt-4o-mini-2024-07-18 (ttft)",
        "execute_tool lookup-order-status",
        'steps."data retrieve-docs".max (each run)',
        'steps."chat gpt-4o-mini-2024-07-18".ttft_p95',
    ):
        assert row in text
    assert "1 run of 1 workflow in this session; budgets from chainlat.toml" in lines
    assert "support-chat: 1 run" in lines
    assert "runs" not in text.replace("  runs  ", "")  # the column head only; never "1 runs"
    assert [line for line in lines if line][-1] == "OK: all 5 limits judged and kept"


def test_a_narrow_log_gives_long_names_a_line_of_their_own(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "64")
    result = project.runpytest_subprocess(
        "-p", "no:cacheprovider", "--chainlat-budgets=chainlat.toml"
    )
    lines = summary(result)
    assert all(len(line) <= 64 for line in lines), "\n".join(lines)
    at = lines.index('  steps."chat gpt-4o-mini-2024-07-18".ttft_p95')
    values = lines[at + 1].split()
    assert values[:2] == ["2000", "ms"]
    assert values[-2:] == ["1", "ok"]
