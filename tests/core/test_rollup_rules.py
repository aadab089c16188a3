"""The general rules behind the misses of issue 23, on spans made with the OpenTelemetry SDK
alone: each holds live (the span processor's rollup) and read back from a trace file.

The attribute sets are those the instrumentations write (names checked in their sources:
OpenInference's "First Token Stream Event", OpenLLMetry's "llm.content.completion.chunk",
strands-agents' ``gen_ai.server.time_to_first_token`` in ms).
"""

from __future__ import annotations

import json
import math
from dataclasses import fields, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.util.types import Attributes

import chainlat
from chainlat._core.recorded import _negative_part
from chainlat._core.rollup import Rollup, SpanRecord, compute_rollup
from chainlat._core.runs import WorkflowRun, inconsistency, steps_of
from chainlat._core.stats import Stats
from chainlat._runtime.interface import finish_step
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.report.common import stat_rows
from chainlat.report.waterfall import waterfall
from chainlat.testing import Capture
from chainlat.traces import ReadCounters, _files, read_runs
from chainlat.traces.sdk import runs_from_spans
from support import streams

MS = 1_000_000


def _read_back(cap: Capture, tmp_path: Path) -> WorkflowRun:
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    [run] = read_runs([path])
    return run


def _runs(cap: Capture, tmp_path: Path) -> list[WorkflowRun]:
    """The run read back from a file and built from the SDK spans in memory."""
    [in_memory] = runs_from_spans(cap.spans())
    return [_read_back(cap, tmp_path), in_memory]


def _openinference_llm(model: str, **extra: object) -> Attributes:
    return {"openinference.span.kind": "LLM", "llm.model_name": model, **extra}  # type: ignore[dict-item]


# --- a span is timed to its last event or child ------------------------------------------


def test_a_span_whose_first_token_event_comes_after_its_end_is_timed_to_it(
    cap: Capture, tmp_path: Path
) -> None:
    """LlamaIndex through OpenInference ends ``OpenAI.stream_chat`` when the stream is handed
    back (2 ms) and records its first token at +207 ms: the call lasted 207 ms."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.llama_index")
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        span = oi.start_span("OpenAI.stream_chat", attributes=_openinference_llm("gpt-4o-mini"),
                             start_time=start)  # fmt: skip
        span.add_event("First Token Stream Event", timestamp=start + 207 * MS)
        span.end(end_time=start + 2 * MS)
        clock.advance(210)
    assert run.rollup is not None
    assert (run.rollup.inference_ms, run.rollup.inference_count) == (207, 1)
    for read in _runs(cap, tmp_path):
        assert read.recomputed_rollup().inference_ms == 207
        [step] = read.steps
        assert (step.duration_ms, step.ttft_ms, step.extended) == (207, 207, True)
        assert "ended before its own events: took at least this" in waterfall(read)


def test_a_step_whose_child_ends_after_it_is_timed_to_the_child() -> None:
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100 * MS, "workflow")
    spans = [
        SpanRecord(2, 1, "retrieve", 10 * MS, 12 * MS, "data"),
        SpanRecord(3, 2, "db query", 11 * MS, 60 * MS),  # the stage handed back a lazy cursor
    ]
    r = compute_rollup(root, spans)
    assert (r.data_ms, r.data_sum_ms) == (50, 50)
    [step] = steps_of(root, spans)
    assert (step.end_ns, step.extended) == (60 * MS, True)


# --- request building is no call ---------------------------------------------------------


def test_an_empty_model_call_span_inside_a_real_call_is_request_building(
    cap: Capture, tmp_path: Path
) -> None:
    """OpenInference marks LlamaIndex's ``OpenAI._prepare_chat_with_tools`` as an LLM span:
    1 ms with no tokens, no output and no first token, within ``OpenAI.achat``."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.llama_index")
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        call = oi.start_span(
            "OpenAI.achat",
            attributes=_openinference_llm(
                "gpt-4o-mini", **{"llm.token_count.prompt": 50, "llm.token_count.completion": 20}
            ),
            start_time=start,
        )
        prepare = oi.start_span("OpenAI._prepare_chat_with_tools",
                                attributes=_openinference_llm("gpt-4o-mini"),
                                start_time=start + MS)  # fmt: skip
        prepare.end(end_time=start + 2 * MS)
        call.end(end_time=start + 300 * MS)
        clock.advance(301)
    assert run.rollup is not None
    assert (run.rollup.inference_count, run.rollup.inference_ms) == (1, 300)
    for read in _runs(cap, tmp_path):
        assert read.recomputed_rollup().inference_count == 1
        assert [s.span_name for s in read.steps] == ["OpenAI.achat"]


