"""LiveKit Agents' voice spans read as voice turns: the turn, its stages, its first audio
and how it ended, from spans shaped as livekit-agents 1.8.9 writes them."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from chainlat._core import voice
from chainlat._core.conventions import user_bot_latency_ms_of
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import aggregate
from chainlat._runtime.otlp_json import encode_request
from chainlat.cli import main
from chainlat.traces import read_runs
from support.livekit_spans import MS, T0, LiveKitSession

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


class Trace(LiveKitSession):
    """A LiveKit session on an injected clock: every time in ms from T0."""

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


def _streamed_turn(tr: Trace) -> None:
    """A turn 0-1600 whose streamed TTS (tts_node 0-1500) has no tts_request under an
    adapter: its first audio is in no span."""
    turn = tr.span("agent_turn", tr.session, 0, {"gen_ai.operation.name": "invoke_agent",
                                                  "gen_ai.agent.name": "Assistant"})  # fmt: skip
    tr.model_call(turn, 0, 600)
    tts = tr.span("tts_node", turn, 0, {"gen_ai.request.model": "tts-1", "lk.response.ttfb": 0.1})
    tr.closed("tts_request", tts, 0, 1500, {"lk.tts.streaming": True, "lk.tts.label": "x"})
    tts.end(end_time=T0 + 1500 * MS)
    turn.end(end_time=T0 + 1600 * MS)


def test_a_streamed_livekit_tts_leaves_the_first_output_a_lower_bound(
    exporter: InMemorySpanExporter,
) -> None:
    """The model's first token (205 ms) is only a lower bound of the first audio: marked so."""
    tr = Trace(exporter)
    _streamed_turn(tr)
    (run,) = turns_of(tr.runs(exporter, 2000))
    assert run.first_output_ms == pytest.approx(205.0)
    assert run.rollup.unusable == ("tts_node",)
    assert run.rollup.unusable_values[0].startswith("lk.response.ttfb, counted from a first")
    assert run.rollup.unusable_parts == ("first_output", "first_output_split")
    assert run.rollup.bound_in("first_output")


def test_a_placed_livekit_first_audio_is_a_measurement(exporter: InMemorySpanExporter) -> None:
    tr = Trace(exporter)
    voice_turn(tr, 0, interrupted=False)
    (run,) = turns_of(tr.runs(exporter, 3000))
    assert (run.rollup.unusable, run.rollup.unusable_parts) == ((), ())


