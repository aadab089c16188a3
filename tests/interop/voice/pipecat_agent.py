"""A Pipecat cascade voice agent against ``chainlat sim``, its own tracing on.

Run in the ``pipecat`` environment by ``tests/interop/voice/run.py``: ``python
pipecat_agent.py --base-url URL --traces FILE --turns N [--httpx]``. The pipeline is
Pipecat's own: a local input transport that plays generated audio (a 220 Hz tone, 20 ms
frames, in real time) and signals the end of each utterance as a VAD would, Pipecat's
OpenAI-compatible STT (segmented: the utterance's audio goes to
``/v1/audio/transcriptions`` when the caller stops), the LLM context aggregators, its
OpenAI LLM service (``/v1/chat/completions``, streamed) and TTS service
(``/v1/audio/speech``, streamed pcm), and a local output transport that plays the audio
to nowhere, in real time. Pipecat writes its spans (``conversation``, ``turn``, ``stt``,
``llm``, ``tts``) with its own tracing (``enable_tracing=True``) to chainlat's JSON
lines exporter; with ``--httpx`` chainlat's HTTP-level spans are there too.
"""

# mypy: ignore-errors
# (the framework is installed only in the pipecat environment, not in the dev one)

from __future__ import annotations

import argparse
import asyncio
import math
import struct
import sys
import time

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter

IN_RATE = 16_000
FRAME_MS = 20
SPEECH_S = (1.2, 0.8, 1.6, 1.0, 1.4, 0.9)
"""How long the caller speaks in each turn (cycled)."""
PAUSE_S = 5.0
"""Silence after the end of an utterance before the next: room for the whole answer to be
played, so that no turn is interrupted."""


def tone(ms: float, hz: float = 220.0) -> bytes:
    """``ms`` of a 16-bit mono tone at IN_RATE: something for the STT to hear."""
    n = round(IN_RATE * ms / 1000)
    return struct.pack(
        f"<{n}h", *(round(8000 * math.sin(2 * math.pi * hz * i / IN_RATE)) for i in range(n))
    )


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--traces", required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--llm", default="sim-voice-llm")
    parser.add_argument("--httpx", action="store_true")
    return parser.parse_args()


async def main(args: argparse.Namespace) -> None:
    from pipecat.frames.frames import (
        EndFrame,
        InputAudioRawFrame,
        OutputAudioRawFrame,
        StartFrame,
        UserStartedSpeakingFrame,
        UserStoppedSpeakingFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.services.openai.stt import OpenAISTTService
    from pipecat.services.openai.tts import OpenAITTSService
    from pipecat.transports.base_input import BaseInputTransport
    from pipecat.transports.base_output import BaseOutputTransport
    from pipecat.transports.base_transport import TransportParams

    stopped_at: list[int] = []
    """time.time_ns() of each utterance's end, as the input transport signalled it."""
    played = asyncio.Event()

    class GeneratedInput(BaseInputTransport):
        """Plays the script of utterances as microphone frames, in real time."""

        async def start(self, frame: StartFrame) -> None:
            await super().start(frame)
            await self.set_transport_ready(frame)
            self._player = self.create_task(self._play())

        async def _play(self) -> None:
            await asyncio.sleep(0.5)
            chunk = tone(FRAME_MS)
            for n in range(args.turns):
                await self.broadcast_frame(VADUserStartedSpeakingFrame)
                await self.broadcast_frame(UserStartedSpeakingFrame)
                started = time.perf_counter()
                frames = round(SPEECH_S[n % len(SPEECH_S)] * 1000 / FRAME_MS)
                for i in range(frames):
                    await self.push_audio_frame(
                        InputAudioRawFrame(audio=chunk, sample_rate=IN_RATE, num_channels=1)
                    )
                    delay = started + (i + 1) * FRAME_MS / 1000 - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                stopped_at.append(time.time_ns())
                await self.broadcast_frame(VADUserStoppedSpeakingFrame)
                await self.broadcast_frame(UserStoppedSpeakingFrame)
                await asyncio.sleep(PAUSE_S)
            # Pipecat ends a turn 2.5 s after the bot stopped speaking; a pipeline ended
            # before that closes the last turn as interrupted.
            await asyncio.sleep(3.0)
            played.set()

    class SilentOutput(BaseOutputTransport):
        """Plays the bot's audio to nowhere, at the pace of a sound card."""

        async def start(self, frame: StartFrame) -> None:
            await super().start(frame)
            await self.set_transport_ready(frame)

        async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
            seconds = len(frame.audio) / 2 / frame.sample_rate / frame.num_channels
            await asyncio.sleep(seconds)
            return True

    params = TransportParams(audio_in_enabled=True, audio_out_enabled=True)
    transport_in = GeneratedInput(params)
    transport_out = SilentOutput(params)
    base_url = args.base_url + "/v1"
    stt = OpenAISTTService(api_key="sk-test", base_url=base_url, model="sim-stt")
    llm = OpenAILLMService(api_key="sk-test", base_url=base_url, model=args.llm)
    tts = OpenAITTSService(api_key="sk-test", base_url=base_url, model="sim-tts", voice="alloy")
    context = LLMContext([{"role": "system", "content": "You are a helpful voice agent."}])
    aggregators = LLMContextAggregatorPair(context)
    pipeline = Pipeline(
        [
            transport_in,
            stt,
            aggregators.user(),
            llm,
            tts,
            transport_out,
            aggregators.assistant(),
        ]
    )
    task = PipelineTask(
        pipeline,
        params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
        enable_tracing=True,
        conversation_id="interop-voice",
        idle_timeout_secs=60,
    )
    running = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await played.wait()
    await task.queue_frame(EndFrame())
    await running
    print("stopped_at", " ".join(map(str, stopped_at)), flush=True)


if __name__ == "__main__":
    arguments = parse()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(arguments.traces)))
    trace.set_tracer_provider(provider)
    chainlat.configure(tracer_provider=provider, exporter="none", batch=False)
    if arguments.httpx:
        chainlat.instrument_httpx()
    asyncio.run(main(arguments))
    provider.shutdown()
    sys.exit(0)
