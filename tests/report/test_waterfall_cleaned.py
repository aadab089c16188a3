"""The waterfall is cleaned piece by piece and marked scrubbed: every input it shows from a
trace or a budget file (workflow, step, kind, trace id, source, a broken limit's target, a
call whose end is unrecorded, a title) passes ``visible`` where it is put in, so the whole
text, scrubbed or escaped again, is unchanged, and the layers that print it do not scrub it
a second time."""

from __future__ import annotations

from typing import Any

import pytest

from chainlat._core.redact import REDACTED, Scrubbed, scrub, visible
from chainlat._core.rollup import Rollup
from chainlat._core.runs import BudgetViolation, StepTiming, WorkflowRun
from chainlat.report import waterfall

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"
HOSTILE = f"x api_key={SECRET} \x1b[31m"


def _run(*, unrecorded: bool) -> WorkflowRun:
    # A kind is one of four once read; the waterfall cleans it all the same.
    kind: Any = f"kind {HOSTILE}"
    step = StepTiming(f"chat {HOSTILE}", kind, 1_000_000, 5_000_000)
    rollup = Rollup(
        total_ms=6.0,
        inference_ms=4.0,
        data_ms=0.0,
        tool_ms=0.0,
        overhead_ms=2.0,
        unrecorded=(step.name,) if unrecorded else (),
        unrecorded_parts=("inference",) if unrecorded else (),
    )
    return WorkflowRun(
        f"wf {HOSTILE}",
        rollup,
        (step,),
        0,
        6_000_000,
        trace_id=f"{SECRET}\x1b",
        origin=f"https://u:{SECRET}@jaeger.example/api \x1b",
    )


def _violations(run: WorkflowRun) -> list[BudgetViolation]:
    return [
        BudgetViolation(run.workflow, f"total {HOSTILE}", 1.0, 6.0),
        BudgetViolation(run.workflow, f'steps."{run.steps[0].name}".max {HOSTILE}', 1.0, 4.0),
        BudgetViolation(run.workflow, f'steps."no such step".{HOSTILE}', 1.0, 4.0),
    ]


@pytest.mark.parametrize("unrecorded", [False, True], ids=["recorded", "unrecorded"])
@pytest.mark.parametrize("title", [None, f"title {HOSTILE}"], ids=["heading", "title"])
def test_every_input_of_the_waterfall_is_cleaned_where_it_is_put_in(
    unrecorded: bool, title: str | None
) -> None:
    run = _run(unrecorded=unrecorded)
    text = waterfall(run, _violations(run), title=title)
    assert isinstance(text, Scrubbed)
    assert SECRET not in text and "\x1b" not in text
    assert text.count(REDACTED) >= (5 if title is None else 4)
    plain = str(text)
    # The mark is earned: scrubbing or cleaning the plain text again changes nothing.
    assert scrub(plain) == plain
    assert visible(plain, newline=True) == plain
    if unrecorded:
        assert "is not recorded" in text


def test_a_limit_name_from_the_budget_file_is_cleaned_on_the_workflow_row() -> None:
    run = _run(unrecorded=False)
    text = waterfall(run, [BudgetViolation(run.workflow, f"total {HOSTILE}", 1.0, 6.0)])
    row = next(line for line in text.splitlines() if "<--" in line)
    assert f"<-- total x api_key={REDACTED} \\x1b[31m 6" in row
