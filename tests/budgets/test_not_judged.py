"""Limits that cannot be judged are not kept: each case has its reason and fails the gate."""

from __future__ import annotations

import pytest

import chainlat
from chainlat._core.runs import WorkflowRun
from chainlat.budgets import Budgets, evaluate
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans

PRICES = {"gpt-x": {"input_per_mtok": 2.5, "output_per_mtok": 10}}


def _run(
    cap: Capture,
    *,
    model: str = "gpt-x",
    tokens: tuple[object, object] | None = (1000, 100),
    recorded_cost: float | None = None,
) -> None:
    """One run with one model call of 50 ms; ``tokens`` as recorded on the call."""
    p = cap.provider
    with chainlat.workflow("chat", tracer_provider=p) as run:
        with chainlat.inference(model, tracer_provider=p) as call:
            cap.clock.advance(50)
            if tokens is not None:
                call.set_attribute("gen_ai.usage.input_tokens", tokens[0])  # type: ignore[arg-type]
                call.set_attribute("gen_ai.usage.output_tokens", tokens[1])  # type: ignore[arg-type]
        if recorded_cost is not None:
            run.set_attribute("chainlat.chain.cost_usd", recorded_cost)


def _runs(cap: Capture) -> list[WorkflowRun]:
    return runs_from_spans(cap.spans())


def _budgets(workflow: dict[str, object], prices: object = PRICES) -> Budgets:
    return Budgets.model_validate({"prices": prices, "workflows": {"chat": workflow}})


def test_one_unpriced_run_among_priced_ones_is_counted_not_left_out(cap: Capture) -> None:
    for _ in range(4):
        _run(cap)
    _run(cap, model="gpt-unpriced")
    report = evaluate(_runs(cap), _budgets({"cost": "0.01"}))
    (verdict,) = report.verdicts
    assert (verdict.status, verdict.reason) == ("not_judged", "no_price")
    assert (verdict.runs, verdict.unjudged_runs, verdict.broken_runs) == (4, 1, 0)
    assert verdict.why is not None and verdict.why.startswith(
        "1 of 5 runs: a call to 'gpt-unpriced' has no price"
    )
    assert report.exit_code == 2


def test_a_broken_cost_stays_broken_when_another_run_has_no_price(cap: Capture) -> None:
    _run(cap, tokens=(100_000, 10_000))  # 0.25 + 0.1 = $0.35
    _run(cap, model="gpt-unpriced")
    (verdict,) = evaluate(_runs(cap), _budgets({"cost": "0.01"})).verdicts
    assert (verdict.status, verdict.unjudged_runs) == ("broken", 1)
    assert verdict.actual_ms == pytest.approx(0.35)


@pytest.mark.parametrize(
    ("tokens", "reason"),
    [
        (None, "no_tokens"),
        ((float("nan"), float("nan")), "no_tokens"),
        ((-5, -1), "no_tokens"),
        ((0, 0), "no_tokens"),  # no usage counted (docs/attributes.md, rule 21)
    ],
    ids=["no token counts", "NaN tokens", "negative tokens", "a usage of nothing"],
)
def test_a_call_without_valid_token_counts_leaves_the_cost_not_judged(
    cap: Capture, tokens: tuple[object, object] | None, reason: str
) -> None:
    _run(cap, tokens=tokens)
    (verdict,) = evaluate(_runs(cap), _budgets({"cost": "0.01"})).verdicts
    assert (verdict.status, verdict.reason) == ("not_judged", reason)


def test_the_budget_files_prices_win_over_a_recorded_cost(cap: Capture) -> None:
    _run(cap, tokens=(100_000, 10_000), recorded_cost=0.0001)  # priced: $0.35
    (verdict,) = evaluate(_runs(cap), _budgets({"cost": "0.01"})).verdicts
    assert verdict.status == "broken" and verdict.actual_ms == pytest.approx(0.35)


def test_a_negative_recorded_cost_without_prices_is_not_kept(cap: Capture) -> None:
    """The impossible recorded rollup is rebuilt from the spans, whose call has no price."""
    _run(cap, tokens=None, recorded_cost=-5.0)
    runs = _runs(cap)
    assert all("cost_usd" in run.rebuilt for run in runs)
    (verdict,) = evaluate(runs, _budgets({"cost": "0.01"}, prices={})).verdicts
    assert (verdict.status, verdict.reason) == ("not_judged", "no_price")


def test_a_cost_percentile_over_runs_some_without_a_cost_is_not_judged(cap: Capture) -> None:
    for _ in range(3):
        _run(cap)
    _run(cap, tokens=None)
    (verdict,) = evaluate(_runs(cap), _budgets({"cost_p50": "0.01"})).verdicts
    assert (verdict.status, verdict.reason, verdict.runs, verdict.unjudged_runs) == (
        "not_judged",
        "no_tokens",
        3,
        1,
    )
    assert verdict.why is not None and verdict.why.startswith("1 of 4 runs have no cost")


def test_every_worst_run_waterfall_says_a_cost_in_dollars(cap: Capture) -> None:
    """The waterfall of a broken cost limit marks ``cost $0.3500 > $0.01``, never in ms."""
    from chainlat.pytest_plugin import session_lines
    from chainlat.report import check_markdown, check_text

    _run(cap, tokens=(100_000, 10_000))
    report = evaluate(_runs(cap), _budgets({"cost": "0.01"}))
    for text in (check_text(report), check_markdown(report), "\n".join(session_lines(report))):
        (mark,) = [line for line in text.splitlines() if "<-- cost" in line]
        assert mark.endswith("<-- cost $0.3500 > $0.01"), mark
