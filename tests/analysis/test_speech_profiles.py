"""Speech models in ``chainlat profile`` and ``chainlat whatif --swap``: fitted on the
characters spoken (TTS) or the seconds of audio heard (STT), since they report no tokens."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

import chainlat
from chainlat._core import attributes as attr
from chainlat.analysis.profiles import LatencyProfile, ModelCall, fit_profiles
from chainlat.analysis.speech import fit_speech_profile
from chainlat.analysis.whatif import whatif
from chainlat.testing import Capture
from chainlat.traces import read_runs
from chainlat.traces.sdk import runs_from_spans


def tts_call(
    characters: float, ttft_ms: float, duration_ms: float, env_ms: float = 0.0
) -> ModelCall:
    return ModelCall(
        span_id=int(characters * 1000),
        step="speak",
        model="tts",
        duration_ms=duration_ms,
        ttft_ms=ttft_ms,
        env_ms=env_ms,
        operation=attr.OP_TEXT_TO_SPEECH,
        speech_input=characters,
    )


def test_tts_is_fitted_on_first_audio_and_time_per_character() -> None:
    """First audio 150 ms whatever the length; then 5 ms of synthesis per character."""
    calls = [tts_call(x, 150.0, 150.0 + 5.0 * x) for x in (10, 20, 30, 40)]
    p = fit_speech_profile(calls)
    assert p is not None
    assert (p.speech_input, p.ttft_base_ms, p.ttft_per_speech_input_ms) == (
        "characters",
        150.0,
        0.0,
    )
    assert p.ms_per_speech_input == 5.0
    assert (p.calls, p.ttft_calls, p.speech_input_range) == (4, 4, (10.0, 40.0))
    assert p.speech_ttft_ms(100) == 150.0 and p.speech_service_ms(100) == 650.0


def test_queue_and_network_are_left_out_of_the_first_audio() -> None:
    calls = [tts_call(x, 170.0, 170.0 + 5.0 * x, env_ms=20.0) for x in (10, 20, 30)]
    p = fit_speech_profile(calls)
    assert p is not None and p.ttft_base_ms == 150.0


def test_stt_is_fitted_on_seconds_of_audio() -> None:
    """First word after 100 ms + 20 ms per second heard; then 30 ms per second."""
    calls = [
        ModelCall(
            span_id=n,
            step="transcribe",
            model="stt",
            duration_ms=100.0 + 50.0 * s,
            ttft_ms=100.0 + 20.0 * s,
            operation=attr.OP_SPEECH_TO_TEXT,
            speech_input=s,
        )
        for n, s in enumerate((1.0, 2.0, 3.0, 4.0))
    ]
    p = fit_speech_profile(calls)
    assert p is not None
    assert p.speech_input == "audio_seconds"
    assert p.ttft_base_ms == pytest.approx(100.0)
    assert p.ttft_per_speech_input_ms == pytest.approx(20.0)
    assert p.ms_per_speech_input == pytest.approx(30.0)


def test_calls_not_streamed_are_fitted_as_one_line() -> None:
    calls = [
        ModelCall(
            span_id=n,
            step="speak",
            model="tts",
            duration_ms=200.0 + 4.0 * x,
            operation=attr.OP_TEXT_TO_SPEECH,
            speech_input=x,
        )
        for n, x in enumerate((10.0, 20.0, 30.0))
    ]
    p = fit_speech_profile(calls)
    assert p is not None
    assert p.ttft_base_ms == pytest.approx(200.0)
    assert p.ttft_per_speech_input_ms == pytest.approx(4.0)
    assert p.ms_per_speech_input is None
    assert "no call streamed" in p.note


def test_failed_calls_and_calls_without_an_input_are_not_fitted() -> None:
    bad = ModelCall(1, "speak", "tts", 900.0, ttft_ms=800.0, error=True, speech_input=10.0)
    assert fit_speech_profile([bad]) is None
    assert fit_speech_profile([tts_call(10, 150, 200)]) is not None


def turn(cap: Capture, model: str, ttft: int, after: int) -> None:
    """A model call 0-100, then a TTS call of 20 characters: first audio ``ttft`` ms in."""
    p = cap.provider
    with chainlat.workflow("voice-turn", tracer_provider=p):
        with chainlat.inference("llm", tracer_provider=p):
            cap.clock.advance(100)
        with chainlat.inference(
            model, operation="text_to_speech", user_facing=True, tracer_provider=p
        ) as call:
            call.set_attribute(attr.SPEECH_INPUT_CHARACTERS, 20)
            cap.clock.advance(ttft)
            call.first_token()
            cap.clock.advance(after)


def test_a_swap_to_a_faster_voice_moves_the_first_audio(cap: Capture) -> None:
    """Old voice: 400 ms to first audio + 10 ms/char; new: 150 ms + 5 ms/char. The recorded
    call matches its old profile (residual 1), so the new one is 150 + 100 ms."""
    turn(cap, "tts-hd", 400, 200)
    runs = runs_from_spans(cap.spans())
    profiles = {
        "tts-hd": LatencyProfile(
            ttft_base_ms=400, speech_input="characters", ms_per_speech_input=10
        ),
        "tts-fast": LatencyProfile(
            ttft_base_ms=150, speech_input="characters", ms_per_speech_input=5
        ),
    }
    result = whatif(runs, swap={"text_to_speech tts-hd": "tts-fast"}, profiles=profiles)
    (estimate,) = result.runs
    assert (estimate.before.first_output_ms, estimate.before.total_ms) == (500.0, 700.0)
    assert (estimate.after.first_output_ms, estimate.after.total_ms) == (250.0, 350.0)


def test_the_swap_keeps_the_call_s_own_residual(cap: Capture) -> None:
    """The recorded call took 1.2 times its profile's 600 ms: the new voice's 250 ms too."""
    turn(cap, "tts-hd", 480, 240)
    profiles = {
        "tts-hd": LatencyProfile(
            ttft_base_ms=400, speech_input="characters", ms_per_speech_input=10
        ),
        "tts-fast": LatencyProfile(
            ttft_base_ms=150, speech_input="characters", ms_per_speech_input=5
        ),
    }
    result = whatif(
        runs_from_spans(cap.spans()), swap={"text_to_speech tts-hd": "tts-fast"}, profiles=profiles
    )
    (estimate,) = result.runs
    assert estimate.after.first_output_ms == pytest.approx(100.0 + 150.0 * 1.2)
    assert estimate.after.total_ms == pytest.approx(100.0 + 250.0 * 1.2)


def test_profiles_of_speech_models_are_fitted_from_traced_turns(cap: Capture) -> None:
    for _ in range(3):
        turn(cap, "tts-hd", 400, 200)
    fitted = fit_profiles(runs_from_spans(cap.spans()))
    assert fitted["tts-hd"].speech_input == "characters"
    assert fitted["tts-hd"].ttft_base_ms == 400.0
    assert fitted["tts-hd"].ms_per_speech_input == 10.0


SWAP_TOLERANCE_MS = 60.0
"""The predicted median first audio against the measured one. Measured on this machine,
5 turns per voice: 472 ms predicted against 500 ms run (the swap moves it by ~250 ms)."""


def test_swapping_the_demo_s_hd_voice_for_the_fast_one_predicts_its_first_audio(
    tmp_path: Path,
) -> None:
    """Both voices run against the simulator (``demo --voice``); the fast voice's profile,
    fitted from its turns, swapped into the hd voice's turns, predicts the fast voice's
    measured first audio."""
    traces = tmp_path / "voice.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, "-m", "chainlat.cli", "demo", "--voice", "--requests", "5",
         "--traces-file", str(traces)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    runs = [r for r in read_runs([traces]) if r.workflow == "voice-agent"]
    fast = [r for r in runs if r.variant == "fast-voice"]
    hd = [r for r in runs if r.variant == "hd-voice"]
    profiles = fit_profiles(fast)
    assert profiles["sim-tts"].speech_input == "characters"
    result = whatif(hd, swap={"speak": "sim-tts"}, profiles=profiles)
    before = statistics.median(e.before.first_output_ms or 0.0 for e in result.runs)
    predicted = statistics.median(e.after.first_output_ms or 0.0 for e in result.runs)
    measured = statistics.median(r.first_output_ms or 0.0 for r in fast)
    assert before - measured > 3 * SWAP_TOLERANCE_MS  # the swap has something to predict
    assert predicted == pytest.approx(measured, abs=SWAP_TOLERANCE_MS), (before, predicted)
