"""The line ``chainlat serve`` and ``chainlat run`` print for each run received says what
``chainlat check`` will say of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chainlat.budgets import evaluate, parse_budgets
from chainlat.receiver import run_line
from chainlat.traces import read_runs

T0 = 1_700_000_000_000_000_000
MS = 1_000_000


def _attributes(values: dict[str, str | int]) -> list[dict[str, Any]]:
    def value(v: str | int) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    return [{"key": k, "value": value(v)} for k, v in values.items()]


def _run_file(tmp_path: Path, chat_ms: int, *, streamed: bool = False) -> Path:
    """One run: a workflow with one model call of ``chat_ms``, 1000 + 200 tokens, no cost;
    the call says whether it ``streamed`` (with no first token: rule 17)."""
    trace_id, root, chat = (
        "5b8efff798038103d269b633813fc60c",
        "eee19b7ec3c1b174",
        "eee19b7ec3c1b175",
    )
    spans = [
        {
            "traceId": trace_id,
            "spanId": chat,
            "parentSpanId": root,
            "name": "chat gpt-4o-mini",
            "kind": 3,
            "startTimeUnixNano": str(T0 + MS),
            "endTimeUnixNano": str(T0 + (1 + chat_ms) * MS),
            "attributes": _attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.request.stream": streamed,
                    "gen_ai.usage.input_tokens": 1000,
                    "gen_ai.usage.output_tokens": 200,
                }
            ),
        },
        {
            "traceId": trace_id,
            "spanId": root,
            "name": "invoke_workflow support",
            "kind": 1,
            "startTimeUnixNano": str(T0),
            "endTimeUnixNano": str(T0 + (2 + chat_ms) * MS),
            "attributes": _attributes(
                {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "support"}
            ),
        },
    ]
    document = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(document) + "\n")
    return path


PRICES = {"gpt-4o-mini": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}
"""1000 input and 200 output tokens cost $0.0014."""


@pytest.mark.parametrize(
    ("cost", "verdict", "exit_code"),
    [
        ("0.01", "kept", 0),
        ("0.001", "broken: support: cost $0.0014 > limit $0.001", 1),
    ],
)
def test_a_cost_limit_is_judged_with_the_prices_of_the_budget_file_as_check_does(
    tmp_path: Path, cost: str, verdict: str, exit_code: int
) -> None:
    budgets = parse_budgets({"workflows": {"support": {"cost": cost}}, "prices": PRICES})
    (run,) = read_runs([_run_file(tmp_path, 50)])
    assert run_line(run, budgets) == f"support, total 52.0 ms, first output 51.0 ms: {verdict}"
    assert evaluate([run], budgets).exit_code == exit_code


def test_a_first_output_that_is_a_bound_is_said_to_be_one(tmp_path: Path) -> None:
    """The call says it streamed and no span marks its first token (rule 17): the first
    output is at least the call's start, 1 ms, and the line says it is a bound."""
    (run,) = read_runs([_run_file(tmp_path, 50, streamed=True)])
    assert run_line(run, None) == "support, total 52.0 ms, first output 1.0 ms (a bound)"


def test_a_cost_limit_without_prices_is_not_judged(tmp_path: Path) -> None:
    budgets = parse_budgets({"workflows": {"support": {"cost": "0.01"}}})
    (run,) = read_runs([_run_file(tmp_path, 50)])
    assert "not judged: no [prices] in the budget file" in run_line(run, budgets)


def test_a_budgeted_step_the_run_does_not_have_is_no_verdict_on_the_line(tmp_path: Path) -> None:
    budget = {"total": "100ms", "steps": {"retrieve docs": {"max": "10ms"}}}
    budgets = parse_budgets({"workflows": {"support": budget}})
    (run,) = read_runs([_run_file(tmp_path, 150)])
    line = run_line(run, budgets)
    assert line.endswith(": broken: support: total 152.0 ms > limit 100 ms")
