"""A LiveKit Agents voice agent against ``chainlat sim``, in voice mode with no media server.

Run in the ``livekit`` environment by ``tests/interop/voice/run.py --stack livekit``:
``python livekit_agent.py --base-url URL --traces FILE --truth FILE --scenario NAME``.

An ``AgentSession`` in voice mode (STT, VAD, LLM, TTS) started with no room: its audio
input and output are set before ``start()`` (``session.input.audio``,
``session.output.audio``; ``AgentSession.start`` makes a ``RoomIO`` only when given a
room, voice/agent_session.py 1040-1077 in livekit-agents 1.8.9), so no LiveKit server and
no sound device is needed:

- ``ScriptedMicrophone`` (an ``io.AudioInput``) hands over 10 ms frames of 16 kHz mono at
  the pace of a microphone, each when its 10 ms have passed: a 220 Hz tone while the
  caller "speaks", silence otherwise. The end of the words is the instant the last tone
  frame is handed over (``time.time_ns()``, the spans' clock).
- ``EnergyVAD`` (a ``vad.VAD``): speech when a frame's RMS is above a threshold, the start
  of speech after ``MIN_SPEECH_S`` of it, the end after ``MIN_SILENCE_S`` of silence, with
  the events LiveKit reads as Silero's plugin writes them (``silence_duration``: the
  silence waited, which LiveKit subtracts to date the end of speech). No model download.
- ``RealTimeSpeaker`` (an ``io.AudioOutput``) plays what it is given to nowhere at the
  pace of a sound card, reports playback started on the first frame of each segment and
  finished (or interrupted, on ``clear_buffer``) as LiveKit's own sinks do. The first
  output of an answer is the instant its first frame reaches ``capture_frame``.

LiveKit's OpenAI plugin talks to the sim: STT (``/v1/audio/transcriptions``, not
streamed: the session wraps it in a ``StreamAdapter`` on the VAD), the LLM (streamed
chat) and TTS (``/v1/audio/speech``, pcm, not streamed: a ``tts_stream_adapter``).
LiveKit writes its spans to the global tracer provider, given chainlat's JSON lines
exporter.

Scenarios: ``turns`` (several turns, the caller waiting for each answer), ``tool`` (the
agent has a ``function_tool`` whose body sleeps ``TOOL_S``; the sim's model calls it
first in each turn), ``bargein`` (a turn answered, then the caller speaks over the
second answer and is answered again). The truth goes to ``--truth`` as JSON: the end of
each utterance, each answer's first frame at the output, each tool body's interval.
"""

# mypy: ignore-errors
# (the framework is installed only in the livekit environment, not in the dev one)

from __future__ import annotations

import argparse
import asyncio
import json
import math
import struct
import sys
import time
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from chainlat._runtime.otlp_json import JsonLinesSpanExporter

IN_RATE = 16_000
FRAME_MS = 10
SPEECH_S = (1.2, 0.8, 1.6, 1.0)
"""How long the caller speaks in each utterance (cycled)."""
MIN_SPEECH_S = 0.05
MIN_SILENCE_S = 0.3
"""The energy VAD's wait before it says speech started / ended (Silero's plugin waits 0.55 s
by default; any value works, LiveKit backdates the end by it)."""
THRESHOLD_RMS = 500.0
TOOL_S = 0.3
"""How long the tool's body sleeps."""
ANSWER_WAIT_S = 20.0
"""The longest wait for an answer to be played out."""
BARGE_AFTER_S = 0.4
"""In the barge-in scenario, the caller speaks again this long after the answer's first
frame reached the output (the answer is still playing)."""


