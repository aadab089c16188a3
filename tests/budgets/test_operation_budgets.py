"""Limits on every call of an operation inside a workflow (``[workflows.X.operations.Y]``):
per call, and percentiles over the calls, through the one verdict model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

import chainlat
from chainlat._core.errors import BudgetFileError
from chainlat.budgets import Budgets, check_run, evaluate, json_schema, load_budgets
from chainlat.budgets.targets import per_run_targets
from chainlat.prometheus import limit_queries, unexpressed_limits
from chainlat.testing import Capture, FakeClock
from chainlat.traces.sdk import runs_from_spans
from support.voice import voice_turn

TTS = "operations.text_to_speech"


def budgets_of(budget: dict[str, Any]) -> Budgets:
    return Budgets.model_validate({"workflows": {"voice-turn": budget}})


def verdicts(cap: Capture, budget: dict[str, Any]) -> dict[str, tuple[object, ...]]:
    report = evaluate(runs_from_spans(cap.spans()), budgets_of(budget))
    return {v.target: (v.status, v.actual_ms, v.runs, v.reason) for v in report.verdicts}


def test_every_call_of_an_operation_is_held_to_its_limit(cap: Capture) -> None:
    """Two TTS calls of 500 ms, the first audio of the first at 120 ms."""
    voice_turn(cap)
    found = verdicts(
        cap, {"operations": {"text_to_speech": {"latency": "450ms", "first_output": "150ms"}}}
    )
    assert found[f"{TTS}.latency"] == ("broken", 500.0, 1, None)
    assert found[f"{TTS}.first_output"] == ("ok", 120.0, 1, None)


def test_check_run_reports_the_worst_call(cap: Capture) -> None:
    voice_turn(cap)
    (run,) = runs_from_spans(cap.spans())
    budget = budgets_of({"operations": {"speech_to_text": {"latency": "100ms"}}})
    (broken,) = check_run(run, budget.workflows["voice-turn"])
    assert (broken.target, broken.limit_ms, broken.actual_ms) == (
        "operations.speech_to_text.latency",
        100.0,
        120.0,
    )


def test_percentiles_are_over_every_call_of_the_operation(cap: Capture) -> None:
    """Three turns: six TTS calls of 500 ms, three of them streamed (first audio 120 ms)."""
    for stt_ms in (100, 120, 140):
        voice_turn(cap, stt_ms=stt_ms)
    found = verdicts(
        cap,
        {
            "operations": {
                "text_to_speech": {"p95": {"latency": "400ms", "first_output": "150ms"}},
                "speech_to_text": {"p50": {"latency": "119ms"}},
            }
        },
    )
    assert found[f"{TTS}.p95.latency"] == ("broken", 500.0, 6, None)
    assert found[f"{TTS}.p95.first_output"] == ("ok", 120.0, 3, None)
    assert found["operations.speech_to_text.p50.latency"] == ("broken", 120.0, 3, None)


def test_interrupted_turns_are_left_out_of_the_call_percentiles(cap: Capture) -> None:
    voice_turn(cap, stt_ms=100)
    voice_turn(cap, stt_ms=900, end_reason="interrupted")
    found = verdicts(cap, {"operations": {"speech_to_text": {"p99": {"latency": "150ms"}}}})
    assert found["operations.speech_to_text.p99.latency"] == ("ok", 100.0, 1, None)


def test_an_operation_no_run_called_is_not_judged_and_says_so(cap: Capture) -> None:
    voice_turn(cap)
    budgets = budgets_of(
        {
            "operations": {
                "embeddings": {"latency": "1s", "p95": {"latency": "1s"}},
                "speech_to_text": {"first_output": "1s", "p95": {"first_output": "1s"}},
            }
        }
    )
    report = evaluate(runs_from_spans(cap.spans()), budgets)
    whys = {v.target: (v.status, v.reason, v.why) for v in report.verdicts}
    for target in ("operations.embeddings.latency", "operations.embeddings.p95.latency"):
        assert whys[target][:2] == ("not_judged", "no_data")
        assert "no run of 'voice-turn' has a call of embeddings" in (whys[target][2] or "")
    for target in (
        "operations.speech_to_text.first_output",
        "operations.speech_to_text.p95.first_output",
    ):
        assert whys[target][:2] == ("not_judged", "no_data")
        assert "none streamed" in (whys[target][2] or "")
    assert report.exit_code == 2


def test_an_unknown_operation_is_refused_with_its_key_path(tmp_path: Path) -> None:
    path = tmp_path / "b.toml"
    path.write_text('[workflows.v.operations.tts]\np95 = { latency = "1s" }\n')
    with pytest.raises(BudgetFileError) as caught:
        load_budgets(path)
    assert str(caught.value).startswith(f"{path}:")
    assert "workflows.v.operations.tts: expected 'chat'" in str(caught.value)


def test_the_schema_names_the_operations() -> None:
    workflow = json_schema()["$defs"]["WorkflowBudget"]["properties"]["operations"]
    assert "text_to_speech" in str(workflow)
    operation = json_schema()["$defs"]["OperationBudget"]
    assert {"latency", "first_output"} <= set(operation["properties"])


def test_prometheus_counts_per_call_limits_and_cannot_express_their_percentiles() -> None:
    budgets = budgets_of(
        {"operations": {"text_to_speech": {"latency": "1s", "p95": {"first_output": "150ms"}}}}
    )
    assert (f"{TTS}.latency", 1000.0) in per_run_targets(budgets.workflows["voice-turn"])
    assert f"{TTS}.latency" in {q.target for q in limit_queries(budgets)}
    (unexpressed,) = [u for u in unexpressed_limits(budgets) if u.target.startswith(TTS)]
    assert unexpressed.target == f"{TTS}.p95.first_output"
    assert "operation" in unexpressed.reason


def test_the_application_counts_runs_with_a_call_over_its_limit() -> None:
    """Runtime budgets (``configure(budgets=...)``) judge the same per-call limit and count
    the broken runs in ``chainlat.budget.exceeded``, the series the Prometheus rule reads."""
    reader = InMemoryMetricReader()
    clock = FakeClock()
    budgets = budgets_of({"operations": {"text_to_speech": {"latency": "250ms"}}})
    provider = chainlat.configure(
        exporter="none", metric_readers=[reader], set_global=False, clock=clock, budgets=budgets
    )
    try:
        for tts_ms in (200, 300, 400):
            with chainlat.workflow("voice-turn", tracer_provider=provider):
                with chainlat.inference(
                    "tts-1", operation="text_to_speech", tracer_provider=provider
                ):
                    clock.advance(tts_ms)
        data = reader.get_metrics_data()
        assert data is not None
        counted = {
            str((point.attributes or {})["chainlat.budget.target"]): point.value
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == "chainlat.budget.exceeded"
            for point in m.data.data_points
            if isinstance(point, NumberDataPoint)
        }
        assert counted == {f"{TTS}.latency": 2}
    finally:
        chainlat.shutdown()


def test_a_realtime_response_is_an_operation_a_budget_names(cap: Capture) -> None:
    """A speech-to-speech response (``chainlat.realtime``'s inference step, operation
    ``realtime``): first audio 300 ms in, done at 800 ms."""
    p = cap.provider
    with chainlat.workflow("voice-turn", tracer_provider=p):
        with chainlat.inference("sim-realtime", operation="realtime", tracer_provider=p) as call:
            cap.clock.advance(300)
            call.first_token()
            cap.clock.advance(500)
    found = verdicts(
        cap, {"operations": {"realtime": {"latency": "700ms", "first_output": "350ms"}}}
    )
    assert found["operations.realtime.latency"] == ("broken", 800.0, 1, None)
    assert found["operations.realtime.first_output"] == ("ok", 300.0, 1, None)
