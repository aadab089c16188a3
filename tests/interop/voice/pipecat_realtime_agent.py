"""A Pipecat speech-to-speech agent on OpenAI's Realtime API, against ``chainlat sim``.

Run in the ``pipecat`` environment by ``tests/interop/voice/pipecat_realtime_judge.py``:
``python pipecat_realtime_agent.py --base-url URL --traces FILE --truth FILE --turns N``.
The pipeline is Pipecat's own: an input transport that plays the cascade agent's caller (a
220 Hz tone in 20 ms frames, in real time) and signals its speech as a VAD would
(``VADUserStartedSpeakingFrame``, and ``VADUserStoppedSpeakingFrame`` ``STOP_SECS`` after
the last sound, stamped as a VAD stamps it), the LLM context aggregators, Pipecat's
``OpenAIRealtimeLLMService`` (``pipecat.services.openai.realtime.llm``) on the sim's
``/v1/realtime`` with the server's turn detection off (``turn_detection=False``), and an
output transport that plays the answer to nowhere in real time. With ``--server-vad`` the
input transport is a microphone and nothing more (no VAD frames; its silence streams on
between the utterances) and the server's turn detection is on, the service's default
(``turn_detection`` not given): the server decides each turn and asks the answer itself.
``--semantic-vad`` is the same with Pipecat's ``SemanticTurnDetection`` (``semantic_vad``,
which the sim serves as its server VAD).
Otherwise the user aggregator decides the turns from the VAD's frames with its default
strategies (its smart-turn model ends each turn 157-301 ms after the VAD's stop in the runs
here): at its ``UserStoppedSpeakingFrame`` the service commits the caller's audio and
asks for a response (services/openai/realtime/llm.py 604-607). The input transport sends no
``UserStartedSpeakingFrame`` / ``UserStoppedSpeakingFrame`` of its own: a second stop
commits an empty buffer, which the API refuses (``input_audio_buffer_commit_empty``) and
the service takes as fatal.

Pipecat writes its spans (``conversation``, ``turn``, the service's ``llm_setup`` and
``llm_response``) with its own tracing, and chainlat's observer
(``chainlat.integrations.pipecat``) is on the task. The agent writes its truth to
``--truth``: per turn, the end of the caller's words, the instant the output transport
was handed the answer's first audio frame (``time.time_ns()``), and the instant its write
returned, less the frame's playing time (``first_written_ns``).

With ``--tool`` the session has a function, ``lookup_order`` (its body sleeps ``TOOL_S``),
in its ``session_properties`` (given to the ``LLMContext`` instead, it never reached the
session here: the service takes the context's tools at its first context frame, and none
came); the truth then holds each call's body (``tool_ns``: its start and end) and the
instants the service pushed its frames (``tool_frames_ns``: ``pipecat_agent.noting_calls``).
"""

# mypy: ignore-errors
# (the framework is installed only in the pipecat environment, not in the dev one)

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pipecat_agent import FRAME_MS, IN_RATE, SPEECH_S, STOP_SECS, TOOL_S, noting_calls, tone

