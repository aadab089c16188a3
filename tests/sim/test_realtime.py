"""The simulator's Realtime endpoint (/v1/realtime) through the real openai SDK and raw
WebSockets: server VAD, responses on the profile's clock, tools, barge-in, errors."""

from __future__ import annotations

import asyncio
import base64
import json
import math
import time
from typing import Any

import openai
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from chainlat.sim import SimServer
from chainlat.sim._realtime import REALTIME_PROFILES
from support.realtime import feed, silence, speech, utterance

WEATHER = {
    "type": "function",
    "name": "weather",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
FIRST_AUDIO_MS = REALTIME_PROFILES[0].first_byte_ms


def vad_session(silence_ms: int = 200, **more: Any) -> Any:
    turn = {"type": "server_vad", "silence_duration_ms": silence_ms}
    return {"type": "realtime", "audio": {"input": {"turn_detection": turn}}, **more}


async def collect(connection: Any, until: str, into: list[tuple[float, Any]]) -> Any:
    """Receive events (with perf_counter stamps) until one of type ``until``."""
    async for event in connection:
        into.append((time.perf_counter(), event))
        if event.type == until:
            return event
    raise AssertionError(f"connection closed before {until}")


def types(events: list[tuple[float, Any]]) -> list[str]:
    return [e.type for _, e in events]


def test_a_vad_turn_is_detected_on_the_audio_clock_and_answered_with_silent_audio() -> None:
    async def run() -> float:
        """One turn, every check held; how long the first audio took after response.created."""
        async with SimServer() as sim:
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
            async with client.realtime.connect(model="sim-realtime") as conn:
                await conn.session.update(session=vad_session(max_output_tokens=3))
                events: list[tuple[float, Any]] = []
                feeding = asyncio.create_task(
                    feed(lambda a: conn.input_audio_buffer.append(audio=a), utterance(500, 400))
                )
                done = await collect(conn, "response.done", events)
                await feeding
        names = types(events)
        assert (
            names.index("input_audio_buffer.speech_started")
            < names.index("input_audio_buffer.speech_stopped")
            < names.index("input_audio_buffer.committed")
            < names.index("response.created")
        )
        started = next(e for _, e in events if e.type == "input_audio_buffer.speech_started")
        stopped = next(e for _, e in events if e.type == "input_audio_buffer.speech_stopped")
        assert started.audio_start_ms == 0
        assert stopped.audio_end_ms == 700  # 500 ms of speech and the 200 ms of silence waited
        deltas = [(t, e) for t, e in events if e.type == "response.output_audio.delta"]
        audio = b"".join(base64.b64decode(e.delta) for _, e in deltas)
        assert audio and audio == bytes(len(audio)) and len(audio) % 2 == 0
        created_at = next(t for t, e in events if e.type == "response.created")
        first_audio_ms = (deltas[0][0] - created_at) * 1000
        assert done.response.status == "completed"
        usage = done.response.usage
        assert usage.input_token_details.audio_tokens == 7  # 700 ms committed, one per 100 ms
        assert usage.output_token_details.audio_tokens == math.ceil(len(audio) / 2 / 24 / 50)
        assert usage.output_token_details.text_tokens == 3
        return first_audio_ms

    # Seen by the client's receive times: within 5 ms early (the sim sends the first audio
    # no sooner than its first byte after response.created: `sleep_until`) and 30 ms late
    # in one of a few turns. A loaded machine's scheduling delays some events: a late
    # response.created reads the turn early (by 5.04 ms once, the sim's schedule right),
    # a late delta reads it late. A sim early or late in every turn fails.
    def held(ms: float) -> bool:
        return FIRST_AUDIO_MS - 5 <= ms <= FIRST_AUDIO_MS + 30

    first_audio_ms = [asyncio.run(run())]
    while not held(first_audio_ms[-1]) and len(first_audio_ms) < 5:
        first_audio_ms.append(asyncio.run(run()))
    assert held(first_audio_ms[-1]), first_audio_ms


def test_a_tool_call_waits_for_its_output_and_a_new_response() -> None:
    async def run() -> list[str]:
        async with SimServer() as sim:
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
            async with client.realtime.connect(model="sim-realtime-mini") as conn:
                session: Any = {"type": "realtime", "tools": [WEATHER], "max_output_tokens": 2}
                session["audio"] = {"input": {"turn_detection": None}}
                await conn.session.update(session=session)
                for _ in range(3):
                    await conn.input_audio_buffer.append(audio=speech())
                await conn.input_audio_buffer.commit()
                await conn.response.create()
                events: list[tuple[float, Any]] = []
                call = await collect(conn, "response.function_call_arguments.done", events)
                assert call.name == "weather" and set(json.loads(call.arguments)) == {"city"}
                await collect(conn, "response.done", events)
                item: Any = {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": "sun",
                }
                await conn.conversation.item.create(item=item)
                await conn.response.create()
                done = await collect(conn, "response.done", events)
                assert done.response.status == "completed"
                return types(events)

    names = asyncio.run(run())
    assert "conversation.item.added" in names
    assert names.count("response.created") == 2
    assert names.index("response.function_call_arguments.done") < names.index(
        "response.output_audio.delta"
    )


def test_speech_during_a_response_cancels_it_and_the_client_truncates() -> None:
    async def run() -> list[str]:
        async with SimServer() as sim:
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
            async with client.realtime.connect(model="sim-realtime") as conn:
                await conn.session.update(session=vad_session(max_output_tokens=60))
                events: list[tuple[float, Any]] = []
                await feed(lambda a: conn.input_audio_buffer.append(audio=a), utterance(300, 200))
                await collect(conn, "response.output_audio.delta", events)
                item_id = events[-1][1].item_id
                await conn.input_audio_buffer.append(audio=speech())
                done = await collect(conn, "response.done", events)
                assert done.response.status == "cancelled"
                assert done.response.status_details.reason == "turn_detected"
                await conn.conversation.item.truncate(
                    item_id=item_id, content_index=0, audio_end_ms=100
                )
                truncated = await collect(conn, "conversation.item.truncated", events)
                assert truncated.audio_end_ms == 100
                return types(events)

    names = asyncio.run(run())
    assert names.index("input_audio_buffer.speech_started") < names.index("response.done")


def test_bad_input_is_an_error_event_and_the_session_goes_on() -> None:
    async def run() -> list[dict[str, Any]]:
        async with SimServer() as sim:
            url = f"ws://127.0.0.1:{sim.port}/v1/realtime?model=sim-realtime"
            async with connect(url) as ws:
                json.loads(await ws.recv())  # session.created
                bad: list[str | bytes] = [
                    "not json",
                    "[1, 2]",
                    json.dumps({"type": "no.such.event"}),
                    json.dumps({"type": "input_audio_buffer.append", "audio": "!!"}),
                    json.dumps({"type": "session.update", "session": {"turn_detection": 3}}),
                    json.dumps({"type": "input_audio_buffer.commit"}),
                    json.dumps({"type": "conversation.item.truncate", "item_id": "x"}),
                    json.dumps({"type": "response.cancel"}),
                    json.dumps({"type": "conversation.item.create", "item": {"type": "x"}}),
                    b"\x00binary",
                    '{"type": "session.update", "session": ' + "[" * 200 + "]" * 200 + "}",
                ]
                answers = []
                for message in bad:
                    await ws.send(message)
                    answers.append(json.loads(await ws.recv()))
                await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": silence()}))
                await ws.send(json.dumps({"type": "input_audio_buffer.clear"}))
                answers.append(json.loads(await ws.recv()))
                return answers

    answers = asyncio.run(run())
    assert [a["type"] for a in answers] == ["error"] * 11 + ["input_audio_buffer.cleared"]
    assert answers[3]["error"]["param"] == "audio"
    assert answers[5]["error"]["code"] == "input_audio_buffer_commit_empty"


def test_an_unknown_model_or_a_plain_get_is_refused_before_the_upgrade() -> None:
    async def run() -> list[int]:
        statuses = []
        async with SimServer() as sim:
            for query in ("?model=gpt-4o", ""):
                with pytest.raises(InvalidStatus) as caught:
                    async with connect(f"ws://127.0.0.1:{sim.port}/v1/realtime{query}"):
                        pass
                statuses.append(caught.value.response.status_code)
        return statuses

    assert asyncio.run(run()) == [404, 400]
    with SimServer() as sim:
        import httpx

        assert httpx.get(sim.base_url + "/v1/realtime?model=sim-realtime").status_code == 426


def test_a_beta_client_gets_the_beta_event_names() -> None:
    async def run() -> list[str]:
        async with SimServer() as sim:
            url = f"ws://127.0.0.1:{sim.port}/v1/realtime?model=sim-realtime-mini"
            async with connect(url, additional_headers={"OpenAI-Beta": "realtime=v1"}) as ws:
                session = {"turn_detection": None, "max_response_output_tokens": 1}
                await ws.send(json.dumps({"type": "session.update", "session": session}))
                await ws.send(json.dumps({"type": "response.create"}))
                names: list[str] = []
                while not names or names[-1] != "response.done":
                    names.append(json.loads(await ws.recv())["type"])
                return names

    names = asyncio.run(run())
    assert "response.audio.delta" in names and "response.output_audio.delta" not in names
    assert "response.audio_transcript.done" in names


def test_a_responses_output_items_join_the_conversation() -> None:
    """After ``response.output_item.added`` its item is ``conversation.item.added`` (after
    the item before it), and ``conversation.item.done`` after ``response.output_item.done``,
    as OpenAI sends them: a function call, then the spoken answer."""

    async def run() -> list[tuple[float, Any]]:
        async with SimServer() as sim:
            client = openai.AsyncOpenAI(base_url=sim.base_url + "/v1", api_key="sk-test")
            async with client.realtime.connect(model="sim-realtime-mini") as conn:
                session: Any = {"type": "realtime", "tools": [WEATHER], "max_output_tokens": 2}
                session["audio"] = {"input": {"turn_detection": None}}
                await conn.session.update(session=session)
                for _ in range(3):
                    await conn.input_audio_buffer.append(audio=speech())
                await conn.input_audio_buffer.commit()
                await conn.response.create()
                events: list[tuple[float, Any]] = []
                call = await collect(conn, "response.function_call_arguments.done", events)
                await collect(conn, "response.done", events)
                item: Any = {"type": "function_call_output", "call_id": call.call_id}
                item["output"] = "sun"
                await conn.conversation.item.create(item=item)
                await conn.response.create()
                await collect(conn, "response.done", events)
                return events

    events = [e for _, e in asyncio.run(run())]
    names = [e.type for e in events]
    outputs = [i for i, name in enumerate(names) if name == "response.output_item.added"]
    assert len(outputs) == 2
    added = [e for e in events if e.type == "conversation.item.added"]
    user, call, result, answer = (e.item for e in added)
    assert (user.type, call.type, result.type, answer.type) == (
        "message",
        "function_call",
        "function_call_output",
        "message",
    )
    assert answer.role == "assistant"
    for index, item in zip(outputs, (call, answer), strict=True):
        assert names[index + 1] == "conversation.item.added"
        assert events[index + 1].item.id == events[index].item.id == item.id
    assert [e.previous_item_id for e in added] == [None, user.id, call.id, result.id]
    done = [i for i, name in enumerate(names) if name == "response.output_item.done"]
    for index in done:
        assert names[index + 1] == "conversation.item.done"
        assert names[index + 2] == "response.done"