def _prepare_then_call(cap: Capture, *, failed: bool = False) -> None:
    """An empty LLM span of the model, then under the same parent, 0.3 ms later, the real
    ``OpenAI.achat``; with ``failed``, the empty span recorded an exception."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.llama_index")
    start = clock.advance(1)
    prepare = oi.start_span(
        "OpenAI._prepare_chat_with_tools",
        attributes=_openinference_llm("sim-plan"),
        start_time=start,
    )
    if failed:
        prepare.record_exception(TimeoutError("read timed out"), timestamp=start + MS)
    prepare.end(end_time=start + 1 * MS)
    call = oi.start_span(
        "OpenAI.achat",
        attributes=_openinference_llm(
            "sim-plan", **{"llm.token_count.prompt": 119, "llm.token_count.completion": 5}
        ),
        start_time=start + 1 * MS + 300_000,
    )
    call.end(end_time=start + 105 * MS)
    clock.advance(106)


def test_an_empty_model_call_span_just_before_a_real_call_is_request_building(
    cap: Capture, tmp_path: Path
) -> None:
    """The shape the LlamaIndex traces have: ``OpenAI._prepare_chat_with_tools`` (1 ms, no
    tokens, no output) is a sibling that ends before ``OpenAI.achat`` starts, not inside it;
    its time and the gap after it are overhead."""
    with chainlat.workflow("agent", tracer_provider=cap.provider) as run:
        _prepare_then_call(cap)
    assert run.rollup is not None
    reads = _runs(cap, tmp_path)
    for r in (run.rollup, *(read.recomputed_rollup() for read in reads)):
        assert (r.inference_count, r.inference_ms, r.overhead_ms) == (1, 103.7, 3.3)
    for read in reads:
        assert [s.span_name for s in read.steps] == ["OpenAI.achat"]


def test_a_failed_attempt_just_before_a_real_call_is_still_a_call(
    cap: Capture, tmp_path: Path
) -> None:
    """An attempt that recorded an exception, retried by the framework, called the model."""
    with chainlat.workflow("agent", tracer_provider=cap.provider) as run:
        _prepare_then_call(cap, failed=True)
    assert run.rollup is not None
    for r in (run.rollup, *(read.recomputed_rollup() for read in _runs(cap, tmp_path))):
        assert r.inference_count == 2


def test_an_empty_model_call_span_with_a_step_between_it_and_the_call_stays_a_call(
    cap: Capture,
) -> None:
    """Only the span just before the call is its request building: a tool between them
    leaves the empty span a call of its own."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.llama_index")
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        oi.start_span("OpenAI.chat", attributes=_openinference_llm("m"),
                      start_time=start).end(end_time=start + 10 * MS)  # fmt: skip
        oi.start_span("lookup", attributes={"openinference.span.kind": "TOOL"},
                      start_time=start + 11 * MS).end(end_time=start + 20 * MS)  # fmt: skip
        oi.start_span("OpenAI.chat", attributes=_openinference_llm(
            "m", **{"llm.token_count.prompt": 5}), start_time=start + 21 * MS,
        ).end(end_time=start + 40 * MS)  # fmt: skip
        clock.advance(41)
    assert run.rollup is not None
    assert run.rollup.inference_count == 2


