"""The LiveKit voice case of the interop matrix: a real LiveKit Agents session in voice mode
(no media server: ``livekit_agent.py``) against ``chainlat sim``, its traces read by
chainlat and held to the truth the agent recorded and to LiveKit's own ``lk.e2e_latency``.

Run by ``run.py --stack livekit``. Three cases, one agent process and one sim each:
``turns`` (three turns), ``tool`` (a ``function_tool`` whose body sleeps a known time,
called in every turn), ``bargein`` (the caller speaks over the second answer). The
``livekit`` environment is built from ``requirements/livekit.txt`` by the matrix's
``run.py`` (same cache). See README.md, "The LiveKit voice case".
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STACK = "livekit"
CASES = ("turns", "tool", "bargein")
TURNS = 3
"""Turns per case; in ``bargein`` the second is interrupted, the third answers."""
LLM = "sim-voice-llm"
PROFILES = {
    "models": [
        {"name": LLM, "ttft_base_ms": 100, "decode_ms_per_token": 5, "output_tokens": 12},
    ]
}
TOOL_MS = 300.0
"""The tool body's sleep (``livekit_agent.TOOL_S``)."""
START_TOLERANCE_MS = 0.01
"""A turn's start against the end of LiveKit's ``user_speaking`` span, which chainlat
reads it from (``chainlat._core.turn_start``): the same instant."""
DATING_BOUND_MS = 30.0
"""LiveKit's own dating of the end of speech (the ``user_speaking`` end) against the end
of the words on the audio's clock: LiveKit takes ``time.time()`` when it handles the VAD's
event, less the silence waited (voice/audio_recognition.py 1500-1509), so it is late by
the handling of that event: 1.7-14.3 ms in 30 turns on this machine, idle and loaded
(README.md). The framework's, reported per turn (``start_after_words_ms``); bounded only
so that a start taken from another instant cannot pass. chainlat's first output is short
of the caller's wait by exactly this much (its instant is judged against the truth)."""
FIRST_OUTPUT_TOLERANCE_MS = 10.0
"""chainlat's first output against the truth, the first frame of the answer at the
agent's ``AudioOutput``, as an instant (the run's start plus its first output); as a wait
from the end of the words it is short by LiveKit's dating (``DATING_BOUND_MS``)."""
TOOL_SLACK_MS = 2.0
"""A tool step's time (and the first output's tool part) against LiveKit's
``function_tool`` span holding the body, the span chainlat reads the step from."""
TOOL_NOISE_MS = 25.0
"""LiveKit's own time in its ``function_tool`` span before and after the body: the span
opens when the task that runs the tool starts and holds its executor's set-up before the
body (voice/generation.py 1012-1039, voice/tool_executor.py 317-377), 1.8-15 ms in the
runs of README.md while the model's stream still closes on the same loop, and closes
after the body's result is handled (2.5 ms seen under load). The framework's, reported;
each side is held under this bound, and the body must lie inside the span."""
E2E_TOLERANCE_MS = 2.0
E2E_LAG_BOUND_MS = 50.0
"""``lk.e2e_latency`` against chainlat's first output: both end at the sink's playback
start (``agent_speaking``, voice/agent_activity.py 3269-3290, 3412-3421); chainlat's counts
from the end of the ``user_speaking`` span, LiveKit's from the end of speech its user
metrics carry, a ``time.time()`` read after that (3411-3418). LiveKit's is therefore
shorter: by 0.4-0.6 ms on an idle machine, by 8-14 ms on a loaded one (its loop's lag
between the two reads). Held one-sided: never longer than chainlat's by more than
``E2E_TOLERANCE_MS``, shorter by at most ``E2E_LAG_BOUND_MS``, a bound only so that a figure
of another instant cannot pass; the difference is reported. The first output's accuracy is
judged against the truth (``FIRST_OUTPUT_TOLERANCE_MS``), not against LiveKit's figure."""


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


