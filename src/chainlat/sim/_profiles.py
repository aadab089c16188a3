"""Model profiles for the simulator: the latency model's parameters and the files they come from.

Public names are re-exported by `chainlat.sim`, which documents the latency model.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from chainlat._core import latency
from chainlat._core.errors import ProfileError
from chainlat.sim._audio import VoiceProfile


@dataclass(frozen=True)
class ModelProfile:
    """How long one simulated model takes.

    Example:
        >>> p = ModelProfile("fast", ttft_base_ms=100, decode_ms_per_token=10, output_tokens=5)
        >>> p.latency_ms(input_tokens=0)
        140.0

    Attributes:
        name: Model name clients ask for (``"model"`` in the request).
        ttft_base_ms: Prefill time for an empty prompt.
        ttft_per_input_token_ms: Extra prefill time per input token.
        decode_ms_per_token: Time per output token after the first.
        output_tokens: Tokens in every answer, unless the request's ``max_tokens`` is lower.
        slots: Requests the model works on at once; more wait in a FIFO queue.
        jitter: Sigma of the log-normal factor on prefill and decode; 0 for none.
    """

    name: str
    ttft_base_ms: float = 100.0
    ttft_per_input_token_ms: float = 0.0
    decode_ms_per_token: float = 10.0
    output_tokens: int = 16
    slots: int = 4
    jitter: float = 0.0

    def __post_init__(self) -> None:
        for key, problem in _profile_problems(vars(self)):
            raise ProfileError(f"ModelProfile {self.name!r}: {key}: {problem}")

    def ttft_ms(self, input_tokens: int) -> float:
        """Nominal time to first token (prefill), without queueing, network or jitter."""
        return self.ttft_base_ms + self.ttft_per_input_token_ms * input_tokens

    def latency_ms(self, input_tokens: int, output_tokens: int | None = None) -> float:
        """Nominal time to the last token, without queueing, network or jitter."""
        n = self.output_tokens if output_tokens is None else min(output_tokens, self.output_tokens)
        return self.ttft_ms(input_tokens) + self.decode_ms_per_token * max(n - 1, 0)


def _profile_problems(values: Mapping[str, object]) -> Iterable[tuple[str, str]]:
    """(key, problem) for each bad value of a profile's fields."""
    name = values["name"]
    if not isinstance(name, str) or not name or "/" in name:
        yield "name", f"expected a non-empty string without '/', got {name!r}"
    for key, value in values.items():
        if key == "name":
            continue
        if key in ("output_tokens", "slots"):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                yield key, f"expected an integer >= 1, got {value!r}"
        elif (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value < 0
        ):
            yield key, f"expected a number >= 0, got {value!r}"


_DEFAULT: Final = ModelProfile("default")

DEFAULT_PROFILES: tuple[ModelProfile, ...] = (
    ModelProfile(
        "sim-large",
        ttft_base_ms=350.0,
        ttft_per_input_token_ms=0.25,
        decode_ms_per_token=10.0,
        output_tokens=41,
        slots=4,
        jitter=0.1,
    ),
    ModelProfile(
        "sim-small",
        ttft_base_ms=90.0,
        ttft_per_input_token_ms=0.1,
        decode_ms_per_token=3.5,
        output_tokens=41,
        slots=16,
        jitter=0.1,
    ),
    ModelProfile(
        "sim-embed",
        ttft_base_ms=15.0,
        ttft_per_input_token_ms=0.02,
        decode_ms_per_token=0.0,
        output_tokens=1,
        slots=32,
        jitter=0.1,
    ),
)
"""``sim-large`` (~800 ms), ``sim-small`` (~250 ms), ``sim-embed`` (~19 ms) at 200 input tokens."""


def load_profiles(path: str | os.PathLike[str]) -> list[ModelProfile]:
    """Read model profiles from a TOML or JSON profile file, hand-written or fitted.

    The file is the one latency-profile format (:mod:`chainlat._core.latency`): a
    ``models`` table keyed by name (or an array of tables with ``name``). A file
    written by ``chainlat profile -o`` serves as it is: keys left out take the
    `ModelProfile` defaults, a fitted profile's ``residual_sigma`` becomes the
    jitter and the top of its output-token range the answer length. Speech models'
    profiles (with ``speech_input``) are not models: ``chainlat sim --profiles`` serves
    them as voices (`VoiceProfile`).

    Example:
        >>> # sim.toml:  [models.fast]
        >>> #            ttft_base_ms = 120
        >>> profiles = load_profiles("sim.toml")  # doctest: +SKIP

    Raises:
        ProfileError: The file cannot be read or parsed, or a value is wrong; the message
            names the file and the key, e.g. ``sim.toml: models.fast.slots: must be at
            least 1, got 0``.
    """
    return read_profiles(path)[0]


def read_profiles(path: str | os.PathLike[str]) -> tuple[list[ModelProfile], list[VoiceProfile]]:
    """The models and the speech models (profiles with ``speech_input``) of a profile file."""
    models: list[ModelProfile] = []
    voices: list[VoiceProfile] = []
    for name, profile in latency.load_profiles(path).items():
        if profile.speech_input is None:
            models.append(from_latency(name, profile))
        else:
            voices.append(voice_from_latency(name, profile))
    return models, voices


def voice_from_latency(name: str, profile: latency.LatencyProfile) -> VoiceProfile:
    """The simulator's voice for a speech model's latency profile.

    Text to speech: the first audio byte at ``ttft_base_ms`` plus
    ``ttft_per_speech_input_ms`` per character, then audio at the real-time factor that
    makes ``ms_per_speech_input`` per character. Speech to text: the first word at
    ``ttft_base_ms`` plus ``ttft_per_speech_input_ms`` per second of audio, then words
    that take ``ms_per_speech_input`` per second of audio in all.
    """
    if profile.speech_input == "characters":
        voice = VoiceProfile(name, "text_to_speech")
        rest = profile.ms_per_speech_input
        factor = (
            voice.real_time_factor if rest is None else voice.ms_per_character / max(rest, 1e-3)
        )
        return VoiceProfile(
            name,
            "text_to_speech",
            first_byte_ms=profile.ttft_base_ms,
            first_byte_ms_per_character=profile.ttft_per_speech_input_ms,
            real_time_factor=factor,
        )
    voice = VoiceProfile(name, "speech_to_text")
    rest = profile.ms_per_speech_input
    return VoiceProfile(
        name,
        "speech_to_text",
        first_byte_ms=profile.ttft_base_ms,
        ms_per_audio_second=profile.ttft_per_speech_input_ms,
        ms_per_word=voice.ms_per_word if rest is None else rest / voice.words_per_second,
    )


def from_latency(name: str, profile: latency.LatencyProfile) -> ModelProfile:
    """The simulator's view of a latency profile."""
    output_tokens = profile.output_tokens
    if output_tokens is None:
        fitted = profile.output_tokens_range
        output_tokens = max(fitted[1], 1) if fitted is not None else _DEFAULT.output_tokens
    jitter = profile.jitter if profile.jitter is not None else profile.residual_sigma
    return ModelProfile(
        name,
        ttft_base_ms=profile.ttft_base_ms,
        ttft_per_input_token_ms=profile.ttft_per_input_token_ms,
        decode_ms_per_token=profile.decode_ms_per_token or 0.0,
        output_tokens=output_tokens,
        slots=profile.slots if profile.slots is not None else _DEFAULT.slots,
        jitter=jitter or 0.0,
    )
