"""A model call finished after its workflow block exited (a generator read later) is outside
the run its workflow span recorded: the run's own limits are not judged, and a warning names
the step, in every format of ``chainlat check``."""

from __future__ import annotations

import json
from collections.abc import Generator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.cli import main
from chainlat.testing import Capture, capture
from chainlat.traces import read_runs


def _answer(cap: Capture) -> Generator[str]:
    with chainlat.inference("gpt-4o", tracer_provider=cap.provider) as call:
        yield "sent"
        cap.clock.advance(200)
        call.first_token()
        yield "first"
        cap.clock.advance(300)
        yield "rest"


def _traces(path: Path) -> None:
    with capture(fake_clock=True, sequential_ids=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
        with chainlat.workflow("chat", tracer_provider=cap.provider):
            stream = _answer(cap)
            assert next(stream) == "sent"  # the call starts inside the block
            cap.clock.advance(ms=0.4)
        # Read after the block exited: the first token (+200 ms) and the end are outside it.
        assert list(stream) == ["first", "rest"]


def test_the_run_says_which_step_ended_after_it(tmp_path: Path) -> None:
    traces = tmp_path / "t.jsonl"
    _traces(traces)
    (run,) = read_runs([traces])
    assert run.incomplete is not None
    assert "chat gpt-4o" in run.incomplete


@pytest.mark.parametrize(
    "options", [[], ["--format", "json"], ["--format", "markdown"], ["--junit", "JUNIT"]]
)
def test_run_limits_of_a_run_with_a_step_after_it_are_not_judged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str]
) -> None:
    traces = tmp_path / "t.jsonl"
    _traces(traces)
    budgets = tmp_path / "b.toml"
    budgets.write_text('[workflows.chat]\ntotal = "100ms"\ninference = "100ms"\n')
    junit = tmp_path / "junit.xml"
    options = [str(junit) if o == "JUNIT" else o for o in options]
    assert main(["check", str(traces), "--budgets", str(budgets), *options]) == 2
    out, err = capsys.readouterr()
    assert "chat gpt-4o" in err
    assert "ended after its workflow" in err
    if options[:2] == ["--format", "json"]:
        verdicts = json.loads(out)["verdicts"]
        assert {(v["status"], v["reason"]) for v in verdicts} == {("not_judged", "incomplete_run")}
    elif options and options[0] == "--junit":
        assert 'name="exit_code" value="2"' in junit.read_text()
    else:
        assert "FAILED: 0 of 2 limits broken, 2 not judged" in out


def test_a_step_stamped_late_by_its_instrumentation_is_clipped_not_a_lost_run(
    tmp_path: Path,
) -> None:
    """1.7 ms past a 500 ms run (under 1 % of it, and 5 ms): LiteLLM's own lateness."""
    traces = tmp_path / "t.jsonl"
    with capture(fake_clock=True, sequential_ids=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(traces)))
        with chainlat.workflow("chat", tracer_provider=cap.provider) as run:
            call = cap.provider.get_tracer("framework").start_span(
                "litellm_request",
                start_time=cap.clock(),
                attributes={"gen_ai.operation.name": "chat"},
            )
            cap.clock.advance(500)
        call.end(end_time=cap.clock() + 1_700_000)
    assert run.rollup is not None
    (read,) = read_runs([traces])
    assert read.incomplete is None
    assert read.rollup.inference_count == 1  # the call is read, clipped to the run
    traces = tmp_path / "late.jsonl"
    with capture(fake_clock=True, sequential_ids=True) as cap:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(traces)))
        with chainlat.workflow("chat", tracer_provider=cap.provider):
            call = cap.provider.get_tracer("framework").start_span(
                "litellm_request",
                start_time=cap.clock(),
                attributes={"gen_ai.operation.name": "chat"},
            )
            cap.clock.advance(500)
        call.end(end_time=cap.clock() + 5_100_000)  # past 1 % of the run: a lost part
    (read,) = read_runs([traces])
    assert read.incomplete is not None and "litellm_request" in read.incomplete
