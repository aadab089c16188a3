"""``chainlat demo --voice``: a cascade voice agent, traced from the end of the caller's words
to the first sound of the answer.

Each turn runs the workflow ``voice-agent``, started at the instant the caller stopped
speaking: the recording is transcribed (``sim-stt``, streamed transcript), the FAQ is
searched, ``sim-small`` streams the answer, and each sentence goes to text to speech as
soon as it is written, while the model goes on with the next. The first sentence's
speech call is the user-facing one: its first audio byte is the turn's first output.
Every call goes through the real ``openai`` SDK to :mod:`chainlat.sim` on 127.0.0.1,
traced by :func:`chainlat.instrument_httpx`.

Two variants differ only in the voice: ``fast-voice`` (``sim-tts``, first audio byte
after 150 ms, six times real time) and ``hd-voice`` (``sim-tts-hd``, 400 ms, twice real
time). The median turn of each is drawn as a waterfall, the wait for the first audio is
split by stage (speech to text, model, text to speech, data, overhead), and a budget on
it is judged: ``first_output = "900ms"`` on every turn, ``p95 = { first_output = "800ms",
first_output_text_to_speech = "300ms" }``.
"""

from __future__ import annotations

import asyncio
import io
import time
import wave
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

import chainlat
from chainlat._core.exits import EXIT_OK
from chainlat.demo import Store, keep_previous, open_store, search, traces_path

if TYPE_CHECKING:
    import argparse

    from openai import AsyncOpenAI
    from rich.console import Console

    from chainlat._core.runs import WorkflowRun

WORKFLOW: Final = "voice-agent"
STT: Final = "sim-stt"
MODEL: Final = "sim-small"
VARIANTS: Final = (("fast-voice", "sim-tts"), ("hd-voice", "sim-tts-hd"))
SENTENCE_TOKENS: Final = 8
"""The simulator's text has no full stops: a sentence is this many tokens."""
BUDGET: Final[dict[str, Any]] = {
    "first_output": "900ms",
    "p95": {"first_output": "800ms", "first_output_text_to_speech": "300ms"},
    "steps": {"speak": {"ttft_p95": "450ms"}},
}
QUESTIONS: Final = (
    "How do I return an item?",
    "Where is my order A-1003?",
    "Can I change the delivery address?",
    "Do you ship abroad?",
)


def recording(seconds: float) -> bytes:
    """What the caller said: ``seconds`` of silent 16 kHz mono wav (the simulator does not
    listen; only the length of the audio matters to its latency)."""
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(bytes(2 * round(16_000 * seconds)))
    return out.getvalue()


async def speak(client: AsyncOpenAI, voice_model: str, text: str, *, first: bool) -> int:
    """Say ``text``; returns the bytes of audio played. The first sentence is what the
    caller hears first: its call is the user-facing one."""
    played = 0
    with chainlat.inference(
        voice_model, operation="text_to_speech", step="speak", user_facing=first
    ):
        async with client.audio.speech.with_streaming_response.create(
            model=voice_model, voice="alloy", input=text, response_format="pcm"
        ) as response:
            async for chunk in response.iter_bytes():
                played += len(chunk)  # a real agent plays it here
    return played


async def turn(client: AsyncOpenAI, store: Store, variant: str, voice_model: str, n: int) -> None:
    """One turn: the caller stopped speaking just now."""
    audio = recording(1.0 + 0.25 * (n % 4))
    end_of_speech = time.time_ns()
    with chainlat.workflow(WORKFLOW, variant=variant, started_at_ns=end_of_speech) as run:
        question = QUESTIONS[n % len(QUESTIONS)]
        transcript = await client.audio.transcriptions.create(
            model=STT, file=("turn.wav", audio, "audio/wav"), stream=True
        )
        async for _event in transcript:
            pass  # the simulator's words are filler: the question is the script's
        with chainlat.data_stage("faq-search", source="faq"):
            context = "\n".join(search(store.db, question))
        stream = await client.chat.completions.create(
            model=MODEL,
            messages=[
                {"role": "system", "content": "Answer from these notes:\n" + context},
                {"role": "user", "content": question},
            ],
            stream=True,
        )
        sentence: list[str] = []
        speaking: list[asyncio.Task[int]] = []
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                sentence.append(chunk.choices[0].delta.content)
            if len(sentence) == SENTENCE_TOKENS:
                said = "".join(sentence)
                speaking.append(
                    asyncio.create_task(speak(client, voice_model, said, first=not speaking))
                )
                sentence = []
        if sentence:
            speaking.append(
                asyncio.create_task(
                    speak(client, voice_model, "".join(sentence), first=not speaking)
                )
            )
        await asyncio.gather(*speaking)
        run.end_reason("completed")


