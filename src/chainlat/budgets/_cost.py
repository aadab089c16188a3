"""What a run cost, for the judge: from the budget file's prices when it has them (they win
over a cost recorded on the workflow span), else as recorded; and, when neither gives a
cost, why not (a call without a price, a call without token counts), so that the limit is
not judged rather than passed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chainlat._core.errors import shown
from chainlat._core.prices import price_of
from chainlat._core.rollup import compute_rollup

if TYPE_CHECKING:
    from chainlat._core.prices import Prices
    from chainlat._core.runs import WorkflowRun
    from chainlat.budgets.verdict import NotJudgedReason


@dataclass(frozen=True, slots=True)
class RunCost:
    """A run's cost in US dollars, or why it has none."""

    usd: float | None
    reason: NotJudgedReason | None = None
    why: str | None = None


def run_cost(run: WorkflowRun, prices: Prices | None) -> RunCost:
    """The cost of ``run``'s model calls (see the module's docstring)."""
    calls = [r for r in run.records if r.kind == "inference"]
    if prices and run.spans:
        if not calls:
            return RunCost(0.0)  # no model call: nothing to pay
        usd = compute_rollup(run.root_record, run.records, prices=prices).cost_usd
        return RunCost(usd) if usd is not None else _missing(run, prices)
    recorded = run.rollup.cost_usd
    if recorded is not None:
        if recorded < 0 or math.isinf(recorded):
            return RunCost(
                None,
                "impossible_value",
                f"a run records chainlat.chain.cost_usd = {recorded:g}, which no cost can be; "
                "add [prices] to the budget file to price its calls",
            )
        return RunCost(recorded)
    if not prices:
        return RunCost(
            None,
            "no_price",
            "no [prices] in the budget file and no cost recorded on the run "
            "(chainlat.chain.cost_usd)",
        )
    return _missing(run, prices)


def _missing(run: WorkflowRun, prices: Prices) -> RunCost:
    """Why the prices give ``run`` no cost: the first call without a price, else the first
    without token counts."""
    calls = [r for r in run.records if r.kind == "inference"]
    for call in calls:
        if price_of(prices, call.model) is None:
            model = shown(call.model) if call.model is not None else "(no model name)"
            return RunCost(
                None,
                "no_price",
                f"a call to {model} has no price: add it to [prices] in the budget file",
            )
    for call in calls:
        if call.input_tokens is None and call.output_tokens is None:
            model = shown(call.model) if call.model is not None else "a model"
            return RunCost(
                None,
                "no_tokens",
                f"a call to {model} has no valid token counts (gen_ai.usage.input_tokens, "
                "output_tokens; a streamed call has them when it asks for its usage, "
                'stream_options={"include_usage": True}, and its instrumentation records it)',
            )
    return RunCost(None, "no_data", "the run's calls give no cost")
