"""LiveKit Agents' realtime turns (``AgentSession(llm=RealtimeModel(...))``) read as voice
turns of the same shape as a cascade's, from spans shaped as livekit-agents 1.8.9 and
livekit-plugins-openai 1.8.9 write them (tests/interop/voice/livekit_realtime_agent.py)."""

from __future__ import annotations

import tomllib

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util.types import AttributeValue

from chainlat import report
from chainlat._core.runs import WorkflowRun
from chainlat._core.stats import aggregate
from chainlat.budgets import evaluate, parse_budgets
from chainlat.report.common import stat_rows
from chainlat.traces.sdk import runs_from_spans
from support.livekit_spans import MS, T0, LiveKitSession

# Where each name, key and parent comes from, in livekit-agents 1.8.9 (livekit/agents/):
# - agent_turn: voice/agent_activity.py 4334-4338 (_agent_turn), invoke_agent, with
#   lk.e2e_latency from the user's last speaking time to the first frame (4480-4486).
# - realtime_inference: voice/agent_activity.py 4339, under agent_turn, generate_content,
#   gen_ai.output.type speech and the realtime metrics' usage and
#   gen_ai.response.time_to_first_chunk in seconds (telemetry/utils.py 140-152), counted from
#   the response.created received (llm/_realtime/openai.py 2335), not from the span's start.
# - agent_speaking: voice/agent_session.py 2204, under agent_turn, started at the sink's
#   first frame (voice/agent_activity.py 4458-4470).
# - user_speaking: under user_turn with a VAD of the session's own, the VAD's end of speech
#   less its silence; without one, under agent_session, ended when the server's
#   speech_stopped is received (voice/agent_activity.py 2282-2290).
# - eou_wait: the VAD's endpointing, under user_turn; with a realtime model it may end after
#   the server's response opened the agent_turn.


class Trace(LiveKitSession):
    """A LiveKit realtime session on an injected clock: every time in ms from T0."""

    def turn(self, base: int, *, local_vad: bool, played: bool = True) -> None:
        """Speech 1000-2200 ms after ``base``; the server's speech_stopped received 2530 (its
        300 ms silence and the transit), the agent turn opened 2550, the model's first chunk
        received 2830 (280 ms after response.created at 2550), the first frame at the sink
        2840; the VAD's endpointing wait, with a local VAD, runs 2200-2700."""
        if local_vad:
            user = self.span("user_turn", self.session, base + 1000, {"lk.end_of_turn_delay": "0"})
            self.closed("user_speaking", user, base + 1000, base + 2200)
            self.closed("eou_wait", user, base + 2200, base + 2700, {"lk.eou.outcome": "committed"})
            user.end(end_time=T0 + (base + 2700) * MS)
        else:
            self.closed("user_speaking", self.session, base + 1030, base + 2530)
        attrs: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "default_agent",
            "lk.interrupted": False,
        }
        if local_vad:
            attrs["lk.e2e_latency"] = 0.64
        turn = self.span("agent_turn", self.session, base + 2550, attrs)
        self.closed(
            "realtime_inference",
            turn,
            base + 2550,
            base + 5500,
            {
                "gen_ai.operation.name": "generate_content",
                "gen_ai.output.type": "speech",
                "gen_ai.request.model": "sim-realtime",
                "gen_ai.provider.name": "api.openai.com",
                "gen_ai.usage.input_tokens": 40,
                "gen_ai.usage.output_tokens": 74,
                "gen_ai.usage.audio.input_tokens": 20,
                "gen_ai.usage.audio.output_tokens": 62,
                "gen_ai.response.time_to_first_chunk": 0.28,
            },
        )
        if played:
            self.closed("agent_speaking", turn, base + 2840, base + 5500)
        turn.end(end_time=T0 + (base + 5500) * MS)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def turns(exporter: InMemorySpanExporter, tr: Trace) -> list[WorkflowRun]:
    tr.session.end(end_time=T0 + 20_000 * MS)
    return sorted(runs_from_spans(exporter.get_finished_spans()), key=lambda r: r.start_ns)


