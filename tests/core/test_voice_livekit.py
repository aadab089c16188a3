"""LiveKit Agents' voice spans read as voice turns: the turn, its stages, its first audio
and how it ended, from spans shaped as livekit-agents 1.8.9 writes them."""

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

from chainlat._core import voice
from chainlat._core.conventions import user_bot_latency_ms_of
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import aggregate
from chainlat._runtime.otlp_json import encode_request
from chainlat.traces import read_runs
from chainlat.traces.sdk import runs_from_spans

MS = 1_000_000
T0 = 1_700_000_000_000_000_000

# Where each name, key, unit and parent comes from, in livekit-agents 1.8.9 (livekit/agents/):
# - agent_session: voice/agent_session.py 988, invoke_workflow named "agent_session" (1012,
#   telemetry/gen_ai.py 544-552); the session's context is the root of every turn.
# - user_turn: voice/audio_recognition.py 2088, under the session root, beside the agent
#   turn; lk.transcription_delay, lk.end_of_turn_delay in seconds (1872-1873).
# - agent_turn: voice/agent_activity.py 282-292, invoke_agent with gen_ai.agent.name (the
#   agent's label, telemetry/gen_ai.py 520-541); lk.interrupted (3363), lk.e2e_latency in
#   seconds, started speaking minus the user's stop, and the user turn's delays (3412-3421,
#   236-245).
# - llm_node: voice/generation.py 190, under agent_turn; lk.response.ttft in seconds from
#   the node's start (200, 360).
# - llm_request: llm/llm.py 236-291, under llm_node, chat, with
#   gen_ai.response.time_to_first_chunk in seconds (403-420, 475); llm_request_run, its
#   attempt, names no operation (318-328).
# - tts_node: voice/generation.py 473, under agent_turn beside llm_node; gen_ai.request.model
#   and no operation (485-488); lk.response.ttfb in seconds after the TTS got its first text
#   (516-529).
# - a non-streamed TTS: tts_stream_adapter (tts/stream_adapter.py 112) under tts_node,
#   lk.tts.streaming true; per sentence a tts_request (tts/tts.py 288, 318), started as its
#   text goes out (303) with lk.tts.streaming false (399-404), whose start is the anchor of
#   lk.response.ttfb (492); tts_request_run, its attempt (290, 413).
# No STT span: the STT stream runs for the whole session and writes none (stt/ has no tracer).


