"""A Pipecat turn the caller spoke over (tests/data/foreign/pipecat/bargein-observer.jsonl,
recorded from the interop case ``unwrapped+observer+bargein``): Pipecat ends the turn when
it hears the caller and stops the answer's ``tts`` after, so the step ends past its turn.
That turn is read whole (its late step clipped to it), counted interrupted and left out of
the percentiles, and ``chainlat check`` judges the other turns and says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from chainlat._core.exits import EXIT_OK
from chainlat.cli import main
from chainlat.traces import read_runs
from support.tracegen import DATA_DIR, Spans, spans_rewritten

TRACES = DATA_DIR / "foreign" / "pipecat" / "bargein-observer.jsonl"
SAID = "1 interrupted (barge-in), not in the percentiles"


def _not_interrupted(tmp_path: Path) -> Path:
    """The same traces with the second turn said completed: its tts ended after it."""

    def edit(spans: Spans) -> Spans:
        for span in spans:
            for kv in span.get("attributes", []):
                if kv["key"] == "turn.was_interrupted":
                    kv["value"] = {"boolValue": False}
        return spans

    return spans_rewritten(TRACES, tmp_path / "completed.jsonl", edit)


def test_the_interrupted_turn_is_read_whole_and_said_interrupted() -> None:
    runs = sorted(read_runs([TRACES]), key=lambda r: r.start_ns)
    assert [r.workflow for r in runs] == ["turn"] * 3
    assert [r.incomplete for r in runs] == [None, None, None]
    assert [r.root.attributes.get("turn.was_interrupted") if r.root else None for r in runs] == [
        False,
        True,
        False,
    ]
    cut = runs[1]
    tts = next(s for s in cut.steps if s.name == "tts")
    assert tts.end_ns > cut.end_ns  # as Pipecat wrote it
    # The rollup holds the step to the turn: its critical path is no longer than the turn.
    path_ms = cut.rollup.inference_ms + cut.rollup.tool_ms + cut.rollup.overhead_ms
    assert path_ms == pytest.approx((cut.end_ns - cut.start_ns) / 1e6, abs=1e-3)


def test_a_step_past_a_turn_that_was_not_interrupted_still_loses_the_run(tmp_path: Path) -> None:
    runs = sorted(read_runs([_not_interrupted(tmp_path)]), key=lambda r: r.start_ns)
    assert runs[1].incomplete is not None and "`tts` ended after its workflow" in runs[1].incomplete


def test_check_judges_the_other_turns_and_says_one_was_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows.turn]\nfirst_output = "10s"\np95 = { first_output = "10s" }\n')
    assert main(["check", str(TRACES), "--budgets", str(budgets)]) == EXIT_OK
    out = " ".join(capsys.readouterr().out.split())
    assert SAID in out
    assert "not judged" not in out
