"""The voice cases of the interop matrix: a real Pipecat cascade (and, with ``--stack
livekit``, a LiveKit Agents session: ``livekit_judge.py``; with ``--stack livekit-realtime``
and ``--stack pipecat-realtime``, each on the sim's Realtime API: ``livekit_realtime_judge.py``,
``pipecat_realtime_judge.py``) against ``chainlat sim``, its traces read by chainlat and held
to the framework's own figures and the agent's truth.

``python tests/interop/voice/run.py [--out DIR] [--turns N] [--case NAME] [--stack STACK]``
(from the project's environment: the judging reads the traces with chainlat). The
``pipecat`` environment is built from ``requirements/pipecat.txt`` by the matrix's
``run.py`` (same cache). Six cases: ``unwrapped`` (Pipecat's spans alone) and
``unwrapped+httpx`` (with ``chainlat.instrument_httpx()``), and the same two with the
application wrapping each turn in a ``chainlat.workflow`` marked ``user_stopped_speaking()``
at the end of the caller's audio (``wrapped``, ``wrapped+httpx``), ``unwrapped+observer``:
chainlat's Pipecat observer (``chainlat.integrations.pipecat``) on the task and a function
the model calls in every turn, and ``unwrapped+observer+bargein``: the same with the caller
speaking over the second answer. See README.md, "The Pipecat voice case".
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]

STACK = "pipecat"
LIVEKIT = "livekit"
"""The LiveKit case, judged by ``livekit_judge.py`` beside this file."""
LIVEKIT_REALTIME = "livekit-realtime"
"""LiveKit on a realtime model, judged by ``livekit_realtime_judge.py`` beside this file."""
PIPECAT_REALTIME = "pipecat-realtime"
"""Pipecat on OpenAI's Realtime API, judged by ``pipecat_realtime_judge.py`` beside this file."""
CASES = (
    ("unwrapped", False, False),
    ("unwrapped+httpx", True, False),
    ("wrapped", False, True),
    ("wrapped+httpx", True, True),
)
"""(case, chainlat.instrument_httpx(), a chainlat.workflow per turn)."""
OBSERVER = "unwrapped+observer"
"""Pipecat's spans and chainlat's observer, with a function called in every turn."""
BARGEIN = "unwrapped+observer+bargein"
"""The observer's case with the caller speaking over the second answer (Pipecat
interrupts it): that turn ends interrupted and is left out, and every output says so."""
INTERRUPTED_TURN = 2
TOOL_SLACK_MS = 2.0
"""The observer's tool step runs from the push of the ``FunctionCallInProgressFrame``
(before the LLM service calls the handler) to the push of the ``FunctionCallResultFrame``
(in the result callback): its start and its end each within this of the time that push ran
(``tool_frames``: ``pipecat_agent.noting_calls``; Pipecat stamps each push inside it)."""
AROUND_BOUND_MS = 50.0
"""Pipecat's own time around the body inside the step (0.2-0.9 ms idle, more under load):
the framework's, reported as ``around``; bounded only so that a step that also held the
model's answer cannot pass."""
WAIT_TOLERANCE_MS = 10.0
"""With a barge-in: each turn's first output against the caller's wait as the agent saw it,
from the end of the words to the first audio frame at the output transport (the turn's
start, the observer's end of the words, is the agent's to the microsecond; the mark
0.5-2.4 ms after the frame on a quiet machine)."""
USER_BOT_TOLERANCE_MS = 15.0
"""With a barge-in: Pipecat's ``turn.user_bot_latency_seconds`` against chainlat's first
output. Both count from the VAD's stop less its ``stop_secs``; Pipecat's ends at the output
transport's ``BotStartedSpeakingFrame``, pushed before the write by the event loop's turns
(0.9-9.6 ms), chainlat's at the write (0.5-2.4 ms after it)."""
MARKED = True
"""Whether the observer's first output is judged (it marks one by default,
``first_output=True``)."""
OUTPUT_TOLERANCE_MS = 2.0
"""The observer's first output (the output transport's push of the turn's first audio
frame, once written, less its playing time) against the instant the agent's write of that
frame returned, less its playing time (``first_written``): the transport pushes the frame
right after."""
WRITE_LAG_BOUND_MS = 30.0
"""How late that write returned, beyond its playing time, after the transport was handed
the frame (``first_audio``): the write's sleep overran by a busy loop's turns, and the mark
is late by as much. 0.5-2.4 ms on a quiet machine (docs/voice.md), up to 5.6 ms seen at
load 5-9; the machine's, reported per turn (``write_returned_late_ms``), bounded only so
that a mark of another frame cannot pass."""
TURNS = 3
LLM = "sim-voice-llm"
PROFILES = {
    "models": [
        {"name": LLM, "ttft_base_ms": 100, "decode_ms_per_token": 5, "output_tokens": 12},
    ]
}
FIRST_AUDIO_TOLERANCE_MS = 2.0
FIRST_AUDIO_LAG_BOUND_MS = 100.0
"""chainlat's first audio (the TTS call's first audio, where Pipecat's ``metrics.ttfb``
places it: that reading is held to the microsecond apart) against Pipecat's
``turn.user_bot_latency_seconds`` (its output transport's ``BotStartedSpeakingFrame``),
both from the same end of speech: the frame reaches the output transport and starts playing
after the TTS service pushed it, by Pipecat's frame travel and queueing: 2.5-15 ms in the
runs of README.md, 31.2 ms in a later one. Held one-sided: Pipecat's never shorter by more
than ``FIRST_AUDIO_TOLERANCE_MS``, longer by at most ``FIRST_AUDIO_LAG_BOUND_MS``, a bound
only so that a figure of another instant cannot pass; the difference is reported (the
observer's cases read the first audio at the output transport instead)."""
START_TOLERANCE_MS = 0.01
"""An unwrapped turn's start against what chainlat reads it from, Pipecat's spans alone
(the ``stt`` span's end less its ``metrics.ttfb``: ``chainlat._core.turn_start``): the same
instant, but for the rounding of a double."""
DATING_BOUND_MS = 30.0
"""Pipecat's own dating of the end of the words (that instant) against the instant the agent
noted as the end of the words: Pipecat ends the span after it stopped its STT clock and
pushed the transcript on, 0.9-5.3 ms later in the runs of README.md (the turn starts that
much late, its first output that much short). The framework's, reported per turn
(``start_after_stop_ms``) and bounded, from ``FIRST_AUDIO_TOLERANCE_MS`` early to this late,
only so that a start taken from another instant cannot pass: a busy machine delays
Pipecat's handling of the transcript, as it delayed LiveKit's (its judge's bound is the
same)."""
MARK_TOLERANCE_MS = 0.01
"""A wrapped turn's start (its ``user_stopped_speaking()``) against the call itself: at or
after the instant the agent noted as the end of the utterance, a statement before the call,
and at or before the instant the call returned (``stopped_by``). The two notes are a
statement apart, but the interpreter may run another thread or collect garbage between
them (2.1 ms seen once on an idle machine)."""
WIRE_SLACK_MS = 1.0
"""A call's time to first byte on the wire lies inside Pipecat's, which starts before the
request is built and ends when the service pushes its first frame (for TTS, once it has
0.5 s of audio: ``TTSService.chunk_size``): never longer than it by more than this."""


