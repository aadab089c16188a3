"""A model call whose end the trace does not record: the limits that depend on it are not
judged (``unrecorded_end``), kept or broken; the rest of the run is judged as measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chainlat.cli import main
from chainlat.testing import Capture
from support import streams

BUDGETS = """\
[workflows.agent]
total = "1s"
data = "40ms"
inference = "50ms"
overhead = "1s"
first_output = "200ms"
p95 = { inference = "1s", data = "10ms" }
[workflows.agent.steps."OpenAI.astream_chat"]
max = "1s"
ttft = "100ms"
"""
"""``inference`` (50 ms) is broken by the trace's reading, 60 ms, and ``p95.inference`` kept:
neither is known, the stream having been read for 60 ms more than the trace shows."""

UNRECORDED = {"inference", "overhead", "p95.inference", 'steps."OpenAI.astream_chat".max'}


def _check(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str], *, wire: bool = False
) -> tuple[int, list[dict[str, str]]]:
    for _ in range(5):
        streams.agent_with_stream(cap, wire=wire)
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(BUDGETS)
    code = main(["check", str(path), "--budgets", str(budgets), "--format", "json"])
    verdicts: list[dict[str, str]] = json.loads(capsys.readouterr().out)["verdicts"]
    return code, verdicts


def _outcomes(verdicts: list[dict[str, str]]) -> dict[str, str]:
    """Each limit's status, or its reason when it was not judged."""
    return {v["target"]: v["reason"] or v["status"] for v in verdicts}


def test_limits_on_a_call_whose_end_is_not_recorded_are_not_judged(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, verdicts = _check(cap, tmp_path, capsys)
    assert code == 1  # p95.data, measured and broken
    assert _outcomes(verdicts) == {
        **dict.fromkeys(UNRECORDED, "unrecorded_end"),
        "total": "ok",
        "data": "ok",
        "first_output": "ok",
        "p95.data": "broken",
        'steps."OpenAI.astream_chat".ttft': "ok",
    }


def test_the_why_names_the_call_and_what_times_it(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, verdicts = _check(cap, tmp_path, capsys)
    [inference] = [v for v in verdicts if v["target"] == "inference"]
    assert inference["why"] == (
        "5 of 5 runs: `OpenAI.astream_chat` ended before its own events (a stream handed back "
        "before it was read): its end is not recorded; instrument the HTTP client "
        "(`chainlat.instrument_httpx()`) to time it; --allow-unjudged to pass without it"
    )


def test_the_same_run_timed_at_the_wire_is_judged_whole(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, verdicts = _check(cap, tmp_path, capsys, wire=True)
    outcomes = _outcomes(verdicts)
    assert code == 1
    assert "unrecorded_end" not in outcomes.values()
    assert outcomes["inference"] == "broken"  # 118 ms, measured
    assert outcomes["p95.inference"] == "ok"


def test_allow_unjudged_opts_out_of_unrecorded_ends(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for _ in range(5):
        streams.agent_with_stream(cap)
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(BUDGETS.replace('data = "10ms"', 'data = "1s"'))
    assert main(["check", str(path), "--budgets", str(budgets)]) == 2
    assert main(["check", str(path), "--budgets", str(budgets), "--allow-unjudged"]) == 0