MODEL = "sim-realtime"
PAUSE_S = 6.0
"""Silence after an utterance before the next: room for the whole answer to be played (the
sim's 12 words are 3.1 s of audio; at 4 s the next utterance interrupted it)."""


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--traces", required=True)
    parser.add_argument("--truth", required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tool", action="store_true")
    parser.add_argument("--server-vad", action="store_true")
    parser.add_argument("--semantic-vad", action="store_true")
    args = parser.parse_args()
    args.server_vad = args.server_vad or args.semantic_vad
    return args


def _detection(args: argparse.Namespace) -> object:
    """The session's turn detection: off (the pipeline's VAD decides), the server's default
    (None: server VAD), or Pipecat's ``SemanticTurnDetection`` (``semantic_vad``)."""
    from pipecat.services.openai.realtime import events

    if args.semantic_vad:
        return events.SemanticTurnDetection()
    return None if args.server_vad else False


async def main(args: argparse.Namespace) -> None:
    from pipecat.adapters.schemas.function_schema import FunctionSchema
    from pipecat.adapters.schemas.tools_schema import ToolsSchema
    from pipecat.frames.frames import (
        EndFrame,
        InputAudioRawFrame,
        OutputAudioRawFrame,
        StartFrame,
        VADUserStartedSpeakingFrame,
        VADUserStoppedSpeakingFrame,
    )
    from pipecat.pipeline.pipeline import Pipeline
    from pipecat.pipeline.runner import PipelineRunner
    from pipecat.pipeline.task import PipelineParams, PipelineTask
    from pipecat.processors.aggregators.llm_context import LLMContext
    from pipecat.processors.aggregators.llm_response_universal import LLMContextAggregatorPair
    from pipecat.services.openai.realtime import events
    from pipecat.services.openai.realtime.llm import OpenAIRealtimeLLMService
    from pipecat.transports.base_input import BaseInputTransport
    from pipecat.transports.base_output import BaseOutputTransport
    from pipecat.transports.base_transport import TransportParams

    from chainlat.integrations.pipecat import observer

    words_end: list[int] = []
    first_frame: list[int] = []
    first_written: list[int] = []
    awaiting = [False]
    played = asyncio.Event()

    class GeneratedInput(BaseInputTransport):
        """Plays the script of utterances as microphone frames, in real time."""

        async def start(self, frame: StartFrame) -> None:
            await super().start(frame)
            await self.set_transport_ready(frame)
            self._player = self.create_task(self._play())

        async def _play(self) -> None:
            await asyncio.sleep(1.0)  # the session set up
            for n in range(args.turns):
                await self._utterance(n)
                if not args.server_vad:
                    await asyncio.sleep(PAUSE_S)
            await asyncio.sleep(3.0)  # Pipecat ends a turn 2.5 s after the bot stopped
            played.set()

        async def _frames(self, audio: bytes, seconds: float) -> None:
            """Each frame pushed once its audio would have been captured, as a microphone's
            is: at the end of its 20 ms (the server's turn detection dates the end of the
            words on the audio, and the observer maps it back to these pushes)."""
            started = time.perf_counter()
            for i in range(round(seconds * 1000 / FRAME_MS)):
                delay = started + (i + 1) * FRAME_MS / 1000 - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await self.push_audio_frame(
                    InputAudioRawFrame(audio=audio, sample_rate=IN_RATE, num_channels=1)
                )

        async def _utterance(self, n: int) -> None:
            if args.server_vad:  # a microphone: its silence streams on, for the server's VAD
                await self._frames(tone(FRAME_MS), SPEECH_S[n % len(SPEECH_S)])
                words_end.append(time.time_ns())  # the last word's frame just pushed
                awaiting[0] = True
                await self._frames(bytes(len(tone(FRAME_MS))), PAUSE_S)
                return
            await self.broadcast_frame(VADUserStartedSpeakingFrame)
            await self._frames(tone(FRAME_MS), SPEECH_S[n % len(SPEECH_S)])
            end = time.time_ns()
            words_end.append(end)
            awaiting[0] = True
            await self._frames(bytes(len(tone(FRAME_MS))), STOP_SECS)
            await self.broadcast_frame(
                VADUserStoppedSpeakingFrame, stop_secs=STOP_SECS, timestamp=end / 1e9 + STOP_SECS
            )

    class SilentOutput(BaseOutputTransport):
        """Plays the bot's audio to nowhere, at the pace of a sound card."""

        async def start(self, frame: StartFrame) -> None:
            await super().start(frame)
            await self.set_transport_ready(frame)

        async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
            first = awaiting[0]
            if first:
                awaiting[0] = False
                first_frame.append(time.time_ns())
            seconds = len(frame.audio) / 2 / frame.sample_rate / frame.num_channels
            await asyncio.sleep(seconds)
            if first:  # the write returned, less its playing time: the observer's instant
                first_written.append(time.time_ns() - round(seconds * 1e9))
            return True

    params = TransportParams(audio_in_enabled=True, audio_out_enabled=True)
    transport_in = GeneratedInput(params)
    transport_out = SilentOutput(params)
    tool_body: list[tuple[int, int]] = []
    tool_pushed: dict[str, list[int]] = {}
    tools = (
        ToolsSchema(
            standard_tools=[
                FunctionSchema(
                    name="lookup_order",
                    description="Look up an order's status.",
                    properties={"order": {"type": "string"}},
                    required=["order"],
                )
            ]
        )
        if args.tool
        else None
    )

    async def lookup_order(params) -> None:
        began = time.time_ns()
        await asyncio.sleep(TOOL_S)
        tool_body.append((began, time.time_ns()))
        await params.result_callback({"status": "shipped"})

    llm = noting_calls(OpenAIRealtimeLLMService, tool_pushed)(
        api_key="sk-test",
        base_url=args.base_url.replace("http://", "ws://") + "/v1/realtime",
        settings=OpenAIRealtimeLLMService.Settings(
            model=MODEL,
            system_instruction="You are a helpful voice agent.",
            session_properties=events.SessionProperties(
                tools=tools,
                audio=events.AudioConfiguration(
                    # None: the server's own turn detection (server VAD), the default.
                    input=events.AudioInput(turn_detection=_detection(args)),
                ),
            ),
        ),
    )
    if args.tool:
        llm.register_function("lookup_order", lookup_order)
    context = LLMContext([])
    aggregators = LLMContextAggregatorPair(context)
    pipeline = Pipeline(
        [transport_in, aggregators.user(), llm, transport_out, aggregators.assistant()]
    )
    task = PipelineTask(
        pipeline,
        params=PipelineParams(enable_metrics=True, enable_usage_metrics=True),
        enable_tracing=True,
        conversation_id="interop-voice-realtime",
        idle_timeout_secs=60,
        observers=[observer()],
    )
    running = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await played.wait()
    await task.queue_frame(EndFrame())
    await running
    Path(args.truth).write_text(
        json.dumps(
            {
                "words_end_ns": words_end,
                "first_frame_ns": first_frame,
                "first_written_ns": first_written,
                "tool_ns": tool_body,
                "tool_frames_ns": sorted(call for call in tool_pushed.values() if len(call) == 4),
            }
        )
    )


if __name__ == "__main__":
    arguments = parse()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(arguments.traces)))
    trace.set_tracer_provider(provider)
    chainlat.configure(tracer_provider=provider, exporter="none", batch=False)
    asyncio.run(main(arguments))
    provider.shutdown()
    sys.exit(0)
