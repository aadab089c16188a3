"""Budget files (both formats, every kind of mistake), per-run checks, percentile verdicts,
and the runtime enforcement of configure(budgets=..., on_exceed=...)."""

from __future__ import annotations

import json
import textwrap
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from opentelemetry.trace import StatusCode

import chainlat
from chainlat._core import attributes as attr
from chainlat._core.rollup import Rollup
from chainlat._core.runs import StepTiming, WorkflowRun
from chainlat.budgets import (
    Budgets,
    check_run,
    discover_budgets,
    evaluate,
    json_schema,
    load_budgets,
    parse_budgets,
    parse_duration,
)
from chainlat.testing import Capture
from support import MISTAKES

TOML_EXAMPLE = """\
min_runs = 3

[workflows.support-chat]
total = "800ms"
data = "250ms"
p95 = { total = "700ms", data = "200ms" }
p50 = "400ms"
exclude_cache_hits = true

[workflows.support-chat.steps."chat gpt-4o"]
max = "600ms"
p95 = "500ms"
ttft = 300
ttft_p95 = "0.25s"

[workflows.support-chat.steps."data retrieve-docs"]
max = "250000us"
"""

YAML_EXAMPLE = """\
min_runs: 3
workflows:
  support-chat:
    total: 800ms
    data: 250ms
    p95: {total: 700ms, data: 200ms}
    p50: 400ms
    exclude_cache_hits: true
    steps:
      chat gpt-4o:
        max: 600ms
        p95: 500ms
        ttft: 300
        ttft_p95: 0.25s
      data retrieve-docs:
        max: 250000us
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# --- durations ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("800ms", 800.0),
        ("1.2s", 1200.0),
        ("250us", 0.25),
        ("250µs", 0.25),
        ("90ns", 0.00009),
        ("2m", 120_000.0),
        (" 15 ms ", 15.0),
        (800, 800.0),
        (12.5, 12.5),
        (0, 0.0),
    ],
)
def test_durations_are_read_in_milliseconds(text: object, ms: float) -> None:
    assert parse_duration(text) == pytest.approx(ms)


# --- valid files ------------------------------------------------------------------------------


def test_toml_and_yaml_files_give_the_same_budgets(tmp_path: Path) -> None:
    from_toml = load_budgets(write(tmp_path, "chainlat.toml", TOML_EXAMPLE))
    from_yaml = load_budgets(write(tmp_path, "chainlat.yaml", YAML_EXAMPLE))
    assert from_toml.model_dump() == from_yaml.model_dump()
    chat = from_toml.workflows["support-chat"]
    assert (chat.total, chat.data) == (800.0, 250.0)
    assert chat.percentiles["p95"].total == 700.0
    assert chat.percentiles["p50"].total == 400.0  # a bare duration limits the total
    step = chat.steps["chat gpt-4o"]
    assert (step.max, step.ttft, step.percentiles, step.ttft_percentiles) == (
        600.0,
        300.0,
        {"p95": 500.0},
        {"ttft_p95": 250.0},
    )
    assert chat.steps["data retrieve-docs"].max == 250.0
    assert from_toml.min_runs_for("support-chat") == 3
    assert from_toml.excludes_cache_hits("support-chat") is True
    assert from_toml.source.endswith("chainlat.toml")


def test_budgets_under_tool_chainlat_in_pyproject(tmp_path: Path) -> None:
    write(
        tmp_path,
        "pyproject.toml",
        """\
        [project]
        name = "app"

        [tool.chainlat.workflows.answer]
        total = "1s"
        p99 = "2s"
        """,
    )
    assert discover_budgets(tmp_path) == tmp_path / "pyproject.toml"
    budgets = load_budgets(directory=tmp_path)
    assert budgets.workflows["answer"].total == 1000.0
    assert budgets.workflows["answer"].percentiles["p99"].total == 2000.0


def test_discovery_prefers_chainlat_toml_and_ignores_pyproject_without_the_table(
    tmp_path: Path,
) -> None:
    write(tmp_path, "pyproject.toml", "[project]\nname = 'app'\n")
    assert discover_budgets(tmp_path) is None
    write(tmp_path, "chainlat.yaml", YAML_EXAMPLE)
    assert discover_budgets(tmp_path) == tmp_path / "chainlat.yaml"
    write(tmp_path, "chainlat.toml", TOML_EXAMPLE)
    assert discover_budgets(tmp_path) == tmp_path / "chainlat.toml"


def test_load_without_a_file_to_find_names_the_directory(tmp_path: Path) -> None:
    with pytest.raises(chainlat.BudgetFileError, match="no budget file found"):
        load_budgets(directory=tmp_path)


def test_any_percentile_can_be_limited(tmp_path: Path) -> None:
    budgets = parse_budgets({"workflows": {"w": {"p99.9": "2s", "p75": {"tool": 5}}}})
    assert budgets.workflows["w"].percentiles["p99.9"].total == 2000.0
    assert budgets.workflows["w"].percentiles["p75"].tool == 5.0


# --- mistakes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "toml", "yaml_text", "expected"), MISTAKES, ids=[m[0] for m in MISTAKES]
)
@pytest.mark.parametrize("fmt", ["toml", "yaml"])
def test_each_mistake_is_one_line_naming_file_and_key(
    tmp_path: Path, kind: str, toml: str, yaml_text: str, expected: str, fmt: str
) -> None:
    path = tmp_path / f"budgets.{fmt}"
    path.write_text(toml if fmt == "toml" else yaml_text, encoding="utf-8")
    with pytest.raises(chainlat.BudgetFileError) as caught:
        load_budgets(path)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:")
    assert expected in message


def test_yaml_errors_name_the_line_of_the_key(tmp_path: Path) -> None:
    path = write(tmp_path, "b.yaml", "workflows:\n  chat:\n    total: 1s\n    p95: soon\n")
    with pytest.raises(chainlat.BudgetFileError, match=rf"^{path}:4: workflows\.chat\.p95: "):
        load_budgets(path)


def test_syntax_errors_name_line_and_column(tmp_path: Path) -> None:
    toml_path = write(tmp_path, "b.toml", '[workflows.chat]\ntotal = "800ms\n')
    with pytest.raises(chainlat.BudgetFileError, match=rf"^{toml_path}:2:\d+: invalid TOML: "):
        load_budgets(toml_path)
    yaml_path = write(tmp_path, "b.yaml", "workflows:\n  chat: [1, 2\n")
    with pytest.raises(chainlat.BudgetFileError, match=rf"^{yaml_path}:\d+:\d+: invalid YAML: "):
        load_budgets(yaml_path)


def test_pyproject_errors_name_the_full_key_path(tmp_path: Path) -> None:
    path = write(tmp_path, "pyproject.toml", "[tool.chainlat.workflows.chat]\ntotal = true\n")
    with pytest.raises(chainlat.BudgetFileError, match=r"tool\.chainlat\.workflows\.chat\.total: "):
        load_budgets(path)


def test_missing_file_and_unknown_suffix(tmp_path: Path) -> None:
    with pytest.raises(chainlat.BudgetFileError, match="no such budget file"):
        load_budgets(tmp_path / "nope.toml")
    with pytest.raises(chainlat.BudgetFileError, match=r"expected \.toml, \.yaml, \.yml or \.json"):
        load_budgets(write(tmp_path, "b.ini", "x"))


def test_several_mistakes_are_counted_on_the_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "b.toml", "[workflows.chat]\ntotal = 'x'\ndata = 'y'\n")
    with pytest.raises(chainlat.BudgetFileError, match=r"\(and 1 more\)$"):
        load_budgets(path)


# --- JSON schema --------------------------------------------------------------------------------


def test_json_schema_accepts_the_examples_and_rejects_mistakes(tmp_path: Path) -> None:
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors(tomllib.loads(TOML_EXAMPLE)))
    assert not list(validator.iter_errors(yaml.safe_load(YAML_EXAMPLE)))
    for _, toml_text, _, _ in MISTAKES:
        assert list(validator.iter_errors(tomllib.loads(toml_text))), toml_text


def test_json_schema_is_serialisable() -> None:
    text = json.dumps(json_schema())
    assert '"patternProperties"' in text


# --- per-run checks and percentile verdicts -----------------------------------------------------


def make_run(
    total: float,
    *,
    data: float = 0.0,
    steps: tuple[tuple[str, float], ...] = (),
    ttft: float | None = None,
    cached: bool = False,
    workflow: str = "support-chat",
) -> WorkflowRun:
    rollup = Rollup(
        total_ms=total,
        inference_ms=total - data,
        data_ms=data,
        tool_ms=0.0,
        overhead_ms=0.0,
        cache_hits=1 if cached else 0,
    )
    timings = tuple(
        StepTiming(
            name,
            "inference" if name.startswith("chat") else "data",
            0,
            int(ms * 1e6),
            ttft_ms=ttft if name.startswith("chat") else None,
            cache_hit=cached,
        )
        for name, ms in steps
    )
    return WorkflowRun(workflow, rollup, timings, 0, int(total * 1e6))


def test_check_run_reports_every_broken_per_run_limit(tmp_path: Path) -> None:
    budget = load_budgets(write(tmp_path, "b.toml", TOML_EXAMPLE)).workflows["support-chat"]
    run = make_run(
        900.0,
        data=260.0,
        steps=(("chat gpt-4o", 550.0), ("chat gpt-4o", 620.0), ("data retrieve-docs", 260.0)),
        ttft=310.0,
    )
    found = {(v.target, v.limit_ms, v.actual_ms) for v in check_run(run, budget)}
    assert found == {
        ("total", 800.0, 900.0),
        ("data", 250.0, 260.0),
        ('steps."chat gpt-4o".max', 600.0, 620.0),  # the worst of two calls
        ('steps."chat gpt-4o".ttft', 300.0, 310.0),
        ('steps."data retrieve-docs".max', 250.0, 260.0),
    }
    assert check_run(make_run(800.0, data=250.0), budget) == []  # the limit itself is within


def test_percentiles_are_judged_over_all_runs_with_nearest_rank() -> None:
    budgets = parse_budgets({"workflows": {"support-chat": {"p95": "190ms", "p50": "100ms"}}})
    runs = [make_run(float(ms)) for ms in range(10, 210, 10)]  # 10..200 ms, 20 runs
    report = evaluate(runs, budgets)
    by_target = {v.target: v for v in report.verdicts}
    assert by_target["p95.total"].actual_ms == 190.0  # rank 19 of 20
    assert by_target["p95.total"].status == "ok"
    assert by_target["p50.total"].actual_ms == 100.0
    assert by_target["p50.total"].status == "ok"
    assert report.ok and report.judged
    report = evaluate([*runs, make_run(500.0)], budgets)
    assert {v.target for v in report.broken} == {"p95.total", "p50.total"}


def test_percentile_verdicts_wait_for_min_runs() -> None:
    budgets = parse_budgets({"min_runs": 5, "workflows": {"support-chat": {"p95": "10ms"}}})
    report = evaluate([make_run(50.0)] * 4, budgets)
    (verdict,) = report.verdicts
    assert (verdict.status, verdict.reason, verdict.runs, verdict.actual_ms) == (
        "not_judged",
        "not_enough_runs",
        4,
        50.0,
    )
    assert (report.ok, report.judged, report.exit_code) == (False, False, 2)
    assert report.summary == "FAILED: 0 of 1 limit broken, 1 not judged"
    allowed = evaluate([make_run(50.0)] * 4, budgets, allow=["not_enough_runs"])
    assert allowed.verdicts[0].allowed and allowed.exit_code == 2  # nothing judged at all
    assert evaluate([make_run(50.0)] * 5, budgets).broken


def test_cache_hits_can_be_left_out_of_percentiles() -> None:
    raw = {"workflows": {"support-chat": {"p50": "100ms", "exclude_cache_hits": True}}}
    runs = [make_run(5.0, cached=True)] * 3 + [make_run(200.0)] * 2
    (verdict,) = evaluate(runs, parse_budgets(raw)).verdicts
    assert (verdict.status, verdict.runs, verdict.actual_ms) == ("broken", 2, 200.0)
    raw["workflows"]["support-chat"]["exclude_cache_hits"] = False
    (verdict,) = evaluate(runs, parse_budgets(raw)).verdicts
    assert (verdict.status, verdict.actual_ms) == ("ok", 5.0)


def test_per_run_verdicts_count_broken_runs_and_keep_the_worst() -> None:
    budgets = parse_budgets({"workflows": {"support-chat": {"total": "100ms"}}})
    runs = [make_run(90.0), make_run(150.0), make_run(120.0)]
    (verdict,) = evaluate(runs, budgets).verdicts
    assert (verdict.status, verdict.runs, verdict.broken_runs, verdict.actual_ms) == (
        "broken",
        3,
        2,
        150.0,
    )
    assert verdict.worst_run is runs[1]
    assert verdict.key_path == "workflows.support-chat.total"


def test_budgeted_steps_and_workflows_without_runs_are_not_judged() -> None:
    raw: dict[str, Any] = {
        "workflows": {
            "support-chat": {"steps": {"tool x": {"p95": 5, "max": 5}}},
            "other": {"total": 1},
        }
    }
    report = evaluate([make_run(10.0)], parse_budgets(raw))
    assert {(v.target, v.status, v.reason) for v in report.verdicts} == {
        ('steps."tool x".max', "not_judged", "unknown_step"),
        ('steps."tool x".p95', "not_judged", "unknown_step"),
        ("total", "not_judged", "unknown_workflow"),
    }
    assert not report.judged and report.exit_code == 2


# --- runtime enforcement ------------------------------------------------------------------------

RUNTIME_BUDGETS: dict[str, Any] = {
    "workflows": {
        "support-chat": {
            "total": "100ms",
            "data": "30ms",
            "p95": "1ms",  # percentiles are never judged at runtime
            "steps": {"chat gpt-4o": {"ttft": "20ms"}},
        }
    }
}


@pytest.fixture
def budgeted(cap: Capture) -> Iterator[Capture]:
    """cap, with the runtime budgets uninstalled again after the test."""
    yield cap
    chainlat.shutdown()


def enforce(cap: Capture, on_exceed: Any = "record") -> None:
    chainlat.configure(
        tracer_provider=cap.provider,
        exporter="none",
        set_global=False,
        budgets=parse_budgets(RUNTIME_BUDGETS),
        on_exceed=on_exceed,
    )


def run_chat(cap: Capture, *, data_ms: float, ttft_ms: float, fail: bool = False) -> None:
    with chainlat.workflow("support-chat", tracer_provider=cap.provider):
        with chainlat.data_stage("retrieve-docs", tracer_provider=cap.provider):
            cap.clock.advance(ms=data_ms)
        with chainlat.inference("gpt-4o", tracer_provider=cap.provider) as call:
            cap.clock.advance(ms=ttft_ms)
            call.first_token()
            cap.clock.advance(ms=50)
        if fail:
            raise KeyError("boom")


def test_run_within_budget_is_marked_ok(budgeted: Capture) -> None:
    enforce(budgeted)
    run_chat(budgeted, data_ms=10, ttft_ms=10)
    span = budgeted.span("invoke_workflow support-chat")
    attributes = span.attributes or {}
    assert attributes[attr.BUDGET_OK] is True
    assert attributes[attr.BUDGET_TOTAL_MS] == 100.0
    assert [e.name for e in span.events] == []


@pytest.mark.parametrize("include", [False, True])
def test_an_interrupted_turn_is_checked_only_with_include_interrupted(
    budgeted: Capture, include: bool
) -> None:
    """As check leaves it out of the per-run limits: no verdict, no event, no exception."""
    budgets = {**RUNTIME_BUDGETS, "include_interrupted": include}
    chainlat.configure(
        tracer_provider=budgeted.provider,
        exporter="none",
        set_global=False,
        budgets=parse_budgets(budgets),
        on_exceed="raise",
    )

    def turn() -> None:
        with chainlat.workflow("support-chat", tracer_provider=budgeted.provider) as run:
            budgeted.clock.advance(ms=500)  # over the 100 ms total
            run.end_reason("interrupted")

    if include:
        with pytest.raises(chainlat.LatencyBudgetExceeded):
            turn()
    else:
        turn()
    attributes = budgeted.span("invoke_workflow support-chat").attributes or {}
    assert attributes.get(attr.BUDGET_OK) is (False if include else None)


def test_broken_limits_become_events_on_the_exported_span(budgeted: Capture) -> None:
    enforce(budgeted)
    run_chat(budgeted, data_ms=40, ttft_ms=25)
    span = budgeted.span("invoke_workflow support-chat")
    attributes = span.attributes or {}
    assert attributes[attr.BUDGET_OK] is False
    assert attributes[attr.BUDGET_TOTAL_MS] == 100.0
    events = [(e.name, dict(e.attributes or {}), e.timestamp) for e in span.events]
    assert events == [
        (
            attr.BUDGET_EXCEEDED_EVENT,
            {
                attr.BUDGET_TARGET: "total",
                attr.BUDGET_LIMIT_MS: 100.0,
                attr.BUDGET_ACTUAL_MS: 115.0,
            },
            span.end_time,
        ),
        (
            attr.BUDGET_EXCEEDED_EVENT,
            {attr.BUDGET_TARGET: "data", attr.BUDGET_LIMIT_MS: 30.0, attr.BUDGET_ACTUAL_MS: 40.0},
            span.end_time,
        ),
        (
            attr.BUDGET_EXCEEDED_EVENT,
            {
                attr.BUDGET_TARGET: 'steps."chat gpt-4o".ttft',
                attr.BUDGET_LIMIT_MS: 20.0,
                attr.BUDGET_ACTUAL_MS: 25.0,
            },
            span.end_time,
        ),
    ]
    assert span.status.status_code is StatusCode.UNSET  # the budget does not touch the status


def test_a_cost_limit_that_cannot_be_judged_leaves_the_run_not_ok_and_says_why(
    budgeted: Capture,
) -> None:
    budgets = parse_budgets({"workflows": {"support-chat": {"cost": "0.01"}}})
    chainlat.configure(
        tracer_provider=budgeted.provider,
        exporter="none",
        set_global=False,
        budgets=budgets,
        on_exceed="raise",
    )
    run_chat(budgeted, data_ms=10, ttft_ms=10)  # no prices, no cost: nothing raised
    span = budgeted.span("invoke_workflow support-chat")
    attributes = span.attributes or {}
    assert attributes[attr.BUDGET_OK] is False
    assert str(attributes[attr.BUDGET_NOT_JUDGED]).startswith("no [prices]")
    assert span.events == ()


def test_record_policy_records_the_violation_and_neither_warns_nor_raises(
    budgeted: Capture,
) -> None:
    enforce(budgeted, "record")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_chat(budgeted, data_ms=40, ttft_ms=1)  # raising would fail the test here
    assert [str(w.message) for w in caught] == []
    span = budgeted.span("invoke_workflow support-chat")
    assert (span.attributes or {})[attr.BUDGET_OK] is False
    assert [dict(e.attributes or {}) for e in span.events] == [
        {attr.BUDGET_TARGET: "data", attr.BUDGET_LIMIT_MS: 30.0, attr.BUDGET_ACTUAL_MS: 40.0}
    ]


def test_warn_policy_warns_at_the_workflow_block(budgeted: Capture) -> None:
    enforce(budgeted, "warn")
    with pytest.warns(
        chainlat.LatencyBudgetWarning, match=r"'support-chat'.*data 40\.0 ms > 30 ms"
    ) as rec:
        run_chat(budgeted, data_ms=40, ttft_ms=1)
    assert rec[0].filename == __file__


def test_raise_policy_raises_after_the_span_was_exported(budgeted: Capture) -> None:
    enforce(budgeted, "raise")
    with pytest.raises(chainlat.LatencyBudgetExceeded) as caught:
        run_chat(budgeted, data_ms=40, ttft_ms=1)
    # already exported when the exception reached user code
    assert [s.name for s in budgeted.spans()][-1] == "invoke_workflow support-chat"
    assert caught.value.rollup.data_ms == 40.0
    assert [v.target for v in caught.value.violations] == ["data"]  # type: ignore[attr-defined]


def test_raise_policy_never_replaces_the_users_exception(budgeted: Capture) -> None:
    enforce(budgeted, "raise")
    with pytest.raises(KeyError):
        run_chat(budgeted, data_ms=40, ttft_ms=1, fail=True)
    span = budgeted.span("invoke_workflow support-chat")
    assert (span.attributes or {})[attr.BUDGET_OK] is False
    assert span.status.status_code is StatusCode.ERROR  # as the user's code left it


def test_callable_policy_gets_the_exception(budgeted: Capture) -> None:
    seen: list[chainlat.LatencyBudgetExceeded] = []
    enforce(budgeted, seen.append)
    run_chat(budgeted, data_ms=40, ttft_ms=1)
    run_chat(budgeted, data_ms=1, ttft_ms=1)
    assert len(seen) == 1
    assert seen[0].rollup.total_ms == 91.0


def test_workflows_without_a_budget_are_left_alone(budgeted: Capture) -> None:
    enforce(budgeted, "raise")
    with chainlat.workflow("other", tracer_provider=budgeted.provider):
        budgeted.clock.advance(ms=10_000)
    assert attr.BUDGET_OK not in (budgeted.span("invoke_workflow other").attributes or {})


def test_configure_loads_a_budget_file_and_shutdown_stops_enforcing(
    budgeted: Capture, tmp_path: Path
) -> None:
    path = write(tmp_path, "chainlat.toml", '[workflows.support-chat]\ntotal = "1ms"\n')
    chainlat.configure(
        tracer_provider=budgeted.provider, exporter="none", set_global=False, budgets=path
    )
    run_chat(budgeted, data_ms=1, ttft_ms=1)
    chainlat.shutdown()
    run_chat(budgeted, data_ms=1, ttft_ms=1)
    first, second = budgeted.workflows()
    assert (first.attributes or {})[attr.BUDGET_OK] is False
    assert attr.BUDGET_OK not in (second.attributes or {})


def test_configure_refuses_a_policy_without_budgets_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(chainlat.ConfigError, match="needs budgets="):
        chainlat.configure(exporter="none", set_global=False, on_exceed="raise")
    bad = write(tmp_path, "chainlat.toml", "[workflows.x]\ntotal = 'soon'\n")
    with pytest.raises(chainlat.BudgetFileError, match=r"workflows\.x\.total"):
        chainlat.configure(exporter="none", set_global=False, budgets=bad)
    with pytest.raises(chainlat.ConfigError, match="on_exceed="):
        chainlat.configure(
            exporter="none",
            set_global=False,
            budgets=Budgets(),
            on_exceed="explode",  # type: ignore[arg-type]
        )
    chainlat.shutdown()
