"""A Pipecat cascade voice agent against ``chainlat sim``, its own tracing on.

Run in the ``pipecat`` environment by ``tests/interop/voice/run.py``: ``python
pipecat_agent.py --base-url URL --traces FILE --turns N [--httpx]``. The pipeline is
Pipecat's own: a local input transport that plays generated audio (a 220 Hz tone, 20 ms
frames, in real time) and signals the end of each utterance as a VAD would (after
``STOP_SECS`` of silence, its ``VADUserStoppedSpeakingFrame`` saying so), Pipecat's
OpenAI-compatible STT (segmented: the utterance's audio goes to
``/v1/audio/transcriptions`` when the caller stops), the LLM context aggregators, its
OpenAI LLM service (``/v1/chat/completions``, streamed) and TTS service
(``/v1/audio/speech``, streamed pcm), and a local output transport that plays the audio
to nowhere, in real time. Pipecat writes its spans (``conversation``, ``turn``, ``stt``,
``llm``, ``tts``) with its own tracing (``enable_tracing=True``) to chainlat's JSON
lines exporter; with ``--httpx`` chainlat's HTTP-level spans are there too.

With ``--wrap`` the application wraps each turn in a ``chainlat.workflow("voice-turn")``,
made the parent of Pipecat's ``turn`` span: Pipecat parents a turn to its pipeline's
``TracingContext`` conversation context, so the application opens the conversation itself
(``turn_trace_observer.start_conversation_tracing``) and points that context at the
workflow of the coming turn before Pipecat starts it (the first turn starts with the
pipeline). The workflow is marked ``user_stopped_speaking()`` at the end of the caller's
audio and ends when Pipecat's turn tracking ends the turn (``on_turn_ended``, after
Pipecat's own span). Each workflow is entered and exited in a context of its own
(``contextvars.Context.run``): Pipecat's tasks never see it as their current span.

With ``--observer`` the task has chainlat's observer (``chainlat.integrations.pipecat``)
and the model a function, ``lookup_order``, that the simulator calls once a turn: its body
sleeps ``TOOL_S``. The agent prints the body's start and end (``tool_body``), the instants
the LLM service pushed each call's frames (``tool_frames``: `noting_calls`) and the instant
the output transport was handed each turn's first audio frame (``first_audio``) and when its
write returned, less its playing time (``first_written``), the truths the observer's tool
step and first output are judged against.

With ``--bargein`` (unwrapped) the caller speaks again ``BARGE_S`` after the second
answer's first audio frame reached the output transport: the input transport's
``VADUserStartedSpeakingFrame`` makes the user aggregator's VAD turn start strategy
broadcast an ``InterruptionFrame`` (processors/aggregators/llm_response_universal.py
1396-1419), which stops the answer, and Pipecat's turn tracker ends that turn interrupted
and opens the next (observers/turn_tracking_observer.py 139-147). Three turns then hold
one interrupted, the second.
"""

# mypy: ignore-errors
# (the framework is installed only in the pipecat environment, not in the dev one)

from __future__ import annotations

import argparse
import asyncio
import contextvars
import math
import struct
import sys
import time
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter

IN_RATE = 16_000
FRAME_MS = 20
SPEECH_S = (1.2, 0.8, 1.6, 1.0, 1.4, 0.9)
"""How long the caller speaks in each turn (cycled)."""
CONVERSATION = "interop-voice"
STOP_SECS = 0.2
"""The silence a VAD waits before it says the caller stopped (Pipecat's recommended
``VADParams.stop_secs``): the end of the words is that much before its stop frame."""
TOOL_S = 0.12
"""How long the function's body runs (``--observer``)."""
BARGE_TURN = 1
"""With ``--bargein``, the caller speaks over the answer of this turn (0-based: the second)."""
BARGE_S = 0.3
"""How long that answer has been playing when the caller speaks again: the sim's answer
(12 words) plays for seconds, Pipecat's interruption stops it."""
PAUSE_S = 6.5
"""Silence after the end of an utterance before the next: room for the whole answer to be
played, so that no turn is interrupted (the answer plays about 3 s from its first audio,
1.2-1.8 s after the words; at 5 s a turn whose first audio came 1.8 s after the words, on
a loaded machine, was still playing when the next utterance began)."""


