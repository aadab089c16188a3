"""JUnit XML: one test case per limit, for CI systems that show test reports."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from chainlat._core.redact import visible
from chainlat._core.runs import BudgetViolation
from chainlat._core.stats import (
    format_percentile,
)
from chainlat.report.common import (
    actual_text,
    count,
    limit_text,
    printed_source,
    runs_heading,
    verdict_label,
)
from chainlat.report.waterfall import waterfall

if TYPE_CHECKING:
    from chainlat.budgets import BudgetReport

# --- JUnit XML ----------------------------------------------------------------------------


def _xml(text: str) -> str:
    """Text XML 1.0 can hold: control characters (which it forbids, but for tab, newline and
    CR) as visible escapes, lone surrogates and U+FFFE/U+FFFF as U+FFFD."""
    return visible(text, newline=True).replace("\ufffe", "\ufffd").replace("\uffff", "\ufffd")


def junit_xml(report: BudgetReport) -> str:
    """The verdicts as a JUnit XML report: one test case per limit, for CI test tabs.

    A broken limit is a failure (its message names the limit and the values,
    its text holds the worst run's waterfall); a limit that could not be judged is an
    error, or skipped when the user opted out of it. The suite's properties carry the
    exit code and the summary line.
    """
    failures = len(report.broken)
    errors = len(report.unjudged)
    skipped = len(report.allowed)
    counts = {
        "tests": str(len(report.verdicts)),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": str(skipped),
    }
    suites = ET.Element("testsuites", {"name": "chainlat", **counts})
    suite = ET.SubElement(suites, "testsuite", {"name": "chainlat latency budgets", **counts})
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(
        properties, "property", name="budgets", value=_xml(printed_source(report.budgets_source))
    )
    ET.SubElement(properties, "property", name="exit_code", value=str(report.exit_code))
    ET.SubElement(properties, "property", name="summary", value=_xml(report.summary))
    for name, workflow in report.stats.workflows.items():
        # What each workflow's percentiles leave out (failed runs, interrupted turns).
        heading = runs_heading(workflow)
        ET.SubElement(properties, "property", name=_xml(f"runs.{name}"), value=_xml(heading))
    for v in report.verdicts:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_xml(f"chainlat.{v.workflow}"),
            name=_xml(v.target),
            time="0",
        )
        if v.percentile is not None:
            over = f"{format_percentile(v.percentile)} of {count(v.runs, 'run')}"
        else:
            over = f"{v.broken_runs} of {count(v.runs, 'run')} " + (
                "failed" if v.kind == "share" else "over"
            )
        detail = (
            f"{v.key_path}: {actual_text(v.actual_ms, v.unit, against=v.limit_ms)} > "
            f"{limit_text(v.limit_ms, v.unit)} ({over})"
        )
        if v.status == "broken":
            failure = ET.SubElement(
                case, "failure", message=_xml(detail), type="LatencyBudgetExceeded"
            )
            if v.worst_run is not None and v.actual_ms is not None:
                violation = BudgetViolation(v.workflow, v.target, v.limit_ms, v.actual_ms, v.unit)
                failure.text = _xml(waterfall(v.worst_run, [violation]))
        elif v.status == "not_judged":
            message = _xml(f"{v.key_path}: {verdict_label(v)}: {v.why}")
            if v.allowed:
                ET.SubElement(case, "skipped", message=message)
            else:
                ET.SubElement(case, "error", message=message, type="LatencyBudgetNotJudged")
        else:
            ET.SubElement(case, "system-out").text = _xml(
                f"{v.key_path}: {actual_text(v.actual_ms, v.unit, against=v.limit_ms)} <= "
                f"{limit_text(v.limit_ms, v.unit)}"
            )
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode")