def test_an_applications_own_call_without_usage_is_still_a_call(cap: Capture) -> None:
    """``chainlat.inference`` says it is a call: a short parallel one that recorded nothing,
    within a longer one of the same model, is not request building."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("w", tracer_provider=p) as run:
        long = chainlat.inference("m", tracer_provider=p).start()
        clock.advance(1)
        short = chainlat.inference("m", tracer_provider=p).start()
        clock.advance(5)
        finish_step(short, None)
        clock.advance(5)
        long.record_usage(input_tokens=3)
        finish_step(long, None)
    assert run.rollup is not None
    assert run.rollup.inference_count == 2


# --- twins that do not overlap -----------------------------------------------------------


def _stream_chat_then_wire(cap: Capture) -> None:
    """LlamaIndex's ``OpenAI.stream_chat`` (OpenInference) ends before the request goes out;
    chainlat.httpx's span of that request starts after it, under the same parent."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.llama_index")
    wire = p.get_tracer("chainlat")
    start = clock.advance(1)
    framework = oi.start_span(
        "OpenAI.stream_chat",
        attributes=_openinference_llm(
            "gpt-4o-mini", **{"llm.token_count.prompt": 22, "llm.token_count.completion": 20}
        ),
        start_time=start,
    )
    framework.end(end_time=start + 2 * MS)
    call = wire.start_span(
        "chat gpt-4o-mini",
        attributes=streams.WIRE_CHAT,
        start_time=start + 2 * MS + 300_000,
    )
    call.end(end_time=start + 392 * MS)
    clock.advance(393)


def test_a_framework_span_and_the_wire_span_beside_it_in_time_are_one_call(
    cap: Capture, tmp_path: Path
) -> None:
    with chainlat.workflow("agent", tracer_provider=cap.provider) as run:
        _stream_chat_then_wire(cap)
    assert run.rollup is not None
    for r in (run.rollup, *(read.recomputed_rollup() for read in _runs(cap, tmp_path))):
        assert (r.inference_count, r.input_tokens, r.output_tokens) == (1, 22, 20)
        assert r.inference_ms == 389.7


def test_a_stream_span_timed_to_its_first_token_and_a_late_wire_span_are_one_call(
    cap: Capture, tmp_path: Path
) -> None:
    """Under load the request of LlamaIndex's stream went out 58.7 ms after
    ``OpenAI.astream_chat`` started; timed to its first token (+104.1 ms), the span overlaps
    the wire's by 45.4 ms, less than half of its own length: still one call."""
    p, clock = cap.provider, cap.clock
    oi = p.get_tracer("openinference.instrumentation.llama_index")
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        framework = oi.start_span(
            "OpenAI.astream_chat",
            attributes=_openinference_llm(
                "sim-answer", **{"llm.token_count.prompt": 53, "llm.token_count.completion": 20}
            ),
            start_time=start,
        )
        framework.add_event("First Token Stream Event", timestamp=start + 104_100_000)
        framework.end(end_time=start + 1 * MS)
        p.get_tracer("chainlat").start_span(
            "chat sim-answer",
            attributes={
                "chainlat.step.kind": "inference",
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "sim-answer",
                "gen_ai.usage.input_tokens": 53,
                "gen_ai.usage.output_tokens": 20,
                "http.request.method": "POST",
            },
            start_time=start + 58_700_000,
        ).end(end_time=start + 186 * MS)
        clock.advance(187)
    assert run.rollup is not None
    for r in (run.rollup, *(read.recomputed_rollup() for read in _runs(cap, tmp_path))):
        assert (r.inference_count, r.input_tokens, r.output_tokens) == (1, 53, 20)
        assert r.inference_ms == 127.3


