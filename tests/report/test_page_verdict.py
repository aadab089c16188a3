"""The HTML page's budget verdict is ``check``'s: the limits over the set of runs
(percentiles) included, which the explorer's budget column, one run at a time, cannot show."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

import chainlat
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.testing import Capture
from support.voice import voice_turn

# Every turn's text to speech takes 120 ms to its first audio (tests/support/voice.py): the
# p95 of 100 ms is broken, while no single run breaks the per-run limits.
_BUDGET = """\
[workflows.voice-turn]
total = "5s"
first_output = "2s"

[workflows.voice-turn.p95]
first_output = "1.5s"
first_output_text_to_speech = "{tts}"
"""


def _files(cap: Capture, tmp_path: Path, tts: str) -> tuple[Path, Path]:
    for stt_ms in (100, 120, 140, 160):
        voice_turn(cap, stt_ms=stt_ms)
    traces = tmp_path / "voice.jsonl"
    traces.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    budgets = tmp_path / "budget.toml"
    budgets.write_text(_BUDGET.format(tts=tts))
    return traces, budgets


def _document(page: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="chainlat-runs">(.*?)</script>', page)
    assert found is not None
    document: dict[str, object] = json.loads(found.group(1))
    return document


def _summary(page: str) -> str:
    found = re.search(r'id="cl-budget-summary">(.*?)</span>', page)
    assert found is not None
    return html.unescape(found.group(1))


def test_the_page_says_the_p95_limit_check_fails_on_is_broken(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, budgets = _files(cap, tmp_path, "100ms")
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 1
    checked = capsys.readouterr().out
    assert "BROKEN: workflows.voice-turn.p95.first_output_text_to_speech" in checked
    page_path = tmp_path / "page.html"
    args = ["report", str(traces), "--budgets", str(budgets), "--html", str(page_path)]
    assert main([*args, "--format", "json"]) == 0
    page = page_path.read_text()
    summary = _summary(page)
    assert summary == "FAILED: 1 of 4 limits broken, 0 not judged"
    assert summary in checked  # check's own summary line
    assert "with this file exits 1" in page
    row = re.search(r'<tr data-key="[^"]*p95\.first_output_text_to_speech" data-status="(\w+)">'
                    r"(.*?)</tr>", page)  # fmt: skip
    assert row is not None and row.group(1) == "broken"
    assert "BROKEN" in row.group(2) and "120.0 ms" in row.group(2) and "100 ms" in row.group(2)
    assert "<li>BROKEN: workflows.voice-turn.p95.first_output_text_to_speech</li>" in page
    # Each run kept its per-run limits; its workflow's set of runs broke one (D.set).
    document = _document(page)
    runs = document["runs"]
    assert isinstance(runs, dict) and runs["verdict"] == [0, 0, 0, 0]
    strings = document["strings"]
    assert isinstance(strings, list)
    assert document["set"] == {str(strings.index("voice-turn")): [1, 0]}


def test_the_page_says_ok_when_check_keeps_every_limit(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, budgets = _files(cap, tmp_path, "200ms")
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 0
    page_path = tmp_path / "page.html"
    args = ["report", str(traces), "--budgets", str(budgets), "--html", str(page_path)]
    assert main([*args, "--format", "json"]) == 0
    page = page_path.read_text()
    assert _summary(page) == "OK: all 4 limits judged and kept"
    assert "with this file exits 0" in page
    assert _document(page)["set"] == {}


def test_the_page_judges_a_workflow_no_run_has_as_check_does(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A budgeted workflow with no run fails check (exit 2): the page says so too."""
    traces, budgets = _files(cap, tmp_path, "200ms")
    budgets.write_text(budgets.read_text() + '\n[workflows.other]\ntotal = "1s"\n')
    assert main(["check", str(traces), "--budgets", str(budgets)]) == 2
    page_path = tmp_path / "page.html"
    args = ["report", str(traces), "--budgets", str(budgets), "--html", str(page_path)]
    assert main([*args, "--format", "json"]) == 0
    page = page_path.read_text()
    assert _summary(page) == "FAILED: 0 of 5 limits broken, 1 not judged"
    assert "with this file exits 2" in page
    assert "NOT JUDGED: workflows.other:" in html.unescape(page)


def test_the_compare_page_shows_the_same_verdict(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces, budgets = _files(cap, tmp_path, "100ms")
    page_path = tmp_path / "compare.html"
    args = ["compare", str(traces), "--budgets", str(budgets), "--html", str(page_path)]
    assert main([*args, "--format", "json"]) == 0
    assert _summary(page_path.read_text()) == "FAILED: 1 of 4 limits broken, 0 not judged"


def test_a_page_without_a_budget_file_has_no_verdict(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    traces, _ = _files(cap, tmp_path, "100ms")
    monkeypatch.chdir(tmp_path / "..")  # no budget file found in the working directory
    page_path = tmp_path / "page.html"
    assert main(["report", str(traces), "--html", str(page_path), "--format", "json"]) == 0
    page = page_path.read_text()
    assert 'id="cl-budget"' not in page and "set" not in _document(page)


def test_the_page_judges_the_workflows_workflow_names_as_check_does(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--workflow leaves the other budgets out of the page's verdict, as out of check's; a
    workflow no budget names leaves the page without a verdict."""
    traces, budgets = _files(cap, tmp_path, "100ms")
    budgets.write_text(budgets.read_text() + '\n[workflows.other]\ntotal = "1s"\n')
    chosen = ["--workflow", "voice-turn"]
    assert main(["check", str(traces), "--budgets", str(budgets), *chosen]) == 1
    page_path = tmp_path / "page.html"
    args = ["report", str(traces), "--budgets", str(budgets), "--html", str(page_path)]
    assert main([*args, *chosen, "--format", "json"]) == 0
    assert _summary(page_path.read_text()) == "FAILED: 1 of 4 limits broken, 0 not judged"
    cap.clear()
    with chainlat.workflow("unbudgeted", tracer_provider=cap.provider):
        cap.clock.advance(5)
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps(encode_request(cap.spans())) + "\n")
    args = ["report", str(other), "--budgets", str(budgets), "--html", str(page_path)]
    assert main([*args, "--workflow", "unbudgeted", "--format", "json"]) == 0
    assert 'id="cl-budget"' not in page_path.read_text()