class Trace:
    """A LiveKit session on an injected clock: every time in ms from T0."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        self.tracer = provider.get_tracer("livekit-agents")
        self.session = self.span(
            "agent_session",
            None,
            0,
            {"gen_ai.operation.name": "invoke_workflow", "gen_ai.workflow.name": "agent_session"},
        )

    def span(
        self, name: str, parent: Span | None, start_ms: int, attributes: dict[str, AttributeValue]
    ) -> Span:
        context = trace.set_span_in_context(parent) if parent is not None else None
        return self.tracer.start_span(
            name, context=context, start_time=T0 + start_ms * MS, attributes=attributes
        )

    def closed(
        self,
        name: str,
        parent: Span | None,
        start_ms: int,
        end_ms: int,
        attributes: dict[str, AttributeValue],
    ) -> Span:
        span = self.span(name, parent, start_ms, attributes)
        span.end(end_time=T0 + end_ms * MS)
        return span

    def model_call(self, turn: Span, start_ms: int, end_ms: int) -> None:
        """llm_node, first token 210 ms in; its llm_request 5 ms later, first chunk 200 ms in."""
        node = self.span("llm_node", turn, start_ms, {"lk.response.ttft": 0.21})
        request = self.span(
            "llm_request",
            node,
            start_ms + 5,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.response.time_to_first_chunk": 0.2,
                "gen_ai.usage.input_tokens": 40,
                "gen_ai.usage.output_tokens": 16,
            },
        )
        self.closed("llm_request_run", request, start_ms + 5, end_ms - 5, {"lk.retry_count": 0})
        request.end(end_time=T0 + (end_ms - 5) * MS)
        node.end(end_time=T0 + end_ms * MS)

    def runs(self, exporter: InMemorySpanExporter, end_ms: int) -> list[WorkflowRun]:
        self.session.end(end_time=T0 + end_ms * MS)
        return sorted(runs_from_spans(exporter.get_finished_spans()), key=lambda r: r.start_ns)


def voice_turn(tr: Trace, base: int, *, interrupted: bool) -> None:
    """The user speaks base+0 to base+1000; the turn is committed 300 ms later (base+1300),
    where agent_turn opens with llm_node (to base+1900) and tts_node (to base+2700); the
    first sentence goes to the TTS at base+1600 (its tts_request), the first audio 150 ms
    later (base+1750), the agent speaking at base+1760."""
    delays: dict[str, AttributeValue] = {
        "lk.transcription_delay": 0.12,
        "lk.end_of_turn_delay": 0.3,
    }
    tr.closed("user_turn", tr.session, base, base + 1300, delays)
    outcome: dict[str, AttributeValue] = {"lk.interrupted": interrupted}
    if not interrupted:
        outcome["lk.e2e_latency"] = 0.76
    turn = tr.span(
        "agent_turn",
        tr.session,
        base + 1300,
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "Assistant",
            "lk.speech_id": f"speech_{base}",
            **outcome,
            **delays,
        },
    )
    tr.model_call(turn, base + 1300, base + 1900)
    tts = tr.span(
        "tts_node",
        turn,
        base + 1300,
        {
            "gen_ai.request.model": "tts-1",
            "gen_ai.provider.name": "openai",
            "lk.response.ttfb": 0.15,
        },
    )
    adapter = tr.span(
        "tts_stream_adapter", tts, base + 1300, {"lk.tts.streaming": True, "lk.tts.label": "x"}
    )
    for start, end in ((1600, 2100), (2100, 2600)):
        request = tr.span(
            "tts_request",
            adapter,
            base + start,
            {
                "lk.tts.streaming": False,
                "lk.tts.label": "openai.TTS",
                "gen_ai.request.model": "tts-1",
            },
        )
        tr.closed("tts_request_run", request, base + start, base + end, {"lk.retry_count": 0})
        request.end(end_time=T0 + (base + end) * MS)
    adapter.end(end_time=T0 + (base + 2650) * MS)
    tts.end(end_time=T0 + (base + 2700) * MS)
    turn.end(end_time=T0 + (base + 2900) * MS)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def turns_of(runs: list[WorkflowRun]) -> list[WorkflowRun]:
    return [r for r in runs if r.workflow == "Assistant"]


def ttfts(run: WorkflowRun) -> dict[str, float | None]:
    """Each step's time to first token (first audio for TTS), to the microsecond."""
    return {s.name: None if s.ttft_ms is None else round(s.ttft_ms, 3) for s in run.steps}


def test_a_livekit_agent_turn_is_a_voice_run_split_by_stage(
    exporter: InMemorySpanExporter,
) -> None:
    tr = Trace(exporter)
    voice_turn(tr, 0, interrupted=False)
    (run,) = turns_of(tr.runs(exporter, 3000))
    assert ttfts(run) == {
        "llm_request": 200.0,  # the node around it is no second call
        "tts_node": 150.0,  # timed from its first sentence, at 1600
    }
    assert (run.rollup.input_tokens, run.rollup.output_tokens) == (40, 16)
    # The first audio: 150 ms after the first sentence went out at 1600, from the turn's 1300.
    assert run.first_output_ms == pytest.approx(450.0)
    r = run.rollup
    assert r.first_output_text_to_speech_ms == pytest.approx(150.0)
    assert r.first_output_speech_to_text_ms == pytest.approx(0.0)
    # The model writes the first sentence (1300-1600, 5 ms of it before its request), then
    # the voice speaks it.
    assert r.first_output_inference_ms == pytest.approx(445.0)
    assert r.first_output_overhead_ms == pytest.approx(5.0)
    assert voice.end_reason_of(run.root.attributes if run.root else {}) == "completed"


