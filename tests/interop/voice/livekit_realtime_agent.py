"""A LiveKit Agents session on OpenAI's Realtime API against ``chainlat sim``, in voice mode
with no media server.

Run in the ``livekit`` environment by ``tests/interop/voice/run.py --stack livekit``:
``python livekit_realtime_agent.py --base-url URL --traces FILE --truth FILE``.

``AgentSession(llm=openai.realtime.RealtimeModel(...))``: one speech-to-speech model over
one WebSocket (the sim's ``/v1/realtime``, model ``sim-realtime``), its server VAD ending
the caller's turns (``silence_duration_ms`` = ``SILENCE_MS``). The audio input and output
are those of ``livekit_agent.py`` (``audio_io``): a scripted microphone handing over 10 ms
frames at a microphone's pace (a tone while the caller speaks, silence otherwise; the end
of the words on the audio clock), and a speaker playing at a sound card's pace that notes
the first frame of each answer. No local VAD: the model's ``input_speech_started`` /
``stopped`` events drive the turns. The truth goes to ``--truth`` as JSON (as
``livekit_agent.py``'s), LiveKit's spans to ``--traces`` (chainlat's JSON lines exporter on
the global tracer provider).
"""

# mypy: ignore-errors
# (the framework is installed only in the livekit environment, not in the dev one)

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with -P: livekit_agent beside

from livekit_agent import ANSWER_WAIT_S, SPEECH_S, audio_io
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from chainlat._runtime.otlp_json import JsonLinesSpanExporter

MODEL = "sim-realtime"
SILENCE_MS = 300
"""The server VAD's silence before it ends the caller's turn."""


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--traces", required=True)
    parser.add_argument("--truth", required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--vad", choices=("server", "local"), default="local")
    return parser.parse_args()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from livekit.agents import Agent, AgentSession
    from livekit.plugins import openai
    from openai.types.beta.realtime.session import TurnDetection

    truth: dict[str, Any] = {"words_end_ns": [], "handed_over_late_ns": [], "first_frame_ns": []}
    EnergyVAD, ScriptedMicrophone, RealTimeSpeaker = audio_io(truth)
    model = openai.realtime.RealtimeModel(
        model=MODEL,
        base_url=args.base_url.replace("http://", "ws://") + "/v1",
        api_key="sim",
        turn_detection=TurnDetection(
            type="server_vad", threshold=0.5, prefix_padding_ms=300,
            silence_duration_ms=SILENCE_MS, create_response=True, interrupt_response=True,
        ),
    )  # fmt: skip
    local = {"vad": EnergyVAD()} if args.vad == "local" else {}
    session = AgentSession(llm=model, aec_warmup_duration=None, **local)
    microphone = ScriptedMicrophone()
    speaker = RealTimeSpeaker()
    session.input.audio = microphone
    session.output.audio = speaker
    await session.start(Agent(instructions="You are a helpful voice agent."))
    await asyncio.sleep(0.5)
    for n in range(args.turns):
        await microphone.say(SPEECH_S[n % len(SPEECH_S)])
        await asyncio.wait_for(speaker.first_frames.get(), ANSWER_WAIT_S)
        # The answer played out, then a pause before the caller speaks again.
        await asyncio.sleep(0.2)
        await asyncio.wait_for(speaker.wait_for_playout(), ANSWER_WAIT_S)
        await asyncio.sleep(0.8)
    await session.aclose()
    return truth


if __name__ == "__main__":
    arguments = parse()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(arguments.traces)))
    trace.set_tracer_provider(provider)
    started = time.perf_counter()
    found = asyncio.run(main(arguments))
    provider.shutdown()
    with open(arguments.truth, "w") as out:
        json.dump(found, out)
    sys.exit(0)