def test_check_does_not_judge_a_lower_bound_of_the_first_audio_in_any_format(
    exporter: InMemorySpanExporter, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``first_output`` judged "ok" on the model's first token (exit 0)."""
    tr = Trace(exporter)
    _streamed_turn(tr)
    tr.runs(exporter, 2000)
    traces = tmp_path / "livekit.jsonl"
    traces.write_text(json.dumps(encode_request(exporter.get_finished_spans())) + "\n")
    budgets = tmp_path / "chainlat.toml"
    budgets.write_text(
        '[workflows.Assistant]\ntotal = "5s"\nfirst_output = "700ms"\n'
        'p50 = { first_output = "700ms" }\n'
        '[workflows.Assistant.operations.text_to_speech]\nfirst_output = "300ms"\n'
    )
    summary = "FAILED: 0 of 4 limits broken, 3 not judged"
    base = ["check", str(traces), "--budgets", str(budgets), "--workflow", "Assistant"]
    junit = tmp_path / "junit.xml"
    assert main([*base, "--format", "json", "--junit", str(junit)]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["summary"] == summary
    outcomes = {v["target"]: v["reason"] or v["status"] for v in document["verdicts"]}
    assert outcomes == {
        "total": "ok",
        "first_output": "unusable_value",
        "p50.first_output": "unusable_value",
        "operations.text_to_speech.first_output": "unusable_value",
    }
    why = next(v["why"] for v in document["verdicts"] if v["target"] == "first_output")
    assert "`tts_node` gives lk.response.ttfb, counted from a first text no span marks" in why
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert (properties["exit_code"], properties["summary"]) == ("2", summary)
    for fmt in ("text", "markdown"):
        assert main([*base, "--format", fmt]) == 2
        assert capsys.readouterr().out.rstrip("\n").splitlines()[-1] == summary
    assert main(["report", str(traces), "--workflow", "Assistant"]) == 0
    out = capsys.readouterr().out
    assert "first output [a bound in 1/1 runs]" in out
    assert "first output at least 205.0 ms" in out


# The shape of a real voice turn (livekit-agents 1.8.9, livekit-plugins-openai 1.8.9, the
# interop matrix's livekit case, its figures rounded to the ms): the caller speaks 0-800
# (user_speaking, ended at the VAD's end of speech less the silence waited); eou_wait
# 800-1300; agent_turn opens at 1285, before the wait ends (voice/agent_activity.py
# 282-292); tts_node opens at the model's first token (1400: the segment starts on its first
# text, voice/agent_activity.py 3675-3713), its tts_request once the sentence is written
# (1464); the sink plays the first frame at 1620 (agent_speaking, started at the sink's
# playback_started time: voice/generation.py 614-616, voice/agent_activity.py 3269-3290,
# voice/agent_session.py 2204), 6 ms before tts_request + lk.response.ttfb (1464 + 162):
# the ttfb counts from the request object's construction (tts/tts.py 303), before its span
# starts (318). lk.e2e_latency: the user's stop to the agent speaking (3412-3421).


def measured_turn(tr: Trace, *, streamed: bool = False, played: bool = True) -> None:
    user_turn = tr.span("user_turn", tr.session, 0, {"lk.end_of_turn_delay": 0.5})
    tr.closed("user_speaking", user_turn, 0, 800, {})
    tr.closed("eou_wait", user_turn, 800, 1300, {"lk.eou.outcome": "committed"})
    user_turn.end(end_time=T0 + 1302 * MS)
    outcome: dict[str, AttributeValue] = {"lk.interrupted": False}
    if played:
        outcome["lk.e2e_latency"] = 0.82
    kind: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "Assistant",
    }
    turn = tr.span("agent_turn", tr.session, 1285, {**kind, **outcome})
    tr.model_call(turn, 1195, 1463)  # first token at 1195 + 5 + 200 = 1400
    tts = tr.span(
        "tts_node", turn, 1400, {"gen_ai.request.model": "tts-1", "lk.response.ttfb": 0.162}
    )
    if streamed:
        tr.closed("tts_request", tts, 1400, 2110, {"lk.tts.streaming": True, "lk.tts.label": "x"})
    else:
        adapter = tr.span("tts_stream_adapter", tts, 1400, {"lk.tts.streaming": True})
        tr.closed("tts_request", adapter, 1464, 2117, {"lk.tts.streaming": False})
        adapter.end(end_time=T0 + 2119 * MS)
    tts.end(end_time=T0 + 2120 * MS)
    if played:
        tr.closed("agent_speaking", turn, 1620, 2700, {})
    turn.end(end_time=T0 + 2700 * MS)


def test_a_livekit_first_audio_is_where_the_sink_started_playing(
    exporter: InMemorySpanExporter,
) -> None:
    """Was: tts_request + lk.response.ttfb (1626), 6 ms late; the sink's playback start is
    the first output, and lk.e2e_latency is then the same wait."""
    tr = Trace(exporter)
    measured_turn(tr)
    (run,) = turns_of(tr.runs(exporter, 3000))
    assert run.start_ns == T0 + 800 * MS  # the end of the words
    assert ttfts(run) == {"llm_request": 200.0, "tts_node": 156.0}  # from 1464 to 1620
    assert run.first_output_ms == pytest.approx(820.0)
    assert run.root is not None
    assert user_bot_latency_ms_of(run.root.attributes) == pytest.approx(run.first_output_ms)
    r = run.rollup
    assert r.first_output_end_of_turn_ms == pytest.approx(500.0)  # 800 to the decision at 1300
    assert r.first_output_text_to_speech_ms == pytest.approx(156.0)
    assert (r.unusable, r.unusable_parts) == ((), ())


def test_a_streamed_livekit_tts_is_placed_by_the_sink_when_it_played(
    exporter: InMemorySpanExporter,
) -> None:
    """No span marks a streamed TTS's first text, but the sink's playback start is the first
    audio all the same: a measurement, not the model's first token as a bound."""
    tr = Trace(exporter)
    measured_turn(tr, streamed=True)
    (run,) = turns_of(tr.runs(exporter, 3000))
    assert ttfts(run) == {"llm_request": 200.0, "tts_node": 220.0}  # the node's 1400 to 1620
    assert run.first_output_ms == pytest.approx(820.0)
    assert (run.rollup.unusable, run.rollup.unusable_parts) == ((), ())


def test_a_livekit_answer_cut_before_it_played_keeps_the_ttfb(
    exporter: InMemorySpanExporter,
) -> None:
    """No agent_speaking (the caller spoke before a frame played): tts_request + ttfb."""
    tr = Trace(exporter)
    measured_turn(tr, played=False)
    (run,) = turns_of(tr.runs(exporter, 3000))
    assert ttfts(run)["tts_node"] == pytest.approx(162.0)
    assert run.first_output_ms == pytest.approx(826.0)