def test_a_livekit_realtime_turn_starts_at_the_vads_end_and_first_outputs_at_the_sink(
    exporter: InMemorySpanExporter,
) -> None:
    """With a VAD of its own: the turn from the end of the words to the first frame at the
    sink, the response an inference with operation realtime, the wait before it the end of
    turn (the endpointing wait still running when the server answered does not count)."""
    tr = Trace(exporter)
    tr.turn(0, local_vad=True)
    tr.turn(8000, local_vad=True)
    runs = turns(exporter, tr)
    assert len(runs) == 2
    for run, base in zip(runs, (0, 8000), strict=True):
        assert run.start_ns == T0 + (base + 2200) * MS
        assert run.first_output_ms == pytest.approx(640.0)
        [step] = run.steps
        assert (step.name, step.kind) == ("realtime_inference", "inference")
        assert step.ttft_ms == pytest.approx(290.0)  # from the span's start to the first frame
        assert run.rollup.first_output_end_of_turn_ms == pytest.approx(350.0)
        assert run.rollup.first_output_inference_ms == pytest.approx(290.0)
        assert (run.rollup.input_tokens, run.rollup.output_tokens) == (40, 74)


def test_a_livekit_realtime_response_has_the_realtime_operation(
    exporter: InMemorySpanExporter,
) -> None:
    """``generate_content`` as LiveKit names it, ``realtime`` as chainlat's own turns do."""
    tr = Trace(exporter)
    tr.turn(0, local_vad=True)
    [run] = turns(exporter, tr)
    [step] = run.steps
    assert step.operation == "realtime"


def test_without_a_local_vad_the_turn_starts_at_the_servers_speech_stopped(
    exporter: InMemorySpanExporter,
) -> None:
    """No span says where the words ended then: the turn starts where LiveKit ended
    user_speaking (the server's speech_stopped received), and says that is no end of the
    words (its user_speaking hangs from the session, not from a VAD's user_turn); the first
    output is still the first frame at the sink, from that start: a lower bound."""
    tr = Trace(exporter)
    tr.turn(0, local_vad=False)
    tr.turn(8000, local_vad=True)
    quiet, vad = turns(exporter, tr)
    assert quiet.start_ns == T0 + 2530 * MS
    assert quiet.first_output_ms == pytest.approx(310.0)
    assert quiet.unknown_start is not None
    assert "speech_stopped arrived (no VAD of the session's own)" in quiet.unknown_start
    assert vad.unknown_start is None


BUDGETS = """
min_runs = 2
[workflows.default_agent]
total = "5s"
first_output = "200ms"
inference = "5s"
p50 = { first_output = "1s", total = "9s", inference = "9s" }

[workflows.default_agent.steps.realtime_inference]
max = "9s"
p50 = "9s"
"""


def test_what_counts_from_such_a_start_is_not_judged_and_shown_as_a_bound(
    exporter: InMemorySpanExporter,
) -> None:
    """A first output of 310 ms from a start after the server's silence would keep a 1 s
    p50 and break a 200 ms limit it may well break or not: neither is known. The first
    output, the total and their percentiles are not judged (``unknown_start``, saying why);
    the model's time and the step's are, as they do not count from the start. The report
    marks the bounds, and the waterfall says where the first output counts from."""
    tr = Trace(exporter)
    tr.turn(0, local_vad=False)
    tr.turn(8000, local_vad=False)
    runs = turns(exporter, tr)
    budgets = parse_budgets(tomllib.loads(BUDGETS), source="chainlat.toml")
    verdicts = {v.target: v for v in evaluate(runs, budgets).verdicts}
    for target in ("total", "first_output", "p50.first_output", "p50.total"):
        verdict = verdicts[target]
        assert (verdict.status, verdict.reason) == ("not_judged", "unknown_start"), target
        assert verdict.why is not None and "speech_stopped" in verdict.why
        assert "bounds, not measurements (docs/attributes.md, rule 16)" in verdict.why
    for target in ("inference", "p50.inference", "steps.realtime_inference.max"):
        assert verdicts[target].status == "ok", target
    assert verdicts["steps.realtime_inference.p50"].status == "ok"
    rows = {row.label: row for row in stat_rows(aggregate(runs).workflows["default_agent"])}
    assert "total [a bound in 2/2 runs]" in rows
    assert "first output [a bound in 2/2 runs]" in rows
    assert "inference (critical path)" in rows  # measured
    text = report.waterfall(runs[0])
    assert "first output 310.0 ms from a start that is no end of the words" in text


def test_a_livekit_realtime_answer_cut_before_it_played_keeps_the_plugins_first_chunk(
    exporter: InMemorySpanExporter,
) -> None:
    """No agent_speaking: the first chunk received, as the plugin measured it."""
    tr = Trace(exporter)
    tr.turn(0, local_vad=True, played=False)
    [run] = turns(exporter, tr)
    [step] = run.steps
    assert step.ttft_ms == pytest.approx(280.0)