def test_livekit_e2e_latency_is_the_first_audio_plus_the_wait_before_the_turn(
    exporter: InMemorySpanExporter,
) -> None:
    tr = Trace(exporter)
    voice_turn(tr, 0, interrupted=False)
    (run,) = turns_of(tr.runs(exporter, 3000))
    assert run.root is not None
    theirs = user_bot_latency_ms_of(run.root.attributes)
    assert theirs is not None
    assert theirs == pytest.approx(760.0)
    # LiveKit counts from the user's stop (1000), chainlat from the turn's start (1300):
    # the end-of-turn delay (300 ms), then 10 ms from the first audio to playing it.
    assert run.first_output_ms is not None
    assert theirs - run.first_output_ms == pytest.approx(300.0 + 10.0)


def test_a_streamed_livekit_tts_has_no_first_audio_placed_too_early(
    exporter: InMemorySpanExporter,
) -> None:
    """A streamed TTS marks no span when its first text goes out: the first audio is unknown,
    not lk.response.ttfb after the node's start."""
    tr = Trace(exporter)
    turn = tr.span("agent_turn", tr.session, 0, {"gen_ai.operation.name": "invoke_agent",
                                                  "gen_ai.agent.name": "Assistant"})  # fmt: skip
    tr.model_call(turn, 0, 600)
    tts = tr.span("tts_node", turn, 0, {"gen_ai.request.model": "tts-1", "lk.response.ttfb": 0.1})
    tr.closed("tts_request", tts, 0, 1500, {"lk.tts.streaming": True, "lk.tts.label": "x"})
    tts.end(end_time=T0 + 1500 * MS)
    turn.end(end_time=T0 + 1600 * MS)
    (run,) = turns_of(tr.runs(exporter, 2000))
    assert ttfts(run) == {"llm_request": 200.0, "tts_node": None}
    assert run.first_output_ms == pytest.approx(205.0)  # the model's first token: a lower bound


def test_livekit_interrupted_turns_are_counted_apart(exporter: InMemorySpanExporter) -> None:
    tr = Trace(exporter)
    voice_turn(tr, 0, interrupted=False)
    voice_turn(tr, 3000, interrupted=True)  # the caller spoke over the agent
    runs = turns_of(tr.runs(exporter, 6000))
    assert [voice.end_reason_of(r.root.attributes if r.root else {}) for r in runs] == [
        "completed",
        "interrupted",
    ]
    stats = aggregate(runs).workflows["Assistant"]
    assert (stats.runs, stats.interrupted) == (2, 1)
    assert len(stats.quantities["first_output"]) == 1


def test_livekit_text_mode_turn_is_a_model_call_in_a_session(
    exporter: InMemorySpanExporter,
) -> None:
    """Text mode (AgentSession.run(user_input=...)), the shape checked by hand: agent_session
    -> agent_turn -> llm_node -> llm_request, no user_turn, STT or TTS, no lk.e2e_latency."""
    tr = Trace(exporter)
    turn = tr.span(
        "agent_turn",
        tr.session,
        100,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "Assistant",
         "lk.interrupted": False},
    )  # fmt: skip
    tr.model_call(turn, 100, 700)
    turn.end(end_time=T0 + 720 * MS)
    # The session is a container, never a run (docs/attributes.md, rule 14): its turn is.
    (run,) = tr.runs(exporter, 800)
    assert run.workflow == "Assistant"
    assert not run.nested
    assert ttfts(run) == {"llm_request": 200.0}
    assert run.first_output_ms == pytest.approx(205.0)
    assert run.rollup.first_output_text_to_speech_ms is None
    assert run.root is not None
    assert voice.end_reason_of(run.root.attributes) == "completed"
    assert user_bot_latency_ms_of(run.root.attributes) is None


def test_a_livekit_turn_read_from_a_file_has_the_same_first_audio(
    exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    """The trace readers keep what the turn needs: the first audio and its split as above."""
    tr = Trace(exporter)
    voice_turn(tr, 0, interrupted=False)
    tr.runs(exporter, 3000)
    path = tmp_path / "livekit.jsonl"
    path.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    (run,) = turns_of(list(read_runs([path])))
    assert ttfts(run) == {"llm_request": 200.0, "tts_node": 150.0}
    assert run.first_output_ms == pytest.approx(450.0)
    assert run.rollup.first_output_text_to_speech_ms == pytest.approx(150.0)
    assert run.root is not None
    assert voice.end_reason_of(run.root.attributes) == "completed"
    assert user_bot_latency_ms_of(run.root.attributes) == pytest.approx(760.0)