def _matrix() -> Any:
    return _load("chainlat_interop_run", HERE.parent / "run.py")


def _judged(
    judging: Any,
    environment: str,
    matrix: Any,
    out: Path | None,
    turns: int,
    only: list[str] | None,
) -> int:
    """Set up ``environment``, then run and judge each case of a judge module (its
    ``STACK``, ``CASES``, ``run_case`` and ``judge``, which gives a case's problems and
    figures); the summary beside the traces."""
    stack = judging.STACK
    try:
        venv, spent = matrix.setup(environment, REPO)
    except matrix.SetupError as exc:
        print(f"{stack}: cannot set up: {exc}", file=sys.stderr)
        return 2
    out = out or Path(tempfile.mkdtemp(prefix="chainlat-voice-interop-"))
    summary: dict[str, Any] = {"setup_s": spent, "cases": {}}
    for case in judging.CASES:
        if only and case not in only:
            continue
        started = time.perf_counter()
        traces = judging.run_case(venv, matrix, case, out / stack / case, turns)
        problems, figures = judging.judge(case, traces, turns)
        summary["cases"][case] = {"right": not problems, "problems": problems, "turns": figures}
        said = "right" if not problems else "WRONG (" + "; ".join(problems) + ")"
        print(f"{stack} {case}: {said}  ({time.perf_counter() - started:.0f} s)", flush=True)
    (out / "voice-summary.json").write_text(json.dumps(summary, indent=2))
    print(f"results in {out}")
    return 0 if all(c["right"] for c in summary["cases"].values()) else 1


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class Verdict:
    """One case: right when ``problems`` is empty; ``figures`` per turn for the summary."""

    case: str
    problems: list[str] = field(default_factory=list)
    figures: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def right(self) -> bool:
        return not self.problems

    def line(self) -> str:
        said = "right" if self.right else "WRONG (" + "; ".join(self.problems) + ")"
        return f"{STACK} {self.case}: {said}"


def run_case(
    venv: Path,
    matrix: Any,
    case: str,
    httpx: bool,
    where: Path,
    turns: int,
    wrap: bool = False,
    observer: bool = False,
    bargein: bool = False,
) -> Path:
    """Run the agent against a fresh sim; returns the traces file (``stopped_at`` beside)."""
    where.mkdir(parents=True, exist_ok=True)
    profiles = where / "profiles.json"
    profiles.write_text(json.dumps(PROFILES))
    sim = matrix.Sim(venv, profiles, where / "sim-spans.jsonl", where / "sim.log")
    traces = where / "traces.jsonl"
    traces.unlink(missing_ok=True)  # the exporter appends: a rerun into --out starts anew
    try:
        argv = [
            str(matrix._bin(venv, "python")),
            "-P",
            str(HERE / "pipecat_agent.py"),
            "--base-url",
            sim.base_url.removesuffix("/v1"),
            "--traces",
            str(traces),
            "--turns",
            str(turns),
            "--llm",
            LLM,
        ]
        if httpx:
            argv.append("--httpx")
        if wrap:
            argv.append("--wrap")
        if observer:
            argv.append("--observer")
        if bargein:
            argv.append("--bargein")
        with open(where / "agent.log", "w") as log:
            done = subprocess.run(
                argv, stdout=subprocess.PIPE, stderr=log, text=True, timeout=300, check=False
            )
        if done.returncode != 0:
            raise RuntimeError(f"{case}: the agent failed (exit {done.returncode}); see {log.name}")
        stops = [line for line in done.stdout.splitlines() if line.startswith("stopped_at")]
        (where / "stopped_at.txt").write_text(stops[-1] if stops else "")
        truths = [
            line
            for line in done.stdout.splitlines()
            if line.startswith(
                ("first_audio", "first_written", "stopped_by", "tool_body", "tool_frames")
            )
        ]
        (where / "truths.txt").write_text("\n".join(truths))
    finally:
        sim.stop()
    return traces


