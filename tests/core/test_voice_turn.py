"""A voice turn on an injected clock: the critical path and the split of the time to first
audio when text to speech starts on the model's first sentence while the model streams."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

import chainlat
from chainlat._core import attributes as attr
from chainlat._core.rollup import Rollup, compute_rollup
from chainlat._core.runs import inconsistency
from chainlat.testing import Capture
from support.records import MS, rec
from support.voice import voice_turn


def test_first_audio_is_split_along_the_model_writing_the_first_sentence(cap: Capture) -> None:
    r = voice_turn(cap)
    assert r.first_output_ms == 520.0
    assert r.first_output_split() == {
        "inference": 120.0 + 220.0 + 120.0,  # STT, the model to the first sentence, TTS
        "data": 40.0,
        "tool": 0.0,
        "overhead": 20.0,  # end of speech to the turn's detection
    }
    assert r.first_output_speech_to_text_ms == 120.0
    assert r.first_output_text_to_speech_ms == 120.0


def test_the_whole_turn_is_split_by_operation(cap: Capture) -> None:
    r = voice_turn(cap)
    assert r.total_ms == 1100.0
    assert r.critical_path == ("speech_to_text stt-1", "data kb", "answer", "text_to_speech tts-1")
    assert (r.inference_ms, r.data_ms, r.tool_ms, r.overhead_ms) == (1040.0, 40.0, 0.0, 20.0)
    assert r.speech_to_text_ms == 120.0
    assert r.text_to_speech_ms == 500.0  # the model's share: 1040 - 120 - 500 = 420


def test_the_turn_span_carries_the_split_and_reads_back(cap: Capture) -> None:
    voice_turn(cap)
    span = cap.workflows()[0]
    a = dict(span.attributes or {})
    assert a[attr.CHAIN_FIRST_OUTPUT_SPEECH_TO_TEXT_MS] == 120.0
    assert a[attr.CHAIN_FIRST_OUTPUT_TEXT_TO_SPEECH_MS] == 120.0
    assert a[attr.CHAIN_SPEECH_TO_TEXT_MS] == 120.0
    assert a[attr.CHAIN_TEXT_TO_SPEECH_MS] == 500.0
    assert span.start_time is not None and span.end_time is not None
    assert span.end_time - span.start_time == 1100 * MS  # started at the end of speech
    assert cap.rollups()[0].first_output_text_to_speech_ms == 120.0
    tts = [s for s in cap.spans() if s.name == "text_to_speech tts-1"]
    assert all((s.attributes or {})[attr.GEN_AI_OUTPUT_TYPE] == "speech" for s in tts)


def test_without_a_speech_call_overlapping_steps_keep_the_walk_as_it_was() -> None:
    # The same shape with a chat call in place of TTS: the gap stays overhead (no change
    # for runs that are not voice turns).
    root = rec(1, None, "invoke_workflow w", 0, 700, "workflow")
    spans = [
        rec(2, 1, "chat a", 0, 600, "inference", ttft_ms=150.0),
        rec(3, 1, "chat b", 400, 700, "inference", ttft_ms=120.0, user_facing=True),
    ]
    r = compute_rollup(root, spans)
    assert r.first_output_split() == {
        "inference": 120.0,
        "data": 0.0,
        "tool": 0.0,
        "overhead": 400.0,
    }
    assert r.speech_to_text_ms is None and r.first_output_text_to_speech_ms is None


def test_end_reason_is_recorded_on_the_turn(cap: Capture) -> None:
    voice_turn(cap, end_reason="interrupted")
    a = dict(cap.workflows()[0].attributes or {})
    assert a[attr.GEN_AI_AGENT_INVOCATION_END_REASON] == "interrupted"


def test_an_unknown_end_reason_is_logged_not_raised(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="chainlat"):
        voice_turn(cap, end_reason="hung-up")
    assert attr.GEN_AI_AGENT_INVOCATION_END_REASON not in (cap.workflows()[0].attributes or {})
    assert "end_reason" in caplog.text


def test_a_start_later_than_now_is_ignored(cap: Capture) -> None:
    with chainlat.workflow(
        "w", started_at_ns=cap.clock() + 5 * MS, tracer_provider=cap.provider
    ) as run:
        cap.clock.advance(10)
    assert run.duration_ms == 10.0


def test_a_model_call_timed_at_the_wire_still_covers_the_first_sentence() -> None:
    """The model call wrapped by hand around its wire span: the wire span is what runs
    through the gap before TTS, and the call is on the path to the first audio."""
    root = rec(1, None, "invoke_workflow voice-turn", 0, 1100, "workflow")
    spans = [
        rec(2, 1, "speech_to_text stt-1", 20, 140, "inference", operation="speech_to_text"),
        rec(3, 1, "data kb", 140, 180, "data"),
        rec(4, 1, "answer", 180, 600, "inference", operation="chat", source="chainlat"),
        rec(5, 4, "chat llm-1", 182, 598, "inference", operation="chat", source="http",
            ttft_ms=148.0, streamed=True),
        rec(6, 1, "text_to_speech tts-1", 400, 900, "inference", operation="text_to_speech",
            ttft_ms=120.0, user_facing=True),
        rec(7, 1, "text_to_speech tts-1", 600, 1100, "inference", operation="text_to_speech"),
    ]  # fmt: skip
    r = compute_rollup(root, spans)
    assert r.first_output_ms == 520.0
    assert r.first_output_split() == {
        "inference": 120.0 + 218.0 + 120.0,  # the wire span from 182 to the first sentence
        "data": 40.0,
        "tool": 0.0,
        "overhead": 20.0 + 2.0,  # the client's 2 ms before the request went out
    }
    assert (r.first_output_speech_to_text_ms, r.first_output_text_to_speech_ms) == (120.0, 120.0)


def test_a_recorded_speech_split_larger_than_its_inference_is_not_trusted() -> None:
    """The speech parts are parts of the inference time: a recorded rollup that says more is
    impossible for its span, and rebuilt from the spans."""
    root = rec(1, None, "invoke_workflow turn", 0, 100, "workflow")
    good = Rollup(100.0, 60.0, 0.0, 0.0, 40.0, speech_to_text_ms=20.0, text_to_speech_ms=40.0)
    assert inconsistency(good, root) == ""
    assert inconsistency(replace(good, text_to_speech_ms=41.0), root) == (
        "the speech parts of chainlat.chain.inference_ms are 61 ms, more than it"
    )
    waited = replace(
        good,
        first_output_ms=50.0,
        first_output_inference_ms=30.0,
        first_output_overhead_ms=20.0,
        first_output_text_to_speech_ms=31.0,
    )
    assert inconsistency(waited, root) == (
        "the speech parts of chainlat.chain.first_output.inference_ms are 31 ms, more than it"
    )
