"""Traces of frameworks run for real (tests/data/foreign/, each README says how they were
made), read by the commands as a new user would: the runs, counts and warnings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from chainlat._core.exits import EXIT_INPUT, EXIT_OK
from chainlat.cli import main
from chainlat.traces import read_runs
from support.tracegen import DATA_DIR

FOREIGN = DATA_DIR / "foreign"


def _report(capsys: pytest.CaptureFixture[str], path: Path, *args: str) -> dict[str, Any]:
    code = main(["report", "--format", "json", *args, str(path)])
    out = capsys.readouterr().out
    assert code == EXIT_OK
    found: dict[str, Any] = json.loads(out)
    return found


def _counts(workflow: dict[str, Any]) -> dict[str, int]:
    """Steps by kind, each step's count of calls in the one run."""
    counts: dict[str, int] = {}
    for step in workflow["steps"].values():
        counts[step["kind"]] = counts.get(step["kind"], 0) + step["duration"]["count"]
    return counts


@pytest.mark.parametrize("name", ["legacy", "legacy-undici", "genai", "genai-undici"])
def test_a_vercel_ai_sdk_request_is_one_run_with_roots(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The interop agent's request (retrieval, a plan call asking for a tool, the tool, a
    second plan call, two calls in parallel, a streamed answer): five model calls."""
    found = _report(capsys, FOREIGN / "ai-sdk" / f"{name}.jsonl", "--roots")
    assert list(found["workflows"]) == ["agent"]
    agent = found["workflows"]["agent"]
    assert agent["runs"] == 1
    counts = _counts(agent)
    assert (counts["inference"], counts["data"], counts["tool"]) == (5, 1, 1)
    assert agent["quantities"]["first_output"]["count"] == 1
    clock = [w for w in found["warnings"] if "rounds span starts to 1 ms" in w]
    assert len(clock) == 1
    # The GenAI format says nothing of streaming on a call, so its undici spans time no
    # call (rule 18) and the framework's spans do; the legacy format says, by operation id.
    framework = [w for w in found["warnings"] if "no HTTP-level span timed" in w]
    assert bool(framework) == (name != "legacy-undici")


def test_without_roots_the_ai_sdks_calls_side_by_side_are_said_to_be(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = _report(capsys, FOREIGN / "ai-sdk" / "legacy.jsonl")
    [line] = [w for w in found["warnings"] if "side by side" in w]
    assert line.startswith("1 traces hold 4 runs side by side") and "--roots" in line


@pytest.mark.parametrize("stack", ["genkit", "genkit-go"])
def test_http_spans_that_time_no_call_leave_the_frameworks_time_said(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Genkit's model spans say nothing of streaming: the HTTP spans of its runs with the
    wire time no call (rule 18), so the warning that the framework's own time is in the
    inference stands, as without them. It was not given while a wire span was in the run."""
    found = _report(capsys, FOREIGN / stack / "wrapped-http.jsonl")
    assert [w for w in found["warnings"] if "no HTTP-level span timed" in w]


def test_an_http_span_that_saw_only_a_streams_headers_times_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """openai-v2 says nothing of streaming; the httpx instrumentation's POST of the streamed
    answer ends at its headers. The call's span times it (rule 18): inference 411.1 ms and
    overhead 5.9 (p50), as the live rollup recorded them and the readers compute them."""
    found = _report(capsys, FOREIGN / "openai-v2-httpx" / "wrapped.jsonl")
    quantities = found["workflows"]["agent"]["quantities"]
    assert quantities["inference"]["p50_ms"] == pytest.approx(411.1, abs=0.05)
    assert quantities["overhead"]["p50_ms"] == pytest.approx(5.9, abs=0.05)
    [run, *_] = read_runs([str(FOREIGN / "openai-v2-httpx" / "wrapped.jsonl")])
    assert run.recomputed_rollup().inference_ms == pytest.approx(run.rollup.inference_ms)


def test_a_mastra_call_that_asked_for_its_tool_ends_where_the_tool_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Mastra's first ``chat sim-plan`` (47-182 ms) holds its tool (153-179): the call is
    ended at 153 (rule 19), the tool's 26 ms are on the path (0.0 before); the answer's
    first token is Mastra's instant, 462.0 ms, measured (a bound at 414.0 before)."""
    found = _report(capsys, FOREIGN / "mastra" / "wrapped.jsonl", "--roots")
    quantities = found["workflows"]["agent"]["quantities"]
    assert quantities["tool"]["p50_ms"] == pytest.approx(26.0)
    assert quantities["first_output"]["p50_ms"] == pytest.approx(462.0)
    assert found["workflows"]["agent"]["bound_runs"] == {}