def _turns_read(
    verdict: Verdict,
    traces: Path,
    turns: int,
    workflow: str,
    *,
    only: bool,
    interrupted: int = 0,
) -> tuple[list[Any], list[int], list[dict[str, Any]]] | None:
    """The runs read from ``traces`` in order (only those of ``workflow`` if ``only``), the
    instants the caller stopped speaking and the raw spans; None, said in ``verdict``, when
    the counts of turns read, spoken and asked differ. Turns counted interrupted other than
    ``interrupted`` of them, or a kept turn without a first audio, are a problem too; with
    ``interrupted``, the report's heading must say they were left out."""
    from chainlat._core.stats import aggregate
    from chainlat.traces import ReadCounters, read_runs

    stopped = [int(x) for x in (traces.parent / "stopped_at.txt").read_text().split()[1:]]
    counters = ReadCounters()
    runs = sorted(
        (r for r in read_runs([traces], counters=counters) if not only or r.workflow == workflow),
        key=lambda r: r.start_ns,
    )
    # Pipecat backdates its stt span to the start of speech on purpose: no clock skew.
    verdict.problems.extend(f"warned: {w}" for w in counters.warnings() if "skew" in w)
    spans = _all_spans(traces)
    if len(runs) != turns or len(stopped) != turns:
        verdict.problems.append(f"{len(runs)} turns read, {len(stopped)} spoken, {turns} asked")
        return None
    stats = aggregate(runs).workflows[workflow]
    kept = len(stats.quantities["first_output"])
    if stats.interrupted != interrupted or kept != turns - interrupted:
        verdict.problems.append(
            f"{stats.interrupted} turns counted interrupted, {kept} first audio samples"
        )
    if interrupted:
        from chainlat.report.common import runs_heading

        heading = runs_heading(stats)
        said = f"{interrupted} interrupted (barge-in), not in the percentiles"
        verdict.notes.append(heading)
        if said not in heading:
            verdict.problems.append(f"the heading does not say {said!r}: {heading}")
    return runs, stopped, spans


