"""The wait for a voice turn's first output by stage, in the statistics: one definition
per part, the same number whichever budget key or report reads it."""

from __future__ import annotations

from typing import Any

import pytest

from chainlat._core.stats import FIRST_OUTPUT_PARTS, aggregate, first_output_parts
from chainlat.budgets import Budgets, evaluate
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans
from support.voice import voice_turn


def test_a_voice_turn_splits_its_first_output_into_parts_that_sum_to_it(cap: Capture) -> None:
    rollup = voice_turn(cap)
    parts = first_output_parts(rollup)
    assert parts == {
        "speech_to_text": 120.0,
        "model": 220.0,  # from the retrieval's end to the first sentence's TTS
        "text_to_speech": 120.0,
        "data": 40.0,
        "tool": 0.0,
        "overhead": 20.0,  # end of speech to the turn's detection: no end-of-turn span
    }
    assert sum(parts.values()) == rollup.first_output_ms


def test_the_statistics_hold_each_part_and_share_the_speech_parts_with_their_quantities(
    cap: Capture,
) -> None:
    for stt_ms in (100, 120, 140):
        voice_turn(cap, stt_ms=stt_ms)
    workflow = aggregate(runs_from_spans(cap.spans())).workflows["voice-turn"]
    split = workflow.first_output_split
    assert list(split) == list(FIRST_OUTPUT_PARTS)
    assert split["speech_to_text"].sorted() == [100.0, 120.0, 140.0]
    assert split["model"].sorted() == [220.0] * 3
    assert not len(split["end_of_turn"])  # the trace does not say when the turn was decided
    assert split["text_to_speech"] is workflow.quantities["first_output_text_to_speech"]


def test_a_run_without_a_speech_call_has_no_split(cap: Capture) -> None:
    import chainlat

    with chainlat.workflow("chat", tracer_provider=cap.provider):
        with chainlat.inference("m", tracer_provider=cap.provider) as call:
            call.first_token()
    workflow = aggregate(runs_from_spans(cap.spans())).workflows["chat"]
    assert workflow.first_output_split == {}


def _judged(cap: Capture, budget: dict[str, Any]) -> dict[str, float | None]:
    report = evaluate(
        runs_from_spans(cap.spans()), Budgets.model_validate({"workflows": {"voice-turn": budget}})
    )
    return {v.target: v.actual_ms for v in report.verdicts}


def test_three_budget_keys_on_the_first_audio_byte_judge_the_same_value(cap: Capture) -> None:
    """On the demo's shape (the first sentence's TTS starts on the critical path), a step's
    time to first token, the operation's first output and the first output's text-to-speech
    part are one number; docs/voice.md says where they part."""
    for stt_ms in (100, 120, 140):
        voice_turn(cap, stt_ms=stt_ms)
    judged = _judged(
        cap,
        {
            "p95": {"first_output_text_to_speech": "1s"},
            "operations": {"text_to_speech": {"p95": {"first_output": "1s"}}},
            "steps": {"text_to_speech tts-1": {"ttft_p95": "1s"}},
        },
    )
    assert judged == {
        "p95.first_output_text_to_speech": 120.0,
        "operations.text_to_speech.p95.first_output": 120.0,
        'steps."text_to_speech tts-1".ttft_p95': 120.0,
    }
    workflow = aggregate(runs_from_spans(cap.spans())).workflows["voice-turn"]
    assert workflow.first_output_split["text_to_speech"].percentile(95) == 120.0


@pytest.mark.parametrize("stt_ms", [100.0, 300.0])
def test_the_speech_to_text_part_is_the_value_its_budget_key_judges(
    cap: Capture, stt_ms: float
) -> None:
    voice_turn(cap, stt_ms=stt_ms)
    judged = _judged(cap, {"p50": {"first_output_speech_to_text": "1s"}})
    workflow = aggregate(runs_from_spans(cap.spans())).workflows["voice-turn"]
    assert judged["p50.first_output_speech_to_text"] == stt_ms
    assert workflow.first_output_split["speech_to_text"].percentile(50) == stt_ms