def _the_agents_steps(
    capsys: pytest.CaptureFixture[str], path: Path, *, roots: bool = False
) -> dict[str, Any]:
    """``report``'s workflow of the interop agent's request read from ``path`` (``roots``:
    as ``--roots`` reads it), with its five model calls, its retrieval and its tool."""
    found = _report(capsys, path, *(["--roots"] if roots else []))
    agent: dict[str, Any] = found["workflows"]["agent"]
    counts = _counts(agent)
    assert (counts["inference"], counts["data"], counts["tool"]) == (5, 1, 1)
    return agent


def _the_agents_request(
    capsys: pytest.CaptureFixture[str], path: Path, *, roots: bool = False
) -> dict[str, Any]:
    """The interop agent's one request read from ``path`` (`_the_agents_steps`), the
    reference's tokens, and a first output measured, not a bound; its quantities, for the
    figures each file has."""
    agent = _the_agents_steps(capsys, path, roots=roots)
    assert agent["bound_runs"] == {}
    [run] = read_runs([path], roots=roots)
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (363, 85)
    quantities: dict[str, Any] = agent["quantities"]
    return quantities


@pytest.mark.parametrize(
    ("name", "data_ms", "tool_ms", "first_output_ms"),
    [("unwrapped", 30.7, 25.5, 387.1), ("unwrapped-js", 30.9, 25.6, 391.0)],
)
def test_a_langfuse_request_reads_its_generations_retrieval_and_tool(
    name: str,
    data_ms: float,
    tool_ms: float,
    first_output_ms: float,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Langfuse's spans, from Python and from JavaScript, carry only its own keys
    (``langfuse.observation.type``, a generation's usage as a JSON object, its first chunk
    as a quoted ISO date). Before its row, no step was read: inference, data and tool 0.0
    ms, the whole request overhead. The answer's first output is Langfuse's instant,
    measured: 387.1 ms where the sim sent its first chunk at 386.0, and 391.0 ms (whole
    milliseconds) where it sent it at 389.3 (tests/data/foreign/langfuse/README.md)."""
    quantities = _the_agents_request(capsys, FOREIGN / "langfuse" / f"{name}.jsonl", roots=True)
    assert quantities["data"]["p50_ms"] == pytest.approx(data_ms, abs=0.05)
    assert quantities["tool"]["p50_ms"] == pytest.approx(tool_ms, abs=0.05)
    assert quantities["first_output"]["p50_ms"] == pytest.approx(first_output_ms, abs=0.05)


@pytest.mark.parametrize(
    ("name", "inference_ms", "first_output_ms"),
    [("unwrapped", 406.3, 390.2), ("wrapped-httpx", 398.7, 396.1)],
)
def test_an_mlflow_request_reads_its_calls_retrieval_and_tool(
    name: str, inference_ms: float, first_output_ms: float, capsys: pytest.CaptureFixture[str]
) -> None:
    """MLflow's span types, in their JSON quotes: its ``AGENT`` request is the run. Its first
    chunk is a span event (``mlflow.chunk.item.0``): the answer's first output measured,
    390.2 ms where the sim sent its first chunk at 388.8. With the wire, each call's
    ``Completions`` span and the wire's span beside it are one call (five, not ten), though
    MLflow writes its key on the wire's span too (tests/data/foreign/mlflow/README.md)."""
    quantities = _the_agents_request(capsys, FOREIGN / "mlflow" / f"{name}.jsonl")
    assert quantities["inference"]["p50_ms"] == pytest.approx(inference_ms, abs=0.05)
    assert quantities["first_output"]["p50_ms"] == pytest.approx(first_output_ms, abs=0.05)


@pytest.mark.parametrize(("name", "tool_ms"), [("wrapped", 29.1), ("wrapped-http", 26.1)])
def test_a_genkit_flow_reads_its_model_tool_and_data_steps(
    name: str, tool_ms: float, capsys: pytest.CaptureFixture[str]
) -> None:
    """Genkit's own spans (no gen_ai key): the actions' type in ``genkit:metadata:subtype``.
    Before its row, no step was read (inference 0.0 ms, overhead 455.8 of 486.8)."""
    found = _report(capsys, FOREIGN / "genkit" / f"{name}.jsonl")
    agent = found["workflows"]["agent"]
    counts = _counts(agent)
    assert (counts["inference"], counts["data"], counts["tool"]) == (5, 1, 1)
    assert agent["quantities"]["tool"]["p50_ms"] == pytest.approx(tool_ms, abs=0.05)
    assert "sim/sim-plan" in agent["steps"]  # a model action is named after its model


@pytest.mark.parametrize("stack", ["crewai", "smolagents"])
def test_a_framework_run_that_is_half_the_request_is_said_to_be(
    stack: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Unwrapped, the framework's task is the trace's one run (CrewAI's
    ``Support agent._execute_core``, smolagents' ``ToolCallingAgent.run``): the request's
    retrieval, its two parallel calls and its answer lie beside it under the application's
    span. Without ``--roots`` the run is read as it is, and the four steps outside it are
    said; with ``--roots`` the request is the run, holding them all, and nothing is said."""
    path = FOREIGN / stack / "unwrapped.jsonl"
    found = _report(capsys, path)
    [line] = [w for w in found["warnings"] if "outside their runs" in w]
    assert line.startswith("1 traces hold 4 steps outside their runs") and "--roots" in line
    found = _report(capsys, path, "--roots")
    assert not [w for w in found["warnings"] if "outside their runs" in w]
    [agent] = found["workflows"].values()
    assert _counts(agent)["data"] == 1


def test_a_run_at_the_top_of_its_trace_leaves_no_step_outside(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Google ADK's invocation is the root of its trace: no step lies beside it."""
    found = _report(capsys, FOREIGN / "google-adk" / "unwrapped.jsonl")
    assert not [w for w in found["warnings"] if "outside their runs" in w]


@pytest.mark.parametrize("name", ["unwrapped", "legacy"])
def test_a_google_adk_invocation_is_one_run(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """ADK's invocation span and its agent span share the agent's name: one run, its
    sub-agents steps of it."""
    found = _report(capsys, FOREIGN / "google-adk" / f"{name}.jsonl")
    assert found["runs"] == 1
    [(workflow, stats)] = found["workflows"].items()
    assert (workflow, stats["runs"]) == ("agent", 1)


def test_a_haystack_pipeline_is_one_run_with_its_retriever_agent_and_tool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    found = _report(capsys, FOREIGN / "haystack" / "unwrapped.jsonl")
    [(workflow, stats)] = found["workflows"].items()
    assert (workflow, stats["runs"]) == ("haystack.pipeline.run", 1)
    steps = {name: step["kind"] for name, step in stats["steps"].items()}
    assert steps["retriever"] == "data"
    assert steps["haystack.agent.step.llm"] == "inference"
    assert steps["lookup_order"] == "tool"


def test_a_semantic_kernel_request_is_one_run_and_its_streamed_answer_bounds_the_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Semantic Kernel's streamed `chat sim-answer` says nothing of streaming and marks no
    first token (rule 17 of docs/attributes.md): the first output is at least the answer
    call's start, never its end, and is said to be a bound."""
    found = _report(capsys, FOREIGN / "semantic-kernel" / "wrapped.jsonl")
    assert list(found["workflows"]) == ["agent"]
    agent = found["workflows"]["agent"]
    assert agent["runs"] == 1
    counts = _counts(agent)
    assert (counts["inference"], counts["data"], counts["tool"]) == (5, 1, 1)
    assert agent["steps"]["execute_tool orders-lookup_order"]["kind"] == "tool"
    assert agent["quantities"]["first_output"]["count"] == 1
    assert agent["bound_runs"]["first_output"] == 1
    assert "total" not in agent["bound_runs"]
    # at least the answer call's start (354.9 ms into the run), never its end (475.9)
    assert agent["quantities"]["first_output"]["max_ms"] == pytest.approx(354.9, abs=0.05)


def test_an_openlit_request_reads_its_first_token_in_seconds_and_its_stream_as_inference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """OpenLIT's `gen_ai.server.time_to_first_token` is in seconds (rule 12 of
    docs/attributes.md): the answer's first token 40.8 ms after its start, not 0.04 ms;
    the POST of its stream ended at the headers and times nothing (rule 18)."""
    found = _report(capsys, FOREIGN / "openlit" / "wrapped.jsonl")
    agent = found["workflows"]["agent"]
    assert agent["runs"] == 1
    counts = _counts(agent)
    assert (counts["inference"], counts["data"], counts["tool"]) == (5, 1, 1)
    assert agent["steps"]["chat sim-answer"]["ttft"]["max_ms"] == pytest.approx(40.77, abs=0.01)
    assert agent["bound_runs"] == {}
    assert agent["quantities"]["first_output"]["max_ms"] == pytest.approx(398.33, abs=0.01)
    assert agent["quantities"]["inference"]["max_ms"] > 400


def test_a_logfire_streamed_answer_lasts_until_the_record_of_its_end(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Logfire ends a streamed call's span when the SDK hands the stream back (354.8-356.5
    ms) and writes a zero-length record when it was read (474.6 ms). The call lasts until
    the record (rule 20), which is no call: inference 407.7 ms on the path. Before, the
    record was the answer's call, of 0 ms, and the call's own span request building (rule
    9): inference 287.9, overhead 131.0, the first output "at least" 474.6
    (tests/data/foreign/logfire/README.md)."""
    path = FOREIGN / "logfire" / "unwrapped.jsonl"
    agent = _the_agents_steps(capsys, path, roots=True)
    quantities = agent["quantities"]
    assert quantities["inference"]["p50_ms"] == pytest.approx(407.7, abs=0.05)
    assert quantities["data"]["p50_ms"] == pytest.approx(30.7, abs=0.05)
    assert quantities["tool"]["p50_ms"] == pytest.approx(25.6, abs=0.05)
    # Logfire writes no first chunk: a bound, at the streamed call's start.
    assert agent["bound_runs"]["first_output"] == 1
    assert quantities["first_output"]["p50_ms"] == pytest.approx(354.8, abs=0.05)
    [run] = read_runs([path], roots=True)
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (363, 85)
    [streamed] = [s for s in run.steps if s.start_ns - run.start_ns > 354_000_000]
    assert (streamed.start_ns - run.start_ns) / 1e6 == pytest.approx(354.8, abs=0.05)
    assert (streamed.end_ns - run.start_ns) / 1e6 == pytest.approx(474.6, abs=0.05)


def test_the_agents_sdk_traced_by_logfire_reads_its_function_tool(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The OpenAI Agents SDK's spans as ``logfire.instrument_openai_agents()`` writes them:
    the function tool's call, ``Function: {name}``, is the tool (27.1 ms), where it was
    overhead (tool 0.0, overhead 55.5 ms). Its agent runs are transparent: the request is
    the run (tests/data/foreign/logfire/README.md)."""
    agent = _the_agents_steps(capsys, FOREIGN / "logfire" / "openai-agents.jsonl", roots=True)
    quantities = agent["quantities"]
    assert quantities["tool"]["p50_ms"] == pytest.approx(27.1, abs=0.05)
    assert quantities["overhead"]["p50_ms"] == pytest.approx(28.5, abs=0.05)
    assert quantities["inference"]["p50_ms"] == pytest.approx(414.9, abs=0.05)


_ANSWER_PRICED = """
[prices."sim-plan"]
input_per_mtok = 2.5
output_per_mtok = 10
[prices."sim-fast"]
input_per_mtok = 0.15
output_per_mtok = 0.6
[prices."sim-answer"]
input_per_mtok = 2.5
output_per_mtok = 10

[workflows.agent]
cost = "0.01"
"""


def test_a_streamed_answer_whose_usage_is_zeros_has_no_cost_to_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Agents SDK asked for no usage of its streamed answer and wrote 0 input and 0
    output tokens for it. No model reads nothing: the call's tokens are not known (rule 21),
    so the run's cost is not judged. Before, the answer cost nothing: $0.0010 for the run,
    the budget kept (exit 0)."""
    path = FOREIGN / "logfire" / "openai-agents.jsonl"
    [run] = read_runs([path], roots=True)
    answers = [r for r in run.records if r.kind == "inference" and r.model == "sim-answer"]
    assert [(r.input_tokens, r.output_tokens) for r in answers] == [(None, None)]
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (340, 65)  # the rest
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(_ANSWER_PRICED)
    code = main(["check", "--roots", "--budgets", str(budgets), str(path)])
    err = capsys.readouterr().err
    assert code == EXIT_INPUT
    assert "a call to 'sim-answer' has no valid token counts" in err
    # The totals say they leave it out (chainlat.chain.uncounted_calls), and so does report.
    assert run.rollup.uncounted_calls == 1
    assert main(["report", "--roots", str(path)]) == EXIT_OK
    assert "1 runs count the tokens of some model calls and not of others" in (
        capsys.readouterr().err
    )
