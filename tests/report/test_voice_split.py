"""Every format of ``report`` and ``check`` shows the first audio of voice runs by stage:
speech to text, model, text to speech, end of turn, data, tool, overhead."""

from __future__ import annotations

from chainlat._core.stats import aggregate
from chainlat.budgets import Budgets, evaluate
from chainlat.report import check_markdown, check_text, stats_json, stats_markdown, stats_text
from chainlat.testing import Capture
from chainlat.traces.sdk import runs_from_spans
from support.voice import voice_turn


def _turns(cap: Capture) -> None:
    for stt_ms in (100, 120, 140):
        voice_turn(cap, stt_ms=stt_ms)


def test_json_has_a_first_output_split_per_voice_workflow(cap: Capture) -> None:
    _turns(cap)
    document = stats_json(aggregate(runs_from_spans(cap.spans())))
    split = document["workflows"]["voice-turn"]["first_output_split"]
    assert list(split) == [
        "speech_to_text", "model", "text_to_speech", "end_of_turn", "data", "tool", "overhead",
    ]  # fmt: skip
    assert split["speech_to_text"]["p95_ms"] == 140.0
    assert split["model"]["p50_ms"] == 220.0
    assert split["text_to_speech"]["max_ms"] == 120.0
    assert split["end_of_turn"]["count"] == 0  # the trace does not say when it was decided
    assert split["overhead"]["count"] == 3


def test_json_of_a_workflow_without_speech_has_no_split(cap: Capture) -> None:
    import chainlat

    with chainlat.workflow("chat", tracer_provider=cap.provider):
        pass
    document = stats_json(aggregate(runs_from_spans(cap.spans())))
    assert document["workflows"]["chat"]["first_output_split"] is None


def test_text_and_markdown_show_the_split_under_the_first_output(cap: Capture) -> None:
    _turns(cap)
    stats = aggregate(runs_from_spans(cap.spans()))
    text = stats_text(stats, width=160)
    labels = [f"first output: {part}" for part in ("speech to text", "model", "text to speech",
              "end of turn", "data", "tool", "overhead")]  # fmt: skip
    at = [text.index(label) for label in labels]
    assert text.index("first output ") < at[0] and at == sorted(at)
    markdown = stats_markdown(stats)
    assert "| first output: model | first output | 3 | 220.0 | 220.0 | 220.0 | 220.0 | 220.0 |" in (
        markdown
    )


def test_check_tables_show_the_split_beside_the_verdicts(cap: Capture) -> None:
    _turns(cap)
    budgets = Budgets.model_validate(
        {"workflows": {"voice-turn": {"p95": {"first_output_text_to_speech": "100ms"}}}}
    )
    report = evaluate(runs_from_spans(cap.spans()), budgets)
    assert "first output: text to speech" in check_text(report, width=160)
    assert "| first output: text to speech | first output | 3 | 120.0 |" in check_markdown(report)