def judge(case: str, traces: Path, turns: int, *, httpx: bool) -> Verdict:
    """chainlat's reading of one case against Pipecat's own attributes (README.md)."""
    from chainlat._core import attributes as attr
    from chainlat._core import voice

    verdict = Verdict(case)
    read = _turns_read(verdict, traces, turns, "turn", only=False)
    if read is None:
        return verdict
    runs, stopped, spans = read
    for n, (run, stop) in enumerate(zip(runs, stopped, strict=True), start=1):
        root = run.root.attributes if run.root is not None else {}
        figures: dict[str, Any] = {"turn": n, "workflow": run.workflow}
        verdict.figures.append(figures)
        if run.workflow != "turn" or root.get("turn.number") not in (n, str(n)):
            verdict.problems.append(f"turn {n}: read as {run.workflow!r} {root.get('turn.number')}")
        stages = {s.name: s for s in run.steps}
        if run.rollup.critical_path != ("stt", "llm", "tts") or set(stages) != {
            "stt",
            "llm",
            "tts",
        }:
            verdict.problems.append(f"turn {n}: stages {run.rollup.critical_path} {sorted(stages)}")
            continue
        # Tokens: the LLM's usage as Pipecat recorded it, and as the sim counted it.
        llm = _pipecat_span(spans, run, "llm")
        tokens = (run.rollup.input_tokens, run.rollup.output_tokens)
        pipecat_tokens = (
            int(llm[attr.GEN_AI_USAGE_INPUT_TOKENS]),
            int(llm[attr.GEN_AI_USAGE_OUTPUT_TOKENS]),
        )
        figures["tokens"] = tokens
        if tokens != pipecat_tokens or tokens[1] != PROFILES["models"][0]["output_tokens"]:
            verdict.problems.append(f"turn {n}: tokens {tokens}, Pipecat's {pipecat_tokens}")
        # Stages: each stage's time to first byte, chainlat's reading of Pipecat's metrics.ttfb.
        for name in ("llm", "tts"):
            ttfb_s = float(_pipecat_span(spans, run, name)["metrics.ttfb"])
            read = stages[name].ttft_ms
            figures[f"{name}_ttfb_ms"] = {"pipecat": ttfb_s * 1000, "chainlat": read}
            if read is None or abs(read - ttfb_s * 1000) > 0.001:
                verdict.problems.append(f"turn {n}: {name} ttfb {read}, Pipecat's {ttfb_s * 1000}")
        # The turn starts at the end of the caller's words as Pipecat's spans date it: the
        # stt span's end less its time to first byte, exactly; that dating is Pipecat's.
        stt = _pipecat_record(spans, run, "stt")
        dated = stt["end"] - round(float(stt["attributes"]["metrics.ttfb"]) * 1e9)
        if abs(run.start_ns - dated) > START_TOLERANCE_MS * 1e6:
            verdict.problems.append(
                f"turn {n}: starts {(run.start_ns - dated) / 1e6:.3f} ms from the stt span's "
                "end less its metrics.ttfb"
            )
        figures["start_after_stop_ms"] = (run.start_ns - stop) / 1e6
        if not -FIRST_AUDIO_TOLERANCE_MS * 1e6 <= dated - stop <= DATING_BOUND_MS * 1e6:
            verdict.problems.append(
                f"turn {n}: Pipecat dates the end of the words {(dated - stop) / 1e6:.1f} ms "
                f"from it (bound -{FIRST_AUDIO_TOLERANCE_MS:.0f} to {DATING_BOUND_MS:.0f})"
            )
        # The first audio, from the turn's own start, and from the end of the caller's words.
        assert run.first_output_ms is not None
        first_audio_ns = run.start_ns + run.first_output_ms * 1e6
        mine_ms = run.first_output_ms
        theirs_ms = float(str(root["turn.user_bot_latency_seconds"])) * 1000
        figures["first_audio_ms"] = {
            "chainlat": mine_ms,
            "from_the_words": (first_audio_ns - stop) / 1e6,
            "pipecat": theirs_ms,
        }
        if not -FIRST_AUDIO_TOLERANCE_MS <= theirs_ms - mine_ms <= FIRST_AUDIO_LAG_BOUND_MS:
            verdict.problems.append(
                f"turn {n}: first audio {mine_ms:.1f} ms after the end of speech, Pipecat's "
                f"{theirs_ms:.1f} (from {FIRST_AUDIO_TOLERANCE_MS:.0f} ms shorter to "
                f"{FIRST_AUDIO_LAG_BOUND_MS:.0f} ms longer)"
            )
        figures["split_ms"] = {
            "speech_to_text": run.rollup.first_output_speech_to_text_ms,
            "text_to_speech": run.rollup.first_output_text_to_speech_ms,
            "inference": run.rollup.first_output_inference_ms,
            "overhead": run.rollup.first_output_overhead_ms,
        }
        if run.rollup.first_output_text_to_speech_ms is None:
            verdict.problems.append(f"turn {n}: no text-to-speech part of the first audio")
        reason = voice.end_reason_of(root)
        figures["end_reason"] = reason
        if reason != "completed" or root.get("turn.was_interrupted") is not False:
            verdict.problems.append(f"turn {n}: ended {reason}, Pipecat says completed")
        if httpx:
            _wire(verdict, figures, spans, run, n)
    return verdict