async def run_turns(base_url: str, store: Store, *, turns: int) -> None:
    """``turns`` turns of each variant, one after the other (a call is one turn at a time)."""
    from openai import AsyncOpenAI

    async with AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-demo", max_retries=0) as client:
        # Outside any turn: the SDK's first request pays for lazy imports and setup.
        await client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "warm up"}], max_tokens=1
        )
        for variant, voice_model in VARIANTS:
            for n in range(turns):
                await turn(client, store, variant, voice_model, n)


def first_audio_split(run: WorkflowRun) -> dict[str, float]:
    """The wait for the first audio by stage: speech to text, the model, text to speech,
    (end of turn,) data, tool and overhead; they sum to the wait (`first_output_parts`,
    the split every report shows)."""
    from chainlat._core.stats import first_output_parts

    return first_output_parts(run.rollup) or {}


def render(console: Console, runs: Sequence[WorkflowRun]) -> None:
    """The median turn of each variant as a waterfall, its first-audio split, the budget."""
    from chainlat.budgets import Budgets, check_run, evaluate
    from chainlat.report import check_text, waterfall

    budgets = Budgets.model_validate({"workflows": {WORKFLOW: BUDGET}})
    for variant, voice_model in VARIANTS:
        mine = sorted(
            (r for r in runs if r.variant == variant and r.first_output_ms is not None),
            key=lambda r: r.first_output_ms or 0.0,
        )
        if not mine:
            console.print(f"[red]no turn of {variant} finished[/]")
            continue
        median = mine[len(mine) // 2]
        console.rule(
            f"{variant} ({voice_model}): median first audio {median.first_output_ms:.0f} ms"
        )
        broken = check_run(median, budgets.workflows[WORKFLOW])
        console.print(waterfall(median, broken), highlight=False, soft_wrap=True)
        split = ", ".join(f"{k} {v:.0f} ms" for k, v in first_audio_split(median).items())
        console.print(f"first audio by stage: {split}", highlight=False, soft_wrap=True)
        console.print(check_text(evaluate(mine, budgets)), highlight=False, soft_wrap=True)


def voice_main(args: argparse.Namespace) -> int:
    """``chainlat demo --voice`` with the demo's parsed arguments; returns the exit code."""
    from rich.console import Console

    from chainlat.demo import print_destination
    from chainlat.httpx import instrument_httpx, uninstrument_httpx
    from chainlat.sim import SimServer
    from chainlat.traces.sdk import runs_from_spans

    console = Console()
    destination = traces_path(args.traces_file)
    kept = keep_previous(destination) if destination is not None else None
    if kept is not None:
        console.print(f"the previous traces are kept in [bold]{kept}[/]", soft_wrap=True)
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    provider = chainlat.configure("chainlat-demo-voice", traces_file=args.traces_file)
    seen = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(seen))
    instrument_httpx()
    store = open_store()
    try:
        with SimServer(seed=args.seed) as sim:
            console.print(
                f"[bold]chainlat demo --voice[/]: {args.requests} turns of [bold]{WORKFLOW}[/] "
                f"per voice; models simulated at {sim.base_url}"
            )
            asyncio.run(run_turns(sim.base_url, store, turns=args.requests))
    finally:
        uninstrument_httpx()
    render(console, runs_from_spans(seen.get_finished_spans()))
    chainlat.shutdown()
    print_destination(console, args.traces_file)
    return EXIT_OK
