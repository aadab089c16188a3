"""Speech models' profiles in a profile file: served by ``chainlat sim --profiles`` as voices.

A file written by ``chainlat profile -o`` from voice runs holds chat models and speech
models side by side; the speech ones (``speech_input`` set) must come out as voices with
the latency their profile says, never as chat models.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chainlat._core.latency import LatencyProfile
from chainlat.sim import ProfileError, VoiceProfile, load_profiles
from chainlat.sim._profiles import read_profiles, voice_from_latency
from support.sim_checks import FITTED_WITH_VOICES


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
    path.write_text(FITTED_WITH_VOICES)
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
