"""The turn logic of chainlat.realtime fed scripted event sequences on an injected clock:
exact starts, first outputs and their split, tool steps and end reasons (a barge-in during
the answer, and after its response.done while the client plays it)."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from chainlat._core import attributes as attr
from chainlat._core.rollup import Rollup
from chainlat._core.stats import first_output_parts
from chainlat.realtime import RealtimeTurns
from chainlat.testing import Capture, capture
from chainlat.traces.sdk import runs_from_spans

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


def rollups(cap: Capture) -> list[Rollup]:
    runs = sorted(runs_from_spans(cap.spans()), key=lambda r: r.start_ns)
    return [r.rollup for r in runs]


def audio(ms: int) -> str:
    """Base64 of ``ms`` of PCM16 at 24 kHz (48 bytes a millisecond), as a delta carries."""
    return base64.b64encode(bytes(48 * ms)).decode()


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
    assert not spans(cap, "workflow")  # held while the answer may still play
    s.at(5000)
    s.turns.closed()
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


def test_a_function_call_is_a_tool_step_from_its_response_done_until_its_output_is_sent(
    cap: Capture,
) -> None:
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
    s.sent(4000, "input_audio_buffer.commit")  # the next turn: this one was heard out
    [turn] = spans(cap, "workflow")
    [tool] = spans(cap, "tool")
    first, second = sorted(spans(cap, "inference"), key=lambda sp: sp.start_time or 0)
    assert (s.ms(tool.start_time), s.ms(tool.end_time)) == (2260, 2400)
    assert (tool.attributes or {})[attr.GEN_AI_TOOL_NAME] == "weather"
    assert (s.ms(first.start_time), s.ms(first.end_time)) == (2000, 2260)
    # asked for at 2405, started at its response.created: the server's answer
    assert (s.ms(second.start_time), s.ms(second.end_time)) == (2410, 3000)
    assert attr.LATENCY_TTFT_MS not in (first.attributes or {})
    assert (second.attributes or {})[attr.LATENCY_TTFT_MS] == 290
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
    s.turns.closed()
    [turn] = spans(cap, "workflow")
    [response] = spans(cap, "inference")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (800, 1500)
    assert (turn.attributes or {})[attr.WORKFLOW_FIRST_OUTPUT_MS] == 300
    assert s.ms(response.start_time) == 810  # its response.created


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


# -- the first output's split ------------------------------------------------------------


def test_a_vad_turns_first_output_splits_into_end_of_turn_and_model(cap: Capture) -> None:
    """From the end of the words (1400) to the speech_stopped received (2000) is the end of
    turn when the appends seen do not reach its audio_end_ms (the server counted audio the
    client was not seen to send); from there to the first audio (2300), the model's."""
    s = Script(cap)
    vad_turn(s)
    s.received(2300, "response.output_audio.delta", response_id="resp_1", delta=audio(100))
    s.received(2800, "response.done", response={"id": "resp_1", "status": "completed"})
    s.turns.closed()
    [rollup] = rollups(cap)
    parts = first_output_parts(rollup)
    assert parts == {"model": 300.0, "end_of_turn": 600.0, "data": 0.0, "tool": 0.0,
                     "overhead": 0.0}  # fmt: skip
    assert sum(parts.values()) == rollup.first_output_ms == 900.0
    [turn] = spans(cap, "workflow")
    assert (turn.attributes or {})[attr.CHAIN_FIRST_OUTPUT_END_OF_TURN_MS] == 600.0


def test_the_end_of_turn_runs_to_the_append_that_gave_the_server_its_detection(
    cap: Capture,
) -> None:
    """Audio sent 100 ms at a time, every 100 ms: the append that brought the session's
    audio to audio_end_ms 1900 went at 1800. The end of turn is 1400-1800; the round trip
    of that audio and of the detection (1800-2000) is overhead, not the model's."""
    s = Script(cap)
    turn = {"type": "server_vad", "silence_duration_ms": 500}
    session = {"model": "gpt-realtime", "audio": {"input": {"turn_detection": turn}}}
    s.received(0, "session.updated", session=session)
    for n in range(20):
        s.sent(100 * n, "input_audio_buffer.append", audio=audio(100))
    s.received(2000, "input_audio_buffer.speech_stopped", audio_end_ms=1900)
    s.received(2010, "response.created", response={"id": "resp_1"})
    s.received(2300, "response.output_audio.delta", response_id="resp_1", delta=audio(100))
    s.received(2800, "response.done", response={"id": "resp_1", "status": "completed"})
    s.turns.closed()
    [rollup] = rollups(cap)
    assert first_output_parts(rollup) == {
        "model": 300.0, "end_of_turn": 400.0, "data": 0.0, "tool": 0.0, "overhead": 200.0,
    }  # fmt: skip


