"""``chainlat demo --voice`` on the real clock: the time to first audio and its split, read
back from the traces file, match values computed by hand from the raw spans of each turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chainlat._core import attributes as attr
from chainlat._core.runs import TracedSpan, WorkflowRun
from chainlat.cli import main
from chainlat.demo.voice import VARIANTS, first_audio_split
from chainlat.traces import read_runs

TOLERANCE_MS = 2.0


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


def test_every_turn_of_the_voice_demo_splits_its_first_audio_as_its_spans_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Run as a user runs it, in a process of its own: in this one, a tracer provider set up
    # globally by an earlier test would be joined, and it writes no traces file.
    traces = tmp_path / "voice.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    command = [sys.executable, "-m", "chainlat.cli", "demo", "--voice", "--requests", "3"]
    done = subprocess.run(
        [*command, "--traces-file", str(traces)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    assert "first audio by stage: speech_to_text" in done.stdout
    runs = [r for r in read_runs([traces]) if r.workflow == "voice-agent"]
    assert sorted(r.variant or "" for r in runs) == sorted([v for v, _ in VARIANTS] * 3)
    for run in runs:
        expected = by_hand(run)
        assert run.first_output_ms is not None
        assert run.first_output_ms == pytest.approx(expected.pop("total"), abs=TOLERANCE_MS)
        split = first_audio_split(run)
        assert split.pop("tool") == 0.0
        assert split == pytest.approx(expected, abs=TOLERANCE_MS), run.trace_id
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
