"""Which spans are one model call (the general rules behind the misses of issue 23, on spans
made with the OpenTelemetry SDK alone, live and read back from a trace file): request
building is no call, a framework span and the wire span beside it are twins, and the
wire's token counts win when twins disagree."""

from __future__ import annotations

from pathlib import Path

import chainlat
from chainlat._runtime.interface import finish_step
from chainlat.testing import Capture
from support import streams
from support.readback import both_ways, openinference_llm
from support.records import MS

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
            attributes=openinference_llm(
                "gpt-4o-mini", **{"llm.token_count.prompt": 50, "llm.token_count.completion": 20}
            ),
            start_time=start,
        )
        prepare = oi.start_span("OpenAI._prepare_chat_with_tools",
                                attributes=openinference_llm("gpt-4o-mini"),
                                start_time=start + MS)  # fmt: skip
        prepare.end(end_time=start + 2 * MS)
        call.end(end_time=start + 300 * MS)
        clock.advance(301)
    assert run.rollup is not None
    assert (run.rollup.inference_count, run.rollup.inference_ms) == (1, 300)
    for read in both_ways(cap, tmp_path):
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
        attributes=openinference_llm("sim-plan"),
        start_time=start,
    )
    if failed:
        prepare.record_exception(TimeoutError("read timed out"), timestamp=start + MS)
    prepare.end(end_time=start + 1 * MS)
    call = oi.start_span(
        "OpenAI.achat",
        attributes=openinference_llm(
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
    reads = both_ways(cap, tmp_path)
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
    for r in (run.rollup, *(read.recomputed_rollup() for read in both_ways(cap, tmp_path))):
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
        oi.start_span("OpenAI.chat", attributes=openinference_llm("m"),
                      start_time=start).end(end_time=start + 10 * MS)  # fmt: skip
        oi.start_span("lookup", attributes={"openinference.span.kind": "TOOL"},
                      start_time=start + 11 * MS).end(end_time=start + 20 * MS)  # fmt: skip
        oi.start_span("OpenAI.chat", attributes=openinference_llm(
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
        attributes=openinference_llm(
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
    for r in (run.rollup, *(read.recomputed_rollup() for read in both_ways(cap, tmp_path))):
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
            attributes=openinference_llm(
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
    for r in (run.rollup, *(read.recomputed_rollup() for read in both_ways(cap, tmp_path))):
        assert (r.inference_count, r.input_tokens, r.output_tokens) == (1, 53, 20)
        assert r.inference_ms == 127.3


def test_spans_beside_each_other_with_other_token_counts_stay_two_calls(cap: Capture) -> None:
    """Two calls one after the other: the rule asks for equal token counts."""
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("agent", tracer_provider=p) as run:
        oi = p.get_tracer("openinference.instrumentation.llama_index")
        start = clock.advance(1)
        oi.start_span("OpenAI.chat", start_time=start, attributes=openinference_llm(
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
    for r in (run.rollup, *(read.recomputed_rollup() for read in both_ways(cap, tmp_path))):
        assert (r.inference_count, r.input_tokens, r.output_tokens) == (1, 30, 20)