def judge_wrapped(case: str, traces: Path, turns: int, *, httpx: bool) -> Verdict:
    """A ``chainlat.workflow`` per turn, started at the end of the caller's speech
    (``user_stopped_speaking()``), Pipecat's ``turn`` span inside it: chainlat's turn, its
    stages and first audio against Pipecat's own attributes (README.md)."""
    from chainlat._core import attributes as attr

    verdict = Verdict(case)
    read = _turns_read(verdict, traces, turns, "voice-turn", only=True)
    if read is None:
        return verdict
    runs, stopped, spans = read
    truths = _truths(traces)
    marked_by = [int(x) for x in truths.get("stopped_by", ())]
    for n, (run, stop) in enumerate(zip(runs, stopped, strict=True), start=1):
        figures: dict[str, Any] = {"turn": n, "workflow": run.workflow}
        verdict.figures.append(figures)
        _live(verdict, figures, run, n)
        if not figures["live_rollup"]:
            verdict.problems.append(f"turn {n}: no rollup recorded on chainlat's workflow span")
        turn = _pipecat_record(spans, run, "turn")
        if turn["attributes"].get("turn.number") not in (n, str(n)):
            verdict.problems.append(f"turn {n}: Pipecat's turn {turn['attributes']}")
        # The turn starts where the application marked the end of the caller's words: at
        # its call, between the note before it and the note after it.
        figures["start_after_stop_ms"] = (run.start_ns - stop) / 1e6
        slack = MARK_TOLERANCE_MS * 1e6
        called_by = marked_by[n - 1] if len(marked_by) == len(runs) else None
        if called_by is None or not stop - slack <= run.start_ns <= called_by + slack:
            verdict.problems.append(
                f"turn {n}: starts {(run.start_ns - stop) / 1e6:.3f} ms from the end of speech, "
                f"outside the call to user_stopped_speaking() "
                f"({None if called_by is None else (called_by - stop) / 1e6} ms)"
            )
        stages = {s.name: s for s in run.steps if s.kind == "inference"}
        if set(stages) != {"stt", "llm", "tts"}:
            verdict.problems.append(f"turn {n}: stages {sorted(stages)}")
            continue
        llm = _pipecat_record(spans, run, "llm", parent=turn)["attributes"]
        tokens = (run.rollup.input_tokens, run.rollup.output_tokens)
        pipecat_tokens = (
            int(llm[attr.GEN_AI_USAGE_INPUT_TOKENS]),
            int(llm[attr.GEN_AI_USAGE_OUTPUT_TOKENS]),
        )
        figures["tokens"] = tokens
        if tokens != pipecat_tokens:
            verdict.problems.append(f"turn {n}: tokens {tokens}, Pipecat's {pipecat_tokens}")
        for name in ("llm", "tts"):
            ttfb_s = float(
                _pipecat_record(spans, run, name, parent=turn)["attributes"]["metrics.ttfb"]
            )
            read = stages[name].ttft_ms
            figures[f"{name}_ttfb_ms"] = {"pipecat": ttfb_s * 1000, "chainlat": read}
            if read is None or abs(read - ttfb_s * 1000) > 0.001:
                verdict.problems.append(f"turn {n}: {name} ttfb {read}, Pipecat's {ttfb_s * 1000}")
        # The first audio: from the turn's own start, no arithmetic on the side.
        mine_ms = run.first_output_ms
        theirs_ms = float(str(turn["attributes"]["turn.user_bot_latency_seconds"])) * 1000
        figures["first_audio_ms"] = {"chainlat": mine_ms, "pipecat": theirs_ms}
        if (
            mine_ms is None
            or not -FIRST_AUDIO_TOLERANCE_MS <= theirs_ms - mine_ms <= FIRST_AUDIO_LAG_BOUND_MS
        ):
            verdict.problems.append(
                f"turn {n}: first audio {mine_ms} ms, Pipecat's {theirs_ms:.1f} (from "
                f"{FIRST_AUDIO_TOLERANCE_MS:.0f} ms shorter to {FIRST_AUDIO_LAG_BOUND_MS:.0f} ms "
                "longer)"
            )
        figures["split_ms"] = {
            "speech_to_text": run.rollup.first_output_speech_to_text_ms,
            "text_to_speech": run.rollup.first_output_text_to_speech_ms,
            "inference": run.rollup.first_output_inference_ms,
            "overhead": run.rollup.first_output_overhead_ms,
        }
        if run.rollup.first_output_text_to_speech_ms is None:
            verdict.problems.append(f"turn {n}: no text-to-speech part of the first audio")
        root = run.root.attributes if run.root is not None else {}
        reason = root.get(attr.GEN_AI_AGENT_INVOCATION_END_REASON)
        figures["end_reason"] = reason
        if reason != "completed" or turn["attributes"].get("turn.was_interrupted") is not False:
            verdict.problems.append(f"turn {n}: ended {reason}, Pipecat says completed")
        if httpx:
            _wire(verdict, figures, spans, run, n, parent=turn)
    return verdict


