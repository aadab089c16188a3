"""Audio and pacing for the Realtime tests: PCM16 speech and silence, fed in real time.

``speech(ms)`` is a tone loud enough for the simulator's VAD (RMS 8,000 at any threshold
up to 1.0 is speech: RMS of a constant 8,000), ``silence(ms)`` zeros; both are base64
PCM16 at 24 kHz, ready for ``input_audio_buffer.append``.
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Awaitable, Callable, Sequence

RATE = 24_000
CHUNK_MS = 100


def pcm(ms: int, amplitude: int = 0) -> bytes:
    """``ms`` of PCM16 mono at 24 kHz, every sample ``amplitude``."""
    return amplitude.to_bytes(2, "little", signed=True) * (RATE * ms // 1000)


def speech(ms: int = CHUNK_MS) -> str:
    return base64.b64encode(pcm(ms, 8000)).decode()


def silence(ms: int = CHUNK_MS) -> str:
    return base64.b64encode(pcm(ms)).decode()


def utterance(speech_ms: int, silence_ms: int) -> list[str]:
    """Chunks of CHUNK_MS: speech, then silence."""
    return [speech()] * (speech_ms // CHUNK_MS) + [silence()] * (silence_ms // CHUNK_MS)


async def feed(
    append: Callable[[str], Awaitable[object]], chunks: Sequence[str], *, pace_s: float = 0.1
) -> int:
    """Append each chunk on a real-time schedule; returns ``time.time_ns()`` at the first."""
    started_ns = time.time_ns()
    start = time.perf_counter()
    for index, chunk in enumerate(chunks):
        delay = start + index * pace_s - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        await append(chunk)
    return started_ns
