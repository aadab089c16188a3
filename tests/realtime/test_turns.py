"""The turn logic of chainlat.realtime fed scripted event sequences on an injected clock:
exact starts, first outputs, tool steps and end reasons."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from chainlat._core import attributes as attr
from chainlat.realtime import RealtimeTurns
from chainlat.testing import Capture, capture

MS = 1_000_000


@pytest.fixture
def cap() -> Iterator[Capture]:
    with capture(fake_clock=True) as c:
        yield c


class Script:
    """Events at injected instants, in ms after the session's first audio."""

    def __init__(self, cap: Capture) -> None:
        self.cap = cap
        self.t0 = cap.clock()
        self.turns = RealtimeTurns(tracer_provider=cap.provider, clock=cap.clock)

    def at(self, ms: float) -> None:
        self.cap.clock.advance(ns=self.t0 + round(ms * MS) - self.cap.clock())

    def sent(self, ms: float, kind: str, **fields: Any) -> None:
        self.at(ms)
        self.turns.sent({"type": kind, **fields})

    def received(self, ms: float, kind: str, **fields: Any) -> None:
        self.at(ms)
        self.turns.received({"type": kind, **fields})

    def ms(self, ns: int | None) -> float:
        assert ns is not None
        return (ns - self.t0) / MS


def spans(cap: Capture, kind: str) -> list[ReadableSpan]:
    return [s for s in cap.spans() if (s.attributes or {}).get(attr.STEP_KIND) == kind]


USAGE = {
    "input_tokens": 30,
    "output_tokens": 50,
    "input_token_details": {"text_tokens": 10, "audio_tokens": 20},
    "output_token_details": {"text_tokens": 5, "audio_tokens": 45},
}


def vad_turn(s: Script, *, silence_ms: int = 500) -> None:
    turn = {"type": "server_vad", "silence_duration_ms": silence_ms}
    session = {"model": "gpt-realtime", "audio": {"input": {"turn_detection": turn}}}
    s.received(0, "session.updated", session=session)
    s.sent(0, "input_audio_buffer.append", audio="AAAA")
    s.sent(100, "input_audio_buffer.append", audio="AAAA")
    s.received(1000, "input_audio_buffer.speech_started", audio_start_ms=700)
    s.received(2000, "input_audio_buffer.speech_stopped", audio_end_ms=1900)
    s.received(2010, "response.created", response={"id": "resp_1"})


