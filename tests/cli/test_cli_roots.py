"""The commands on traces without any workflow span: a plain service with model calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.cli import main
from chainlat.testing import Capture


def _service_traces(cap: Capture, path: Path, requests: int = 3) -> None:
    """``POST /chat`` spans holding one 120 ms model call with token counts, no workflow."""
    from opentelemetry import trace

    tracer = cap.provider.get_tracer("opentelemetry.instrumentation.fastapi")
    llm = cap.provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    clock = cap.clock
    for i in range(requests):
        root = tracer.start_span("POST /chat", start_time=clock())
        call = llm.start_span(
            "chat gpt-4o",
            context=trace.set_span_in_context(root),
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.usage.input_tokens": 100 * (i + 1),
                "gen_ai.usage.output_tokens": 10 * (i + 1),
            },
            start_time=clock.advance(5),
        )
        call.end(end_time=clock.advance(100 + 20 * i))
        root.end(end_time=clock.advance(5))
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()


def test_check_judges_root_spans_with_roots_and_finds_nothing_without(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    _service_traces(cap, traces)
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text('[workflows."POST /chat"]\ntotal = "125ms"\n')
    assert main(["check", str(traces), "--budgets", str(budgets), "--no-progress"]) == 2
    assert "nothing to judge" in capsys.readouterr().err
    code = main(["check", str(traces), "--budgets", str(budgets), "--roots", "--no-progress"])
    out = capsys.readouterr().out
    assert code == 1  # the third request took 150 ms
    assert "POST /chat" in out


def test_profile_fits_model_calls_without_any_workflow(
    cap: Capture, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    _service_traces(cap, traces)
    assert main(["profile", str(traces), "--format", "json", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert '"gpt-4o"' in out
    assert '"calls": 3' in out
