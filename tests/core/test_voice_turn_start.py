"""A voice turn starts where the caller stopped speaking, whoever wrote the trace
(`chainlat._core.turn_start`), and the wait for the end of their turn to be detected is a
part of the first output's split (`chainlat._core.voice.end_of_turn_cut`). Spans built with
the OpenTelemetry SDK in the shapes livekit-agents 1.8.9 and pipecat-ai 1.14.0 write them,
on an injected clock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from chainlat._core import attributes as attr
from chainlat._core.chain import Rollup
from chainlat._core.recorded import inconsistency
from chainlat._core.rollup import SpanRecord, compute_rollup
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import aggregate
from chainlat._runtime.otlp_json import encode_request
from chainlat.traces import ReadCounters, read_runs
from chainlat.traces.sdk import runs_from_spans

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


class Session:
    """A trace on an injected clock: every time in ms from T0."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.exporter = exporter
        self.tracer = provider.get_tracer("voice-framework")

    def span(
        self,
        name: str,
        parent: Span | None,
        start_ms: float,
        attributes: dict[str, AttributeValue] | None = None,
    ) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(
            name, context=context, start_time=T0 + round(start_ms * MS), attributes=attributes
        )

    def closed(
        self,
        name: str,
        parent: Span | None,
        start_ms: float,
        end_ms: float,
        attributes: dict[str, AttributeValue] | None = None,
    ) -> Span:
        span = self.span(name, parent, start_ms, attributes)
        span.end(end_time=T0 + round(end_ms * MS))
        return span

    def runs(self) -> list[WorkflowRun]:
        spans = self.exporter.get_finished_spans()
        return sorted(runs_from_spans(spans), key=lambda r: r.start_ns)


# --- LiveKit Agents 1.8.9 -------------------------------------------------------------
# agent_session (voice/agent_session.py 988) holds, under its context: user_speaking
# (2263-2284: started at the VAD's start of speech, ended at its end of speech backdated
# by the silence it waited on), user_turn (voice/audio_recognition.py 2088) with eou_wait
# under it (2133-2180: from the last speech to the turn decision, lk.eou.outcome
# "committed" at 1881), and agent_turn (voice/agent_activity.py 282), which opens before
# eou_wait ends (measured: docs/voice.md).


def livekit_turn(
    s: Session, session: Span, base: float, *, speech: tuple[float, float] | None = (0, 1000)
) -> None:
    """The caller speaks ``speech`` (ms from ``base``); the end-of-turn wait runs from the
    end of the words to base+1400; agent_turn opens at base+1300; llm_node at base+1450
    (llm_request 5 ms in, its first chunk 200 ms later: base+1655); tts_node beside it, its
    first sentence out at base+1660 and its first audio 150 ms later (base+1810); LiveKit's
    own figure: the agent speaking at base+1820, 820 ms after the words."""
    if speech is not None:
        s.closed("user_speaking", session, base + speech[0], base + speech[1])
        user_turn = s.span("user_turn", session, base + speech[0])
        s.closed(
            "eou_wait",
            user_turn,
            base + speech[1],
            base + 1400,
            {"lk.eou.outcome": "committed", "lk.eou.endpointing_delay": 0.4},
        )
        user_turn.end(end_time=T0 + round((base + 1400) * MS))
    turn = s.span(
        "agent_turn",
        session,
        base + 1300,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "Assistant",
            "lk.interrupted": False,
            "lk.e2e_latency": 0.82,
        },
    )
    node = s.span("llm_node", turn, base + 1450, {"lk.response.ttft": 0.205})
    s.closed(
        "llm_request",
        node,
        base + 1455,
        base + 1995,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o-mini",
            "gen_ai.response.time_to_first_chunk": 0.2,
        },
    )
    node.end(end_time=T0 + round((base + 2000) * MS))
    tts = s.span(
        "tts_node", turn, base + 1450, {"gen_ai.request.model": "tts-1", "lk.response.ttfb": 0.15}
    )
    adapter = s.span("tts_stream_adapter", tts, base + 1450, {"lk.tts.streaming": True})
    s.closed("tts_request", adapter, base + 1660, base + 2600, {"lk.tts.streaming": False})
    adapter.end(end_time=T0 + round((base + 2600) * MS))
    tts.end(end_time=T0 + round((base + 2650) * MS))
    turn.end(end_time=T0 + round((base + 2700) * MS))


