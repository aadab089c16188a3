"""``chainlat demo --voice --realtime``: the voice demo's conversation also spoken to a
speech-to-speech model, and the two waits for the first audio side by side.

The same turns (the caller's words of 1 to 1.75 s, then silence) are fed in real time,
100 ms of PCM16 at a time, to the simulator's ``/v1/realtime`` (``sim-realtime``) through
the real ``openai`` SDK's ``client.realtime.connect()``, traced by
:func:`chainlat.realtime.traced` as the workflow ``voice-agent-realtime``: one run per
turn, from where the caller stopped speaking to the end of the answer, its first output at
the first audio delta received. The server's VAD decides the end of each turn after
:data:`SILENCE_MS` of silence; the next turn is spoken once the answer is done.

Per turn, each cascade voice's first audio and its split (`first_output_parts`: end of
turn, speech to text, model, text to speech, data, overhead) are printed beside the
realtime session's, by the same definition (end of turn, the realtime model, tool, and
overhead: the round trip of the audio the server's detection needed and of the detection,
docs/voice.md).
"""

from __future__ import annotations

import asyncio
import base64
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from chainlat._core.runs import WorkflowRun

WORKFLOW: Final = "voice-agent-realtime"
"""The workflow of the turns spoken to the speech-to-speech model."""
MODEL: Final = "sim-realtime"
RATE: Final = 24_000
"""The Realtime API's PCM16 sample rate (mono)."""
CHUNK_MS: Final = 100
SILENCE_MS: Final = 300
"""The server VAD's ``silence_duration_ms``: the silence that ends a turn."""
ANSWER_TIMEOUT_S: Final = 10.0
"""The longest a turn waits for its answer before the next is spoken."""
BUDGET_TOML: Final = """
[workflows.voice-agent-realtime]
first_output = "2s"                         # every realtime turn, until the caller hears it
"""
"""The realtime workflow's limit, appended to the voice demo's budget with ``--realtime``."""


def pcm(ms: int, amplitude: int = 0) -> bytes:
    """``ms`` of PCM16 mono at 24 kHz, every sample ``amplitude``."""
    return amplitude.to_bytes(2, "little", signed=True) * (RATE * ms // 1000)


def speech(ms: int = CHUNK_MS) -> str:
    """Base64 PCM16 loud enough for the simulator's VAD (RMS 8,000), the caller's words."""
    return base64.b64encode(pcm(ms, 8000)).decode()


def silence(ms: int = CHUNK_MS) -> str:
    """Base64 PCM16 of zeros."""
    return base64.b64encode(pcm(ms)).decode()


def speech_ms(n: int) -> int:
    """How long the caller speaks in turn ``n``: the cascade's recording, 1 to 1.75 s."""
    return 1000 + 250 * (n % 4)


async def run_realtime_turns(base_url: str, *, turns: int) -> None:
    """``turns`` turns spoken to :data:`MODEL` in one session, each traced as a run of
    :data:`WORKFLOW`."""
    from openai import AsyncOpenAI

    import chainlat.realtime

    client = AsyncOpenAI(base_url=base_url + "/v1", api_key="sk-demo", max_retries=0)
    async with client.realtime.connect(model=MODEL) as connection:
        chainlat.realtime.traced(connection, workflow=WORKFLOW, variant=MODEL)
        session: Any = {
            "type": "realtime",
            "audio": {
                "input": {
                    "turn_detection": {"type": "server_vad", "silence_duration_ms": SILENCE_MS}
                }
            },
        }
        await connection.session.update(session=session)
        answered = asyncio.Event()

        async def listen() -> None:
            async for event in connection:
                if event.type == "response.done":
                    answered.set()

        listening = asyncio.create_task(listen())

        # One real-time schedule for the whole session, as a microphone's: the server's
        # audio clock (audio_end_ms) counts the chunks appended, and the turn starts are
        # read from it, so a chunk sent early would move every later turn's start.
        started = time.perf_counter()
        sent = 0

        async def say(chunk: str) -> None:
            nonlocal sent
            delay = started + sent * CHUNK_MS / 1000 - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await connection.input_audio_buffer.append(audio=chunk)
            sent += 1

        try:
            # The session's audio is one stream, as a call's: silence goes on between turns.
            for n in range(turns):
                answered.clear()
                for _ in range(speech_ms(n) // CHUNK_MS):
                    await say(speech())
                deadline = time.perf_counter() + ANSWER_TIMEOUT_S
                while not answered.is_set() and time.perf_counter() < deadline:
                    await say(silence())
                # A moment of silence after the answer, as a caller takes, before speaking.
                for _ in range(3):
                    await say(silence())
        finally:
            listening.cancel()
            await asyncio.gather(listening, return_exceptions=True)


def realtime_parts(run: WorkflowRun) -> dict[str, float]:
    """A realtime turn's wait for the first audio by part (`first_output_parts`, as the
    voice demo prints a cascade turn's: the end of turn, the realtime model's time to first
    audio, tool and overhead); for a turn whose end of turn is not known, the realtime
    model's and the overhead, the VAD's silence in it. They sum to the wait."""
    from chainlat._core.stats import first_output_parts

    rollup = run.rollup
    parts = first_output_parts(rollup)
    if parts is not None:
        return parts
    end_of_turn = rollup.first_output_end_of_turn_ms
    split = {
        "end_of_turn": end_of_turn,
        "realtime": rollup.first_output_inference_ms or 0.0,
        "tool": rollup.first_output_tool_ms or 0.0,
        "overhead": (rollup.first_output_overhead_ms or 0.0) - (end_of_turn or 0.0),
    }
    return {part: value for part, value in split.items() if value is not None}


def comparison(
    cascade: Sequence[WorkflowRun],
    realtime: Sequence[WorkflowRun],
    variants: Sequence[str],
    cascade_split: Callable[[WorkflowRun], dict[str, float]],
) -> Table:
    """Per turn, each cascade voice's first audio and its split beside the realtime
    session's, one row each (milliseconds; the split by ``cascade_split``, as the voice
    demo prints it)."""
    from rich.table import Table

    table = Table(title="first audio per turn: cascade and realtime", title_justify="left")
    table.add_column("turn", no_wrap=True)
    table.add_column("agent", no_wrap=True)
    table.add_column("first audio", justify="right", no_wrap=True)
    table.add_column("by stage (ms)")
    agents: list[tuple[str, list[WorkflowRun], Callable[[WorkflowRun], dict[str, float]]]] = [
        (
            variant,
            sorted((r for r in cascade if r.variant == variant), key=lambda r: r.start_ns),
            cascade_split,
        )
        for variant in variants
    ]
    agents.append(("realtime", sorted(realtime, key=lambda r: r.start_ns), realtime_parts))
    turns = max((len(runs) for _, runs, _ in agents), default=0)
    for n in range(turns):
        for agent, runs, split in agents:
            if n >= len(runs) or runs[n].first_output_ms is None:
                table.add_row(str(n + 1), agent, "none", "no first output")
                continue
            parts = ", ".join(f"{k} {v:.0f}" for k, v in split(runs[n]).items())
            table.add_row(str(n + 1), agent, f"{runs[n].first_output_ms:.0f} ms", parts)
        table.add_section()
    return table


def show(console: Console, table: Table) -> None:
    """Print the comparison."""
    console.rule("cascade and realtime, turn by turn")
    console.print(table, highlight=False, soft_wrap=True)