def judge_observer(
    case: str, traces: Path, turns: int, *, interrupted: int | None = None
) -> Verdict:
    """chainlat's observer on Pipecat's spans: each turn's function call a tool step of
    its body's time plus Pipecat's around it, and the first output at the first audio frame
    the output transport was handed, both against what the agent recorded. With
    ``interrupted`` (a turn's number) that turn must end interrupted, be left out of the
    percentiles and ``chainlat report`` and ``check`` must say so."""
    from chainlat._core import conventions, voice

    verdict = Verdict(case)
    read = _turns_read(
        verdict, traces, turns, "turn", only=False, interrupted=1 if interrupted else 0
    )
    if read is None:
        return verdict
    runs, stopped, _spans = read
    truths = _truths(traces)
    first_audio = [int(x) for x in truths.get("first_audio", ())]
    written = [int(x) for x in truths.get("first_written", ())]
    if len(written) != len(first_audio):
        verdict.problems.append(f"{len(written)} writes of {len(first_audio)} first frames")
        return verdict
    returned = dict(zip(first_audio, written, strict=True))
    bodies = [tuple(int(t) for t in x.split(":")) for x in truths.get("tool_body", ())]
    pushes = [tuple(int(t) for t in x.split(":")) for x in truths.get("tool_frames", ())]
    if not len(first_audio) == len(bodies) == len(pushes) == turns:
        verdict.problems.append(
            f"{len(first_audio)} first audio frames, {len(bodies)} tool calls, {len(pushes)} pushed"
        )
        return verdict
    for n, (run, stop, audio, body, pushed) in enumerate(
        zip(runs, stopped, first_audio, bodies, pushes, strict=True), start=1
    ):
        figures: dict[str, Any] = {"turn": n, "workflow": run.workflow}
        verdict.figures.append(figures)
        _live(verdict, figures, run, n)
        tools = [s for s in run.steps if s.kind == "tool"]
        if len(tools) != 1:
            verdict.problems.append(f"turn {n}: {len(tools)} tool steps")
            continue
        tool = tools[0]
        step_ms = (tool.end_ns - tool.start_ns) / 1e6
        body_ms = (body[1] - body[0]) / 1e6
        figures["tool_ms"] = {
            "step": step_ms,
            "body": body_ms,
            "around": step_ms - body_ms,
            "start_after_push": (tool.start_ns - pushed[0]) / 1e6,
            "call_push": (pushed[1] - pushed[0]) / 1e6,
            "end_after_push": (tool.end_ns - pushed[2]) / 1e6,
            "result_push": (pushed[3] - pushed[2]) / 1e6,
        }
        for edge, at, (pushing, pushed_ns) in (
            ("starts", tool.start_ns, pushed[0:2]),
            ("ends", tool.end_ns, pushed[2:4]),
        ):
            if not pushing - TOOL_SLACK_MS * 1e6 <= at <= pushed_ns + TOOL_SLACK_MS * 1e6:
                verdict.problems.append(
                    f"turn {n}: the tool step {edge} {(at - pushing) / 1e6:+.2f} ms from its "
                    f"frame's push, which took {(pushed_ns - pushing) / 1e6:.2f} ms "
                    f"(tolerance {TOOL_SLACK_MS:.0f})"
                )
        if not (tool.start_ns <= body[0] and body[1] <= tool.end_ns):
            verdict.problems.append(f"turn {n}: the tool step does not hold its body")
        elif step_ms - body_ms > AROUND_BOUND_MS:
            verdict.problems.append(
                f"turn {n}: tool step {step_ms:.2f} ms, its body {body_ms:.2f} "
                f"(Pipecat's time around it bounded by {AROUND_BOUND_MS:.0f})"
            )
        if run.rollup.first_output_tool_ms is None or run.rollup.tool_ms <= 0:
            verdict.problems.append(f"turn {n}: no tool time in the split")
        figures["split_ms"] = {
            "tool": run.rollup.first_output_tool_ms,
            "overhead": run.rollup.first_output_overhead_ms,
        }
        if run.first_output_ms is None:
            verdict.problems.append(f"turn {n}: no first output")
            continue
        output_ns = run.start_ns + run.first_output_ms * 1e6
        written_ns = returned[audio]
        figures["first_output_after_frame_ms"] = (output_ns - audio) / 1e6
        figures["write_returned_late_ms"] = (written_ns - audio) / 1e6
        figures["first_audio_from_the_words_ms"] = (audio - stop) / 1e6
        figures["first_output_ms"] = run.first_output_ms
        figures["start_after_stop_ms"] = (run.start_ns - stop) / 1e6
        root = run.root.attributes if run.root is not None else {}
        pipecat_ms = conventions.user_bot_latency_ms_of(root)
        figures["pipecat_user_bot_latency_ms"] = pipecat_ms
        if interrupted is not None and (
            pipecat_ms is None or abs(run.first_output_ms - pipecat_ms) > USER_BOT_TOLERANCE_MS
        ):
            verdict.problems.append(
                f"turn {n}: turn.user_bot_latency_seconds {pipecat_ms} ms, chainlat's first "
                f"output {run.first_output_ms:.1f} (tolerance {USER_BOT_TOLERANCE_MS:.0f})"
            )
        reason = voice.end_reason_of(root)
        figures["end_reason"] = reason
        wanted = "interrupted" if n == interrupted else "completed"
        if interrupted is not None and reason != wanted:
            verdict.problems.append(f"turn {n}: ended {reason}, the script says {wanted}")
        if interrupted is not None and MARKED:
            # The caller's wait: from the end of the words to the first frame at the output,
            # with the write's overrun (the machine's, reported) taken out.
            off_ms = run.first_output_ms - (written_ns - stop) / 1e6
            if abs(off_ms) > WAIT_TOLERANCE_MS:
                verdict.problems.append(
                    f"turn {n}: first output {run.first_output_ms:.1f} ms, the wait for the "
                    f"first frame {(audio - stop) / 1e6:.1f} and its write's overrun "
                    f"{(written_ns - audio) / 1e6:.1f} (tolerance {WAIT_TOLERANCE_MS:.0f})"
                )
        # Without the mark (MARKED = False) Pipecat's own reading (tts start +
        # metrics.ttfb) stands, a few ms before the frame: a figure.
        if MARKED and abs(output_ns - written_ns) > OUTPUT_TOLERANCE_MS * 1e6:
            verdict.problems.append(
                f"turn {n}: first output {(output_ns - written_ns) / 1e6:.2f} ms from the "
                f"written first audio frame less its playing time (tolerance "
                f"{OUTPUT_TOLERANCE_MS:.0f})"
            )
        if MARKED and not -1e6 <= written_ns - audio <= WRITE_LAG_BOUND_MS * 1e6:
            verdict.problems.append(
                f"turn {n}: the first frame's write returned {(written_ns - audio) / 1e6:.2f} "
                f"ms late (bound {WRITE_LAG_BOUND_MS:.0f})"
            )
    if interrupted is not None:
        _left_out_said(verdict, traces)
    return verdict


