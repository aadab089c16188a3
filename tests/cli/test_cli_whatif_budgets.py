"""``chainlat whatif --budgets`` judges as ``chainlat check`` does: a limit that cannot be
judged fails it (exit 2, one line on stderr) unless opted out of, the recorded runs get the
same summary line as ``check`` gives them, and ``--workflow`` leaves the other workflows'
budgets out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import chainlat
from chainlat._core.prices import Price
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import Capture
from support.whatif import PROFILES


@pytest.fixture
def traces(cap: Capture, tmp_path: Path) -> Path:
    """Three runs of 'agent' (a 200 ms call to big, not streamed) and three of 'triage';
    their cost recorded at runtime: 100 input and 10 output tokens at $1 and $2 per million
    tokens, $0.00012 a run."""
    p, clock = cap.provider, cap.clock
    cap.processor.prices = {"big": Price(input_per_mtok=1.0, output_per_mtok=2.0)}
    for workflow in ("agent", "triage"):
        for _ in range(3):
            with chainlat.workflow(workflow, tracer_provider=p):
                clock.advance(1)
                with chainlat.inference("big", tracer_provider=p) as call:
                    clock.advance(200)
                    call.record_usage(100, 10)
                clock.advance(1)
    file = tmp_path / "traces.jsonl"
    file.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    (tmp_path / "profiles.toml").write_text(PROFILES)
    return file


def _run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


# The call streamed nothing: its ttft cannot be judged. The total is kept before and after.
UNJUDGED = '[workflows.agent]\ntotal = "1s"\n[workflows.agent.steps."chat big"]\nttft = "1s"\n'


def test_a_limit_not_judged_fails_whatif_as_it_fails_check(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = traces.parent / "chainlat.toml"
    budgets.write_text(UNJUDGED)
    summary = "FAILED: 0 of 2 limits broken, 1 not judged"
    code, out, err = _run(capsys, "check", traces, "--budgets", budgets, "--workflow", "agent")
    assert (code, out.rstrip("\n").splitlines()[-1]) == (2, summary)
    whatif: list[str | Path] = ["whatif", traces, "--workflow", "agent", "--budgets", budgets]
    whatif += ["--profiles", traces.parent / "profiles.toml", "--prompt-scale", "chat big=0.5"]
    code, out, err = _run(capsys, *whatif)
    assert code == 2
    assert f"budget, recorded runs: {summary}" in out
    assert f"budget, estimated runs: {summary}" in out
    assert "NOT JUDGED: workflows.agent.steps.\"chat big\".ttft: no run of 'agent'" in out
    (line,) = err.splitlines()
    assert line.startswith(f"chainlat: {budgets}: workflows.agent.steps.")
    code, out, _ = _run(capsys, *whatif, "--format", "json")
    document = json.loads(out)
    assert code == 2
    assert document["budget_ok_after"] is False
    after = document["budget_after"]
    assert (after["exit_code"], after["summary"], after["broken"]) == (2, summary, [])
    assert [v["reason"] for v in after["not_judged"]] == ["no_data"]
    code, out, err = _run(capsys, *whatif, "--allow-unjudged")
    assert (code, err) == (0, "")
    assert "budget, estimated runs: OK: 1 of 2 limits judged and kept, 1 not judged" in out


def test_the_recorded_cost_judges_the_recorded_runs_as_check_judges_it(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = traces.parent / "chainlat.toml"
    budgets.write_text('[workflows.agent]\ncost = "0.001"\n')
    code, out, _ = _run(capsys, "check", traces, "--budgets", budgets, "--workflow", "agent")
    assert (code, out.rstrip("\n").splitlines()[-1]) == (0, "OK: all 1 limit judged and kept")
    whatif: list[str | Path] = ["whatif", traces, "--workflow", "agent", "--budgets", budgets]
    whatif += ["--profiles", traces.parent / "profiles.toml", "--swap", "chat big=small"]
    code, out, err = _run(capsys, *whatif)
    assert "budget, recorded runs: OK: all 1 limit judged and kept" in out
    # The estimate calls another model: without prices its cost is not known, not kept.
    assert "budget, estimated runs: FAILED: 0 of 1 limit broken, 1 not judged" in out
    assert code == 2 and "workflows.agent.cost" in err


def test_whatif_judges_only_the_budgets_of_the_workflow_asked_for(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = traces.parent / "chainlat.toml"
    budgets.write_text('[workflows.agent]\ntotal = "1s"\n[workflows.triage]\ntotal = "1s"\n')
    profiles = traces.parent / "profiles.toml"
    whatif: list[str | Path] = ["whatif", traces, "--budgets", budgets, "--profiles", profiles]
    whatif += ["--swap", "chat big=small"]
    code, out, err = _run(capsys, *whatif, "--workflow", "agent")
    assert (code, err) == (0, "")
    assert "budget, estimated runs: OK: all 1 limit judged and kept" in out
    code, _, err = _run(capsys, *whatif, "--workflow", "agent", "--budgets", budgets)
    assert code == 0
    budgets.write_text('[workflows.triage]\ntotal = "1s"\n')
    code, _, err = _run(capsys, *whatif, "--workflow", "agent")
    assert code == 2
    assert err.strip() == (
        f"chainlat: --workflow agent: no budget for it in {budgets} (budgeted: triage)"
    )
