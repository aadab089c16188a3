"""Speech models' profiles in a profile file: served by ``chainlat sim --profiles`` as voices.

A file written by ``chainlat profile -o`` from voice runs holds chat models and speech
models side by side; the speech ones (``speech_input`` set) must come out as voices with
the latency their profile says, never as chat models.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import openai
import pytest

from chainlat._core.latency import LatencyProfile
from chainlat.sim import ProfileError, VoiceProfile, load_profiles
from chainlat.sim._profiles import read_profiles, voice_from_latency

_FILE = """\
[models.fast]
ttft_base_ms = 20
decode_ms_per_token = 1

[models.my-tts]
speech_input = "characters"
ttft_base_ms = 150
ttft_per_speech_input_ms = 0.5
ms_per_speech_input = 10.8333

[models.my-stt]
speech_input = "audio_seconds"
ttft_base_ms = 120
ttft_per_speech_input_ms = 15
ms_per_speech_input = 37.5
"""

_RUN_MAIN = (
    "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from chainlat.sim import main; sys.exit(main(sys.argv[1:]))"
)
STARTUP_S = 60.0
"""Bound on interpreter start, imports and the first line on a loaded machine."""


def test_a_text_to_speech_profile_becomes_a_voice_with_its_timing() -> None:
    profile = LatencyProfile(
        speech_input="characters",
        ttft_base_ms=150.0,
        ttft_per_speech_input_ms=0.5,
        ms_per_speech_input=65.0 / 6.0,
    )
    voice = voice_from_latency("my-tts", profile)
    assert voice.operation == "text_to_speech"
    assert voice.real_time_factor == pytest.approx(6.0)
    # "Hello": 5 characters, 325 ms of audio in 96 ms chunks (4), one every 16 ms,
    # the first at 150 + 5 x 0.5 ms.
    assert voice.chunk_offsets_ms("Hello") == pytest.approx([152.5, 168.5, 184.5, 200.5])


def test_a_speech_to_text_profile_becomes_a_voice_with_its_timing() -> None:
    profile = LatencyProfile(
        speech_input="audio_seconds",
        ttft_base_ms=120.0,
        ttft_per_speech_input_ms=15.0,
        ms_per_speech_input=37.5,
    )
    voice = voice_from_latency("my-stt", profile)
    assert voice.operation == "speech_to_text"
    assert voice.first_word_ms(2.0) == 150.0
    # 37.5 ms per second of audio after the first word, at 2.5 words a second.
    assert voice.ms_per_word == 15.0


def test_without_a_fitted_rest_the_voice_keeps_the_default_pace() -> None:
    tts = voice_from_latency("t", LatencyProfile(speech_input="characters", ttft_base_ms=90.0))
    stt = voice_from_latency("s", LatencyProfile(speech_input="audio_seconds", ttft_base_ms=9.0))
    default_tts = VoiceProfile("t", "text_to_speech")
    default_stt = VoiceProfile("s", "speech_to_text")
    assert (tts.first_byte_ms, tts.real_time_factor) == (90.0, default_tts.real_time_factor)
    assert (stt.first_byte_ms, stt.ms_per_word) == (9.0, default_stt.ms_per_word)


def test_a_profile_file_is_split_into_models_and_voices(tmp_path: Path) -> None:
    path = tmp_path / "fitted.toml"
    path.write_text(_FILE)
    models, voices = read_profiles(path)
    assert [m.name for m in models] == ["fast"]
    assert [(v.name, v.operation) for v in voices] == [
        ("my-tts", "text_to_speech"),
        ("my-stt", "speech_to_text"),
    ]
    assert [m.name for m in load_profiles(path)] == ["fast"]


def test_a_bad_speech_profile_is_one_line_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[models.t]\nspeech_input = "words"\nttft_base_ms = 1\n')
    with pytest.raises(ProfileError, match=r"^.*bad\.toml: models\.t\.speech_input: "):
        read_profiles(path)


def _first_line(process: subprocess.Popen[str], timeout_s: float) -> str:
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    return process.stdout.readline() if ready else ""


def test_chainlat_sim_serves_the_files_speech_models_as_voices(tmp_path: Path) -> None:
    path = tmp_path / "fitted.toml"
    path.write_text(_FILE)
    with subprocess.Popen(
        [sys.executable, "-c", _RUN_MAIN, "--port", "0", "--profiles", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "error"},
    ) as process:
        try:
            line = _first_line(process, STARTUP_S)
            assert line.startswith("chainlat sim: serving http://127.0.0.1:"), line
            assert "(fast, my-tts, my-stt)" in line
            client = openai.OpenAI(
                base_url=line.split()[3] + "/v1", api_key="sk-test", max_retries=0
            )
            start = time.perf_counter()
            with client.audio.speech.with_streaming_response.create(
                model="my-tts", voice="alloy", input="Hello", response_format="pcm"
            ) as response:
                audio = response.read()
            # The first audio byte is due 152.5 ms after the request: a floor, never early.
            assert len(audio) > 0 and time.perf_counter() - start >= 0.1525
            with pytest.raises(openai.NotFoundError, match="my-tts"):
                client.chat.completions.create(
                    model="my-tts", messages=[{"role": "user", "content": "hi"}]
                )
            reply = client.chat.completions.create(
                model="fast", messages=[{"role": "user", "content": "hi"}]
            )
            assert reply.choices[0].message.content
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=STARTUP_S)