def tone(ms: float, hz: float = 220.0) -> bytes:
    """``ms`` of a 16-bit mono tone at IN_RATE: something for the STT to hear."""
    n = round(IN_RATE * ms / 1000)
    return struct.pack(
        f"<{n}h", *(round(8000 * math.sin(2 * math.pi * hz * i / IN_RATE)) for i in range(n))
    )


def noting_calls(service: type, pushed: dict[str, list[int]]) -> type:
    """``service`` with the pushes of each function call's frames noted in ``pushed`` (the
    call's id: ``[in progress begun, in progress done, result begun, result done]``,
    ``time.time_ns()``): as its first ``FunctionCallInProgressFrame``'s push begins and
    returns, and as its first ``FunctionCallResultFrame``'s push begins and returns.

    Those pushes are where the observer's tool step starts and ends (Pipecat stamps each
    push with its pipeline clock inside it; the observer places that on the spans' clock):
    the truth its step is judged against, read here where the frames leave the service.
    Each push is a span of time, the stamp somewhere inside: the base class calls its
    ``on_before_push_frame`` handlers first, and ``OpenAIRealtimeLLMService`` sends a
    result to the API (``conversation.item.create``) before it passes the frame on
    (services/openai/realtime/llm.py 709-727), 2-10 ms with its logging. The body inside
    is judged apart: Pipecat's own time around it is the framework's, not a reading of
    chainlat's."""
    from pipecat.frames.frames import FunctionCallInProgressFrame, FunctionCallResultFrame
    from pipecat.processors.frame_processor import FrameDirection

    class Noted(service):
        async def push_frame(self, frame, direction=FrameDirection.DOWNSTREAM):
            call = None
            if isinstance(frame, FunctionCallInProgressFrame | FunctionCallResultFrame):
                at = time.time_ns()
                call = pushed.setdefault(str(frame.tool_call_id), [])
                wanted = 0 if isinstance(frame, FunctionCallInProgressFrame) else 2
                call = call if len(call) == wanted else None
                if call is not None:
                    call.append(at)
            await super().push_frame(frame, direction)
            if call is not None:
                call.append(time.time_ns())

    return Noted


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--traces", required=True)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--llm", default="sim-voice-llm")
    parser.add_argument("--httpx", action="store_true")
    parser.add_argument("--wrap", action="store_true")
    parser.add_argument("--observer", action="store_true")
    parser.add_argument("--bargein", action="store_true")
    return parser.parse_args()


