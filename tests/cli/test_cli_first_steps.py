"""A new user's first commands: ``make demo`` leaves ``report --html`` working, the errors
read as written, and nothing says OK on a run that exits 2."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from chainlat._core.exits import EXIT_INPUT
from chainlat.testing import Capture
from support.cli import run, write_variant_runs

REPO = Path(__file__).resolve().parents[2]


def _requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0].lower() for r in requirements}


def test_the_demo_extra_brings_what_report_html_needs() -> None:
    """``make demo`` installs ``.[demo]`` only: it must hold the ``html`` extra, or the
    README's next command, ``report --html``, fails with ``--html needs plotly``."""
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert _requirement_names(extras["html"]) <= _requirement_names(extras["demo"])
    readme = (REPO / "README.md").read_text()
    assert "chainlat report chainlat-traces.jsonl --html" in readme


def test_no_budget_file_in_a_directory_named_session_is_said_as_is(
    tmp_path: Path,
    cap: Capture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The scrubber redacts values after a secret-sounding name, not the words of a message."""
    traces = write_variant_runs(cap, tmp_path / "traces.jsonl")
    (tmp_path / "session").mkdir()
    monkeypatch.chdir(tmp_path / "session")
    code, _out, err = run(capsys, "check", traces)
    assert code == EXIT_INPUT
    assert f"{tmp_path / 'session'}: no budget file found" in err
    assert "REDACTED" not in err


def test_nothing_prints_ok_on_a_run_that_exits_2(
    tmp_path: Path, cap: Capture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Percentiles below ``min_runs`` are not judged: exit 2, and no line says OK."""
    traces = write_variant_runs(cap, tmp_path / "traces.jsonl", runs=3)
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('min_runs = 10\n[workflows.agent]\np95 = "5s"\n')
    for fmt in ("text", "markdown", "json"):
        code, out, _err = run(capsys, "check", traces, "--budgets", budgets, "--format", fmt)
        assert code == EXIT_INPUT
        assert not re.search(r"\bOK\b", out), out


def test_a_diff_with_too_few_runs_to_compare_says_no_ok(
    tmp_path: Path, cap: Capture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three runs a side are below the eight a comparison needs: exit 2, and no OK."""
    traces = write_variant_runs(cap, tmp_path / "traces.jsonl", runs=3, variants=1)
    for fmt in ("text", "markdown"):
        code, out, err = run(capsys, "diff", traces, traces, "--format", fmt)
        assert code == EXIT_INPUT
        assert "nothing to compare" in err
        assert not re.search(r"\bOK\b", out), out
        assert "NOT COMPARED" in out
