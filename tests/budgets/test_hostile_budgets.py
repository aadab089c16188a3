"""Budget loading and judging under hostile input: duplicates, deep nesting, NaN measurements."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from chainlat._core.errors import BudgetFileError
from chainlat._core.rollup import Rollup
from chainlat._core.runs import StepTiming, WorkflowRun
from chainlat.budgets import Budgets, check_run, evaluate, load_budgets
from chainlat.report import check_json, check_markdown, check_text, junit_xml
from chainlat.report.jsondoc import to_json

NAN = math.nan


def run_of(total_ms: float, *, step_ms: float = 1.0, ttft_ms: float | None = None) -> WorkflowRun:
    rollup = Rollup(
        total_ms=total_ms, inference_ms=step_ms, data_ms=0.0, tool_ms=0.0, overhead_ms=0.0
    )
    step = StepTiming("chat m", "inference", 0, int(step_ms * 1e6), ttft_ms=ttft_ms)
    return WorkflowRun("chat", rollup, (step,), 0, 10_000_000, trace_id="ab" * 16)


def budgets_of(limits: dict[str, object]) -> Budgets:
    return Budgets.model_validate({"workflows": {"chat": limits}})


def strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise AssertionError(f"not JSON: bare {constant}")

    return json.loads(text, parse_constant=refuse)


# --- item 6: a non-finite measured value never passes a limit ------------------------------


@pytest.mark.parametrize("value", [NAN, math.inf, -math.inf])
def test_a_non_finite_total_breaks_every_per_run_limit(value: float) -> None:
    budgets = budgets_of({"total": "1s", "inference": "1s"})
    assert [v.target for v in check_run(run_of(value), budgets.workflows["chat"])] == ["total"]
    report = evaluate([run_of(10.0), run_of(value)], budgets)
    total = next(v for v in report.verdicts if v.target == "total")
    assert total.status == "broken" and total.broken_runs == 1
    assert total.actual_ms is not None and not math.isfinite(total.actual_ms)
    assert not report.ok


def test_a_nan_ttft_breaks_the_step_limit() -> None:
    budgets = budgets_of({"steps": {"chat m": {"ttft": "1s"}}})
    report = evaluate([run_of(10.0, ttft_ms=NAN)], budgets)
    assert [v.status for v in report.verdicts] == ["broken"]


def test_a_percentile_over_samples_holding_nan_is_broken_whatever_min_runs() -> None:
    budgets = Budgets.model_validate({"min_runs": 50, "workflows": {"chat": {"p95": "1s"}}})
    report = evaluate([run_of(10.0), run_of(NAN), run_of(20.0)], budgets)
    (verdict,) = report.verdicts
    assert verdict.status == "broken"
    assert verdict.actual_ms is not None and math.isnan(verdict.actual_ms)


def test_every_format_of_a_nan_verdict_says_broken_and_json_stays_json() -> None:
    budgets = budgets_of({"total": "1s", "p50": "1s"})
    report = evaluate([run_of(NAN), run_of(NAN)], budgets)
    document = strict_json(to_json(check_json(report)))
    assert isinstance(document, dict)
    statuses = {v["target"]: (v["status"], v["actual_ms"]) for v in document["verdicts"]}
    assert statuses == {"total": ("broken", None), "p50.total": ("broken", None)}
    assert all("not a finite number" in v["note"] for v in document["verdicts"])
    assert document["ok"] is False
    assert "NaN ms" in check_text(report) and "FAILED: 2 of 2 limits broken" in check_text(report)
    assert "**BROKEN**" in check_markdown(report)
    assert "LatencyBudgetExceeded" in junit_xml(report)


def test_json_documents_write_non_finite_numbers_as_null() -> None:
    text = to_json({"a": NAN, "b": [math.inf, 1.5], "c": {"d": -math.inf}})
    assert strict_json(text) == {"a": None, "b": [None, 1.5], "c": {"d": None}}


# --- item 7: duplicate keys are errors in every format -------------------------------------


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        (
            "chainlat.yaml",
            "workflows:\n  chat:\n    total: 1ms\n  chat:\n    p95: 5s\n",
            'chainlat.yaml:4: duplicate key "chat"',
        ),
        (
            "chainlat.yaml",
            "workflows:\n  chat:\n    total: 1ms\n    total: 1h\n",
            'chainlat.yaml:4: duplicate key "total"',
        ),
        (
            "b.json",
            '{"workflows": {\n  "chat": {"total": "1ms"},\n  "chat": {"p95": "5s"}\n}}',
            'b.json:3: duplicate key "chat"',
        ),
        (
            "b.json",
            '{"min_runs": 2, "workflows": {}, "min_runs": 3}',
            'b.json:1: duplicate key "min_runs"',
        ),
    ],
)
def test_a_key_given_twice_is_one_line_naming_file_line_and_key(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(BudgetFileError) as caught:
        load_budgets(path)
    message = str(caught.value)
    assert message.endswith("(each key may appear once)") and "\n" not in message
    assert message.startswith(str(tmp_path / where.split(":")[0]))
    assert message.endswith(where.split(":", 1)[1] + " (each key may appear once)")


def test_yaml_merge_keys_may_still_be_overridden(tmp_path: Path) -> None:
    path = tmp_path / "chainlat.yaml"
    path.write_text("workflows:\n  base: &d {total: 1s}\n  chat:\n    <<: *d\n    total: 3s\n")
    assert load_budgets(path).workflows["chat"].total == 3000.0


# --- item 12: nesting that would exhaust the stack -----------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("deep.json", "[" * 5000 + "]" * 5000),
        ("deep.json", '{"workflows": ' + '{"a": ' * 3000 + "1" + "}" * 3001),
        ("deep.toml", "x = " + "[" * 5000 + "]" * 5000),
        ("deep.toml", "x = " + "{a = " * 3000 + "1" + "}" * 3000),
        ("deep.yaml", "x: " + "[" * 5000 + "]" * 5000),
        ("deep.yaml", "workflows: " + "{a: " * 3000 + "1" + "}" * 3000),
    ],
)
def test_deep_nesting_is_a_budget_file_error(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(BudgetFileError) as caught:
        load_budgets(path)
    assert str(caught.value).startswith(str(path)) and "\n" not in str(caught.value)


def test_a_negative_recorded_total_is_impossible_not_kept() -> None:
    """A workflow span recording chainlat.chain.total_ms = -100 passed total and p95."""
    budgets = budgets_of({"total": "1s", "p95": "1s"})
    report = evaluate([run_of(-100.0), run_of(20.0)], budgets)
    assert {v.target: (v.status, v.reason) for v in report.verdicts} == {
        "total": ("not_judged", "impossible_value"),
        "p95.total": ("not_judged", "impossible_value"),
    }
    assert report.exit_code == 2
    broken = evaluate([run_of(-100.0), run_of(5000.0)], budgets)
    assert {v.target: v.status for v in broken.verdicts} == {
        "total": "broken",
        "p95.total": "broken",
    }