def tone(ms: float, hz: float = 220.0) -> bytes:
    n = round(IN_RATE * ms / 1000)
    return struct.pack(
        f"<{n}h", *(round(8000 * math.sin(2 * math.pi * hz * i / IN_RATE)) for i in range(n))
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--traces", required=True)
    parser.add_argument("--truth", required=True)
    parser.add_argument("--scenario", choices=("turns", "tool", "bargein"), default="turns")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--llm", default="sim-voice-llm")
    return parser.parse_args()


def audio_io(truth: dict[str, Any]) -> tuple[type, type, type]:
    """The custom audio I/O, as classes: ``(EnergyVAD, ScriptedMicrophone, RealTimeSpeaker)``,
    each noting what it saw into ``truth`` (``words_end_ns``, ``handed_over_late_ns``,
    ``first_frame_ns``). Shared with ``livekit_realtime_agent.py``."""
    import numpy as np
    from livekit import rtc
    from livekit.agents import vad
    from livekit.agents.voice import io

    class EnergyVADStream(vad.VADStream):
        async def _main_task(self) -> None:
            speaking = False
            speech_s = silence_s = 0.0
            speech_frames: list[rtc.AudioFrame] = []
            index = 0
            async for item in self._input_ch:
                if isinstance(item, vad.VADStream._FlushSentinel):
                    speaking, speech_s, silence_s, speech_frames = False, 0.0, 0.0, []
                    continue
                frame: rtc.AudioFrame = item
                samples = np.frombuffer(frame.data, dtype=np.int16).astype(np.float64)
                loud = bool(samples.size) and math.sqrt(float(np.mean(samples**2))) > THRESHOLD_RMS
                duration = frame.samples_per_channel / frame.sample_rate
                index += frame.samples_per_channel
                if loud:
                    speech_s += duration
                    silence_s = 0.0
                else:
                    silence_s += duration
                    if not speaking:
                        speech_s = 0.0
                if speaking or loud:
                    speech_frames.append(frame)
                now = time.time()

                state = {
                    "samples_index": index,
                    "timestamp": now,
                    "speech_duration": speech_s,
                    "silence_duration": silence_s,
                    "probability": 1.0 if loud else 0.0,
                    "raw_accumulated_speech": speech_s if loud else 0.0,
                    "raw_accumulated_silence": silence_s,
                }

                def event(kind: vad.VADEventType, frames: list[rtc.AudioFrame]) -> vad.VADEvent:
                    return vad.VADEvent(type=kind, frames=frames, speaking=speaking, **state)  # noqa: B023

                if not speaking and loud and speech_s >= MIN_SPEECH_S:
                    speaking = True
                    self._event_ch.send_nowait(
                        event(vad.VADEventType.START_OF_SPEECH, list(speech_frames))
                    )
                self._event_ch.send_nowait(event(vad.VADEventType.INFERENCE_DONE, [frame]))
                if speaking and silence_s >= MIN_SILENCE_S:
                    speaking = False
                    self._event_ch.send_nowait(
                        event(vad.VADEventType.END_OF_SPEECH, list(speech_frames))
                    )
                    speech_frames, speech_s = [], 0.0
                elif not speaking and not loud:
                    speech_frames = []

    class EnergyVAD(vad.VAD):
        def __init__(self) -> None:
            super().__init__(capabilities=vad.VADCapabilities(update_interval=FRAME_MS / 1000))

        @property
        def model(self) -> str:
            return "energy"

        def stream(self) -> vad.VADStream:
            return EnergyVADStream(self)

    class ScriptedMicrophone(io.AudioInput):
        """A microphone hearing a script: ``say(seconds)`` queues an utterance."""

        def __init__(self) -> None:
            super().__init__(label="scripted microphone")
            self._pending: list[tuple[bytes, bool]] = []  # (frame, the last of an utterance)
            self._said: dict[int, asyncio.Future[int]] = {}
            self._count = 0
            self._silence = bytes(2 * IN_RATE * FRAME_MS // 1000)
            self._tone = tone(FRAME_MS)
            self._t0: float | None = None
            self._t0_ns = 0
            self._n = 0

        def say(self, seconds: float) -> asyncio.Future[int]:
            """Queue ``seconds`` of words; the future gets the end of the words (ns)."""
            frames = round(seconds * 1000 / FRAME_MS)
            self._pending += [(self._tone, i == frames - 1) for i in range(frames)]
            done: asyncio.Future[int] = asyncio.get_running_loop().create_future()
            self._said[self._count] = done
            self._count += 1
            return done

        async def __anext__(self) -> rtc.AudioFrame:
            if self._t0 is None:
                self._t0, self._t0_ns = time.perf_counter(), time.time_ns()
            self._n += 1
            # A frame is there once its 10 ms have been heard.
            delay = self._t0 + self._n * FRAME_MS / 1000 - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            data, last = self._pending.pop(0) if self._pending else (self._silence, False)
            if last:
                # The words ended on the audio's clock, when this frame's 10 ms were heard;
                # a busy loop may hand it over later (and the silence after it faster).
                ended = self._t0_ns + self._n * FRAME_MS * 1_000_000
                truth["words_end_ns"].append(ended)
                truth["handed_over_late_ns"].append(time.time_ns() - ended)
                self._said.pop(min(self._said)).set_result(ended)
            return rtc.AudioFrame(
                data=data,
                sample_rate=IN_RATE,
                num_channels=1,
                samples_per_channel=IN_RATE * FRAME_MS // 1000,
            )

    class RealTimeSpeaker(io.AudioOutput):
        """Plays to nowhere at real-time pace; notes each segment's first frame."""

        def __init__(self) -> None:
            super().__init__(
                label="real-time speaker",
                capabilities=io.AudioOutputCapabilities(pause=False),
                sample_rate=None,
            )
            self._pushed_s = 0.0
            self._started = 0.0  # perf_counter at the segment's first frame
            self._interrupted = asyncio.Event()
            self._flush_task: asyncio.Task[None] | None = None
            self.first_frames: asyncio.Queue[int] = asyncio.Queue()

        async def capture_frame(self, frame: rtc.AudioFrame) -> None:
            await super().capture_frame(frame)
            if self._flush_task is not None and not self._flush_task.done():
                await self._flush_task
            if not self._pushed_s:
                now = time.time_ns()
                truth["first_frame_ns"].append(now)
                self.first_frames.put_nowait(now)
                self._started = time.perf_counter()
                self._interrupted.clear()
                self.on_playback_started(created_at=now / 1e9)
            self._pushed_s += frame.duration
            # A sound card takes frames as fast as its buffer allows: stay at most 200 ms
            # ahead of the audio played.
            ahead = self._started + self._pushed_s - 0.2 - time.perf_counter()
            if ahead > 0:
                await asyncio.sleep(ahead)

        def flush(self) -> None:
            super().flush()
            if self._pushed_s:
                self._flush_task = asyncio.create_task(self._play_out())

        def clear_buffer(self) -> None:
            if self._pushed_s:
                self._interrupted.set()

        async def _play_out(self) -> None:
            remaining = self._started + self._pushed_s - time.perf_counter()
            try:
                await asyncio.wait_for(self._interrupted.wait(), timeout=max(remaining, 0))
                interrupted = True
            except TimeoutError:
                interrupted = False
            played = min(time.perf_counter() - self._started, self._pushed_s)
            self._pushed_s = 0.0
            self._interrupted.clear()
            self.on_playback_finished(playback_position=played, interrupted=interrupted)

    return EnergyVAD, ScriptedMicrophone, RealTimeSpeaker


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from livekit.agents import Agent, AgentSession, function_tool
    from livekit.plugins import openai

    truth: dict[str, Any] = {
        "words_end_ns": [],
        "handed_over_late_ns": [],
        "first_frame_ns": [],
        "tool_ns": [],
    }

    EnergyVAD, ScriptedMicrophone, RealTimeSpeaker = audio_io(truth)

    @function_tool
    async def lookup_order(order_id: str) -> str:
        """Look up an order by its number."""
        started = time.time_ns()
        await asyncio.sleep(TOOL_S)
        truth["tool_ns"].append([started, time.time_ns()])
        return f"Order {order_id} ships tomorrow."

    tools = [lookup_order] if args.scenario == "tool" else []
    agent = Agent(
        instructions="You are a helpful voice agent. Answer in one or two sentences.",
        tools=tools,
    )
    base_url = args.base_url + "/v1"
    session = AgentSession(
        stt=openai.STT(model="sim-stt", base_url=base_url, api_key="sk-test"),
        llm=openai.LLM(model=args.llm, base_url=base_url, api_key="sk-test"),
        tts=openai.TTS(
            model="sim-tts", voice="alloy", base_url=base_url, api_key="sk-test",
            response_format="pcm",
        ),
        vad=EnergyVAD(),
        # Barge-in by the VAD (no adaptive model here), from the answer's first frame on:
        # the default 3 s echo-cancellation warm-up ignores the caller meanwhile.
        # The end of the turn by the VAD's silence and the endpointing delay: the bundled
        # turn detector (livekit-local-inference) judges the sim's random words unfinished
        # and waits its max_delay (2.5 s) on every turn.
        turn_handling={"turn_detection": "vad", "interruption": {"mode": "vad"}},
        aec_warmup_duration=None,
    )  # fmt: skip
    microphone = ScriptedMicrophone()
    speaker = RealTimeSpeaker()
    session.input.audio = microphone
    session.output.audio = speaker
    await session.start(agent)
    await asyncio.sleep(0.5)

    async def answered() -> int:
        return await asyncio.wait_for(speaker.first_frames.get(), ANSWER_WAIT_S)

    async def played_out() -> None:
        # The answer's audio is played, then a pause before the caller speaks again.
        await asyncio.sleep(0.2)
        await asyncio.wait_for(speaker.wait_for_playout(), ANSWER_WAIT_S)
        await asyncio.sleep(0.8)

    if args.scenario in ("turns", "tool"):
        for n in range(args.turns):
            await microphone.say(SPEECH_S[n % len(SPEECH_S)])
            await answered()
            await played_out()
    else:
        await microphone.say(SPEECH_S[0])
        await answered()
        await played_out()
        await microphone.say(SPEECH_S[1])
        await answered()
        await asyncio.sleep(BARGE_AFTER_S)
        truth["barge_in_ns"] = time.time_ns()
        await microphone.say(SPEECH_S[2])  # over the answer, which is cut
        await answered()
        await played_out()
    await session.aclose()
    return truth


if __name__ == "__main__":
    arguments = parse()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(arguments.traces)))
    trace.set_tracer_provider(provider)
    found = asyncio.run(main(arguments))
    provider.shutdown()
    with open(arguments.truth, "w") as out:
        json.dump(found, out)
    sys.exit(0)
