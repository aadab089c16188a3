"""A framework's time value that is no time (negative, a boolean, a list, not a number, not
finite, absurd) is never used as one: what depends on it is not judged (``unusable_value``,
naming the key and the span), in every format of ``chainlat check`` (docs/attributes.md,
rule 15). Pipecat's spans in the shape pipecat-ai 1.14.0 writes them, on an injected clock."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.traces import read_runs

MS = 1_000_000
T0 = 1_700_000_000_000_000_000

BUDGETS = '[workflows.turn]\ntotal = "5s"\nfirst_output = "700ms"\n'


def pipecat_turn(path: Path, tts_ttfb: AttributeValue) -> Path:
    """A Pipecat turn, 0-2000 ms: ``llm`` 0-600 (first token at 400 ms), ``tts`` 500-1500
    with ``metrics.ttfb`` = ``tts_ttfb``; written as OTLP JSON lines."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("pipecat")
    turn = tracer.start_span("turn", start_time=T0, attributes={"turn.number": 1})
    inside = trace.set_span_in_context(turn)
    stages: tuple[tuple[str, str, int, int, AttributeValue], ...] = (
        ("llm", "chat", 0, 600, 0.4),
        ("tts", "tts", 500, 1500, tts_ttfb),
    )
    for name, operation, start, end, ttfb in stages:
        span = tracer.start_span(
            name,
            context=inside,
            start_time=T0 + start * MS,
            attributes={
                "gen_ai.operation.name": operation,
                "gen_ai.request.model": f"sim-{name}",
                "metrics.ttfb": ttfb,
            },
        )
        span.end(end_time=T0 + end * MS)
    turn.end(end_time=T0 + 2000 * MS)
    path.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    return path


UNUSABLE: list[tuple[AttributeValue, str]] = [
    (-1, "-1"),
    (True, "true"),
    ([0.001], "[0.001]"),
    ("abc", '"abc"'),
    ("NaN", '"NaN"'),
    (math.nan, "a number no reader can hold"),
    (1e20, "1e+20"),
]


@pytest.mark.parametrize(("ttfb", "shown"), UNUSABLE, ids=[s for _, s in UNUSABLE])
def test_an_unusable_ttfb_leaves_a_lower_bound_never_the_model_first_token(
    ttfb: AttributeValue, shown: str, tmp_path: Path
) -> None:
    """The first output was the model's first token (400 ms), before the TTS started."""
    (run,) = read_runs([pipecat_turn(tmp_path / "t.jsonl", ttfb)])
    assert [(s.name, s.ttft_ms) for s in run.steps] == [("llm", 400.0), ("tts", None)]
    assert run.first_output_ms == 500.0  # at least the TTS's start: rule 2
    assert run.rollup.unusable == ("tts",)
    assert run.rollup.unusable_values[0].startswith(f"metrics.ttfb = {shown}")
    assert run.rollup.unusable_parts == ("first_output", "first_output_split")
    assert run.rollup.unusable_in("first_output_text_to_speech")
    assert not run.rollup.unusable_in("total")


@pytest.mark.parametrize("ttfb", ["0.25", 0.25])
def test_a_numeric_string_is_a_time(ttfb: AttributeValue, tmp_path: Path) -> None:
    """A double written as a string (protobuf's JSON mapping allows it) stays usable."""
    (run,) = read_runs([pipecat_turn(tmp_path / "t.jsonl", ttfb)])
    assert run.first_output_ms == 750.0
    assert (run.rollup.unusable, run.rollup.unusable_parts) == ((), ())


def _check(
    capsys: pytest.CaptureFixture[str], traces: Path, budgets: Path, *args: str
) -> tuple[int, str]:
    code = main(["check", str(traces), "--budgets", str(budgets), *args])
    return code, capsys.readouterr().out


@pytest.mark.parametrize(("ttfb", "shown"), UNUSABLE, ids=[s for _, s in UNUSABLE])
def test_check_does_not_judge_a_first_output_that_depends_on_it_in_every_format(
    ttfb: AttributeValue, shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: exit 0, "OK: all 2 limits judged and kept" (first output 400 ms)."""
    traces = pipecat_turn(tmp_path / "t.jsonl", ttfb)
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(BUDGETS)
    summary = "FAILED: 0 of 2 limits broken, 1 not judged"
    code, out = _check(capsys, traces, budgets)
    assert (code, out.rstrip("\n").splitlines()[-1]) == (2, summary)
    assert "NOT JUDGED" in out
    junit = tmp_path / "junit.xml"
    code, out = _check(capsys, traces, budgets, "--format", "json", "--junit", str(junit))
    assert code == 2
    document = json.loads(out)
    assert (document["exit_code"], document["summary"]) == (2, summary)
    verdicts = {v["target"]: v for v in document["verdicts"]}
    assert verdicts["total"]["status"] == "ok"
    first = verdicts["first_output"]
    assert (first["status"], first["reason"]) == ("not_judged", "unusable_value")
    assert f"`tts` gives metrics.ttfb = {shown}" in first["why"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (properties["exit_code"], properties["summary"]) == ("2", summary)
    assert (suite.get("failures"), suite.get("errors")) == ("0", "1")
    code, out = _check(capsys, traces, budgets, "--format", "markdown")
    assert (code, out.rstrip("\n").splitlines()[-1]) == (2, summary)
    assert "**NOT JUDGED" in out


def test_step_and_operation_first_token_limits_are_not_judged_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The TTS's own time to first byte is not known: a limit on it is not judged, where it
    was skipped (a limit with no value) or judged on the other runs alone."""
    traces = pipecat_turn(tmp_path / "t.jsonl", -1)
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(
        '[workflows.turn]\ntotal = "5s"\n'
        '[workflows.turn.steps.tts]\nttft = "300ms"\nttft_p50 = "300ms"\n'
        '[workflows.turn.operations.text_to_speech]\nfirst_output = "300ms"\n'
        'p50 = { first_output = "300ms" }\n'
    )
    code, out = _check(capsys, traces, budgets, "--format", "json", "--allow-missing")
    outcomes = {v["target"]: v["reason"] or v["status"] for v in json.loads(out)["verdicts"]}
    assert code == 2
    assert outcomes == {
        "total": "ok",
        "steps.tts.ttft": "unusable_value",
        "steps.tts.ttft_p50": "unusable_value",
        "operations.text_to_speech.first_output": "unusable_value",
        "operations.text_to_speech.p50.first_output": "unusable_value",
    }


def test_report_shows_the_first_output_as_a_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    traces = pipecat_turn(tmp_path / "t.jsonl", -1)
    assert main(["report", str(traces)]) == 0
    out = capsys.readouterr().out
    assert "first output [a bound in 1/1 runs]" in out
