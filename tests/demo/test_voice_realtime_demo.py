"""``chainlat demo --voice --realtime`` against the simulator on 127.0.0.1: the cascade's
turns and the realtime session's go to the voice traces file as two workflows, each
realtime turn with its ``realtime`` inference and a first output, and the comparison it
prints names both; without websockets the option says so in one line."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from chainlat._core import attributes as attr
from chainlat._core.errors import InputError
from chainlat.demo import main
from chainlat.demo.voice import (
    BUDGET_FILE,
    REALTIME_WORKFLOW,
    TRACES_FILE,
    VARIANTS,
    WORKFLOW,
    budget_toml,
    write_budget,
)
from chainlat.traces import read_runs

TURNS = 2


def test_the_realtime_demo_traces_both_agents_and_prints_them_side_by_side(
    tmp_path: Path,
) -> None:
    # A process of its own, as test_voice_demo.py runs the voice demo: a tracer provider
    # set up globally by an earlier test would otherwise be joined.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_") and k != "CHAINLAT_TRACES_FILE"
    }
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.demo", "--voice", "--realtime", "--requests", str(TURNS)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    runs = list(read_runs([tmp_path / TRACES_FILE]))
    cascade = [r for r in runs if r.workflow == WORKFLOW]
    realtime = [r for r in runs if r.workflow == REALTIME_WORKFLOW]
    assert sorted(r.variant or "" for r in cascade) == sorted([v for v, _ in VARIANTS] * TURNS)
    assert len(realtime) == TURNS
    for run in realtime:
        operations = [
            s.attributes.get(attr.GEN_AI_OPERATION_NAME)
            for s in run.spans
            if s.record.kind == "inference"
        ]
        assert operations == ["realtime"], run.trace_id
        assert run.first_output_ms is not None, run.trace_id
    # The comparison names both agents, turn by turn, and the verdict judges both workflows.
    assert "cascade and realtime" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith("│ 1 ")]
    assert [row.split("│")[2].strip() for row in rows] == [*(v for v, _ in VARIANTS), "realtime"]
    assert f"{REALTIME_WORKFLOW} kept all 1 limits" in done.stdout
    budget = tomllib.loads((tmp_path / BUDGET_FILE).read_text())["workflows"]
    assert budget[WORKFLOW]["first_output"] == budget[REALTIME_WORKFLOW]["first_output"]


def test_the_budget_file_follows_the_option_but_keeps_a_users_edit(tmp_path: Path) -> None:
    path = tmp_path / BUDGET_FILE
    assert write_budget(path) == f"budget written to {path}"
    assert write_budget(path, budget_toml(True)) == f"budget written to {path}"
    assert path.read_text() == budget_toml(True)
    path.write_text("[workflows.voice-agent]\nfirst_output = '1s'\n")
    assert "kept as it is" in write_budget(path, budget_toml(True))


def test_realtime_without_websockets_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "websockets", None)
    with pytest.raises(InputError) as raised:
        main(["--voice", "--realtime"])
    assert str(raised.value) == "--realtime needs websockets: pip install 'chainlat[realtime]'"


def test_realtime_goes_with_voice() -> None:
    with pytest.raises(InputError, match="--realtime goes with --voice"):
        main(["--realtime"])
