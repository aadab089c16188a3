"""The voice cases of the interop matrix (tests/interop/voice/, README.md there).

A real Pipecat cascade (its OpenAI-compatible STT, LLM and TTS services) runs against
``chainlat sim`` with its own tracing on; chainlat reads its turns, stages, tokens and
first audio and must agree with Pipecat's ``metrics.ttfb`` and
``turn.user_bot_latency_seconds`` within the stated tolerances. Its environment is built
from PyPI the first time (``requirements/pipecat.txt``), like every stack's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).parent / "interop" / "voice" / "run.py"


def _cases_right(tmp_path: Path, args: list[str], cases: set[str], timeout_s: int) -> None:
    """Run ``run.py`` with ``args``: every case in ``cases`` judged, none wrong. A set-up
    that cannot be made (exit 2) fails with its last lines."""
    if os.environ.get("CHAINLAT_INTEROP") == "0":
        pytest.skip("CHAINLAT_INTEROP=0: the interop matrix is turned off")
    done = subprocess.run(
        [sys.executable, str(RUN), *args, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode == 2:
        pytest.fail(done.stderr.strip()[-300:], pytrace=False)
    summary = json.loads((tmp_path / "voice-summary.json").read_text())
    assert set(summary["cases"]) == cases
    bad = [line for line in done.stdout.splitlines() if "WRONG" in line]
    assert not bad, "\n".join(bad)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.interop
def test_pipecat_turns_are_read_as_pipecat_measures_them(tmp_path: Path) -> None:
    """All six cases right (Pipecat alone or wrapped in a chainlat.workflow per turn, each
    with and without instrument_httpx; with chainlat's observer and a function call, and
    the same with the caller speaking over the second answer): turns, stages, tokens, time
    to first byte, first audio and the tool; the interrupted turn left out and said so."""
    cases = {
        "unwrapped",
        "unwrapped+httpx",
        "wrapped",
        "wrapped+httpx",
        "unwrapped+observer",
        "unwrapped+observer+bargein",
    }
    _cases_right(tmp_path, [], cases, timeout_s=1800)


@pytest.mark.interop
def test_livekit_voice_turns_are_read_as_the_caller_hears_them(tmp_path: Path) -> None:
    """A LiveKit Agents session in voice mode with no media server (livekit_agent.py), three
    cases right (turns, a tool, a barge-in): each turn's start and first output within 10 ms
    of the agent's truth, the tool's time its body's, the interrupted turn left out of the
    percentiles and said so, lk.e2e_latency agreeing."""
    _cases_right(tmp_path, ["--stack", "livekit"], {"turns", "tool", "bargein"}, timeout_s=1800)


@pytest.mark.interop
def test_livekit_realtime_turns_are_read_as_the_caller_hears_them(tmp_path: Path) -> None:
    """A LiveKit Agents session on the sim's Realtime API (livekit_realtime_agent.py): each
    turn one realtime inference, its first output within 10 ms of the first frame at the
    output; with a local VAD the turn's start and first output within 10 ms of the truth;
    with the server's VAD alone each turn says its start is no end of the words (rule 16)."""
    _cases_right(
        tmp_path, ["--stack", "livekit-realtime"], {"local-vad", "server-vad"}, timeout_s=900
    )


@pytest.mark.interop
def test_pipecat_realtime_turns_are_read_as_the_caller_hears_them(tmp_path: Path) -> None:
    """A Pipecat pipeline on the sim's Realtime API (pipecat_realtime_agent.py, Pipecat's
    OpenAIRealtimeLLMService, chainlat's observer on the task): each turn starts at the end
    of the words and its first output is within 10 ms of the first frame at the output,
    turn.user_bot_latency_seconds agreeing, the response's tokens Pipecat's, the first
    output's split (end of turn, model, tool, the rest) summing to it; with a function the
    model calls in every turn, each call a tool step holding its body and each answer that
    called one a model step of its own with no first token; with the server's turn
    detection (the service's default, no VAD in the pipeline), the end of the words read
    from the server's speech_stopped, which the service hands on without it; with its
    semantic_vad, the start said to be no known end of the words."""
    cases = {"local-vad", "local-vad+tool", "server-vad", "semantic-vad"}
    _cases_right(tmp_path, ["--stack", "pipecat-realtime"], cases, timeout_s=900)


def test_a_turns_recorded_rollup_must_be_the_turn_read_back() -> None:
    """``live_differs``: a wrapped turn's rollup, recorded as its workflow ended, against
    the turn read back from the file (counts and tokens exactly, times to 0.01 ms)."""
    import importlib.util
    from dataclasses import replace
    from types import SimpleNamespace

    from chainlat._core.rollup import Rollup

    spec = importlib.util.spec_from_file_location("chainlat_voice_run", RUN)
    assert spec is not None and spec.loader is not None
    voice = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = voice  # its dataclasses look their module up
    spec.loader.exec_module(voice)
    read = Rollup(
        total_ms=900.0,
        inference_ms=850.0,
        data_ms=0.0,
        tool_ms=0.0,
        overhead_ms=50.0,
        inference_count=3,
        input_tokens=40,
        output_tokens=12,
        first_output_ms=620.0,
        first_output_speech_to_text_ms=200.0,
        first_output_text_to_speech_ms=180.0,
        first_output_inference_ms=200.0,
        first_output_overhead_ms=40.0,
    )

    def turn(live: Rollup | None) -> SimpleNamespace:
        attributes = {} if live is None else live.to_attributes()
        return SimpleNamespace(root=SimpleNamespace(attributes=attributes), rollup=read)

    assert voice.live_differs(turn(None)) == []
    assert voice.live_differs(turn(read)) == []
    assert voice.live_differs(turn(replace(read, first_output_ms=620.004))) == []
    no_output = replace(
        read,
        first_output_ms=None,
        first_output_speech_to_text_ms=None,
        first_output_text_to_speech_ms=None,
        first_output_inference_ms=None,
        first_output_overhead_ms=None,
    )
    assert voice.live_differs(turn(no_output)) == [
        "live first_output_ms None, read 620.0",
        "live first_output_speech_to_text_ms None, read 200.0",
        "live first_output_text_to_speech_ms None, read 180.0",
        "live first_output_inference_ms None, read 200.0",
        "live first_output_tool_ms None, read 0.0",
        "live first_output_overhead_ms None, read 40.0",
    ]
    assert voice.live_differs(
        turn(replace(read, inference_count=2, first_output_text_to_speech_ms=150.0))
    ) == ["live inference_count 2, read 3", "live first_output_text_to_speech_ms 150.0, read 180.0"]
