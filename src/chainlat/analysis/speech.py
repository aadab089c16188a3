"""Latency profiles of speech models: fitted on what a speech call has in place of tokens.

A speech call reports no tokens to fit (a text-to-speech answer is audio, a transcription
is often billed by the second), so a speech model is fitted against its *speech input*:
the characters spoken for text to speech (``chainlat.speech.input_characters``), the
seconds of audio heard for speech to text (``chainlat.audio.input_seconds``)::

    first audio byte / transcript word = ttft_base_ms + ttft_per_speech_input_ms * input
    duration                           = that + ms_per_speech_input * input

Over a model's streamed calls (failed calls and cache hits left out): a least-squares line
of the time to the first output (less queue, connect and network) against the input gives
``ttft_base_ms`` and ``ttft_per_speech_input_ms``; the slope is set to 0 when it is
negative or within three standard errors of 0, as for tokens (a voice's first audio byte
does not depend on the length of the sentence); ``ms_per_speech_input`` is the slope,
through the origin, of the time after the first output against the input (for text to
speech: the audio's length per character over the voice's real-time factor). Calls that
did not stream are fitted as one line of their service time.

Example::

    profiles = fit_profiles(runs)            # speech models included
    profiles["sim-tts"].speech_ttft_ms(120)  # the first audio byte of 120 characters
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, Literal

from chainlat._core import attributes as attr
from chainlat._core import conventions
from chainlat._core.latency import LatencyProfile
from chainlat.analysis.fitting import fit_line, rounded

if TYPE_CHECKING:
    from chainlat.analysis.profiles import ModelCall

__all__ = ["fit_speech_profile", "speech_input_of"]

_OPERATIONS: Final = frozenset(attr.SPEECH_OPERATIONS)


def speech_input_of(
    attributes: Iterable[Mapping[str, object]],
) -> tuple[str | None, float | None]:
    """The speech operation and input of a call's spans (outer first), or (None, None)."""
    spans = list(attributes)
    operation = next(
        (op for a in spans if (op := a.get(attr.GEN_AI_OPERATION_NAME)) in _OPERATIONS), None
    )
    if not isinstance(operation, str):
        return None, None
    amounts = (conventions.speech_input_of(a) for a in spans)
    return operation, next((x for x in amounts if x is not None), None)


def _share(parts: Sequence[float | None], total_ms: float) -> float | None:
    known = [p for p in parts if p is not None]
    if not known or total_ms <= 0:
        return None
    return rounded(min(max(math.fsum(known) / total_ms, 0.0), 1.0))


def fit_speech_profile(calls: Iterable[ModelCall]) -> LatencyProfile | None:
    """The latency profile of one speech model from its calls; None when none can be used."""
    every = list(calls)
    usable = [c for c in every if not c.cache_hit and not c.error and c.speech_input is not None]
    if not usable:
        return None
    unit: Literal["characters", "audio_seconds"] = (
        "characters" if usable[0].operation == attr.OP_TEXT_TO_SPEECH else "audio_seconds"
    )
    xs = [c.speech_input or 0.0 for c in usable]
    streamed = [c for c in usable if c.ttft_ms is not None]
    notes: list[str] = []
    per_after: float | None = None
    if streamed:
        sx = [c.speech_input or 0.0 for c in streamed]
        first = [max((c.ttft_ms or 0.0) - c.env_ms, 0.0) for c in streamed]
        base, per_first, kept = fit_line(sx, first)
        after = [
            (x, max(c.duration_ms - (c.ttft_ms or 0.0), 0.0))
            for x, c in zip(sx, streamed, strict=True)
        ]
        sxx = math.fsum(x * x for x, _ in after)
        per_after = math.fsum(x * g for x, g in after) / sxx if sxx > 0 else None
    else:
        base, per_first, kept = fit_line(xs, [c.service_ms for c in usable])
        notes.append(f"no call streamed: the whole service time is fitted against {unit}")
    if not kept and len(set(xs)) > 1 and streamed:
        notes.append(f"time to first output taken as flat over {unit} {min(xs):g}-{max(xs):g}")
    if not all(math.isfinite(v) for v in (base, per_first, per_after or 0.0)):
        return None
    profile = LatencyProfile(
        ttft_base_ms=rounded(max(base, 0.0)),
        speech_input=unit,
        ttft_per_speech_input_ms=rounded(per_first),
        ms_per_speech_input=None if per_after is None else rounded(per_after),
    )
    logs = [
        math.log(c.service_ms / predicted)
        for c in usable
        if c.service_ms > 0 and (predicted := profile.speech_service_ms(c.speech_input or 0.0)) > 0
    ]
    hits = [c.duration_ms for c in every if c.cache_hit and not c.error]
    total_ms = math.fsum(c.duration_ms for c in usable)
    return profile.model_copy(
        update={
            "cache_hit_ms": rounded(statistics.median(hits)) if hits else None,
            "residual_sigma": rounded(statistics.stdev(logs)) if len(logs) > 1 else None,
            "queue_share": _share([c.queue_ms for c in usable], total_ms),
            "network_share": _share([c.network_ms for c in usable], total_ms),
            "calls": len(usable),
            "ttft_calls": len(streamed),
            "speech_input_range": (min(xs), max(xs)),
            "note": "; ".join(notes),
        }
    )
