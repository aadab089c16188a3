"""Rule 17 of docs/attributes.md: a call that may have streamed is never taken for one that
did not. The end of a model call is its output only when the call is known not to have
streamed (a span of it says so, or it is chainlat's own call, whose application marks a
streamed call's first token); otherwise a first output that depends on it is at least its
start, a bound, and ``check`` does not judge it. Spans written by the real OpenTelemetry
SDK on an injected clock, read back as ``chainlat report`` and ``check`` read them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

import chainlat
from chainlat._core.call_readings import MAYBE_STREAMED, STREAMED_UNMARKED, streamed_of
from chainlat._core.exits import EXIT_INPUT, EXIT_OK
from chainlat._core.runs import WorkflowRun
from chainlat.cli import main
from chainlat.traces import read_runs
from support.sdk_traces import MS, T0, sdk_tracer, workflow_span, written

Call = tuple[str, int, int, dict[str, AttributeValue]]
"""A model call: its name, start and end (ms from the run's start), and its attributes."""

CHAT: dict[str, AttributeValue] = {"gen_ai.operation.name": "chat"}
"""A GenAI chat span that says nothing of streaming (opentelemetry-instrumentation-openai-v2,
Semantic Kernel)."""


def _write(path: Path, calls: list[Call], *, end_ms: int = 500) -> Path:
    """A workflow 0-``end_ms`` ms with ``calls`` under it, as OTLP JSON lines."""
    tracer, exporter = sdk_tracer()
    root = workflow_span(tracer, "agent")
    inside = trace.set_span_in_context(root)
    for name, start, end, attributes in calls:
        model = name.split()[-1]
        span = tracer.start_span(
            name,
            context=inside,
            start_time=T0 + start * MS,
            attributes={"gen_ai.request.model": model, **attributes},
        )
        span.end(end_time=T0 + end * MS)
    root.end(end_time=T0 + end_ms * MS)
    return written(path, exporter)


def _run(tmp_path: Path, calls: list[Call]) -> WorkflowRun:
    [run] = read_runs([_write(tmp_path / "run.jsonl", calls)])
    return run


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("gen_ai.request.stream", True),  # the GenAI conventions; Spring AI writes "true"
        ("gen_ai.request.stream", "true"),
        ("llm.is_streaming", "True"),  # LiteLLM
        ("gen_ai.is_streaming", True),  # OpenLLMetry
    ],
)
def test_a_call_that_says_it_streamed_without_a_first_token_bounds_the_first_output(
    tmp_path: Path, key: str, value: AttributeValue
) -> None:
    """The answer, 300-450 ms, streamed and no span says when its first token came: the user
    saw its first words somewhere after 300 ms, not at 450."""
    run = _run(
        tmp_path,
        [
            ("chat plan", 10, 290, {**CHAT, key: not value if isinstance(value, bool) else "0"}),
            ("chat answer", 300, 450, {**CHAT, key: value}),
        ],
    )
    rollup = run.rollup
    assert rollup.first_output_ms == 300.0
    assert rollup.unusable == ("chat answer",)
    assert rollup.unusable_values == (STREAMED_UNMARKED,)
    assert rollup.unusable_parts == ("first_output", "first_output_split")


def test_a_call_that_says_it_did_not_stream_gives_its_output_when_it_ends(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        [
            ("chat plan", 10, 290, {**CHAT, "gen_ai.request.stream": False}),
            ("chat answer", 300, 450, {**CHAT, "llm.is_streaming": "False"}),
        ],
    )
    assert run.rollup.first_output_ms == 450.0
    assert run.rollup.unusable == ()
    assert not run.rollup.bound_in("first_output")


def test_a_call_that_says_nothing_is_named_only_where_the_first_output_depends_on_it(
    tmp_path: Path,
) -> None:
    """Three calls that say nothing of streaming: the last to start decides the first output
    (at least its start, 300 ms); the two before it are not named: their output, whenever
    it came, decides nothing."""
    run = _run(
        tmp_path,
        [
            ("chat plan", 10, 290, CHAT),
            ("chat side", 20, 200, CHAT),
            ("chat answer", 300, 450, CHAT),
        ],
    )
    rollup = run.rollup
    assert rollup.first_output_ms == 300.0
    assert rollup.unusable == ("chat answer",)
    assert rollup.unusable_values == (MAYBE_STREAMED,)
    assert rollup.first_output_split() == {
        "inference": 280.0,
        "data": 0.0,
        "tool": 0.0,
        "overhead": 20.0,
    }