def run_case(venv: Path, matrix: Any, case: str, where: Path, turns: int) -> Path:
    """Run the agent against a fresh sim; returns the traces file (``truth.json`` beside)."""
    where.mkdir(parents=True, exist_ok=True)
    profiles = where / "profiles.json"
    profiles.write_text(json.dumps(PROFILES))
    traces = where / "traces.jsonl"
    traces.unlink(missing_ok=True)  # the exporter appends
    sim = matrix.Sim(venv, profiles, where / "sim-spans.jsonl", where / "sim.log")
    try:
        argv = [str(matrix._bin(venv, "python")), "-P", str(HERE / "livekit_agent.py")]
        argv += ["--base-url", sim.base_url.removesuffix("/v1"), "--traces", str(traces)]
        argv += ["--truth", str(where / "truth.json"), "--scenario", case]
        argv += ["--turns", str(turns), "--llm", LLM]
        with open(where / "agent.log", "w") as log:
            done = subprocess.run(argv, stderr=log, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{case}: the agent failed (exit {done.returncode}); see {log.name}")
    finally:
        sim.stop()
    return traces


def judge(case: str, traces: Path, turns: int) -> Verdict:
    """chainlat's reading of one case against the agent's truth and LiveKit's figures."""
    from chainlat._core import voice
    from chainlat._core.stats import aggregate
    from chainlat.report.common import runs_heading
    from chainlat.traces import ReadCounters, read_runs

    verdict = Verdict(case)
    truth = json.loads((traces.parent / "truth.json").read_text())
    words, frames = truth["words_end_ns"], truth["first_frame_ns"]
    counters = ReadCounters()
    runs = sorted(read_runs([traces], counters=counters), key=lambda r: r.start_ns)
    verdict.notes.extend(counters.warnings())
    verdict.problems.extend(f"warned: {w}" for w in counters.warnings() if "skew" in w)
    if not len(runs) == len(words) == len(frames) == turns:
        verdict.problems.append(
            f"{len(runs)} turns read, {len(words)} spoken, {len(frames)} answered, {turns} asked"
        )
        return verdict
    spans = _spans(traces)
    interrupted = 2 if case == "bargein" else None
    for n, (run, spoken, heard) in enumerate(zip(runs, words, frames, strict=True), start=1):
        root = run.root.attributes if run.root is not None else {}
        figures: dict[str, Any] = {"turn": n, "workflow": run.workflow}
        verdict.figures.append(figures)
        # The turn starts where LiveKit's user_speaking ends: LiveKit's dating of the end
        # of the words, reported against the truth.
        figures["start_after_words_ms"] = (run.start_ns - spoken) / 1e6
        speech = _user_speaking_end(spans, run)
        figures["start_after_user_speaking_ms"] = (
            None if speech is None else (run.start_ns - speech) / 1e6
        )
        if speech is None or abs(run.start_ns - speech) > START_TOLERANCE_MS * 1e6:
            verdict.problems.append(
                f"turn {n}: starts {figures['start_after_user_speaking_ms']} ms from the end "
                f"of LiveKit's user_speaking"
            )
        if not 0 <= run.start_ns - spoken <= DATING_BOUND_MS * 1e6:
            verdict.problems.append(
                f"turn {n}: LiveKit dates the end of the words {(run.start_ns - spoken) / 1e6:.1f}"
                f" ms from it (bound 0 to {DATING_BOUND_MS:.0f})"
            )
        # The first output: the first frame of the answer at the output.
        first = run.first_output_ms
        if first is None:
            verdict.problems.append(f"turn {n}: no first output")
            continue
        at_ns = run.start_ns + first * 1e6
        truth_ms = (heard - spoken) / 1e6
        e2e_ms = float(str(root["lk.e2e_latency"])) * 1000 if "lk.e2e_latency" in root else None
        figures["first_output_ms"] = {
            "chainlat": first,
            "truth": truth_ms,
            "lk.e2e_latency": e2e_ms,
            "instant_after_frame_ms": (at_ns - heard) / 1e6,
        }
        if abs(at_ns - heard) > FIRST_OUTPUT_TOLERANCE_MS * 1e6:
            verdict.problems.append(
                f"turn {n}: first output {(at_ns - heard) / 1e6:.1f} ms from the first frame "
                f"at the output (tolerance {FIRST_OUTPUT_TOLERANCE_MS:.0f})"
            )
        dated_ms = (run.start_ns - spoken) / 1e6
        if abs(first + dated_ms - truth_ms) > FIRST_OUTPUT_TOLERANCE_MS:
            verdict.problems.append(
                f"turn {n}: first output {first:.1f} ms, the caller's wait {truth_ms:.1f} less "
                f"LiveKit's dating {dated_ms:.1f} (tolerance {FIRST_OUTPUT_TOLERANCE_MS:.0f})"
            )
        if e2e_ms is None or not -E2E_TOLERANCE_MS <= first - e2e_ms <= E2E_LAG_BOUND_MS:
            verdict.problems.append(f"turn {n}: lk.e2e_latency {e2e_ms} ms, chainlat {first:.1f}")
        rollup = run.rollup
        figures["split_ms"] = {
            "end_of_turn": rollup.first_output_end_of_turn_ms,
            "inference": rollup.first_output_inference_ms,
            "text_to_speech": rollup.first_output_text_to_speech_ms,
            "tool": rollup.first_output_tool_ms,
            "overhead": rollup.first_output_overhead_ms,
        }
        if not rollup.first_output_text_to_speech_ms:
            verdict.problems.append(f"turn {n}: no text-to-speech part of the first output")
        reason = voice.end_reason_of(root)
        figures["end_reason"] = reason
        wanted = "interrupted" if n == interrupted else "completed"
        if reason != wanted:
            verdict.problems.append(f"turn {n}: ended {reason}, the script says {wanted}")
        if case == "tool":
            _tool(verdict, figures, spans, run, truth["tool_ns"][n - 1], n)
    stats = aggregate(runs).workflows[runs[0].workflow]
    kept = len(stats.quantities["first_output"])
    heading = runs_heading(stats)
    verdict.notes.append(heading)
    left_out = 1 if interrupted else 0
    if stats.interrupted != left_out or kept != turns - left_out:
        verdict.problems.append(f"{stats.interrupted} interrupted, {kept} in the percentiles")
    if left_out and "1 interrupted (barge-in), not in the percentiles" not in heading:
        verdict.problems.append(
            f"the report does not say the interrupted turn is left out: {heading}"
        )
    return verdict


def _tool(
    verdict: Verdict,
    figures: dict[str, Any],
    spans: list[dict[str, Any]],
    run: Any,
    body: list[int],
    n: int,
) -> None:
    """The tool is a tool: its step's time is LiveKit's ``function_tool`` span's, which
    holds the body, LiveKit's own time before and after it stated."""
    tools = [s for s in run.steps if s.kind == "tool"]
    if len(tools) != 1:
        verdict.problems.append(f"turn {n}: {len(tools)} tool steps")
        return
    span = [s for s in spans if s["name"] == "function_tool" and s["start"] <= body[0] <= s["end"]]
    if len(span) != 1:
        verdict.problems.append(f"turn {n}: {len(span)} function_tool spans hold the body")
        return
    body_ms = (body[1] - body[0]) / 1e6
    span_ms = (span[0]["end"] - span[0]["start"]) / 1e6
    read_ms = tools[0].duration_ms
    setup_ms = (body[0] - span[0]["start"]) / 1e6
    after_ms = (span[0]["end"] - body[1]) / 1e6
    on_path = run.rollup.first_output_tool_ms
    figures["tool_ms"] = {
        "chainlat": read_ms,
        "first_output_tool": on_path,
        "function_tool_span": span_ms,
        "body": body_ms,
        "livekit_setup_before_body": setup_ms,
        "livekit_after_body": after_ms,
    }
    for side, value in (("before", setup_ms), ("after", after_ms)):
        if not 0 <= value <= TOOL_NOISE_MS:
            verdict.problems.append(f"turn {n}: LiveKit's time {side} the tool body {value} ms")
    for label, value in (("tool step", read_ms), ("first output's tool part", on_path)):
        if value is None or abs(value - span_ms) > TOOL_SLACK_MS:
            verdict.problems.append(
                f"turn {n}: {label} {value} ms, LiveKit's function_tool span {span_ms:.1f} ms "
                f"(the body {body_ms:.1f} ms; tolerance {TOOL_SLACK_MS:.0f})"
            )
    if abs(body_ms - TOOL_MS) > TOOL_NOISE_MS:
        verdict.problems.append(f"turn {n}: the tool body slept {body_ms:.1f} ms, not {TOOL_MS}")


def _user_speaking_end(spans: list[dict[str, Any]], run: Any) -> int | None:
    """The end of the ``user_speaking`` span nearest the run's start (within a second)."""
    ends = [s["end"] for s in spans if s["name"] == "user_speaking"]
    near = min(ends, key=lambda end: abs(end - run.start_ns), default=None)
    return near if near is not None and abs(near - run.start_ns) < 1_000_000_000 else None


def _spans(traces: Path) -> list[dict[str, Any]]:
    """Every span of the file: name, start, end."""
    found: list[dict[str, Any]] = []
    for line in traces.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                found.extend(
                    {
                        "name": span["name"],
                        "start": int(span["startTimeUnixNano"]),
                        "end": int(span["endTimeUnixNano"]),
                    }
                    for span in scope["spans"]
                )
    return found


def main(matrix: Any, repo: Path, out: Path | None, turns: int, cases: list[str] | None) -> int:
    """Set up the environment, run and judge each case; the summary beside the traces."""
    import sys
    import tempfile

    try:
        venv, spent = matrix.setup(STACK, repo)
    except matrix.SetupError as exc:
        print(f"{STACK}: cannot set up: {exc}", file=sys.stderr)
        return 2
    out = out or Path(tempfile.mkdtemp(prefix="chainlat-voice-interop-"))
    verdicts = []
    for case in CASES:
        if cases and case not in cases:
            continue
        started = time.perf_counter()
        traces = run_case(venv, matrix, case, out / STACK / case, turns)
        verdict = judge(case, traces, turns)
        verdicts.append(verdict)
        print(f"{verdict.line()}  ({time.perf_counter() - started:.0f} s)", flush=True)
    summary = {
        "setup_s": spent,
        "cases": {
            v.case: {"right": v.right, "problems": v.problems, "notes": v.notes, "turns": v.figures}
            for v in verdicts
        },
    }
    (out / "voice-summary.json").write_text(json.dumps(summary, indent=2))
    print(f"results in {out}")
    return 0 if all(v.right for v in verdicts) else 1