def test_the_audio_sent_is_counted_in_the_sessions_input_format(cap: Capture) -> None:
    """G.711 is 8 bytes a millisecond: 100 ms of it is 800 bytes, so 1900 ms of audio was
    reached by the append sent at 1800 (read as PCM16 it would be past the audio sent)."""
    s = Script(cap)
    turn = {"type": "server_vad", "silence_duration_ms": 500}
    fmt = {"type": "audio/pcmu"}
    session = {"model": "m", "audio": {"input": {"turn_detection": turn, "format": fmt}}}
    s.received(0, "session.updated", session=session)
    for n in range(20):
        s.sent(100 * n, "input_audio_buffer.append", audio=base64.b64encode(bytes(800)).decode())
    s.received(2000, "input_audio_buffer.speech_stopped", audio_end_ms=1900)
    s.received(2300, "response.output_audio.delta", response_id="", delta=audio(100))
    s.turns.closed()
    [rollup] = rollups(cap)
    assert rollup.first_output_end_of_turn_ms == 400.0


def test_a_committed_turn_has_no_end_of_turn_wait(cap: Capture) -> None:
    """The client decided the turn at its commit, the turn's start: an end of turn of 0;
    the wait before its response.create (5 ms) and the round trip to its response.created
    (5 ms) overhead; the model's from there."""
    s = Script(cap)
    s.received(0, "session.updated", session={"model": "m", "turn_detection": None})
    s.sent(0, "input_audio_buffer.append", audio="AAAA")
    s.sent(800, "input_audio_buffer.commit")
    s.sent(805, "response.create")
    s.received(810, "response.created", response={"id": "r"})
    s.received(1100, "response.audio.delta", response_id="r", delta=audio(100))
    s.received(1500, "response.done", response={"id": "r", "status": "completed"})
    s.turns.closed()
    [rollup] = rollups(cap)
    assert first_output_parts(rollup) == {
        "model": 290.0, "end_of_turn": 0.0, "data": 0.0, "tool": 0.0, "overhead": 10.0,
    }  # fmt: skip


