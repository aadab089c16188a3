"""``chainlat demo --voice`` on the real clock: the time to first audio and its split, read
back from the traces file, match values computed by hand from the raw spans of each turn;
its traces and its budget go to files of their own, and the ``check`` it suggests next
judges them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from chainlat._core import attributes as attr
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat.cli import main
from chainlat.demo.voice import (
    BUDGET_FILE,
    BUDGET_TOML,
    TRACES_FILE,
    VARIANTS,
    first_audio_split,
    write_budget,
)
from chainlat.traces import read_runs

TOLERANCE_MS = 2.0
REPOSITORY_BUDGETS = Path(__file__).resolve().parents[2] / "chainlat.toml"


def one(spans: list[TracedSpan]) -> TracedSpan:
    assert len(spans) == 1, [s.record.name for s in spans]
    return spans[0]


def by_hand(run: WorkflowRun) -> dict[str, float]:
    """The first audio and its split, from the spans: end of speech -> STT -> search ->
    the model until TTS of the first sentence starts -> that call's first audio byte."""
    spans = list(run.spans)

    def wire(operation: str) -> list[TracedSpan]:
        return [
            s
            for s in spans
            if s.attributes.get(attr.GEN_AI_OPERATION_NAME) == operation
            and attr.HTTP_REQUEST_METHOD in s.attributes
        ]

    stt = one(wire("speech_to_text")).record
    chat = one(wire("chat")).record
    search = one([s for s in spans if s.record.kind == "data"]).record
    speak = one([s for s in spans if s.attributes.get(attr.USER_FACING) is True]).record
    speak_wire = one([s for s in spans if s.record.parent_id == speak.span_id]).record
    assert speak_wire.ttft_ms is not None
    first_audio = speak_wire.start_ns + speak_wire.ttft_ms * 1e6
    start = run.start_ns
    assert stt.end_ns <= search.start_ns <= search.end_ns <= chat.start_ns < speak.start_ns
    assert speak.start_ns < chat.end_ns  # TTS started while the model still streamed
    ms = 1e6
    return {
        "total": (first_audio - start) / ms,
        "speech_to_text": (stt.end_ns - stt.start_ns) / ms,
        "data": (search.end_ns - search.start_ns) / ms,
        "model": (speak.start_ns - chat.start_ns) / ms,
        "text_to_speech": (first_audio - speak_wire.start_ns) / ms,
        "overhead": (
            (stt.start_ns - start)
            + (search.start_ns - stt.end_ns)
            + (chat.start_ns - search.end_ns)
            + (speak_wire.start_ns - speak.start_ns)
        )
        / ms,
    }


def test_the_demo_writes_its_budget_file_but_never_over_one_that_differs(tmp_path: Path) -> None:
    path = tmp_path / BUDGET_FILE
    assert write_budget(path) == f"budget written to {path}"
    assert write_budget(path).endswith("(the demo's, as written before)")
    path.write_text("[workflows.voice-agent]\nfirst_output = '1s'\n")
    assert "kept as it is" in write_budget(path)
    assert path.read_text() == "[workflows.voice-agent]\nfirst_output = '1s'\n"


def test_every_turn_of_the_voice_demo_splits_its_first_audio_as_its_spans_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run as a user runs it, in a process of its own: in this one, a tracer provider set up
    # globally by an earlier test would be joined, and it writes no traces file. In the
    # working directory: the repository's budget file and the chat demo's traces, which
    # the voice demo leaves as they are.
    shutil.copy(REPOSITORY_BUDGETS, tmp_path / "chainlat.toml")
    chat_traces = tmp_path / "chainlat-traces.jsonl"
    chat_traces.write_text('{"resourceSpans": []}\n')
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("OTEL_") and k != "CHAINLAT_TRACES_FILE"
    }
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "demo", "--voice", "--requests", "3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "first audio by stage: speech_to_text" in done.stdout
    # Its verdict in one line: the fast voice keeps the budget, the hd voice breaks its
    # text-to-speech part on purpose.
    assert (
        "verdict: fast-voice kept all 5 limits; "
        "hd-voice broke 1 of 5 (p95.first_output_text_to_speech)"
    ) in done.stdout
    # The chat demo's traces stay; the voice demo's go beside them.
    assert chat_traces.read_text() == '{"resourceSpans": []}\n'
    traces = tmp_path / TRACES_FILE
    assert (tmp_path / BUDGET_FILE).read_text() == BUDGET_TOML
    assert f"budget written to {BUDGET_FILE}" in done.stdout
    (hint,) = [line for line in done.stdout.splitlines() if line.startswith("traces written")]
    suggested = shlex.split(hint.partition("next: ")[2])
    assert suggested == ["chainlat", "check", TRACES_FILE, "--budgets", BUDGET_FILE]
    runs = [r for r in read_runs([traces]) if r.workflow == "voice-agent"]
    assert sorted(r.variant or "" for r in runs) == sorted([v for v, _ in VARIANTS] * 3)
    for run in runs:
        expected = by_hand(run)
        assert run.first_output_ms is not None
        assert run.first_output_ms == pytest.approx(expected.pop("total"), abs=TOLERANCE_MS)
        split = first_audio_split(run)
        assert split.pop("tool") == 0.0
        assert split == pytest.approx(expected, abs=TOLERANCE_MS), run.trace_id
    # The check it suggests, run where it ran: the hd voice's limit broken, exit 1.
    monkeypatch.chdir(tmp_path)
    assert main(suggested[1:]) == 1
    checked = capsys.readouterr().out
    assert "BROKEN: workflows.voice-agent.p95.first_output_text_to_speech" in checked
    assert "FAILED: 1 of 5 limits broken, 0 not judged" in checked
    assert main([*suggested[1:], "--variant", "fast-voice"]) == 0
    assert "OK: all 5 limits judged and kept" in capsys.readouterr().out
    # report --format json on the demo's traces holds the same split, part by part.
    assert main(["report", str(traces), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    held = document["workflows"]["voice-agent"]["first_output_split"]
    for part in ("speech_to_text", "model", "text_to_speech", "data", "tool", "overhead"):
        values = sorted(first_audio_split(run)[part] for run in runs)
        assert held[part]["count"] == len(runs)
        assert held[part]["max_ms"] == pytest.approx(values[-1]), part
        assert held[part]["p50_ms"] == pytest.approx(values[len(values) // 2 - 1]), part
    assert held["end_of_turn"]["count"] == 0