LIVE_TOLERANCE_MS = 0.01
"""The recorded rollup and the turn read back come from the same spans: only rounding may
part them (the matrix's ``run.LIVE_TOLERANCE_MS``)."""
LIVE_COUNTS = ("inference_count", "data_count", "tool_count", "input_tokens", "output_tokens")
LIVE_TIMES = (
    "total_ms",
    "inference_ms",
    "data_ms",
    "tool_ms",
    "overhead_ms",
    "first_output_ms",
    "first_output_speech_to_text_ms",
    "first_output_text_to_speech_ms",
    "first_output_inference_ms",
    "first_output_tool_ms",
    "first_output_overhead_ms",
)


def live_differs(run: Any) -> list[str]:
    """Where the rollup chainlat recorded on a turn's workflow span as the turn ended (what
    a runtime budget, a pytest assertion and Jaeger's view of the span read) is not the turn
    read back from the file: counts and tokens exactly, the split, the first audio and its
    voice parts to `LIVE_TOLERANCE_MS` (one present and the other not differs). A turn with
    no recorded rollup (Pipecat's own ``turn`` span) has nothing to compare."""
    from chainlat._core.rollup import Rollup

    live = Rollup.from_attributes(run.root.attributes if run.root is not None else {})
    if live is None:
        return []
    # The turn read back as it would be recorded (a first output's missing part is
    # recorded as 0.0), so that only a difference of reading shows.
    read = Rollup.from_attributes(run.rollup.to_attributes()) or run.rollup
    differs = [
        f"live {name} {getattr(live, name)}, read {getattr(read, name)}"
        for name in LIVE_COUNTS
        if getattr(live, name) != getattr(read, name)
    ]
    for name in LIVE_TIMES:
        mine, theirs = getattr(live, name), getattr(read, name)
        if (mine is None) != (theirs is None) or (
            mine is not None and theirs is not None and abs(mine - theirs) > LIVE_TOLERANCE_MS
        ):
            differs.append(f"live {name} {mine}, read {theirs}")
    return differs


def _live(verdict: Verdict, figures: dict[str, Any], run: Any, n: int) -> None:
    """`live_differs` of turn ``n``, each a problem; whether a rollup was compared, a figure."""
    from chainlat._core.rollup import Rollup

    root = run.root.attributes if run.root is not None else {}
    figures["live_rollup"] = Rollup.from_attributes(root) is not None
    verdict.problems.extend(f"turn {n}: {d}" for d in live_differs(run))


def _truths(traces: Path) -> dict[str, list[str]]:
    """What the agent noted beside the traces (``truths.txt``, a line a key: the key, then
    its values), each key's values."""
    found: dict[str, list[str]] = {}
    for line in (traces.parent / "truths.txt").read_text().splitlines():
        key, _, values = line.partition(" ")
        found[key] = values.split()
    return found


def _left_out_said(verdict: Verdict, traces: Path) -> None:
    """``chainlat report`` and ``chainlat check`` (a budget with a per-run and a percentile
    limit on the turns' first output) on the traces, as a user runs them: each must say
    that one interrupted turn was left out, and the check passes; the per-run limit judges
    every turn but that one."""
    budget = traces.parent / "chainlat.toml"
    budget.write_text('[workflows.turn]\nfirst_output = "10s"\np95 = { first_output = "10s" }\n')
    said = "1 interrupted (barge-in), not in the percentiles"
    for command in ("report", "check"):
        argv = [str(Path(sys.executable).parent / "chainlat"), command, str(traces)]
        argv.append("--no-progress")
        if command == "check":
            argv += ["--budgets", str(budget)]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        text = " ".join(done.stdout.split())  # a table may wrap the line
        verdict.notes.append(f"chainlat {command}: exit {done.returncode}")
        if said not in text or done.returncode != 0:
            verdict.problems.append(
                f"chainlat {command} (exit {done.returncode}) does not say {said!r}"
            )
    from chainlat.budgets import evaluate, load_budgets
    from chainlat.traces import read_runs

    # The per-run limit judges the completed turns only, as the percentile does.
    runs = [r for r in read_runs([traces]) if r.workflow == "turn"]
    (per_run,) = [
        v for v in evaluate(runs, load_budgets(budget)).verdicts if v.target == "first_output"
    ]
    if per_run.runs != len(runs) - 1:
        verdict.problems.append(
            f"the per-run first_output limit judged {per_run.runs} of {len(runs)} turns, "
            "the interrupted one included"
        )


def _wire(
    verdict: Verdict,
    figures: dict[str, Any],
    spans: list[dict[str, Any]],
    run: Any,
    n: int,
    parent: dict[str, Any] | None = None,
) -> None:
    """With instrument_httpx: each stage's call on the wire, against Pipecat's figures."""
    for name, operation in (("llm", "chat"), ("tts", "text_to_speech")):
        pipecat = _pipecat_record(spans, run, name, parent=parent)
        wire = [
            s
            for s in spans
            if s["attributes"].get("gen_ai.operation.name") == operation
            and "http.request.method" in s["attributes"]
            and pipecat["start"] <= s["start"] <= pipecat["end"]
        ]
        if len(wire) != 1:
            verdict.problems.append(f"turn {n}: {len(wire)} {operation} calls on the wire")
            continue
        wire_ttfb = float(wire[0]["attributes"]["chainlat.latency.ttft_ms"])
        pipecat_ttfb = float(pipecat["attributes"]["metrics.ttfb"]) * 1000
        before = (wire[0]["start"] - pipecat["start"]) / 1e6
        figures[f"{name}_wire"] = {
            "ttfb_ms": wire_ttfb,
            "pipecat_ttfb_ms": pipecat_ttfb,
            "request_sent_after_ms": before,
        }
        if wire_ttfb > pipecat_ttfb + WIRE_SLACK_MS:
            verdict.problems.append(
                f"turn {n}: {name}'s first byte {wire_ttfb:.1f} ms on the wire, longer than "
                f"Pipecat's time to first byte {pipecat_ttfb:.1f}"
            )