def test_a_tool_turns_split_sums_to_its_first_output(cap: Capture) -> None:
    s = Script(cap)
    vad_turn(s)
    call = {"call_id": "call_1", "name": "weather", "arguments": "{}"}
    s.received(2250, "response.function_call_arguments.done", response_id="resp_1", **call)
    output = [{"type": "function_call", "call_id": "call_1"}]
    s.received(
        2260, "response.done", response={"id": "resp_1", "status": "completed", "output": output}
    )
    item = {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
    s.sent(2400, "conversation.item.create", item=item)
    s.sent(2405, "response.create")
    s.received(2410, "response.created", response={"id": "resp_2"})
    s.received(2700, "response.output_audio.delta", response_id="resp_2", delta=audio(100))
    s.received(3000, "response.done", response={"id": "resp_2", "status": "completed"})
    s.turns.closed()
    [rollup] = rollups(cap)
    parts = first_output_parts(rollup)
    # 1400-2000 end of turn, 2000-2260 the first response, 2260-2400 the tool, 2400-2410
    # the client and the round trip, 2410-2700 the second response
    assert parts == {"model": 550.0, "end_of_turn": 600.0, "data": 0.0, "tool": 140.0,
                     "overhead": 10.0}  # fmt: skip
    assert sum(parts.values()) == rollup.first_output_ms == 1300.0


def session_of_turns(s: Script, lags_ms: list[int], model_ms: int = 300) -> None:
    """One turn a second: the words end at 1000 n + 400, the VAD's 500 ms of silence, the
    speech_stopped received ``lag`` later; the first audio ``model_ms`` after it."""
    turn = {"type": "server_vad", "silence_duration_ms": 500}
    session = {"model": "gpt-realtime", "audio": {"input": {"turn_detection": turn}}}
    s.received(0, "session.updated", session=session)
    s.sent(0, "input_audio_buffer.append", audio="AAAA")
    for n, lag in enumerate(lags_ms):
        base = 2000 * n
        s.received(base + lag + 900, "input_audio_buffer.speech_stopped", audio_end_ms=base + 900)
        s.received(base + lag + 905, "response.created", response={"id": f"resp_{n}"})
        delta = {"response_id": f"resp_{n}", "item_id": f"item_{n}", "delta": audio(100)}
        s.received(base + lag + 900 + model_ms, "response.output_audio.delta", **delta)
        s.received(base + lag + 1500, "response.done", response={"id": f"resp_{n}"})
    s.turns.closed()


def test_the_end_of_turn_part_is_the_value_its_budget_key_judges(cap: Capture) -> None:
    from chainlat._core.stats import aggregate
    from chainlat.budgets import Budgets, evaluate

    s = Script(cap)
    session_of_turns(s, [50, 100, 150])
    runs = runs_from_spans(cap.spans())
    budgets = {
        "first_output_end_of_turn": "620ms",  # every turn: the 650 ms one breaks it
        "p50": {"first_output_end_of_turn": "1s"},
        "operations": {"realtime": {"p50": {"first_output": "1s"}}},
        "steps": {"realtime gpt-realtime": {"ttft_p50": "1s"}},
    }
    report = evaluate(runs, Budgets.model_validate({"workflows": {"realtime-turn": budgets}}))
    judged = {v.target: v.actual_ms for v in report.verdicts}
    assert [v.target for v in report.broken] == ["first_output_end_of_turn"]
    assert judged == {
        "first_output_end_of_turn": 650.0,
        "p50.first_output_end_of_turn": 600.0,  # 500 of silence and the 100 ms lag
        "operations.realtime.p50.first_output": 300.0,
        'steps."realtime gpt-realtime".ttft_p50': 300.0,
    }
    split = aggregate(runs).workflows["realtime-turn"].first_output_split
    assert split["end_of_turn"].sorted() == [550.0, 600.0, 650.0]
    assert split["end_of_turn"].percentile(50) == judged["p50.first_output_end_of_turn"]
    assert split["model"].percentile(50) == judged["operations.realtime.p50.first_output"]
    # A speech-to-speech turn has no speech parts: they are left out, not shown empty.
    assert list(split) == ["model", "end_of_turn", "data", "tool", "overhead"]


def test_report_json_holds_the_realtime_split(cap: Capture) -> None:
    from chainlat._core.stats import aggregate
    from chainlat.report import stats_json

    s = Script(cap)
    session_of_turns(s, [50, 100, 150])
    document = stats_json(aggregate(runs_from_spans(cap.spans())))
    split = document["workflows"]["realtime-turn"]["first_output_split"]
    assert split["end_of_turn"]["p50_ms"] == 600.0
    assert split["model"]["max_ms"] == 300.0
    assert split["overhead"]["max_ms"] == 0.0
    assert "speech_to_text" not in split and "text_to_speech" not in split


# -- barge-in after the answer was done, while the client plays it ------------------------


def answered(s: Script) -> None:
    """A VAD turn whose answer, 200 ms of audio in two deltas, was done at 2500."""
    vad_turn(s)
    for at in (2300, 2400):
        delta = {"response_id": "resp_1", "item_id": "item_1", "delta": audio(100)}
        s.received(at, "response.output_audio.delta", **delta)
    s.received(2500, "response.done", response={"id": "resp_1", "status": "completed"})


def test_a_truncate_short_of_the_audio_received_after_done_interrupts(cap: Capture) -> None:
    """The client stopped its playout 150 ms into the 200 ms it received: the caller cut the
    answer off, though its response was done."""
    s = Script(cap)
    answered(s)
    s.received(2550, "input_audio_buffer.speech_started", audio_start_ms=2500)
    s.sent(2560, "conversation.item.truncate", item_id="item_1", content_index=0,
           audio_end_ms=150)  # fmt: skip
    [turn] = spans(cap, "workflow")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 2560)
    a = turn.attributes or {}
    assert a[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "interrupted"
    assert a[attr.WORKFLOW_FIRST_OUTPUT_MS] == 900


def test_a_truncate_at_the_end_of_the_audio_leaves_the_turn_completed(cap: Capture) -> None:
    s = Script(cap)
    answered(s)
    s.sent(2700, "conversation.item.truncate", item_id="item_1", content_index=0,
           audio_end_ms=200)  # fmt: skip
    [turn] = spans(cap, "workflow")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 2500)
    assert (turn.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "completed"


def test_speech_after_done_without_a_truncate_is_the_next_turn(cap: Capture) -> None:
    """The client did not stop the audio: the caller heard the answer out; the turn ends at
    its response.done when the next one starts."""
    s = Script(cap)
    answered(s)
    s.received(3000, "input_audio_buffer.speech_started", audio_start_ms=2900)
    s.sent(3100, "conversation.item.truncate", item_id="item_0", audio_end_ms=10)  # not ours
    assert not spans(cap, "workflow")
    s.received(4000, "input_audio_buffer.speech_stopped", audio_end_ms=3900)
    [turn] = spans(cap, "workflow")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 2500)
    assert (turn.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "completed"
    s.turns.closed()
    _, second = sorted(spans(cap, "workflow"), key=lambda sp: sp.start_time or 0)
    assert s.ms(second.start_time) == 3400


def test_a_held_turn_is_released_completed_once_its_audio_was_surely_heard_out(
    cap: Capture,
) -> None:
    """The answer's 200 ms of audio, from its first delta at 2300, could have played out by
    2500: the client's appends (its microphone, streamed all along) keep the turn held for
    PLAYOUT_SLACK_MS more, then the first one past that ends it completed at its
    response.done, and a truncate after that is no longer read as a barge-in."""
    s = Script(cap)
    answered(s)
    s.sent(4499, "input_audio_buffer.append", audio="AAAA")
    assert not spans(cap, "workflow")
    s.sent(4500, "input_audio_buffer.append", audio="AAAA")
    [turn] = spans(cap, "workflow")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 2500)
    assert (turn.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "completed"
    s.sent(4600, "conversation.item.truncate", item_id="item_1", audio_end_ms=50)
    assert len(spans(cap, "workflow")) == 1


def test_a_long_answer_is_held_while_it_may_still_play(cap: Capture) -> None:
    """3 s of audio received in 10 ms could play until 5300: a truncate at 7000, short of
    it, is still the caller cutting the answer off."""
    s = Script(cap)
    vad_turn(s)
    for at in (2300, 2310):
        delta = {"response_id": "resp_1", "item_id": "item_1", "delta": audio(1500)}
        s.received(at, "response.output_audio.delta", **delta)
    s.received(2500, "response.done", response={"id": "resp_1", "status": "completed"})
    s.sent(6900, "input_audio_buffer.append", audio="AAAA")  # within 5300 + 2000
    assert not spans(cap, "workflow")
    s.sent(7000, "conversation.item.truncate", item_id="item_1", audio_end_ms=1000)
    [turn] = spans(cap, "workflow")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 7000)
    assert (turn.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "interrupted"


def test_a_text_answer_is_released_the_slack_after_its_response_done(cap: Capture) -> None:
    s = Script(cap)
    vad_turn(s)
    s.received(2300, "response.output_text.delta", response_id="resp_1", delta="Hi")
    s.received(2500, "response.done", response={"id": "resp_1", "status": "completed"})
    s.received(4499, "rate_limits.updated")
    assert not spans(cap, "workflow")
    s.received(4500, "rate_limits.updated")
    [turn] = spans(cap, "workflow")
    assert (
        s.ms(turn.end_time),
        (turn.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON],
    ) == (
        2500,
        "completed",
    )


def test_a_barge_in_during_the_response_ends_the_turn_there(cap: Capture) -> None:
    """speech_started before response.done: interrupted at it; the cancelled response.done
    and the truncate that follow change nothing."""
    s = Script(cap)
    vad_turn(s)
    delta = {"response_id": "resp_1", "item_id": "item_1", "delta": audio(100)}
    s.received(2300, "response.output_audio.delta", **delta)
    s.received(2350, "input_audio_buffer.speech_started", audio_start_ms=2250)
    s.received(2355, "response.done", response={"id": "resp_1", "status": "cancelled"})
    s.sent(2360, "conversation.item.truncate", item_id="item_1", audio_end_ms=50)
    [turn] = spans(cap, "workflow")
    assert (s.ms(turn.start_time), s.ms(turn.end_time)) == (1400, 2350)
    assert (turn.attributes or {})[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "interrupted"


def test_a_first_append_that_holds_the_whole_utterance_is_the_one_that_reached_it(
    cap: Capture,
) -> None:
    """A client that sends its recording at once (2 s of audio at 0): the detection's audio
    was sent then, before the turn's start, so the end of turn is 0 and the round trip
    (1500 to 2000) is overhead."""
    s = Script(cap)
    turn = {"type": "server_vad", "silence_duration_ms": 500}
    session = {"model": "m", "audio": {"input": {"turn_detection": turn}}}
    s.received(0, "session.updated", session=session)
    s.sent(0, "input_audio_buffer.append", audio=audio(2000))
    s.received(2000, "input_audio_buffer.speech_stopped", audio_end_ms=2000)
    s.received(2300, "response.output_audio.delta", response_id="", delta=audio(100))
    s.turns.closed()
    [rollup] = rollups(cap)
    assert first_output_parts(rollup) == {
        "model": 300.0, "end_of_turn": 0.0, "data": 0.0, "tool": 0.0, "overhead": 500.0,
    }  # fmt: skip


def test_a_semantic_vad_turn_says_its_start_is_no_known_end_of_the_words(cap: Capture) -> None:
    """``semantic_vad`` (the default of the OpenAI Agents SDK's and LiveKit's realtime
    sessions) waits as long as its model decides: the turn starts at audio_end_ms 1900, less
    no silence, and says so; what counts from its start is then not judged (rule 16), read
    from the trace or live. A later ``server_vad`` session's turn is measured again."""
    from chainlat._core.voice import SEMANTIC_VAD_START, UNKNOWN_START_QUANTITIES
    from chainlat._runtime.budgets import run_from_handle

    s = Script(cap)
    session = {"model": "m", "audio": {"input": {"turn_detection": {"type": "semantic_vad"}}}}
    s.received(0, "session.updated", session=session)
    s.sent(0, "input_audio_buffer.append", audio="AAAA")
    s.received(2000, "input_audio_buffer.speech_stopped", audio_end_ms=1900)
    live = s.turns._turn
    assert live is not None
    s.received(2010, "response.created", response={"id": "r1"})
    s.received(2300, "response.output_audio.delta", response_id="r1", delta=audio(100))
    s.received(2800, "response.done", response={"id": "r1", "status": "completed"})
    turn = {"type": "server_vad", "silence_duration_ms": 500}
    s.received(3000, "session.updated", session={"audio": {"input": {"turn_detection": turn}}})
    s.received(5000, "input_audio_buffer.speech_stopped", audio_end_ms=4900)
    s.received(5010, "response.created", response={"id": "r2"})
    s.received(5300, "response.output_audio.delta", response_id="r2", delta=audio(100))
    s.received(5800, "response.done", response={"id": "r2", "status": "completed"})
    s.turns.closed()
    first, second = sorted(spans(cap, "workflow"), key=lambda sp: sp.start_time or 0)
    assert s.ms(first.start_time) == 1900
    assert (first.attributes or {})[attr.WORKFLOW_START_UNKNOWN] == SEMANTIC_VAD_START
    assert s.ms(second.start_time) == 4400
    assert attr.WORKFLOW_START_UNKNOWN not in (second.attributes or {})
    read = sorted(runs_from_spans(cap.spans()), key=lambda r: r.start_ns)
    assert [r.unknown_start for r in read] == [SEMANTIC_VAD_START, None]
    assert [r.first_output_ms for r in read] == [400.0, 900.0]
    held = run_from_handle(live.workflow)
    assert held is not None and held.unknown_start == SEMANTIC_VAD_START
    assert "first_output" in UNKNOWN_START_QUANTITIES
