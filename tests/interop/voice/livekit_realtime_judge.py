"""The LiveKit realtime case of the interop matrix: a LiveKit Agents session on OpenAI's
Realtime API (``livekit_realtime_agent.py``) against ``chainlat sim``'s ``/v1/realtime``,
its traces read by chainlat and held to the truth the agent recorded.

Run by ``run.py --stack livekit-realtime``. Two cases, one agent process and one sim each:
``local-vad`` (the session has a VAD of its own: LiveKit dates the end of the words) and
``server-vad`` (the server's VAD alone: no span says where the words ended, LiveKit ends
``user_speaking`` when the server's ``speech_stopped`` arrives; the first output's instant
is judged, the start's lateness reported, and each turn must say its start is no end of
the words, ``WorkflowRun.unknown_start``, so that what counts from it is not judged:
docs/attributes.md, rule 16). The sim runs in the project's own
environment: the ``livekit`` one has no ``websockets`` (the ``realtime`` extra), and a sim
without it answers the upgrade with a 500.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _cascade_judge() -> Any:
    """The cascade's judge (``livekit_judge.py``), loaded by path as ``run.py`` loads it
    (under the same name, once): its reading of LiveKit's ``user_speaking`` is shared."""
    import importlib.util

    name = "chainlat_interop_livekit"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "livekit_judge.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


STACK = "livekit-realtime"
CASES = ("local-vad", "server-vad")
TURNS = 3
PROFILES = {
    "models": [
        {"name": "sim-voice-llm", "ttft_base_ms": 100, "decode_ms_per_token": 5},
    ]
}
FIRST_OUTPUT_TOLERANCE_MS = 10.0
"""The first output against the first frame of the answer at the agent's AudioOutput."""


def run_case(venv: Path, matrix: Any, case: str, where: Path, turns: int) -> Path:
    """Run the agent against a fresh sim; returns the traces file (``truth.json`` beside)."""
    where.mkdir(parents=True, exist_ok=True)
    profiles = where / "profiles.json"
    profiles.write_text(json.dumps(PROFILES))
    traces = where / "traces.jsonl"
    traces.unlink(missing_ok=True)  # the exporter appends
    sim = matrix.Sim(Path(sys.prefix), profiles, where / "sim-spans.jsonl", where / "sim.log")
    try:
        argv = [str(matrix._bin(venv, "python")), "-P", str(HERE / "livekit_realtime_agent.py")]
        argv += ["--base-url", sim.base_url.removesuffix("/v1"), "--traces", str(traces)]
        argv += ["--truth", str(where / "truth.json"), "--turns", str(turns)]
        argv += ["--vad", case.removesuffix("-vad")]
        with open(where / "agent.log", "w") as log:
            done = subprocess.run(argv, stderr=log, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{case}: the agent failed (exit {done.returncode}); see {log.name}")
    finally:
        sim.stop()
    return traces


def judge(case: str, traces: Path, turns: int) -> tuple[list[str], list[dict[str, Any]]]:
    """(problems, figures per turn): chainlat's reading against the agent's truth."""
    from chainlat.traces import read_runs

    truth = json.loads((traces.parent / "truth.json").read_text())
    words, frames = truth["words_end_ns"], truth["first_frame_ns"]
    runs = sorted(read_runs([traces]), key=lambda r: r.start_ns)
    cascade = _cascade_judge()
    spans = cascade._spans(traces)
    problems: list[str] = []
    figures: list[dict[str, Any]] = []
    if not len(runs) == len(words) == len(frames) == turns:
        return [f"{len(runs)} turns read, {len(words)} spoken, {len(frames)} answered"], []
    for n, (run, spoken, heard) in enumerate(zip(runs, words, frames, strict=True), start=1):
        steps = [(s.name, s.kind, s.operation) for s in run.steps]
        start_ms = (run.start_ns - spoken) / 1e6
        first = run.first_output_ms
        at_ms = None if first is None else (run.start_ns + first * 1e6 - heard) / 1e6
        truth_ms = (heard - spoken) / 1e6
        figures.append(
            {
                "turn": n,
                "steps": steps,
                "start_after_words_ms": start_ms,
                "first_output_ms": {"chainlat": first, "truth": truth_ms},
                "instant_after_frame_ms": at_ms,
                "split_ms": {
                    "end_of_turn": run.rollup.first_output_end_of_turn_ms,
                    "inference": run.rollup.first_output_inference_ms,
                },
                "unknown_start": run.unknown_start,
            }
        )
        if (run.unknown_start is not None) != (case == "server-vad"):
            problems.append(f"turn {n}: unknown start {run.unknown_start!r} with {case}")
        if steps != [("realtime_inference", "inference", "realtime")]:
            problems.append(f"turn {n}: steps {steps}")
        if at_ms is None or abs(at_ms) > FIRST_OUTPUT_TOLERANCE_MS:
            problems.append(f"turn {n}: first output {at_ms} ms from the first frame")
        if case == "local-vad":
            # As the cascade's (livekit_judge): the start is LiveKit's user_speaking end,
            # which LiveKit dates late by its handling of the VAD's event, reported.
            speech = cascade._user_speaking_end(spans, run)
            figures[-1]["start_after_user_speaking_ms"] = (
                None if speech is None else (run.start_ns - speech) / 1e6
            )
            if speech is None or abs(run.start_ns - speech) > cascade.START_TOLERANCE_MS * 1e6:
                problems.append(f"turn {n}: starts away from the end of LiveKit's user_speaking")
            if not 0 <= start_ms <= cascade.DATING_BOUND_MS:
                problems.append(
                    f"turn {n}: LiveKit dates the end of the words {start_ms:.1f} ms from it"
                )
            if first is None or abs(first + start_ms - truth_ms) > FIRST_OUTPUT_TOLERANCE_MS:
                problems.append(
                    f"turn {n}: first output {first} ms, the caller's wait {truth_ms:.1f} less "
                    f"LiveKit's dating {start_ms:.1f}"
                )
    return problems, figures
