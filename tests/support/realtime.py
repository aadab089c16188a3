"""Audio and pacing for the Realtime tests: PCM16 speech and silence, fed in real time.

``speech(ms)`` is a tone loud enough for the simulator's VAD (RMS 8,000 at any threshold
up to 1.0 is speech: RMS of a constant 8,000), ``silence(ms)`` zeros; both are base64
PCM16 at 24 kHz, ready for ``input_audio_buffer.append``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from chainlat.demo.realtime import CHUNK_MS as CHUNK_MS
from chainlat.demo.realtime import RATE as RATE
from chainlat.demo.realtime import pcm as pcm
from chainlat.demo.realtime import silence as silence
from chainlat.demo.realtime import speech as speech


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
