"""The new user's first minutes: ``make demo`` installs only what the demo needs, each run
writes a fresh traces file (keeping the last one), and the README's next command,
``chainlat check chainlat-traces.jsonl``, judges it against the shipped budget file."""

from __future__ import annotations

import calendar
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chainlat.demo import keep_previous

REPO = Path(__file__).resolve().parent.parent


def test_make_demo_installs_the_demo_extra_only(tmp_path: Path) -> None:
    """``make -n``: the commands ``make demo`` would run in a fresh checkout."""
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "demo", f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=_outside_make(),
    )
    assert done.returncode == 0, done.stderr
    installs = [line for line in done.stdout.splitlines() if "pip install" in line and "-e" in line]
    assert installs == [f"{tmp_path / 'venv'}/bin/python -m pip install --quiet -e '.[demo]'"]
    assert done.stdout.splitlines()[-1] == f"{tmp_path / 'venv'}/bin/chainlat demo"
    # `make test` still installs everything.
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", "unit", f"VENV={tmp_path / 'venv'}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env=_outside_make(),
    )
    assert "-e '.[dev]'" in done.stdout


def test_the_previous_traces_are_kept_under_the_time_they_were_written(tmp_path: Path) -> None:
    path = tmp_path / "chainlat-traces.jsonl"
    assert keep_previous(path) is None  # nothing there
    path.write_text("")
    assert keep_previous(path) is None  # nothing to keep
    assert path.exists()
    written = calendar.timegm((2026, 12, 3, 12, 15, 0, 0, 0, 0))
    for expected in ("20261203T121500Z", "20261203T121500Z-1", "20261203T121500Z-2"):
        path.write_text(f'{{"run": "{expected}"}}\n')
        os.utime(path, (written, written))
        kept = keep_previous(path)
        assert kept == tmp_path / f"chainlat-traces.{expected}.jsonl"
        assert kept.read_text() == f'{{"run": "{expected}"}}\n'
        assert not path.exists()
    other = tmp_path / "traces.out"
    other.write_text("x\n")
    os.utime(other, (written, written))
    assert keep_previous(other) == tmp_path / "traces.out.20261203T121500Z"


def test_readme_quick_start_runs_as_written(tmp_path: Path) -> None:
    """The README's commands after ``make demo``, in a directory holding the repo's budget
    file and a traces file from an earlier demo: the demo starts a fresh file and says
    where the old one went; ``chainlat check chainlat-traces.jsonl`` judges every limit of
    the shipped budget file and exits by the verdict."""
    readme = (REPO / "README.md").read_text()
    assert "make demo" in readme
    assert ".venv/bin/chainlat check chainlat-traces.jsonl" in readme
    shutil.copy(REPO / "chainlat.toml", tmp_path / "chainlat.toml")
    old = tmp_path / "chainlat-traces.jsonl"
    old.write_text('{"resourceSpans": []}\n')
    written = calendar.timegm((2026, 1, 2, 3, 4, 5, 0, 0, 0))
    os.utime(old, (written, written))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CHAINLAT_TRACES"))}
    demo = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "demo", "--requests", "4", "--concurrency", "2"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr
    kept = tmp_path / "chainlat-traces.20260102T030405Z.jsonl"
    assert kept.read_text() == '{"resourceSpans": []}\n'
    assert "the previous traces are kept in chainlat-traces.20260102T030405Z.jsonl" in (demo.stdout)
    assert '{"resourceSpans": []}' not in old.read_text()  # a fresh file
    check = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "check", "chainlat-traces.jsonl", "--format=json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert check.stderr == ""
    verdicts = json.loads(check.stdout)["verdicts"]
    # Every limit of the shipped file names something the demo runs: all judged.
    assert {v["status"] for v in verdicts} <= {"ok", "broken"}
    assert len(verdicts) == 11
    assert json.loads(check.stdout)["workflows"]["support-agent"]["runs"] == 8
    broken = any(v["status"] == "broken" for v in verdicts)
    assert check.returncode == (1 if broken else 0)


def _outside_make() -> dict[str, str]:
    """The environment without the variables a calling ``make test`` exports to children."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
