"""The budget keys beyond latency: first output, error rate, cost, optional steps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import chainlat
from chainlat._core.errors import BudgetFileError
from chainlat._core.runs import WorkflowRun
from chainlat.budgets import Budgets, check_run, evaluate, load_budgets, unknown_keys
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans


def _chat(cap: Capture, *, wait_ms: float, fail: bool = False, tokens: int = 1000) -> None:
    """One run: ``wait_ms`` of retrieval, then a streamed call (first token 10 ms in)."""
    p, clock = cap.provider, cap.clock
    try:
        with chainlat.workflow("chat", tracer_provider=p):
            with chainlat.data_stage("fetch", tracer_provider=p):
                clock.advance(wait_ms)
            with chainlat.inference("gpt-x", tracer_provider=p) as call:
                clock.advance(10)
                call.first_token()
                clock.advance(40)
                call.record_usage(input_tokens=tokens, output_tokens=tokens // 10)
            if fail:
                raise RuntimeError("upstream failed")
    except RuntimeError:
        pass


def _runs(cap: Capture) -> list[WorkflowRun]:
    return runs_from_spans(cap.spans())


def _verdicts(runs: list[WorkflowRun], budget: dict[str, object]) -> dict[str, tuple[object, ...]]:
    budgets = Budgets.model_validate({"workflows": {"chat": budget}})
    return {
        v.target: (v.status, v.actual_ms, v.runs, v.unit) for v in evaluate(runs, budgets).verdicts
    }


def test_first_output_per_run_and_percentile(cap: Capture) -> None:
    for wait in (10, 20, 30, 40):
        _chat(cap, wait_ms=wait)
    runs = _runs(cap)
    assert [r.first_output_ms for r in runs] == [20.0, 30.0, 40.0, 50.0]
    verdicts = _verdicts(runs, {"first_output": "45ms", "p50": {"first_output": "25ms"}})
    assert verdicts["first_output"] == ("broken", 50.0, 4, "ms")
    assert verdicts["p50.first_output"] == ("broken", 30.0, 4, "ms")
    broken = check_run(
        runs[3],
        Budgets.model_validate({"workflows": {"chat": {"first_output": 45}}}).workflows["chat"],
    )
    assert [str(v) for v in broken] == ["chat: first_output 50.0 ms > limit 45 ms"]


def test_failed_runs_leave_the_percentiles_and_count_in_the_error_rate(cap: Capture) -> None:
    _chat(cap, wait_ms=1, fail=True)  # fast because it failed
    for wait in (50, 60, 70):
        _chat(cap, wait_ms=wait)
    runs = _runs(cap)
    assert [r.error for r in runs] == [True, False, False, False]
    verdicts = _verdicts(runs, {"p50": "10s", "error_rate": "20%"})
    assert verdicts["p50.total"] == ("ok", 110.0, 3, "ms")  # 100, 110, 120: the failure is out
    assert verdicts["error_rate"] == ("broken", 25.0, 4, "%")
    counted = _verdicts(runs, {"p50": "10s", "include_errors": True, "error_rate": 0.25})
    assert counted["p50.total"] == ("ok", 100.0, 4, "ms")  # 51, 100, 110, 120
    assert counted["error_rate"] == ("ok", 25.0, 4, "%")


def test_error_rate_waits_for_min_runs(cap: Capture) -> None:
    _chat(cap, wait_ms=1, fail=True)
    verdicts = _verdicts(_runs(cap), {"error_rate": "2%", "min_runs": 5})
    assert verdicts["error_rate"][0] == "not_judged"


def test_cost_from_the_prices_table_per_run_and_percentile(cap: Capture) -> None:
    _chat(cap, wait_ms=5, tokens=1000)  # 1000 in, 100 out
    _chat(cap, wait_ms=5, tokens=3000)  # 3000 in, 300 out
    runs = _runs(cap)
    budgets = Budgets.model_validate(
        {
            "prices": {"gpt-x": {"input_per_mtok": 2.5, "output_per_mtok": "$10"}},
            "workflows": {"chat": {"cost": "0.004", "cost_p50": 0.002}},
        }
    )
    report = evaluate(runs, budgets)
    verdicts: dict[str, tuple[object, ...]] = {
        v.target: (v.status, v.actual_ms, v.unit) for v in report.verdicts
    }
    # 1000 x 2.5 + 100 x 10 = 3500 per million; 3000 x 2.5 + 300 x 10 = 10500 per million.
    assert verdicts["cost"] == ("broken", pytest.approx(0.0105), "USD")
    assert verdicts["cost_p50"] == ("broken", pytest.approx(0.0035), "USD")
    assert report.stats.workflows["chat"].cost.sorted() == pytest.approx([0.0035, 0.0105])
    assert "cost $0.0105 > limit $0.004" in str(report.broken[0].violation())


def test_configured_prices_put_the_cost_on_the_workflow_span(cap: Capture) -> None:
    from chainlat._core.prices import Price

    cap.processor.prices = {"gpt-x-2026-01-01": Price(2.0, 8.0, cache_read_per_mtok=0.5)}
    with chainlat.workflow("chat", tracer_provider=cap.provider) as run:
        with chainlat.inference("gpt-x", tracer_provider=cap.provider) as call:
            call.record_usage(input_tokens=1000, output_tokens=100, cache_read_tokens=400)
    # (600 x 2 + 400 x 0.5 + 100 x 8) / 1e6, the model matched without its snapshot date.
    assert run.rollup is not None and run.rollup.cost_usd == pytest.approx(0.0022)
    root = cap.span("invoke_workflow chat")
    assert (root.attributes or {})["chainlat.chain.cost_usd"] == pytest.approx(0.0022)


def test_a_call_without_a_price_gives_no_cost_rather_than_a_wrong_one(cap: Capture) -> None:
    _chat(cap, wait_ms=5)
    budgets = Budgets.model_validate(
        {
            "prices": {"other": {"input_per_mtok": 1, "output_per_mtok": 1}},
            "workflows": {"chat": {"cost": "0.001"}},
        }
    )
    (verdict,) = evaluate(_runs(cap), budgets).verdicts
    assert (verdict.status, verdict.actual_ms) == ("not_judged", None)


def test_unknown_workflow_and_step_names_are_reported_with_suggestions(cap: Capture) -> None:
    _chat(cap, wait_ms=5)
    budgets = Budgets.model_validate(
        {
            "workflows": {
                "chat": {
                    "steps": {
                        "chat gpt-y": {"max": "1s"},
                        "data rare": {"max": "1s", "optional": True},
                    }
                },
                "chta": {"total": "1s"},
                "nightly": {"total": "1s", "optional": True},
            }
        }
    )
    problems = unknown_keys(evaluate(_runs(cap), budgets), budgets)
    assert problems == [
        "<inline>: workflows.chat.steps.\"chat gpt-y\": no run of 'chat' has a step "
        "'chat gpt-y' (did you mean 'chat gpt-x'?)",
        "<inline>: workflows.chta: no run of workflow 'chta' (did you mean 'chat'?)",
    ]


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('[workflows.chat]\nerror_rate = "two"\n', "workflows.chat.error_rate: expected a share"),
        ("[workflows.chat]\nerror_rate = 2\n", 'write "2%" for percent'),
        ('[workflows.chat]\ncost = "-1"\n', "workflows.chat.cost: expected US dollars"),
        ("[prices.m]\ninput_per_mtok = 1\n", "prices.m.output_per_mtok"),
        ('[workflows.chat]\ncost_p100 = "1"\n', "percentile out of range: cost_p100"),
        ('[workflows.chat.steps.x]\noptional = "yes"\n', "workflows.chat.steps.x.optional"),
    ],
)
def test_bad_new_keys_name_the_file_and_the_key(tmp_path: Path, text: str, where: str) -> None:
    file = tmp_path / "chainlat.toml"
    file.write_text(text)
    with pytest.raises(BudgetFileError) as caught:
        load_budgets(file)
    assert str(caught.value).startswith(f"{file}:")
    assert where in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "text", "where"),
    [
        ("chainlat.toml", '[workflows.chat]\ntotal = "1s"\ntotal = "2s"\n', ":3:"),
        ("chainlat.yaml", "workflows:\n  chat:\n    total: 1s\n    total: 2s\n", "total"),
        ("chainlat.json", '{"workflows": {"chat": {"total": "1s", "total": "2s"}}}', "total"),
    ],
)
def test_duplicated_keys_are_errors_in_every_format(
    tmp_path: Path, name: str, text: str, where: str
) -> None:
    file = tmp_path / name
    file.write_text(text)
    with pytest.raises(BudgetFileError) as caught:
        load_budgets(file)
    assert str(caught.value).startswith(f"{file}:")
    assert where in str(caught.value)


def test_configure_takes_prices_and_rejects_bad_ones(tmp_path: Path) -> None:
    from chainlat import ConfigError
    from chainlat._runtime.processor import processor_for

    provider = chainlat.configure(
        exporter="none",
        set_global=False,
        prices={"gpt-x": {"input_per_mtok": 1, "output_per_mtok": 2}},
    )
    processor = processor_for(provider, install=False)
    assert processor is not None and processor.prices is not None
    assert processor.prices["gpt-x"].output_per_mtok == 2.0
    with pytest.raises(ConfigError, match=r"prices\['m'\]: expected input_per_mtok"):
        chainlat.configure(exporter="none", set_global=False, prices={"m": {"input": 1}})
    with pytest.raises(ConfigError, match="finite number"):
        chainlat.configure(
            exporter="none",
            set_global=False,
            prices={"m": {"input_per_mtok": float("nan"), "output_per_mtok": 1}},
        )


def _variant_run(cap: Capture, variant: str, *, call_ms: float, tokens: int, ok: bool) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("chat", variant=variant, tracer_provider=p) as run:
        with chainlat.inference(variant, tracer_provider=p) as call:
            clock.advance(call_ms / 2)
            call.first_token()
            clock.advance(call_ms / 2)
            call.record_usage(input_tokens=tokens, output_tokens=0)
        run.record_outcome(success=ok)


def test_compare_shows_cost_and_first_output_and_cost_joins_the_pareto_front(
    cap: Capture,
) -> None:
    from chainlat._core.prices import Price

    # "big" is slower and dearer than "small" and as successful: dominated on all three.
    # "cheap" is as fast as "small" and as successful, and cheaper: it dominates "small".
    for variant, call_ms, tokens in (("big", 100, 1000), ("small", 40, 1000), ("cheap", 40, 100)):
        for _ in range(2):
            _variant_run(cap, variant, call_ms=call_ms, tokens=tokens, ok=True)
    runs = _runs(cap)
    prices = {m: Price(1.0, 1.0) for m in ("big", "small", "cheap")}
    comparison = chainlat.compare(runs, prices=prices)
    rows: dict[str, tuple[Any, ...]] = {
        v.variant: (v.first_output, v.cost_mean, v.pareto) for v in comparison.variants
    }
    assert rows["big"][0] is not None and rows["big"][0].p50 == 50.0
    assert rows["small"][0] is not None and rows["small"][0].p95 == 20.0
    assert {k: (r[1], r[2]) for k, r in rows.items()} == {
        "big": (pytest.approx(0.001), False),
        "small": (pytest.approx(0.001), False),
        "cheap": (pytest.approx(0.0001), True),
    }
    # Without prices, cost is not an axis: "small" and "cheap" tie, both on the front.
    fronts = {v.variant: v.pareto for v in chainlat.compare(runs).variants}
    assert fronts == {"big": False, "small": True, "cheap": True}


def test_error_rate_is_shown_as_a_share_of_runs_not_a_per_run_limit(cap: Capture) -> None:
    from chainlat.report import check_json, check_text

    _chat(cap, wait_ms=1, fail=True)
    for wait in (50, 60, 70):
        _chat(cap, wait_ms=wait)
    budgets = Budgets.model_validate({"workflows": {"chat": {"error_rate": "20%"}}})
    report = evaluate(_runs(cap), budgets)
    (verdict,) = report.verdicts
    assert verdict.kind == "share"
    text = check_text(report, sources="t.jsonl")
    assert "error_rate (each run)" not in text
    assert "1/4 failed" in text
    assert check_json(report)["verdicts"][0]["kind"] == "share"