def test_spans_beside_each_other_with_other_token_counts_stay_two_calls(cap: Capture) -> None:
    """Two calls one after the other: the rule asks for equal token counts."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("agent", tracer_provider=p) as run:
        oi = p.get_tracer("openinference.instrumentation.llama_index")
        start = clock.advance(1)
        oi.start_span("OpenAI.chat", start_time=start, attributes=_openinference_llm(
            "m", **{"llm.token_count.prompt": 5})).end(end_time=start + 10 * MS)  # fmt: skip
        p.get_tracer("chainlat").start_span(
            "chat m",
            attributes={"chainlat.step.kind": "inference", "gen_ai.request.model": "m",
                        "gen_ai.usage.input_tokens": 7, "http.request.method": "POST"},
            start_time=start + 11 * MS,
        ).end(end_time=start + 20 * MS)  # fmt: skip
        clock.advance(21)
    assert run.rollup is not None
    assert (run.rollup.inference_count, run.rollup.input_tokens) == (2, 12)


# --- the wire's token counts win ---------------------------------------------------------


def test_when_twins_disagree_on_tokens_the_provider_sdk_span_wins(
    cap: Capture, tmp_path: Path
) -> None:
    """OpenLLMetry's anthropic instrumentation adds message_start's output token to the
    cumulative count (21); the Anthropic SDK's own span (HTTP method, gen_ai.*) says 20."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        sdk = p.get_tracer("com.anthropic.sdk.python").start_span(
            "anthropic.messages.create",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "anthropic",
                "gen_ai.request.model": "claude-haiku-4-5",
                "gen_ai.usage.input_tokens": 30,
                "gen_ai.usage.output_tokens": 20,
                "http.request.method": "POST",
            },
            start_time=start + MS,
        )
        framework = p.get_tracer("opentelemetry.instrumentation.anthropic").start_span(
            "anthropic.chat",
            attributes={
                "llm.request.type": "chat",
                "gen_ai.system": "Anthropic",
                "gen_ai.request.model": "claude-haiku-4-5",
                "gen_ai.usage.input_tokens": 30,
                "gen_ai.usage.output_tokens": 21,
            },
            start_time=start,
        )
        sdk.end(end_time=start + 100 * MS)
        framework.end(end_time=start + 102 * MS)
        clock.advance(103)
    assert run.rollup is not None
    for r in (run.rollup, *(read.recomputed_rollup() for read in _runs(cap, tmp_path))):
        assert (r.inference_count, r.input_tokens, r.output_tokens) == (1, 30, 20)


# --- every TTFT key ----------------------------------------------------------------------


def test_strands_time_to_first_token_in_ms_is_read(cap: Capture, tmp_path: Path) -> None:
    p, clock = cap.provider, cap.clock
    tracer = p.get_tracer("strands.telemetry.tracer")
    agent = tracer.start_span("invoke_agent helper", start_time=clock(), attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"})  # fmt: skip
    chat = tracer.start_span(
        "chat",
        context=trace.set_span_in_context(agent),
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.server.time_to_first_token": 150,
        },
        start_time=clock.advance(1),
    )
    chat.end(end_time=clock.advance(400))
    agent.end(end_time=clock.advance(1))
    for read in _runs(cap, tmp_path):
        [step] = read.steps
        assert step.ttft_ms == 150
        assert read.rollup.first_output_ms == 151


def test_openllmetry_first_chunk_event_gives_the_first_token(cap: Capture, tmp_path: Path) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("agent", tracer_provider=p) as run:
        start = clock.advance(1)
        span = p.get_tracer("opentelemetry.instrumentation.openai").start_span(
            "openai.chat",
            attributes={"llm.request.type": "chat", "gen_ai.request.model": "m"},
            start_time=start,
        )
        span.add_event("llm.content.completion.chunk", timestamp=start + 80 * MS)
        span.add_event("llm.content.completion.chunk", timestamp=start + 90 * MS)
        span.end(end_time=start + 100 * MS)
        clock.advance(101)
    assert run.rollup is not None
    assert run.rollup.first_output_ms == 81
    for read in _runs(cap, tmp_path):
        assert [s.ttft_ms for s in read.steps] == [80]


