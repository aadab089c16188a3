"""The Pipecat realtime case of the interop matrix: a Pipecat pipeline on OpenAI's Realtime
API (``OpenAIRealtimeLLMService``: ``pipecat_realtime_agent.py``) against ``chainlat
sim``'s ``/v1/realtime``, its traces read by chainlat and held to the truth the agent
recorded and to Pipecat's own ``turn.user_bot_latency_seconds``.

Run by ``run.py --stack pipecat-realtime``. Four cases. ``local-vad`` and
``local-vad+tool`` (the same with a function the model calls in every turn): the agent's input
transport signals the caller's speech as a VAD would, the server's turn detection is off
(``turn_detection=False``) and the service commits the caller's audio and asks for a
response when Pipecat's user aggregator says the caller stopped. ``server-vad``: the
service's default, the server's turn detection on and no VAD in the pipeline; the server
decides the turn on the audio the input transport streams and asks the answer itself, and
the observer reads the end of the words from its ``speech_stopped`` (which the service
hands on without its ``audio_end_ms``). ``semantic-vad``: the same with Pipecat's
``SemanticTurnDetection``, whose wait after the words is its model's: the observer places
the turn's start at the ``audio_end_ms`` (no silence stated) and says it is no known end of
the words (rule 16): held to that, to the sim's silence after the words, and its first
output to the truth less that silence (a bound). Pipecat counts no
``turn.user_bot_latency_seconds`` with the server's detection (it counts from a VAD's
frame): it is reported, not held. Pipecat's spans hold no
``stt`` span and no span for the response itself (its ``llm_response`` is the handling of
``response.done``): chainlat's observer (``chainlat.integrations.pipecat``) writes the end
of the caller's words, the response (``realtime sim-realtime``, from the
``UserStoppedSpeakingFrame`` the service asked at to its ``LLMFullResponseEndFrame``, its
first audio the first ``TTSAudioRawFrame`` it pushed; Pipecat's ``llm_response`` is read as
the same call seen twice, its usage kept; an answer that called a function is a step
too, with no first token) and the first audio frame at the output transport on each turn;
the first output's split is the end-of-turn wait (to the first answer's ask), the model,
the tool and the rest, summing to it. The
sim runs in the project's environment, as for LiveKit's realtime case.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STACK = "pipecat-realtime"
CASES = ("local-vad", "local-vad+tool", "server-vad", "semantic-vad")
TOOL = "local-vad+tool"
SERVER_VAD = "server-vad"
SEMANTIC_VAD = "semantic-vad"
SERVERS = (SERVER_VAD, SEMANTIC_VAD)
"""The cases where the server's turn detection decides the turns."""
SIM_SILENCE_MS = 500.0
"""The silence the sim's server VAD waits on (its default ``silence_duration_ms``), which it
also waits on for ``semantic_vad``: a ``semantic-vad`` turn's start, placed at the
``speech_stopped``'s ``audio_end_ms`` less no silence (Pipecat's ``SemanticTurnDetection``
states none), is that much after the words, and says it is no known end of them."""
"""The same with a function, ``lookup_order`` (its body sleeps ``TOOL_S``, 120 ms), in the
session's tools: the sim's model calls it first in every turn, then answers."""
TOOL_SLACK_MS = 2.0
"""A tool step's start against the push of the call's ``FunctionCallInProgressFrame`` and
its end against the push of its ``FunctionCallResultFrame`` (the truth's ``tool_frames_ns``:
``pipecat_agent.noting_calls``): each within this of the time that push ran (Pipecat stamps
it inside; the service sends the result to the API inside the second)."""
AROUND_BOUND_MS = 50.0
"""Pipecat's own time around the body inside a tool step (the broadcast, the task that
runs the handler; 0.2-0.9 ms on an idle machine, 8 ms seen on a loaded one): the
framework's, reported; bounded only so that a step that also held something else (the
answer that called, the next one) cannot pass."""
TURNS = 3
MODEL = "sim-realtime"
PROFILES = {
    "models": [
        {"name": "sim-voice-llm", "ttft_base_ms": 100, "decode_ms_per_token": 5},
    ]
}
START_TOLERANCE_MS = 10.0
"""The turn's start (the observer's end of the words: the VAD's stamp less its
``stop_secs``) against the end of the words as the agent noted it."""
OUTPUT_TOLERANCE_MS = 2.0
"""The first output as an instant (the run's start plus its first output) against what the
observer reads (``chainlat.integrations.pipecat``): the output transport's push of the
answer's first frame once written, less its playing time; the agent notes that write's
return, less the same (``first_written_ns``)."""
WRITE_LAG_BOUND_MS = 30.0
"""How late that write returned, beyond its playing time, after the transport was handed
the frame: the write's sleep overran by a busy loop's turns, and the mark is late by as
much (the cascade's judge has the same bound, ``run.WRITE_LAG_BOUND_MS``). Reported per
turn (``write_lag_ms``), bounded only so that a mark of another instant cannot pass."""
FIRST_OUTPUT_TOLERANCE_MS = 10.0
"""The first output as a wait against the truth, from the end of the words to the written
first frame (its write's return less its playing time)."""
SIM_FIRST_BYTE_MS = 300.0
"""``sim-realtime``'s first audio, after the response was created (``REALTIME_PROFILES`` in
``chainlat.sim._realtime``): the observer's response step, from the caller's stop the
service asked at to its first audio, can be no shorter."""
SERVER_ASK_SLACK_MS = 50.0
"""With the server's turn detection the server asks the answer itself, before its
``speech_stopped`` reaches the service and the service's handler pushes the frame the step
counts from: the step may be that much shorter than the sim's first byte. That is the event
loop's delay, which the machine's load sets: 2-3 ms in the first runs here, 10.5 ms in one
turn of a run on an otherwise idle machine (the turn read right to 1.5 ms). A bound only, as
`USER_BOT_LAG_BOUND_MS` is: a step counted from a later instant (the answer's first audio or
text) would be short by hundreds of milliseconds."""
SPLIT_ROUNDING_MS = 0.001
"""The parts of the first output's split against it: float sums of ms figures."""
USER_BOT_TOLERANCE_MS = 2.0
USER_BOT_LAG_BOUND_MS = 50.0
"""Pipecat's ``turn.user_bot_latency_seconds`` against chainlat's first output: both count
from the VAD's end of the words; Pipecat's ends at the output transport's
``BotStartedSpeakingFrame``, pushed before the write by the event loop's turns (0.9-9.6 ms
in the cascade case), chainlat's at the write (its mark 0.5-2.4 ms after it there), later
by a write that overran. Held one-sided: chainlat's never shorter by more than
``USER_BOT_TOLERANCE_MS``, longer by at most this, a bound only so that a figure of another
instant cannot pass; the difference is reported."""