def test_a_first_token_of_an_earlier_call_is_no_first_output_when_a_later_one_may_stream(
    tmp_path: Path,
) -> None:
    """The plan call streamed with a first token at 50 ms; the answer after it says nothing.
    Before rule 17 the plan's first token (50 ms) was the first output: the answer, taken
    for a call that did not stream, gave none until its end. The answer started last, so
    if it streamed it is the streamed call that started last: its first token is the
    output, at least 300 ms."""
    run = _run(
        tmp_path,
        [
            ("chat plan", 10, 290, {**CHAT, "gen_ai.response.time_to_first_chunk": 0.04}),
            ("chat answer", 300, 450, CHAT),
        ],
    )
    assert run.rollup.first_output_ms == 300.0
    assert run.rollup.unusable == ("chat answer",)


def test_an_embedding_last_is_no_stream(tmp_path: Path) -> None:
    run = _run(
        tmp_path,
        [
            ("chat plan", 10, 290, {**CHAT, "gen_ai.request.stream": False}),
            ("embeddings small", 300, 320, {"gen_ai.operation.name": "embeddings"}),
        ],
    )
    assert run.rollup.first_output_ms == 320.0
    assert run.rollup.unusable == ()


def test_a_call_of_chainlats_api_is_taken_at_its_applications_word(tmp_path: Path) -> None:
    """``chainlat.inference`` with no ``call.first_token()``: the application says its output
    came at the end. The same span tagged as another instrumentation's by chainlat's
    processor (``chainlat.step.foreign``) is not chainlat's word."""
    own = {**CHAT, "chainlat.step.kind": "inference"}
    run = _run(tmp_path, [("chat answer", 300, 450, own)])
    assert (run.rollup.first_output_ms, run.rollup.unusable) == (450.0, ())
    foreign = {**own, "chainlat.step.foreign": True}
    run = _run(tmp_path, [("chat answer", 300, 450, foreign)])
    assert (run.rollup.first_output_ms, run.rollup.unusable) == (300.0, ("chat answer",))


def test_the_processor_tags_another_instrumentations_step_as_foreign() -> None:
    """A GenAI chat span started inside ``chainlat.workflow`` by another instrumentation: the
    processor writes its kind and says it is not chainlat's own; chainlat's own step is not
    tagged."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    chainlat.configure(tracer_provider=provider, exporter=exporter, batch=False)
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai_v2")
    with chainlat.workflow("agent", tracer_provider=provider):
        tracer.start_span("chat gpt-4o", attributes=CHAT).end()
        with chainlat.inference("gpt-4o", tracer_provider=provider):
            pass
    spans = [(s.name, dict(s.attributes or {})) for s in exporter.get_finished_spans()]
    provider.shutdown()
    foreign = [a for name, a in spans if name == "chat gpt-4o"]
    assert [a.get("chainlat.step.kind") for a in foreign] == ["inference", "inference"]
    assert sorted(str(a.get("chainlat.step.foreign")) for a in foreign) == ["None", "True"]


def test_check_does_not_judge_a_first_output_a_call_that_may_have_streamed_bounds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The answer says nothing of streaming: the first output limit is not judged, kept or
    broken, and the reason names the call; the total is judged."""
    path = _write(tmp_path / "run.jsonl", [("chat answer", 300, 450, CHAT)])
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[workflows.agent]\ntotal = "1s"\nfirst_output = "400ms"\n')
    code = main(["check", str(path), "--budgets", str(budgets), "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == EXIT_INPUT  # a limit not judged
    verdicts = {v["target"]: v for v in out["verdicts"]}
    assert verdicts["total"]["status"] == "ok"
    first = verdicts["first_output"]
    assert (first["status"], first["reason"]) == ("not_judged", "unusable_value")
    assert "`chat answer` may have streamed" in first["why"]
    assert "rules 15 and 17" in first["why"]
    code = main(
        ["check", str(path), "--budgets", str(budgets), "--allow-unjudged", "--format", "json"]
    )
    capsys.readouterr()
    assert code == EXIT_OK


def test_the_waterfall_says_the_first_output_is_a_bound(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path / "run.jsonl", [("chat answer", 300, 450, CHAT)])
    assert main(["report", str(path)]) == EXIT_OK
    out = capsys.readouterr().out
    assert "first output at least 300.0 ms (a first token no span marks)" in out
    assert "[a bound in 1/1 runs]" in out


@pytest.mark.parametrize(
    ("attributes", "said"),
    [
        ({"gen_ai.request.stream": True}, True),
        ({"gen_ai.request.stream": " FALSE "}, False),
        ({"llm.is_streaming": "True"}, True),
        ({"gen_ai.is_streaming": False}, False),
        ({"gen_ai.request.stream": "yes"}, None),
        ({"gen_ai.request.stream": 1}, None),
        ({"gen_ai.request.model": "m"}, None),
    ],
)
def test_what_a_span_says_of_streaming(attributes: dict[str, object], said: bool | None) -> None:
    assert streamed_of(attributes) is said
