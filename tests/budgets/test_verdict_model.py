"""The verdict model: exit code, summary and every document agree, whatever the verdicts."""

from __future__ import annotations

import json
import typing
import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from chainlat._core.stats import Stats
from chainlat.budgets import BudgetReport, LimitVerdict, NotJudgedReason, VerdictStatus
from chainlat.report import check_json, check_markdown, check_text, junit_xml

REASONS = typing.get_args(NotJudgedReason)


@st.composite
def verdicts(draw: st.DrawFn) -> LimitVerdict:
    status: VerdictStatus = draw(st.sampled_from(typing.get_args(VerdictStatus)))
    reason = draw(st.sampled_from(REASONS)) if status == "not_judged" else None
    return LimitVerdict(
        "chat",
        draw(st.sampled_from(["total", "p95.total", "cost"])),
        100.0,
        None if status == "not_judged" else 50.0,
        status,
        3,
        reason=reason,
        why="why" if reason else None,
        allowed=status == "not_judged" and draw(st.booleans()),
    )


@given(st.lists(verdicts(), max_size=6))
def test_exit_code_summary_and_documents_agree(found: list[LimitVerdict]) -> None:
    report = BudgetReport(found, Stats())
    broken = sum(v.status == "broken" for v in found)
    unjudged = sum(v.status == "not_judged" and not v.allowed for v in found)
    judged = any(v.status != "not_judged" for v in found)
    expected = 1 if broken else 2 if unjudged or not judged else 0
    assert report.exit_code == expected
    assert report.ok is (expected == 0)
    assert report.summary.startswith("OK: " if expected == 0 else "FAILED: ")
    document = check_json(report)
    assert (document["exit_code"], document["summary"], document["ok"]) == (
        expected,
        report.summary,
        expected == 0,
    )
    assert [v["status"] for v in document["verdicts"]] == [v.status for v in found]
    assert check_text(report).rstrip("\n").splitlines()[-1] == report.summary
    assert check_markdown(report).rstrip("\n").splitlines()[-1] == report.summary
    suite = ET.fromstring(junit_xml(report)).find("testsuite")
    assert suite is not None
    assert (suite.get("failures"), suite.get("errors"), suite.get("skipped")) == (
        str(broken),
        str(unjudged),
        str(sum(v.status == "not_judged" and v.allowed for v in found)),
    )
    json.dumps(document, allow_nan=False)
