"""Budgets on voice turns: the first audio per turn and per stage, interrupted turns."""

from __future__ import annotations

from typing import Any

from chainlat.budgets import Budgets, evaluate, json_schema
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans
from support.voice import voice_turn


def verdicts(cap: Capture, budget: dict[str, Any], **file: Any) -> dict[str, tuple[object, ...]]:
    budgets = Budgets.model_validate({"workflows": {"voice-turn": budget}, **file})
    runs = runs_from_spans(cap.spans())
    return {v.target: (v.status, v.actual_ms, v.runs) for v in evaluate(runs, budgets).verdicts}


def test_first_audio_per_turn_and_per_stage(cap: Capture) -> None:
    voice_turn(cap)
    found = verdicts(
        cap,
        {
            "first_output": "500ms",
            "first_output_text_to_speech": "150ms",
            "first_output_speech_to_text": "100ms",
            "text_to_speech": "450ms",
        },
    )
    assert found["first_output"] == ("broken", 520.0, 1)
    assert found["first_output_text_to_speech"] == ("ok", 120.0, 1)
    assert found["first_output_speech_to_text"] == ("broken", 120.0, 1)
    assert found["text_to_speech"] == ("broken", 500.0, 1)


def test_percentiles_of_the_first_audio_leave_interrupted_turns_out(cap: Capture) -> None:
    for stt_ms in (100, 120, 140):
        voice_turn(cap, stt_ms=stt_ms)
    voice_turn(cap, stt_ms=900, end_reason="interrupted")
    budget = {"p99": {"first_output": "800ms", "first_output_speech_to_text": "150ms"}}
    found = verdicts(cap, budget)
    assert found["p99.first_output"][2] == 3  # the interrupted turn is counted apart
    assert found["p99.first_output"][0] == "ok"
    assert found["p99.first_output_speech_to_text"][:1] == ("ok",)
    asked = verdicts(cap, {**budget, "include_interrupted": True})
    assert asked["p99.first_output"][2] == 4
    assert asked["p99.first_output"][0] == "broken"
    assert verdicts(cap, budget, include_interrupted=True)["p99.first_output"][2] == 4


def test_the_schema_names_every_voice_key() -> None:
    text = str(json_schema())
    for key in (
        "speech_to_text",
        "text_to_speech",
        "first_output_speech_to_text",
        "first_output_text_to_speech",
        "include_interrupted",
    ):
        assert f"'{key}'" in text
