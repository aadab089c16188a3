"""Fixtures of the chainlat.sim tests; plain helpers live in tests/support/sim_checks.py.

sim_options  SimOptions     PROFILE (``sim-test``) and the default profiles, with a
                            NETWORK_MS network delay: what ``sim`` serves in tests/sim
                            (a module that wants another server overrides it)
client       openai.OpenAI  an OpenAI client of ``sim``, its first call already made
fast_sim     SimServer      a server that answers at once: chat model ``fast-chat``, voices
                            ``fast-tts`` and ``fast-stt`` (for tests of what is answered,
                            not when)
"""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from chainlat.sim import DEFAULT_PROFILES, ModelProfile, SimServer, VoiceProfile
from support import SimOptions, StartSim
from support.sim_checks import NETWORK_MS, PROFILE


@pytest.fixture
def sim_options() -> SimOptions:
    """PROFILE and the default profiles, behind a NETWORK_MS network delay."""
    return SimOptions(profiles=[PROFILE, *DEFAULT_PROFILES], network_delay_ms=NETWORK_MS)


@pytest.fixture
def client(sim: SimServer) -> Iterator[openai.OpenAI]:
    """An OpenAI client of ``sim``, without retries, its first call already made."""
    with openai.OpenAI(base_url=sim.base_url + "/v1", api_key="sk-test", max_retries=0) as c:
        # The first call pays for connection set-up and lazy SDK imports; keep it out
        # of the measurements.
        c.models.list()
        yield c


@pytest.fixture
def fast_sim(start_sim: StartSim) -> SimServer:
    """A server whose models answer at once: ``fast-chat``, ``fast-tts`` and ``fast-stt``."""
    chat = ModelProfile("fast-chat", ttft_base_ms=0.0, decode_ms_per_token=0.0, output_tokens=2)
    voices = [
        VoiceProfile("fast-tts", "text_to_speech", first_byte_ms=0.0, real_time_factor=1e6),
        VoiceProfile(
            "fast-stt",
            "speech_to_text",
            first_byte_ms=0.0,
            ms_per_audio_second=0.0,
            ms_per_word=0.0,
        ),
    ]
    return start_sim(profiles=[chat], voices=voices)