def _all_spans(traces: Path) -> list[dict[str, Any]]:
    """Every span of the file: name, ids, start, end, attributes (values as JSON has them)."""
    found: list[dict[str, Any]] = []
    for line in traces.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    found.append(
                        {
                            "name": span["name"],
                            "trace": span["traceId"],
                            "id": span["spanId"],
                            "parent": span.get("parentSpanId", ""),
                            "start": int(span["startTimeUnixNano"]),
                            "end": int(span["endTimeUnixNano"]),
                            "attributes": {
                                kv["key"]: next(iter(kv["value"].values()))
                                for kv in span.get("attributes", [])
                            },
                        }
                    )
    return found


def _pipecat_record(
    spans: list[dict[str, Any]], run: Any, name: str, parent: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The span ``name`` under the run's root, or under ``parent`` (Pipecat's turn)."""
    parent_id = run.span_id if parent is None else parent["id"]
    mine = [s for s in spans if s["name"] == name and s["parent"] == parent_id]
    assert len(mine) == 1, (name, len(mine))
    return mine[0]


def _pipecat_span(spans: list[dict[str, Any]], run: Any, name: str) -> dict[str, Any]:
    attributes: dict[str, Any] = _pipecat_record(spans, run, name)["attributes"]
    return attributes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--turns", type=int, default=TURNS)
    parser.add_argument("--case", action="append", help="only this case (repeat)")
    parser.add_argument(
        "--stack", choices=(STACK, LIVEKIT, LIVEKIT_REALTIME, PIPECAT_REALTIME), default=STACK
    )
    args = parser.parse_args(argv)
    matrix = _matrix()
    if args.stack == LIVEKIT:
        livekit = _load("chainlat_interop_livekit", HERE / "livekit_judge.py")
        code: int = livekit.main(matrix, REPO, args.out, args.turns, args.case)
        return code
    if args.stack == LIVEKIT_REALTIME:
        realtime = _load("chainlat_interop_livekit_realtime", HERE / "livekit_realtime_judge.py")
        return _judged(realtime, LIVEKIT, matrix, args.out, args.turns, args.case)
    if args.stack == PIPECAT_REALTIME:
        pipecat = _load("chainlat_interop_pipecat_realtime", HERE / "pipecat_realtime_judge.py")
        return _judged(pipecat, STACK, matrix, args.out, args.turns, args.case)
    try:
        venv, spent = matrix.setup(STACK, REPO)
    except matrix.SetupError as exc:
        print(f"{STACK}: cannot set up: {exc}", file=sys.stderr)
        return 2
    out = args.out or Path(tempfile.mkdtemp(prefix="chainlat-voice-interop-"))
    verdicts = []
    for case, httpx, wrap in CASES:
        if args.case and case not in args.case:
            continue
        started = time.perf_counter()
        traces = run_case(venv, matrix, case, httpx, out / STACK / case, args.turns, wrap)
        judging = judge_wrapped if wrap else judge
        verdict = judging(case, traces, args.turns, httpx=httpx)
        verdicts.append(verdict)
        print(f"{verdict.line()}  ({time.perf_counter() - started:.0f} s)", flush=True)
    if not args.case or OBSERVER in args.case:
        started = time.perf_counter()
        where = out / STACK / OBSERVER
        traces = run_case(venv, matrix, OBSERVER, False, where, args.turns, observer=True)
        verdict = judge_observer(OBSERVER, traces, args.turns)
        verdicts.append(verdict)
        print(f"{verdict.line()}  ({time.perf_counter() - started:.0f} s)", flush=True)
    if not args.case or BARGEIN in args.case:
        started = time.perf_counter()
        where = out / STACK / BARGEIN
        traces = run_case(
            venv, matrix, BARGEIN, False, where, args.turns, observer=True, bargein=True
        )
        verdict = judge_observer(BARGEIN, traces, args.turns, interrupted=INTERRUPTED_TURN)
        verdicts.append(verdict)
        print(f"{verdict.line()}  ({time.perf_counter() - started:.0f} s)", flush=True)
    summary = {
        "setup_s": spent,
        "cases": {v.case: {"right": v.right, "problems": v.problems, "notes": v.notes,
                           "turns": v.figures}
                  for v in verdicts},
    }  # fmt: skip
    (out / "voice-summary.json").write_text(json.dumps(summary, indent=2))
    print(f"results in {out}")
    return 0 if all(v.right for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