def livekit_session(s: Session) -> Span:
    return s.span(
        "agent_session",
        None,
        -500,
        {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent_session"},
    )


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def test_a_livekit_turn_starts_at_the_end_of_the_callers_words(
    exporter: InMemorySpanExporter,
) -> None:
    s = Session(exporter)
    session = livekit_session(s)
    livekit_turn(s, session, 0)
    session.end(end_time=T0 + 3000 * MS)
    (run,) = s.runs()
    assert run.workflow == "Assistant"
    assert run.start_ns == T0 + 1000 * MS  # the end of user_speaking, not agent_turn's 1300
    r = run.rollup
    # The first audio at 1810: 810 ms after the words, 10 ms before LiveKit's own figure
    # (the agent speaking at 1820), where the turn's own start read 510.
    assert r.first_output_ms == pytest.approx(810.0)
    assert r.first_output_end_of_turn_ms == pytest.approx(400.0)  # 1000 -> eou_wait's end
    # 1400-1455: agent_turn and llm_node before the request (overhead); 1455-1660 the model
    # writes the first sentence; 1660-1810 the voice speaks it.
    assert r.first_output_overhead_ms == pytest.approx(400.0 + 55.0)
    assert r.first_output_inference_ms == pytest.approx(205.0 + 150.0)
    assert r.first_output_text_to_speech_ms == pytest.approx(150.0)
    assert r.first_output_speech_to_text_ms == pytest.approx(0.0)
    assert (r.first_output_data_ms, r.first_output_tool_ms) == (0.0, 0.0)
    assert r.total_ms == pytest.approx(1700.0)
    # The attribute and the budget quantity read the same part.
    assert r.to_attributes()[attr.CHAIN_FIRST_OUTPUT_END_OF_TURN_MS] == pytest.approx(400.0)
    stats = aggregate([run]).workflows["Assistant"]
    assert stats.quantities["first_output_end_of_turn"].summary().p50 == pytest.approx(400.0)


def test_a_livekit_turn_read_from_a_file_starts_at_the_words_too(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    s = Session(exporter)
    session = livekit_session(s)
    livekit_turn(s, session, 0)
    session.end(end_time=T0 + 3000 * MS)
    path = tmp_path / "livekit.jsonl"
    path.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    (run,) = [r for r in read_runs([path]) if r.workflow == "Assistant"]
    assert run.start_ns == T0 + 1000 * MS
    assert run.first_output_ms == pytest.approx(810.0)
    assert run.rollup.first_output_end_of_turn_ms == pytest.approx(400.0)
    # Computed afresh (with prices, say), the end of turn is kept.
    assert run.recomputed_rollup().first_output_end_of_turn_ms == pytest.approx(400.0)


def test_the_words_spoken_over_an_answer_start_the_next_turn(
    exporter: InMemorySpanExporter,
) -> None:
    """Barge-in: the caller speaks 2200-2900, while the first answer plays (its agent_turn
    opened at 1300): that speech is the second turn's, which starts at 2900."""
    s = Session(exporter)
    session = livekit_session(s)
    livekit_turn(s, session, 0)
    livekit_turn(s, session, 1600, speech=(600, 1300))  # user_speaking 2200-2900
    session.end(end_time=T0 + 5000 * MS)
    first, second = s.runs()
    assert first.start_ns == T0 + 1000 * MS
    assert second.start_ns == T0 + 2900 * MS
    assert second.first_output_ms == pytest.approx(3410.0 - 2900.0)
    assert second.rollup.first_output_end_of_turn_ms == pytest.approx(3000.0 - 2900.0)


def test_a_livekit_turn_with_no_words_before_it_starts_where_it_opened(
    exporter: InMemorySpanExporter,
) -> None:
    """A greeting (session.say, generate_reply at start): no speech of the caller is its,
    the earlier turn's words were answered by the earlier turn."""
    s = Session(exporter)
    session = livekit_session(s)
    livekit_turn(s, session, 0)
    livekit_turn(s, session, 3000, speech=None)
    session.end(end_time=T0 + 6000 * MS)
    first, greeting = s.runs()
    assert first.start_ns == T0 + 1000 * MS
    assert greeting.start_ns == T0 + 4300 * MS
    assert greeting.first_output_ms == pytest.approx(510.0)
    assert greeting.rollup.first_output_end_of_turn_ms is None


def test_without_a_decided_end_the_wait_before_the_turn_opened_is_the_end_of_turn(
    exporter: InMemorySpanExporter,
) -> None:
    """No eou_wait committed (a custom turn detector): the decision is the agent_turn's
    opening."""
    s = Session(exporter)
    session = livekit_session(s)
    s.closed("user_speaking", session, 0, 1000)
    livekit_turn(s, session, 0, speech=None)
    session.end(end_time=T0 + 3000 * MS)
    (run,) = s.runs()
    assert run.start_ns == T0 + 1000 * MS
    assert run.rollup.first_output_end_of_turn_ms == pytest.approx(300.0)
    assert run.first_output_ms == pytest.approx(810.0)


# --- Pipecat 1.14.0 ---------------------------------------------------------------------
# turn (utils/tracing/turn_trace_observer.py 196) opens when the turn tracker hears the
# caller start; stt (utils/tracing/service_decorators.py 632-640) is backdated to the start
# of speech, ends on the final transcript (755-760), and its metrics.ttfb counts from the
# VAD's stop less stop_secs (services/stt_service.py 636-644).


def pipecat_conversation(s: Session, stt_ttfb_s: float | None) -> None:
    """The caller speaks 0-1000 ms; the turn opens 3 ms after the speech started; stt from
    the start of speech to the transcript at 1250; llm 1260-1450 (first token 90 ms in);
    tts 1450-2400, its first audio 250 ms in (1700)."""
    talk = s.span("conversation", None, -100, {"conversation.id": "c"})
    turn = s.span("turn", talk, 3, {"turn.number": 1, "turn.was_interrupted": False})
    stt: dict[str, AttributeValue] = {"gen_ai.operation.name": "stt"}
    if stt_ttfb_s is not None:
        stt["metrics.ttfb"] = stt_ttfb_s
    s.closed("stt", turn, 0, 1250, stt)
    s.closed("llm", turn, 1260, 1450, {"gen_ai.operation.name": "chat", "metrics.ttfb": 0.09})
    s.closed("tts", turn, 1450, 2400, {"gen_ai.operation.name": "tts", "metrics.ttfb": 0.25})
    turn.end(end_time=T0 + 2900 * MS)
    talk.end(end_time=T0 + 3000 * MS)


def test_a_pipecat_turn_starts_where_its_stt_clock_started(
    exporter: InMemorySpanExporter,
) -> None:
    """The stt's time to first byte (0.25 s) counts from the end of the words: 1250 - 250."""
    s = Session(exporter)
    pipecat_conversation(s, 0.25)
    (run,) = s.runs()
    assert run.start_ns == T0 + 1000 * MS
    r = run.rollup
    assert r.first_output_ms == pytest.approx(700.0)
    # 1000-1250 the transcript (the VAD's silence included: no span says when it stopped).
    assert r.first_output_speech_to_text_ms == pytest.approx(250.0)
    assert r.first_output_end_of_turn_ms is None
    assert r.first_output_inference_ms == pytest.approx(250.0 + 190.0 + 250.0)
    assert r.first_output_overhead_ms == pytest.approx(10.0)


def test_a_pipecat_turn_without_an_stt_clock_starts_where_pipecat_opened_it(
    exporter: InMemorySpanExporter,
) -> None:
    """stop_secs = 0: Pipecat measures no STT time to first byte, nothing says where the
    words ended."""
    s = Session(exporter)
    pipecat_conversation(s, None)
    (run,) = s.runs()
    assert run.start_ns == T0 + 3 * MS
    assert run.first_output_ms == pytest.approx(1697.0)


def test_pipecats_stt_before_its_turn_is_no_clock_skew(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    s = Session(exporter)
    pipecat_conversation(s, 0.25)
    path = tmp_path / "pipecat.jsonl"
    path.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    counters = ReadCounters()
    (run,) = read_runs([path], counters=counters)
    assert run.start_ns == T0 + 1000 * MS
    assert not [w for w in counters.warnings() if "skew" in w]


def test_a_pipecat_turn_inside_the_applications_workflow_is_no_clock_skew(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """Wrapped (docs/voice.md): the workflow starts at the end of the words, 1000; Pipecat's
    turn inside it when the caller started speaking."""
    s = Session(exporter)
    workflow = s.span(
        "invoke_workflow voice-turn",
        None,
        1000,
        {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "voice-turn",
         "chainlat.step.kind": "workflow"},
    )  # fmt: skip
    turn = s.span("turn", workflow, 3, {"turn.number": 1, "turn.was_interrupted": False})
    s.closed("stt", turn, 0, 1250, {"gen_ai.operation.name": "stt", "metrics.ttfb": 0.25})
    s.closed("tts", turn, 1450, 2400, {"gen_ai.operation.name": "tts", "metrics.ttfb": 0.25})
    turn.end(end_time=T0 + 2900 * MS)
    workflow.end(end_time=T0 + 2950 * MS)
    path = tmp_path / "wrapped.jsonl"
    path.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    counters = ReadCounters()
    runs = {r.workflow: r for r in read_runs([path], counters=counters)}
    assert not [w for w in counters.warnings() if "skew" in w]
    assert runs["voice-turn"].first_output_ms == pytest.approx(700.0)
    assert runs["turn"].nested
    assert runs["turn"].start_ns == T0 + 1000 * MS  # its stt clock: the same end of words


def test_a_span_before_its_parent_elsewhere_is_still_clock_skew(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    s = Session(exporter)
    root = s.span("invoke_workflow w", None, 10, {"gen_ai.operation.name": "invoke_workflow"})
    s.closed("chat m", root, 0, 50, {"gen_ai.operation.name": "chat"})
    root.end(end_time=T0 + 100 * MS)
    path = tmp_path / "skewed.jsonl"
    path.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    counters = ReadCounters()
    list(read_runs([path], counters=counters))
    assert [w for w in counters.warnings() if "1 spans start before their parent" in w]


# --- the rollup ---------------------------------------------------------------------------


def test_a_model_started_before_the_decision_waited_for_it_too() -> None:
    """Preemptive generation: the model starts at 100, the turn is decided at 300; what the
    model did before 300 did not bring the answer before the decision."""
    root = SpanRecord(1, None, "turn", 0, 1000 * MS, "workflow")
    call = SpanRecord(2, 1, "chat m", 100 * MS, 600 * MS, "inference", ttft_ms=350.0)
    r = compute_rollup(root, [call], end_of_turn_ns=300 * MS)
    assert r.first_output_ms == pytest.approx(450.0)
    assert r.first_output_end_of_turn_ms == pytest.approx(300.0)
    assert r.first_output_overhead_ms == pytest.approx(300.0)
    assert r.first_output_inference_ms == pytest.approx(150.0)
    # The whole run's split is the critical path's, as before.
    assert (r.inference_ms, r.overhead_ms) == pytest.approx((500.0, 500.0))
    plain = compute_rollup(root, [call])
    assert plain.first_output_end_of_turn_ms is None
    assert plain.first_output_inference_ms == pytest.approx(350.0)


def test_a_decision_after_the_first_output_makes_the_whole_wait_end_of_turn() -> None:
    root = SpanRecord(1, None, "turn", 0, 1000 * MS, "workflow")
    call = SpanRecord(2, 1, "chat m", 100 * MS, 600 * MS, "inference", ttft_ms=100.0)
    r = compute_rollup(root, [call], end_of_turn_ns=400 * MS)
    assert r.first_output_ms == pytest.approx(200.0)
    assert r.first_output_end_of_turn_ms == pytest.approx(200.0)
    assert r.first_output_overhead_ms == pytest.approx(200.0)


def test_a_recorded_end_of_turn_is_read_back_and_checked() -> None:
    root = SpanRecord(1, None, "turn", 0, 100 * MS, "workflow")
    good = Rollup(100.0, 60.0, 0.0, 0.0, 40.0, first_output_ms=80.0,
                  first_output_inference_ms=40.0, first_output_data_ms=0.0,
                  first_output_tool_ms=0.0, first_output_overhead_ms=40.0,
                  first_output_end_of_turn_ms=30.0)  # fmt: skip
    assert Rollup.from_attributes(good.to_attributes()) == good
    assert inconsistency(good, root) == ""
    bad = Rollup.from_attributes(
        {**good.to_attributes(), attr.CHAIN_FIRST_OUTPUT_END_OF_TURN_MS: 50.0}
    )
    assert bad is not None
    assert inconsistency(bad, root) == (
        "chainlat.chain.first_output.end_of_turn_ms 50 is more than "
        "chainlat.chain.first_output.overhead_ms"
    )


def test_the_applications_mark_counts_from_the_turns_own_span_start(
    exporter: InMemorySpanExporter,
) -> None:
    """A mark on Pipecat's turn (the observer's first frame at the output transport, 1715 ms,
    written as 1712 ms from the span's start at 3 ms) stays at 1715 when the turn is moved
    to the end of the words (1000): the first output is 715 ms, not 1712."""
    s = Session(exporter)
    talk = s.span("conversation", None, -100, {"conversation.id": "c"})
    turn = s.span(
        "turn",
        talk,
        3,
        {"turn.number": 1, "turn.was_interrupted": False, attr.WORKFLOW_FIRST_OUTPUT_MS: 1712.0},
    )
    s.closed("stt", turn, 0, 1250, {"gen_ai.operation.name": "stt", "metrics.ttfb": 0.25})
    s.closed("llm", turn, 1260, 1450, {"gen_ai.operation.name": "chat", "metrics.ttfb": 0.09})
    s.closed("tts", turn, 1450, 2400, {"gen_ai.operation.name": "tts", "metrics.ttfb": 0.25})
    turn.end(end_time=T0 + 2900 * MS)
    talk.end(end_time=T0 + 3000 * MS)
    (run,) = s.runs()
    assert run.start_ns == T0 + 1000 * MS
    assert run.first_output_ms == pytest.approx(715.0)