class Turn:
    """A ``chainlat.workflow`` per turn (``--wrap``), parent of the next turn Pipecat starts.

    Entered and exited in a context of its own: the application's tasks and Pipecat's never
    have it as their current span; Pipecat's turn span gets it through its tracing context.
    """

    def __init__(self, tracing) -> None:
        self.spec = chainlat.workflow("voice-turn")
        self.context = contextvars.copy_context()
        self.handle = self.context.run(self.spec.__enter__)
        tracing.set_conversation_context(self.handle.span.get_span_context(), CONVERSATION)

    def close(self) -> None:
        self.context.run(self.spec.__exit__, None, None, None)


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
    from pipecat.processors.frame_processor import FrameProcessorSetup
    from pipecat.services.openai.llm import OpenAILLMService
    from pipecat.services.openai.stt import OpenAISTTService
    from pipecat.services.openai.tts import OpenAITTSService
    from pipecat.transports.base_input import BaseInputTransport
    from pipecat.transports.base_output import BaseOutputTransport
    from pipecat.transports.base_transport import TransportParams
    from pipecat.utils.types import NOT_GIVEN

    from chainlat.integrations.pipecat import observer

    stopped_at: list[int] = []
    """time.time_ns() of each utterance's end, as the input transport signalled it."""
    stopped_by: list[int] = []
    """time.time_ns() as each utterance's ``stopped()`` returned (``--wrap``: the call to
    ``user_stopped_speaking()``, whose mark lies between the two)."""
    played = asyncio.Event()
    turn_ended: asyncio.Queue[bool] = asyncio.Queue()
    """Whether each turn Pipecat ended was interrupted (``--wrap``)."""
    conversation_id = CONVERSATION
    turns: list[Turn] = []
    tool_body: list[tuple[int, int]] = []
    """time.time_ns() at the start and end of each call's body (``--observer``)."""
    tool_pushed: dict[str, list[int]] = {}
    """Each call's pushes of its frames (`noting_calls`)."""
    first_audio: list[int] = []
    first_written: list[int] = []
    """When the write of each turn's first audio frame returned, less its playing time: the
    instant the observer's mark reads (the transport pushes the frame once written); after
    ``first_audio`` by as much as the write's sleep overran (a busy loop)."""
    """time.time_ns() when each turn's first audio frame reached the output transport."""
    awaiting_audio: list[bool] = [False]

    class GeneratedInput(BaseInputTransport):
        """Plays the script of utterances as microphone frames, in real time."""

        async def setup(self, setup: FrameProcessorSetup) -> None:
            await super().setup(setup)
            # Before the StartFrame, which starts Pipecat's first turn.
            self._tracing = setup.tracing_context
            if args.wrap:
                task.turn_trace_observer.start_conversation_tracing(conversation_id)
                turns.append(Turn(self._tracing))

        async def start(self, frame: StartFrame) -> None:
            await super().start(frame)
            await self.set_transport_ready(frame)
            self._player = self.create_task(self._play())

        async def _play(self) -> None:
            await asyncio.sleep(0.5)
            for n in range(args.turns):
                if args.wrap:
                    turn = turns[-1]
                    await self._utterance(n, turn.handle.user_stopped_speaking)
                    interrupted = await asyncio.wait_for(turn_ended.get(), timeout=30)
                    turn.handle.end_reason("interrupted" if interrupted else "completed")
                    turn.close()
                    if n + 1 < args.turns:
                        turns.append(Turn(self._tracing))
                    await asyncio.sleep(0.5)
                else:
                    await self._utterance(n, lambda: None)
                    if args.bargein and n == BARGE_TURN and n + 1 < args.turns:
                        # The caller speaks over the answer, once it has been playing
                        # BARGE_S: the next utterance interrupts this turn.
                        await self._answered(n)
                        await asyncio.sleep(BARGE_S)
                    else:
                        await asyncio.sleep(PAUSE_S)
            if not args.wrap:
                # Pipecat ends a turn 2.5 s after the bot stopped speaking; a pipeline
                # ended before that closes the last turn as interrupted.
                await asyncio.sleep(3.0)
            played.set()

        async def _answered(self, n: int) -> None:
            """Until the output transport was handed the first audio of turn ``n + 1``."""
            for _ in range(round(30 / 0.005)):
                if len(first_audio) > n:
                    return
                await asyncio.sleep(0.005)
            raise RuntimeError(f"turn {n + 1}: no answer within 30 s")

        async def _utterance(self, n: int, stopped: Callable[[], None]) -> None:
            chunk = tone(FRAME_MS)
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
            words_end = time.time_ns()
            stopped_at.append(words_end)
            awaiting_audio[0] = True
            stopped()
            stopped_by.append(time.time_ns())
            # The VAD hears STOP_SECS of silence before it says so, and says how long it
            # waited: Pipecat counts its STT's time to first byte and its user-bot latency
            # from its stop less stop_secs, the end of the words.
            silence = bytes(len(chunk))
            quiet = time.perf_counter()
            for i in range(round(STOP_SECS * 1000 / FRAME_MS)):
                await self.push_audio_frame(
                    InputAudioRawFrame(audio=silence, sample_rate=IN_RATE, num_channels=1)
                )
                delay = quiet + (i + 1) * FRAME_MS / 1000 - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            # Stamped as a VAD stamps it: stop_secs after the last sound (the loop above may
            # overrun by a few ms on a busy machine; the VAD's clock is the audio's).
            await self.broadcast_frame(
                VADUserStoppedSpeakingFrame,
                stop_secs=STOP_SECS,
                timestamp=words_end / 1e9 + STOP_SECS,
            )
            await self.broadcast_frame(UserStoppedSpeakingFrame)

    class SilentOutput(BaseOutputTransport):
        """Plays the bot's audio to nowhere, at the pace of a sound card."""

        async def start(self, frame: StartFrame) -> None:
            await super().start(frame)
            await self.set_transport_ready(frame)

        async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
            first = awaiting_audio[0]
            if first:
                awaiting_audio[0] = False
                first_audio.append(time.time_ns())
            seconds = len(frame.audio) / 2 / frame.sample_rate / frame.num_channels
            await asyncio.sleep(seconds)
            if first:
                first_written.append(time.time_ns() - round(seconds * 1e9))
            return True

    params = TransportParams(audio_in_enabled=True, audio_out_enabled=True)
    transport_in = GeneratedInput(params)
    transport_out = SilentOutput(params)
    base_url = args.base_url + "/v1"
    stt = OpenAISTTService(api_key="sk-test", base_url=base_url, model="sim-stt")
    llm = noting_calls(OpenAILLMService, tool_pushed)(
        api_key="sk-test", base_url=base_url, model=args.llm
    )
    tts = OpenAITTSService(api_key="sk-test", base_url=base_url, model="sim-tts", voice="alloy")
    tools = []
    if args.observer:
        from pipecat.adapters.schemas.function_schema import FunctionSchema
        from pipecat.adapters.schemas.tools_schema import ToolsSchema

        async def lookup_order(params) -> None:
            began = time.time_ns()
            await asyncio.sleep(TOOL_S)
            tool_body.append((began, time.time_ns()))
            await params.result_callback({"status": "shipped"})

        llm.register_function("lookup_order", lookup_order)
        tools = [
            FunctionSchema(
                name="lookup_order",
                description="Look up an order's status.",
                properties={"order": {"type": "string"}},
                required=["order"],
            )
        ]
    context = LLMContext(
        [{"role": "system", "content": "You are a helpful voice agent."}],
        tools=ToolsSchema(standard_tools=tools) if tools else NOT_GIVEN,
    )
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
        conversation_id=conversation_id,
        idle_timeout_secs=60,
        observers=[observer()] if args.observer else [],
    )
    if args.wrap:

        @task.turn_tracking_observer.event_handler("on_turn_ended")
        async def on_turn_ended(observer, turn_number, duration, was_interrupted) -> None:
            # Registered after Pipecat's turn tracing: its turn span has ended by now.
            await turn_ended.put(bool(was_interrupted))

    running = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await played.wait()
    await task.queue_frame(EndFrame())
    await running
    print("stopped_at", " ".join(map(str, stopped_at)), flush=True)
    print("first_audio", " ".join(map(str, first_audio)), flush=True)
    print("first_written", " ".join(map(str, first_written)), flush=True)
    print("stopped_by", " ".join(map(str, stopped_by)), flush=True)
    print("tool_body", " ".join(f"{a}:{b}" for a, b in tool_body), flush=True)
    pushes = sorted(call for call in tool_pushed.values() if len(call) == 4)
    print("tool_frames", " ".join(":".join(map(str, call)) for call in pushes), flush=True)


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
