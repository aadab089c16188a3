"""``run.user_stopped_speaking()``: the end of the caller's speech becomes the turn's start,
for the rollup, the wait for the first output and the exported span (an injected clock)."""

from __future__ import annotations

import logging

import pytest

import chainlat
from chainlat._core import attributes as attr
from chainlat.testing import Capture
from support.records import MS


def test_the_mark_is_the_turn_start_and_steps_before_it_are_clipped(cap: Capture) -> None:
    """STT streams while the caller speaks (0-300, the mark at 250): only its last 50 ms
    belong to the turn; the model and TTS follow."""
    p = cap.provider
    t0 = cap.clock()
    with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
        with chainlat.inference("stt-1", operation="speech_to_text", tracer_provider=p):
            cap.clock.advance(250)
            turn.user_stopped_speaking()  # 250
            cap.clock.advance(50)  # 300: the final transcript
        with chainlat.inference("llm-1", tracer_provider=p):
            cap.clock.advance(200)  # 500
        with chainlat.inference(
            "tts-1", operation="text_to_speech", user_facing=True, tracer_provider=p
        ) as tts:
            cap.clock.advance(100)
            tts.first_token()  # 600: the first audio byte
            cap.clock.advance(100)  # 700
    r = turn.rollup
    assert r is not None
    assert r.total_ms == 450.0
    assert r.speech_to_text_ms == 50.0
    assert r.first_output_ms == 350.0
    assert r.first_output_speech_to_text_ms == 50.0
    assert r.first_output_text_to_speech_ms == 100.0
    assert turn.duration_ms == 450.0
    span = cap.workflows()[0]
    assert span.start_time == t0 + 250 * MS
    assert span.end_time == t0 + 700 * MS
    assert cap.rollups()[0].total_ms == 450.0  # the exported span says the same


def test_a_step_that_ended_before_the_mark_counts_no_time(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
        with chainlat.data_stage("warm-cache", tracer_provider=p):
            cap.clock.advance(100)
        cap.clock.advance(50)
        turn.user_stopped_speaking()  # 150
        with chainlat.inference("llm-1", tracer_provider=p):
            cap.clock.advance(300)  # 450
    r = turn.rollup
    assert r is not None
    assert (r.total_ms, r.inference_ms, r.data_ms, r.overhead_ms) == (300.0, 300.0, 0.0, 0.0)
    assert r.step_count == 2


def test_the_last_mark_wins(cap: Capture) -> None:
    """A pause taken for the end of the turn, then the caller spoke again: the second end."""
    p = cap.provider
    t0 = cap.clock()
    with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
        cap.clock.advance(100)
        turn.user_stopped_speaking()  # 100
        cap.clock.advance(300)
        turn.user_stopped_speaking()  # 400
        with chainlat.inference("llm-1", tracer_provider=p):
            cap.clock.advance(200)  # 600
    assert turn.rollup is not None and turn.rollup.total_ms == 200.0
    assert cap.workflows()[0].start_time == t0 + 400 * MS


def test_at_ns_from_the_same_clock_is_the_mark(cap: Capture) -> None:
    p = cap.provider
    t0 = cap.clock()
    with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
        cap.clock.advance(300)
        turn.user_stopped_speaking(at_ns=t0 + 120 * MS)
        cap.clock.advance(100)  # 400
    assert turn.duration_ms == 280.0
    assert cap.workflows()[0].start_time == t0 + 120 * MS


def test_at_ns_from_another_clock_is_refused_and_logged(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    p = cap.provider
    t0 = cap.clock()
    with caplog.at_level(logging.ERROR, logger="chainlat"):
        with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
            cap.clock.advance(300)
            turn.user_stopped_speaking(at_ns=t0 + 10_000 * MS)  # later than now
            turn.user_stopped_speaking(at_ns=t0 - 1)  # before the workflow opened
            cap.clock.advance(100)
    assert turn.duration_ms == 400.0
    assert cap.workflows()[0].start_time == t0
    assert "user_stopped_speaking(at_ns=" in caplog.text


def test_without_a_mark_the_turn_starts_where_it_opened(cap: Capture) -> None:
    p = cap.provider
    t0 = cap.clock()
    with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
        cap.clock.advance(100)
    assert turn.duration_ms == 100.0 and cap.workflows()[0].start_time == t0


def test_a_first_output_marked_before_moves_with_the_start(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
        cap.clock.advance(100)
        t_mark = cap.clock()
        cap.clock.advance(200)
        turn.first_output()  # 300
        turn.user_stopped_speaking(at_ns=t_mark)  # 100
        cap.clock.advance(100)
    a = dict(cap.workflows()[0].attributes or {})
    assert a[attr.WORKFLOW_FIRST_OUTPUT_MS] == 200.0
    assert turn.rollup is not None and turn.rollup.first_output_ms == 200.0


def test_a_mark_after_the_first_output_or_the_end_is_ignored(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    p = cap.provider
    with caplog.at_level(logging.WARNING, logger="chainlat"):
        with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
            cap.clock.advance(100)
            turn.first_output()
            cap.clock.advance(100)
            turn.user_stopped_speaking()
        turn.user_stopped_speaking()
    assert turn.duration_ms == 200.0
    assert "after the first output" in caplog.text
    assert "after workflow 'invoke_workflow voice-turn' ended" in caplog.text


def test_a_bad_at_ns_is_logged_and_now_is_used(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    p = cap.provider
    with caplog.at_level(logging.WARNING, logger="chainlat"):
        with chainlat.workflow("voice-turn", tracer_provider=p) as turn:
            cap.clock.advance(100)
            turn.user_stopped_speaking(at_ns="soon")  # type: ignore[arg-type]
            cap.clock.advance(50)
    assert turn.duration_ms == 50.0
    assert "expected integer nanoseconds" in caplog.text


def test_without_an_sdk_provider_it_does_nothing() -> None:
    from opentelemetry.trace import NoOpTracerProvider

    with chainlat.workflow("voice-turn", tracer_provider=NoOpTracerProvider()) as turn:
        turn.user_stopped_speaking()
    assert turn.end_ns is not None


@pytest.mark.parametrize(
    "started_at_ns",
    [-1, 123_456_789_000],  # below zero; a time.monotonic_ns() reading, 1.8e12 ms too early
)
@pytest.mark.usefixtures("fresh_warnings")
def test_started_at_ns_from_another_clock_is_refused_and_logged(
    cap: Capture, caplog: pytest.LogCaptureFixture, started_at_ns: int
) -> None:
    """``started_at_ns`` is checked as ``at_ns`` is: a value from another clock is logged and
    the workflow starts where it opened, never exported with an impossible start."""
    p = cap.provider
    t0 = cap.clock()
    with caplog.at_level(logging.ERROR, logger="chainlat"):
        with chainlat.workflow(
            "voice-turn", started_at_ns=started_at_ns, tracer_provider=p
        ) as turn:
            cap.clock.advance(300)
    assert cap.workflows()[0].start_time == t0
    assert turn.duration_ms == 300.0
    assert "workflow(started_at_ns=" in caplog.text


def test_started_at_ns_within_a_day_of_now_is_the_start(cap: Capture) -> None:
    p = cap.provider
    t0 = cap.clock()
    day_before = t0 - 86_400_000 * MS
    with chainlat.workflow("voice-turn", started_at_ns=day_before, tracer_provider=p):
        cap.clock.advance(300)
    assert cap.workflows()[0].start_time == day_before