def run_case(venv: Path, matrix: Any, case: str, where: Path, turns: int) -> Path:
    """Run the agent against a fresh sim; returns the traces file (``truth.json`` beside)."""
    where.mkdir(parents=True, exist_ok=True)
    profiles = where / "profiles.json"
    profiles.write_text(json.dumps(PROFILES))
    traces = where / "traces.jsonl"
    traces.unlink(missing_ok=True)  # the exporter appends
    sim = matrix.Sim(Path(sys.prefix), profiles, where / "sim-spans.jsonl", where / "sim.log")
    try:
        argv = [str(matrix._bin(venv, "python")), "-P", str(HERE / "pipecat_realtime_agent.py")]
        argv += ["--base-url", sim.base_url.removesuffix("/v1"), "--traces", str(traces)]
        argv += ["--truth", str(where / "truth.json"), "--turns", str(turns)]
        if case == TOOL:
            argv.append("--tool")
        if case == SERVER_VAD:
            argv.append("--server-vad")
        if case == SEMANTIC_VAD:
            argv.append("--semantic-vad")
        with open(where / "agent.log", "w") as log:
            done = subprocess.run(argv, stderr=log, timeout=300, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{case}: the agent failed (exit {done.returncode}); see {log.name}")
    finally:
        sim.stop()
    return traces


def judge(case: str, traces: Path, turns: int) -> tuple[list[str], list[dict[str, Any]]]:
    """(problems, figures per turn): chainlat's reading against the agent's truth and
    Pipecat's own figures."""
    from chainlat._core import conventions
    from chainlat._core.voice import SEMANTIC_VAD_START
    from chainlat.traces import read_runs

    truth = json.loads((traces.parent / "truth.json").read_text())
    words, frames = truth["words_end_ns"], truth["first_frame_ns"]
    written = truth["first_written_ns"]
    runs = sorted(read_runs([traces]), key=lambda r: r.start_ns)
    problems: list[str] = []
    figures: list[dict[str, Any]] = []
    if not len(runs) == len(words) == len(frames) == len(written) == turns:
        return [f"{len(runs)} turns read, {len(words)} spoken, {len(frames)} answered"], []
    truths = zip(runs, words, frames, written, strict=True)
    for n, (run, spoken, heard, wrote) in enumerate(truths, start=1):
        root = run.root.attributes if run.root is not None else {}
        steps = [(s.name, s.kind) for s in run.steps]
        # The spoken answer has a first token; the answers that called a function none.
        answers = [s for s in run.steps if s.name == f"realtime {MODEL}" and s.ttft_ms]
        ttft = answers[0].ttft_ms if len(answers) == 1 else None
        start_ms = (run.start_ns - spoken) / 1e6
        first = run.first_output_ms
        at_ms = None if first is None else (run.start_ns + first * 1e6 - wrote) / 1e6
        lag_ms = (wrote - heard) / 1e6
        truth_ms = (wrote - spoken) / 1e6
        pipecat_ms = conventions.user_bot_latency_ms_of(root)
        reason = conventions.end_reason_of(root)
        tokens = (run.rollup.input_tokens, run.rollup.output_tokens)
        usage = _usage(traces, run.span_id)
        figures.append(
            {
                "turn": n,
                "workflow": run.workflow,
                "steps": steps,
                "start_after_words_ms": start_ms,
                "first_output_ms": {
                    "chainlat": first,
                    "truth": truth_ms,
                    "turn.user_bot_latency_seconds": pipecat_ms,
                },
                "instant_after_written_ms": at_ms,
                "write_lag_ms": lag_ms,
                "tokens": {"chainlat": tokens, "pipecat": usage},
                "response_first_audio_ms": ttft,
                "split_ms": {
                    "end_of_turn": run.rollup.first_output_end_of_turn_ms,
                    "inference": run.rollup.first_output_inference_ms,
                    "tool": run.rollup.first_output_tool_ms,
                    "overhead": run.rollup.first_output_overhead_ms,
                },
                "end_reason": reason,
            }
        )
        if run.workflow != "turn" or root.get("turn.number") not in (n, str(n)):
            problems.append(f"turn {n}: read as {run.workflow!r} {root.get('turn.number')}")
        if case == TOOL:
            _tools(problems, figures[-1], run, truth, n)
        elif steps != [(f"realtime {MODEL}", "inference")]:
            problems.append(f"turn {n}: steps {steps}")
        shortest = SIM_FIRST_BYTE_MS - (SERVER_ASK_SLACK_MS if case in SERVERS else 0.0)
        if len(answers) != 1 or ttft is None or ttft < shortest:
            problems.append(f"turn {n}: the response's first audio {ttft} ms after it was asked")
        _split(problems, run, n)
        if tokens != usage:
            problems.append(f"turn {n}: tokens {tokens}, Pipecat's usage {usage}")
        late_ms = SIM_SILENCE_MS if case == SEMANTIC_VAD else 0.0
        if abs(start_ms - late_ms) > START_TOLERANCE_MS:
            problems.append(f"turn {n}: starts {start_ms:.1f} ms from the end of the words")
        if case == SEMANTIC_VAD:
            figures[-1]["unknown_start"] = run.unknown_start
            if run.unknown_start != SEMANTIC_VAD_START:
                problems.append(f"turn {n}: its start taken for the end of the words")
            truth_ms -= late_ms  # a bound: the wait from the late start
        if at_ms is None or abs(at_ms) > OUTPUT_TOLERANCE_MS:
            problems.append(f"turn {n}: first output {at_ms} ms from the written first frame")
        if not -1.0 <= lag_ms <= WRITE_LAG_BOUND_MS:
            problems.append(f"turn {n}: the first frame's write returned {lag_ms:.2f} ms late")
        if first is None or abs(first - truth_ms) > FIRST_OUTPUT_TOLERANCE_MS:
            problems.append(f"turn {n}: first output {first} ms, the truth {truth_ms:.1f}")
        if case in SERVERS:
            pass  # Pipecat counts it from a VAD's frame, which this pipeline has none of
        elif (
            first is None
            or pipecat_ms is None
            or not -USER_BOT_TOLERANCE_MS <= first - pipecat_ms <= USER_BOT_LAG_BOUND_MS
        ):
            problems.append(f"turn {n}: turn.user_bot_latency_seconds {pipecat_ms} ms, {first}")
        if reason != "completed":
            problems.append(f"turn {n}: ended {reason}, the script says completed")
    return problems, figures


def _tools(
    problems: list[str],
    figures: dict[str, Any],
    run: Any,
    truth: dict[str, Any],
    n: int,
) -> None:
    """The tool is a tool: each tool step of the turn runs from the push of its call's
    frame to the push of its result (``TOOL_SLACK_MS``) and holds one body of the agent's,
    Pipecat's time around it under ``AROUND_BOUND_MS``; the answer starts at the last
    result."""
    tools = [s for s in run.steps if s.kind == "tool"]
    mine = [b for b in truth.get("tool_ns", []) if run.start_ns <= b[0] <= run.end_ns]
    pushed = [p for p in truth.get("tool_frames_ns", []) if run.start_ns <= p[0] <= run.end_ns]
    figures["tool_ms"] = [
        {
            "step": (t.end_ns - t.start_ns) / 1e6,
            "body": (b[1] - b[0]) / 1e6,
            "start_after_push": (t.start_ns - p[0]) / 1e6,
            "call_push": (p[1] - p[0]) / 1e6,
            "end_after_push": (t.end_ns - p[2]) / 1e6,
            "result_push": (p[3] - p[2]) / 1e6,
        }
        for t, b, p in zip(tools, mine, pushed, strict=False)
    ]
    if not tools or not len(tools) == len(mine) == len(pushed):
        problems.append(
            f"turn {n}: {len(tools)} tool steps, {len(mine)} calls of the body, "
            f"{len(pushed)} pushed"
        )
        return
    for tool, (began, ended), push in zip(tools, mine, pushed, strict=True):
        around_ms = (tool.end_ns - tool.start_ns - (ended - began)) / 1e6
        for edge, at, (pushing, pushed_ns) in (
            ("starts", tool.start_ns, push[0:2]),
            ("ends", tool.end_ns, push[2:4]),
        ):
            if not pushing - TOOL_SLACK_MS * 1e6 <= at <= pushed_ns + TOOL_SLACK_MS * 1e6:
                problems.append(
                    f"turn {n}: a tool step {edge} {(at - pushing) / 1e6:+.2f} ms from its "
                    f"frame's push, which took {(pushed_ns - pushing) / 1e6:.2f} ms "
                    f"(tolerance {TOOL_SLACK_MS:.0f})"
                )
        if not (tool.start_ns <= began and ended <= tool.end_ns):
            problems.append(f"turn {n}: a tool step does not hold its body")
        elif around_ms > AROUND_BOUND_MS:
            problems.append(f"turn {n}: a tool step {around_ms:.2f} ms longer than its body")
    answers = [s for s in run.steps if s.name == f"realtime {MODEL}"]
    calling = [s for s in answers if not s.ttft_ms]
    figures["calling_answer_ms"] = [(s.end_ns - s.start_ns) / 1e6 for s in calling]
    if not calling or len(calling) + 1 != len(answers):
        problems.append(f"turn {n}: {len(calling)} answers calling a function of {len(answers)}")
    elif any(c.end_ns > t.end_ns for c, t in zip(calling, tools, strict=False)):
        problems.append(f"turn {n}: an answer that called a function ends after the result")
    # Asked at the last result, or at the end of the answer that called when that came later
    # (the service owes the create while a response runs).
    asked = max(tools[-1].end_ns, max((c.end_ns for c in calling), default=0))
    if answers and answers[-1].start_ns != asked:
        after_ms = (answers[-1].start_ns - asked) / 1e6
        problems.append(f"turn {n}: the answer starts {after_ms:.2f} ms from the last result")
    if not run.rollup.first_output_tool_ms:
        problems.append(f"turn {n}: no tool part in the first output's split")


def _split(problems: list[str], run: Any, n: int) -> None:
    """The first output's split: the end-of-turn wait (from the end of the words to the
    first answer's ask, a part of the overhead), the model, the tool and the rest sum to it
    (within float rounding)."""
    rollup, first = run.rollup, run.first_output_ms
    parts = (
        rollup.first_output_inference_ms,
        rollup.first_output_data_ms,
        rollup.first_output_tool_ms,
        rollup.first_output_overhead_ms,
    )
    if first is None or None in parts or abs(sum(parts) - first) > SPLIT_ROUNDING_MS:
        problems.append(f"turn {n}: the split {parts} does not sum to {first}")
    asked = min(
        (s.start_ns for s in run.steps if s.name == f"realtime {MODEL}"), default=run.start_ns
    )
    eot, overhead = rollup.first_output_end_of_turn_ms, rollup.first_output_overhead_ms
    if eot is None or abs(eot - (asked - run.start_ns) / 1e6) > SPLIT_ROUNDING_MS:
        problems.append(f"turn {n}: end of turn {eot} ms, the first answer asked at {asked}")
    elif overhead is None or eot > overhead:
        problems.append(f"turn {n}: end of turn {eot} ms outside the overhead {overhead}")


def _usage(traces: Path, turn_id: str) -> tuple[int, int] | None:
    """The usage Pipecat's ``llm_response`` spans under the turn recorded, summed (each
    ``response.done``: a function call's answer and the spoken one)."""
    found: tuple[int, int] | None = None
    for line in traces.read_text().splitlines():
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    if span["name"] != "llm_response" or span.get("parentSpanId") != turn_id:
                        continue
                    values = {
                        kv["key"]: next(iter(kv["value"].values()))
                        for kv in span.get("attributes", [])
                    }
                    before = found or (0, 0)
                    found = (
                        before[0] + int(values["gen_ai.usage.input_tokens"]),
                        before[1] + int(values["gen_ai.usage.output_tokens"]),
                    )
    return found