# --- explicit marks win over derived ones ------------------------------------------------


def test_an_explicit_first_token_on_the_user_facing_call_wins_over_the_wire_chunk(
    cap: Capture, tmp_path: Path
) -> None:
    """The HTTP-level span inside saw its first chunk at +25 ms; the application marked its
    first token at +30 ms (after parsing it): the mark is the first output."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("chat", tracer_provider=p) as run:
        with chainlat.inference("m", user_facing=True, tracer_provider=p) as call:
            start = clock.advance(5)
            wire = p.get_tracer("chainlat").start_span(
                "chat m",
                attributes={
                    "chainlat.step.kind": "inference",
                    "gen_ai.request.model": "m",
                    "gen_ai.response.time_to_first_chunk": 0.02,
                    "http.request.method": "POST",
                },
                start_time=start,
            )
            clock.advance(25)
            call.first_token()
            wire.end(end_time=clock.advance(50))
            clock.advance(2)
        clock.advance(3)
    assert run.rollup is not None
    assert run.rollup.first_output_ms == 30
    for read in _runs(cap, tmp_path):
        assert read.recomputed_rollup().first_output_ms == 30


# --- a recorded rollup is checked against its span ---------------------------------------


def test_an_impossible_recorded_rollup_is_rebuilt_from_the_spans_with_a_warning(
    cap: Capture, tmp_path: Path
) -> None:
    """A 5,000 ms workflow span recording ``total_ms = -100`` and ``cost_usd = -5`` (as a
    runtime given a negative price writes it) passed every limit; the spans say 5,000 ms."""
    p, clock = cap.provider, cap.clock
    tracer = p.get_tracer("hand-written")
    start = clock()
    recorded = {
        "chainlat.chain.total_ms": -100.0,
        "chainlat.chain.inference_ms": 0.0,
        "chainlat.chain.data_ms": 0.0,
        "chainlat.chain.tool_ms": 0.0,
        "chainlat.chain.overhead_ms": -100.0,
        "chainlat.chain.inference_count": 1,
        "chainlat.chain.cost_usd": -5.0,
    }
    root = tracer.start_span("invoke_workflow w", start_time=start, attributes={
        "chainlat.step.kind": "workflow", "gen_ai.workflow.name": "w", **recorded})  # fmt: skip
    call = tracer.start_span(
        "chat m",
        context=trace.set_span_in_context(root),
        attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"},
        start_time=start + 1000 * MS,
    )
    call.end(end_time=start + 4000 * MS)
    root.end(end_time=start + 5000 * MS)
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    counters = ReadCounters()
    [run] = read_runs([path], counters=counters)
    assert (run.rollup.total_ms, run.rollup.inference_ms, run.rollup.cost_usd) == (5000, 3000, None)
    assert run.rebuilt == "chainlat.chain.total_ms -100 is negative"
    [warning] = counters.warnings()
    assert warning.startswith("1 rollups recorded on workflow spans are impossible")
    assert "chainlat.chain.total_ms -100 is negative" in warning


_PARTS = [
    f.name
    for f in fields(Rollup)
    if f.name not in ("critical_path", "unrecorded", "unrecorded_parts")  # names, not parts
]


@given(st.dictionaries(st.sampled_from(_PARTS), st.sampled_from([-1.0, -0.0, 0.0, 2.0, math.nan])))
def test_a_negative_part_is_found_whatever_the_others_hold(values: dict[str, float]) -> None:
    """The parts are checked at once first: a negative part anywhere, NaN or not beside it,
    is still named, the first in the order of the chain attributes."""
    recorded = replace(Rollup(0.0, 0.0, 0.0, 0.0, 0.0), **values)  # type: ignore[arg-type]
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100 * MS, "workflow")
    found = inconsistency(recorded, root)
    negative = _negative_part(recorded)
    assert bool(negative) == any(v < 0 for v in values.values())
    if negative:
        assert found == negative
    else:
        assert not found.endswith("is negative")


def test_a_recorded_rollup_whose_parts_do_not_sum_or_outlast_the_span_is_rebuilt() -> None:
    root = SpanRecord(1, None, "invoke_workflow w", 0, 100 * MS, "workflow")
    whole = Rollup(100.0, 60.0, 10.0, 0.0, 30.0)
    assert inconsistency(whole, root) == ""
    assert inconsistency(replace(whole, overhead_ms=0.0), root) == (
        "inference + data + tool + overhead is 70 ms, not chainlat.chain.total_ms 100"
    )
    assert inconsistency(replace(whole, total_ms=200.0, overhead_ms=130.0), root) == (
        "chainlat.chain.total_ms 200 is longer than the span (100 ms)"
    )
    assert inconsistency(replace(whole, cost_usd=-5.0), root) == (
        "chainlat.chain.cost_usd -5 is negative"
    )


# --- a model call that ended before its own events has an unrecorded end ----------------


def _both_readers(
    path: Path, monkeypatch: pytest.MonkeyPatch, *, roots: bool = False
) -> list[WorkflowRun]:
    """The run read by the quick reader and by the validating one."""
    [quick] = read_runs([path], roots=roots)
    with monkeypatch.context() as m:
        m.setattr(_files, "quick_spans", lambda line, origin: None)
        [slow] = read_runs([path], roots=roots)
    assert (quick, quick.spans) == (slow, slow.spans)
    return [quick, slow]


def test_a_model_call_that_ended_before_its_first_token_has_an_unrecorded_end(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timed to its first token (rule 8) the stream is 60 ms; it was read for 60 ms more, and
    nothing in the trace says so: inference and overhead are bounds, not measurements; the
    data stage before it and the first output (a recorded event) are measured."""
    handle = streams.agent_with_stream(cap)
    assert handle is not None and handle.rollup is not None
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for r in (handle.rollup, *(run.rollup for run in _both_readers(path, monkeypatch))):
        assert (r.total_ms, r.inference_ms, r.data_ms, r.overhead_ms) == (165, 60, 30, 75)
        assert r.unrecorded == ("OpenAI.astream_chat",)
        assert r.unrecorded_parts == ("inference", "overhead")
        assert (r.first_output_ms, r.first_output_inference_ms) == (95, 60)
        assert [r.unrecorded_in(q) for q in ("total", "inference", "data", "overhead")] == [
            False, True, False, True,
        ]  # fmt: skip
        assert not r.unrecorded_in("first_output") and r.unrecorded_in("speech_to_text")