def test_a_turn_starts_at_the_end_of_speech_and_its_first_output_is_the_first_audio(
    cap: Capture,
) -> None:
    s = Script(cap)
    vad_turn(s)
    s.received(2300, "response.output_audio.delta", response_id="resp_1", delta="AAAA")
    s.received(2400, "response.output_audio.delta", response_id="resp_1", delta="AAAA")
    done = {"id": "resp_1", "status": "completed", "usage": USAGE, "output": []}
    s.received(2800, "response.done", response=done)
    [turn] = spans(cap, "workflow")
    [response] = spans(cap, "inference")
    # audio_end_ms 1900 less the 500 ms of silence the VAD waited: speech ended at 1400
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 2800)
    a = turn.attributes or {}
    assert a[attr.WORKFLOW_FIRST_OUTPUT_MS] == 900  # 2300 - 1400
    assert a[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "completed"
    assert (s.ms(response.start_time), s.ms(response.end_time)) == (2000, 2800)
    r = response.attributes or {}
    assert response.name == "realtime gpt-realtime"
    assert r[attr.GEN_AI_OPERATION_NAME] == "realtime"
    assert r[attr.LATENCY_TTFT_MS] == 300
    assert r[attr.GEN_AI_RESPONSE_ID] == "resp_1"
    assert (r[attr.GEN_AI_USAGE_INPUT_TOKENS], r[attr.GEN_AI_USAGE_OUTPUT_TOKENS]) == (30, 50)
    assert r[attr.GEN_AI_USAGE_AUDIO_INPUT_TOKENS] == 20
    assert r[attr.GEN_AI_USAGE_AUDIO_OUTPUT_TOKENS] == 45
    assert not any("AAAA" in str(v) for sp in cap.spans() for v in (sp.attributes or {}).values())


def test_a_function_call_is_a_tool_step_until_its_output_is_sent(cap: Capture) -> None:
    s = Script(cap)
    vad_turn(s)
    call = {"call_id": "call_1", "name": "weather", "arguments": '{"city":"Paris"}'}
    s.received(2250, "response.function_call_arguments.done", response_id="resp_1", **call)
    output = [{"type": "function_call", "call_id": "call_1"}]
    s.received(
        2260, "response.done", response={"id": "resp_1", "status": "completed", "output": output}
    )
    item = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    s.sent(2400, "conversation.item.create", item=item)
    s.sent(2405, "response.create")
    s.received(2410, "response.created", response={"id": "resp_2"})
    s.received(2700, "response.output_audio.delta", response_id="resp_2", delta="AAAA")
    s.received(3000, "response.done", response={"id": "resp_2", "status": "completed"})
    [turn] = spans(cap, "workflow")
    [tool] = spans(cap, "tool")
    first, second = sorted(spans(cap, "inference"), key=lambda sp: sp.start_time or 0)
    assert (s.ms(tool.start_time), s.ms(tool.end_time)) == (2250, 2400)
    assert (tool.attributes or {})[attr.GEN_AI_TOOL_NAME] == "weather"
    assert (s.ms(first.start_time), s.ms(first.end_time)) == (2000, 2260)
    assert (s.ms(second.start_time), s.ms(second.end_time)) == (2405, 3000)
    assert attr.LATENCY_TTFT_MS not in (first.attributes or {})
    assert (second.attributes or {})[attr.LATENCY_TTFT_MS] == 295
    a = turn.attributes or {}
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 3000)
    assert a[attr.WORKFLOW_FIRST_OUTPUT_MS] == 1300
    assert a[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "completed"
    assert not any("Paris" in str(v) for sp in cap.spans() for v in (sp.attributes or {}).values())


def test_speech_during_the_answer_ends_the_turn_interrupted(cap: Capture) -> None:
    s = Script(cap)
    vad_turn(s)
    s.received(2300, "response.output_audio.delta", response_id="resp_1", delta="AAAA")
    s.received(2600, "input_audio_buffer.speech_started", audio_start_ms=2500)
    s.received(2605, "response.done", response={"id": "resp_1", "status": "cancelled"})
    s.sent(2610, "conversation.item.truncate", item_id="item_1", audio_end_ms=300)
    [turn] = spans(cap, "workflow")
    [response] = spans(cap, "inference")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 2600)
    assert (s.ms(response.start_time), s.ms(response.end_time)) == (2000, 2600)
    a = turn.attributes or {}
    assert a[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "interrupted"
    assert a[attr.WORKFLOW_FIRST_OUTPUT_MS] == 900


def test_a_truncate_sent_during_the_turn_ends_it_interrupted(cap: Capture) -> None:
    s = Script(cap)
    vad_turn(s, silence_ms=200)
    s.received(2300, "response.output_audio.delta", response_id="resp_1", delta="AAAA")
    s.sent(2500, "conversation.item.truncate", item_id="item_1", audio_end_ms=200)
    [turn] = spans(cap, "workflow")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1700, 2500)
    assert (turn.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "interrupted"


def test_without_vad_the_turn_starts_at_the_clients_commit(cap: Capture) -> None:
    s = Script(cap)
    s.received(0, "session.updated", session={"model": "m", "turn_detection": None})
    s.sent(0, "input_audio_buffer.append", audio="AAAA")
    s.sent(800, "input_audio_buffer.commit")
    s.sent(805, "response.create")
    s.received(810, "response.created", response={"id": "r"})
    s.received(1100, "response.audio.delta", response_id="r", delta="AAAA")
    s.received(1500, "response.done", response={"id": "r", "status": "completed"})
    [turn] = spans(cap, "workflow")
    [response] = spans(cap, "inference")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (800, 1500)
    assert (turn.attributes or {})[attr.WORKFLOW_FIRST_OUTPUT_MS] == 300
    assert s.ms(response.start_time) == 805


def test_a_failed_response_fails_the_turn_and_a_closed_session_ends_one(cap: Capture) -> None:
    s = Script(cap)
    vad_turn(s)
    failed = {"id": "resp_1", "status": "failed", "status_details": {"type": "failed"}}
    s.received(2100, "response.done", response=failed)
    s.sent(3000, "input_audio_buffer.commit")
    s.at(3500)
    s.turns.closed()
    first, second = spans(cap, "workflow")
    assert first.status.status_code.name == "ERROR"
    assert (second.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "session_closed"
    assert (s.ms(second.start_time), s.ms(second.end_time)) == (3000, 3500)


@pytest.mark.parametrize(
    "event",
    [
        {"type": "response.done", "response": 5},
        {"type": "input_audio_buffer.speech_stopped", "audio_end_ms": "soon"},
        {"type": "response.function_call_arguments.done", "call_id": None},
        {"type": "session.updated", "session": {"audio": {"input": {"turn_detection": 3}}}},
        {"type": 7},
        {},
    ],
)
def test_odd_events_are_read_without_raising(cap: Capture, event: dict[str, Any]) -> None:
    s = Script(cap)
    s.turns.received(event)
    s.turns.sent(event)
    s.turns.closed()