def test_an_unrecorded_end_is_found_under_a_plain_root_span_too(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    streams.agent_with_stream(cap, wrapped=False)
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for run in _both_readers(path, monkeypatch, roots=True):
        assert run.workflow == "agent"
        assert run.rollup.unrecorded == ("OpenAI.astream_chat",)
        assert run.rollup.inference_ms == 60


def test_a_call_timed_at_the_wire_has_its_end_recorded(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``instrument_httpx()`` the wire span is the stream's twin (rule 10) and times it
    (rule 3): 118 ms of inference, measured."""
    handle = streams.agent_with_stream(cap, wire=True)
    assert handle is not None and handle.rollup is not None
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for r in (handle.rollup, *(run.rollup for run in _both_readers(path, monkeypatch))):
        assert (r.inference_count, r.inference_ms) == (1, 118)
        assert (r.unrecorded, r.unrecorded_parts) == ((), ())


def test_a_step_running_past_the_recorded_end_leaves_data_and_tool_time_unknown_too(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data stage beside the stream, to 120 ms: the trace's path goes through it (80 ms of
    data, no inference); had the stream's end been recorded (155 ms), the path would have
    gone through the stream. The first output (95 ms) still comes before any unknown."""
    handle = streams.agent_with_stream(cap, data_until_ms=120)
    assert handle is not None and handle.rollup is not None
    path = streams.write_traces(cap, tmp_path / "traces.jsonl")
    for r in (handle.rollup, *(run.rollup for run in _both_readers(path, monkeypatch))):
        assert (r.inference_ms, r.data_ms) == (0, 110)
        assert r.unrecorded_parts == ("inference", "overhead", "data", "tool")


def test_a_rollup_recorded_without_the_mark_is_rebuilt_from_the_spans(
    cap: Capture, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trace written before the rule: the rollup on the workflow span says nothing of the
    unrecorded end; the readers rebuild it from the spans, which do."""
    streams.agent_with_stream(cap)
    spans = cap.spans()
    path = tmp_path / "old.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(spans)
    exporter.shutdown()
    text = path.read_text()
    for key in ("chainlat.chain.unrecorded", "chainlat.chain.unrecorded_parts"):
        assert f'"{key}"' in text
    lines = [_without_mark(line) for line in text.splitlines()]
    path.write_text("\n".join(lines) + "\n")
    for run in _both_readers(path, monkeypatch):
        assert run.rollup.unrecorded == ("OpenAI.astream_chat",)


def _without_mark(line: str) -> str:
    doc = json.loads(line)
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                span["attributes"] = [
                    a
                    for a in span.get("attributes", [])
                    if not a["key"].startswith("chainlat.chain.unrecorded")
                ]
    return json.dumps(doc)


def test_the_report_shows_an_unrecorded_end_as_a_bound(cap: Capture, tmp_path: Path) -> None:
    """The waterfall and the statistics say which figures are bounds, and what times them."""
    streams.agent_with_stream(cap)
    [run] = read_runs([streams.write_traces(cap, tmp_path / "traces.jsonl")])
    text = waterfall(run)
    assert "ended before its own events: took at least this" in text
    assert "inference at least 60.0 ms, data 30.0 ms, tool 0.0 ms, overhead at most 75.0 ms" in text
    assert "the end of OpenAI.astream_chat is not recorded" in text
    stats = Stats()
    stats.add(run)
    labels = [row.label for row in stat_rows(stats.workflows["agent"])]
    assert "inference (critical path) [a bound in 1/1 runs]" in labels
    assert "data (critical path)" in labels and "first output" in labels


def _stream_record(span_id: int, start_ms: int, first_token_ms: int) -> SpanRecord:
    """A stream span ended 1 ms in, timed to its first token (rule 8): end not recorded."""
    return SpanRecord(
        span_id, 1, f"stream {span_id}", start_ms * MS, (start_ms + first_token_ms) * MS,
        "inference", ttft_ms=first_token_ms, model="m", source="openinference",
        extended=True, unrecorded_end=True,
    )  # fmt: skip


def test_two_unrecorded_ends_leave_the_whole_split_and_a_later_wait_unknown() -> None:
    """Stream A's real end may fall anywhere up to the run's end, past stream B's start: the
    path before B may differ too. The first output, B's first token, is a recorded instant;
    its wait runs past A's recorded end, so its split is not."""
    root = SpanRecord(1, None, "agent", 0, 200 * MS, "workflow")
    r = compute_rollup(root, [_stream_record(2, 10, 10), _stream_record(3, 50, 10)])
    assert r.unrecorded == ("stream 2", "stream 3")
    assert r.unrecorded_parts == ("inference", "overhead", "data", "tool", "first_output_split")
    assert r.first_output_ms == 60
    assert not r.unrecorded_in("first_output")
    assert r.unrecorded_in("first_output_speech_to_text")


def test_a_first_output_taken_from_an_unrecorded_end_is_not_known() -> None:
    """No first token at all (another event came after the end): the first output is the
    end of the call that ended last, which the trace does not hold."""
    root = SpanRecord(1, None, "agent", 0, 200 * MS, "workflow")
    call = replace(_stream_record(2, 10, 10), ttft_ms=None)
    r = compute_rollup(root, [call])
    assert r.first_output_ms == 20
    assert r.unrecorded_parts == ("inference", "overhead", "first_output")
