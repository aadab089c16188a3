"""Print, as JSON, the workflow runs chainlat reads from each trace file given.

Run inside a stack's environment by ``run.py`` (which is stdlib only and cannot import
chainlat itself): ``python judge.py FILE...``. For each file, every run that is not
nested in another, with its counts, tokens and critical-path split; or the one-line
error that reading the file raised.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from chainlat import WorkflowRun
from chainlat._core import clock
from chainlat._core.records import answered_before_tools
from chainlat._core.rollup import WIRE, Rollup, SpanRecord
from chainlat._core.tree import saw_headers_only
from chainlat._core.twins import join_stream_ends, request_builders
from chainlat.traces import read_runs


def seen_twice(run: WorkflowRun) -> tuple[list[float], dict[str, int] | None]:
    """Model calls seen both by the framework and by chainlat at the wire (``+httpx``).

    A call's HTTP-level span (source ``http``) lies inside the framework's model-call span,
    as its descendant, or only in time (OpenInference's LangChain spans are never current,
    so the HTTP span is their sibling). Returns, per call seen twice, how much longer the
    framework's span is (its own processing: time the reference, traced at the wire,
    counts as overhead); and the tokens of the wire spans (what the sim counted), or None
    when no call was seen twice or no wire span counts tokens.
    """
    records = {s.record.span_id: s.record for s in run.spans}
    calls = [r for r in records.values() if r.kind == "inference"]
    wraps: list[float] = []
    wires: list[SpanRecord] = []
    for call in calls:
        if call.source != WIRE or _inside_wire(call, records):
            continue
        wires.append(call)
        outer = _inference_ancestor(call, records)
        if outer is None:
            around = [
                o
                for o in calls
                if o.source != WIRE and o.start_ns <= call.start_ns and o.end_ns >= call.end_ns
            ]
            outer = min(around, key=lambda o: o.end_ns - o.start_ns) if around else None
        if outer is not None:
            wraps.append(((outer.end_ns - outer.start_ns) - (call.end_ns - call.start_ns)) / 1e6)
    if not wraps:
        return [], None
    counted = [c for c in wires if c.input_tokens is not None or c.output_tokens is not None]
    if not counted:
        # Another language's HTTP spans (undici, otelhttp) count no tokens: none to accept.
        return wraps, None
    wire = {
        "input": sum(c.input_tokens or 0 for c in counted),
        "output": sum(c.output_tokens or 0 for c in counted),
    }
    return wraps, wire


def read_calls(run: WorkflowRun) -> list[SpanRecord]:
    """The run's records with chainlat's rules for a call's end applied, as `call_steps`
    reads them (rules 19 and 20)."""
    return answered_before_tools(join_stream_ends(run.root_record.span_id, run.records))


def call_steps(run: WorkflowRun) -> list[list[SpanRecord]]:
    """The run's model calls as the spans that must time them (the wire's, chainlat's HTTP
    spans of source ``http``, or a provider SDK's own span of the request around them,
    where the run has them for a call, else the framework's: docs/attributes.md, rule 3),
    grouped in steps: calls that overlap in time (the parallel ones) make one. Each step
    is one ``inference`` on the critical path: the agent makes 4, or 5 when, under load,
    the second of its parallel calls started only after the first had ended (a thread
    started late). Spans chainlat reads as request building (docs/attributes.md, rule 9:
    LlamaIndex's ``OpenAI._prepare_chat_with_tools``) time no call, nor does an HTTP span
    that saw only a stream's headers (rule 18: `saw_headers_only`, chainlat's own rule); the
    number of calls chainlat reads is judged apart, against the reference's. A call that
    asked for tools is timed to where its first tool started (rule 19:
    `answered_before_tools`, chainlat's own rule: Mastra's ``chat`` span ends after them), and
    a call whose span ended with the response's headers is timed to the record of its
    stream's end (rule 20: `join_stream_ends`, chainlat's own rule: Logfire's)."""
    read = read_calls(run)
    builders = request_builders(run.root_record.span_id, read)
    calls = [r for r in read if r.kind == "inference" and r.span_id not in builders]
    records = {r.span_id: r for r in read}
    wires = [
        r
        for r in calls
        if r.source == WIRE and not _inside_wire(r, records) and not saw_headers_only(r, records)
    ]
    expected = wires + [
        c
        for c in calls
        if c.source != WIRE
        and not any(c.start_ns <= w.start_ns and w.end_ns <= c.end_ns for w in wires)
    ]
    expected.sort(key=lambda r: r.start_ns)
    # A clock that rounds starts (OpenTelemetry JS: to the millisecond) writes a call that
    # began after its predecessor ended as starting up to that much before its end: the
    # critical path takes them as one after the other (docs/attributes.md, rule 14), and so
    # does this count.
    slack = _slack_ns(run.root_record, run.records)
    steps: list[list[SpanRecord]] = []
    for call in expected:
        if steps and call.start_ns + slack < max(c.end_ns for c in steps[-1]):
            steps[-1].append(call)
        else:
            steps.append([call])
    return steps


def _slack_ns(root: SpanRecord, records: list[SpanRecord]) -> int:
    """How far the spans' clock may write a span off the instants it stood for: its starts'
    resolution when coarser than its ends' (`clock.slack_ns`: OpenTelemetry JS)."""
    return clock.slack_ns(
        [root.start_ns, *(r.start_ns for r in records)],
        [root.end_ns, *(r.end_ns for r in records)],
    )


def answer_ttft_ms(run: WorkflowRun) -> float | None:
    """The time to first token chainlat reads for the run's last step of calls (the
    streamed answer), from any span of it (a framework's, the wire's); None when no
    span of it gives one."""
    steps = call_steps(run)
    if not steps:
        return None
    start = min(c.start_ns for c in steps[-1])
    end = max(c.end_ns for c in steps[-1])
    around = sorted(
        (r for r in run.records if r.kind == "inference" and r.start_ns < end and r.end_ns > start),
        key=lambda r: r.start_ns,
    )
    return next((r.ttft_ms for r in around if r.ttft_ms is not None), None)


Timed = list[tuple[SpanRecord, dict[str, int] | None]]
"""Per step of `call_steps`, the call that times it and the sim's SERVER span for it
(None for a span read as a call that sent no request): `timed_calls`."""


def timed_calls(run: WorkflowRun, server: list[dict[str, int]]) -> Timed:
    """Each step of calls' timing call (`_timing_call`) and its server span (`_served`),
    worked out once for `inside_ms` and `served_ms`."""
    on_path = _on_path(run)
    calls = [_timing_call(step, on_path) for step in call_steps(run)]
    return [(call, _served(call, server)) for call in calls]


Held = list[tuple[dict[str, Any], SpanRecord]]
"""Each step function's interval with the step span chainlat reads around it
(`held_functions`)."""


def inside_ms(
    run: WorkflowRun, timed: Timed, records: list[SpanRecord], held: Held
) -> dict[str, float]:
    """Per judged kind, the time on the critical path inside the step spans chainlat must
    read that is not the step's own: measured, for the judge to take out before it
    compares a case with the reference (README.md, "The verdict").

    - ``inference``: for each step of `call_steps`, timed by its call on chainlat's
      critical path (``timed``, `timed_calls`: of parallel calls, the one under the agent
      that ended last), that call's span's duration minus the duration of the sim's
      SERVER span for that call (the model's time, measured by the sim; the longest
      inside the call's span: `_served`): what the client did while the call was open (a
      framework's own work inside its span; a stream read at the pace of a framework's
      per-chunk callbacks); all of it for a span read as a call that no server span
      overlaps; nothing for a span shorter than the server's (the model's time it lost
      is chainlat's reading, judged).
    - ``data``, ``tool``: for each interval of the step's own function and the step span
      holding it (``held``, `held_functions`), the span's duration minus the function's:
      a framework's work around the function inside its step span (argument parsing,
      bookkeeping, events dispatched after an inner span ends). A function no span of
      its kind holds: nothing (no allowance).

    ``records``: the run's, as `call_steps` reads them (`answered_before_tools`, rule 19).
    """
    inference = 0.0
    for call, match in timed:
        if match is None:
            # A span read as a call that sent no request (LlamaIndex's request building,
            # an LLM span): none of its time is a model's. Its count and its place on the
            # path are judged apart, exactly.
            inference += (call.end_ns - call.start_ns) / 1e6
            continue
        beyond = (call.end_ns - call.start_ns) - (match["end_ns"] - match["start_ns"])
        # Steps of other kinds inside the call's span (the AI SDK's legacy ``ai.toolCall``
        # is a child of the ``doGenerate`` that asked for it, which ends after the tool)
        # are judged as themselves, not as the client's time inside the call.
        beyond -= _nested_steps_ns(call, records)
        # Never below zero: a span shorter than the server's work (a stream span ended at
        # its first token) has lost the model's time, which is judged, not taken out.
        inference += max(0, beyond) / 1e6
    out = {"inference": inference, "data": 0.0, "tool": 0.0}
    for own, outer in held:
        span_ns = outer.end_ns - outer.start_ns
        out[own["kind"]] += (span_ns - (own["end_ns"] - own["start_ns"])) / 1e6
    return out


def functions_ms(held: Held) -> dict[str, float]:
    """Per kind (``data``, ``tool``), the duration of the step functions whose span chainlat
    reads as a step of their kind (``held``: those `inside_ms` measures around): their own
    time, which the machine and the language's runtime set (a timer that oversleeps, an
    event loop busy elsewhere), not chainlat, as the sim sets a model's (`served_ms`)."""
    out = {"data": 0.0, "tool": 0.0}
    for own, _outer in held:
        out[own["kind"]] += (own["end_ns"] - own["start_ns"]) / 1e6
    return out


def held_functions(
    run: WorkflowRun, records: list[SpanRecord], intervals: list[dict[str, Any]]
) -> Held:
    """Each interval of a step's own function (``intervals``, recorded by the agent) inside
    the run whose innermost holding span chainlat reads as a step of that kind, with that
    span taken up through its ancestors of the same kind (one step, the outermost's time:
    `_outermost_of_kind`). A clock that rounds starts (OpenTelemetry JS: a span starts at
    `Date.now()`, and ends that start plus the time elapsed since) may write a span up to
    its resolution off its function at either end: that is allowed (`clock.slack_ns`), as
    `call_steps` allows it."""
    root = run.root_record
    slack = _slack_ns(root, records)
    first, last = root.start_ns - slack, root.end_ns + slack
    by_id = {r.span_id: r for r in records}
    held: Held = []
    for own in intervals:
        if not (first <= own["start_ns"] and own["end_ns"] <= last):
            continue
        holding = [
            r
            for r in records
            if r.start_ns - slack <= own["start_ns"] and own["end_ns"] <= r.end_ns + slack
        ]
        if not holding:
            continue
        inner = min(holding, key=lambda r: r.end_ns - r.start_ns)
        if inner.kind == own["kind"]:
            held.append((own, _outermost_of_kind(inner, by_id)))
    return held


def _on_path(run: WorkflowRun) -> dict[int, SpanRecord | None]:
    """The run's records by span id, each mapped to itself when chainlat's critical path
    counts inference in it, to its nearest such ancestor when one is, else to None."""
    from chainlat.report._critical import run_path

    path = run_path(run)
    counted: set[int] = set()
    if path is not None:
        for piece in path.pieces:
            if piece.kind == "inference":
                counted.update((piece.span_id, piece.shown_on))
    by_id = {r.span_id: r for r in run.records}
    found: dict[int, SpanRecord | None] = {}
    for rec in run.records:
        at: SpanRecord | None = rec
        while at is not None and at.span_id not in counted:
            at = by_id.get(at.parent_id) if at.parent_id is not None else None
        found[rec.span_id] = at
    return found


def _timing_call(step: list[SpanRecord], on_path: dict[int, SpanRecord | None]) -> SpanRecord:
    """The call of a step of calls that times it: the one the critical path goes through
    (the call's span, or a framework span around it, counts inference on the path), the
    latest-ending of them; else the step's latest-ending call. Of two parallel calls the
    path takes the one whose agent ended last, which is not always the one whose request
    ended last (google-adk's fan-out: the summary agent's request ended 7 ms before the
    policy agent's, and its agent 0.8 ms after)."""
    taken = [call for call in step if on_path.get(call.span_id) is not None]
    return max(taken or step, key=lambda c: c.end_ns)


def _served(call: SpanRecord, server: list[dict[str, int]]) -> dict[str, int] | None:
    """The sim's SERVER span for ``call``: the longest one inside its span (the server
    takes the request after it was sent and answers before it is read), else the one
    overlapping it most; None when none overlaps it (a span read as a call that sent no
    request). Of two parallel calls, the other's server span may overlap a call more than
    its own does, and lie partly outside it."""
    near = [s for s in server if s["end_ns"] > call.start_ns and s["start_ns"] < call.end_ns]
    inside = [s for s in near if call.start_ns <= s["start_ns"] and s["end_ns"] <= call.end_ns]
    if inside:
        return max(inside, key=lambda s: s["end_ns"] - s["start_ns"])
    if not near:
        return None
    return max(
        near, key=lambda s: min(s["end_ns"], call.end_ns) - max(s["start_ns"], call.start_ns)
    )


def served_ms(timed: Timed) -> float:
    """The model's own time on the run's steps of calls, as the sim measured it: for each
    step of `call_steps`, the duration of the SERVER span of its call on the critical path
    (``timed``, `timed_calls`: the call `inside_ms` takes). The judge takes it out of both sides
    (README.md, "The verdict"): the sim, on the same two cores as the agents, serves the
    same call a few milliseconds slower beside one agent's work than beside another's, which
    is no reading of chainlat's. A span that lost some of the model's time is still
    judged: its time less the server's is then below zero."""
    total = sum(match["end_ns"] - match["start_ns"] for _, match in timed if match is not None)
    return total / 1e6


def _outermost_of_kind(rec: SpanRecord, by_id: dict[int, SpanRecord]) -> SpanRecord:
    """``rec``'s furthest ancestor reached through spans of its kind only: the step whose
    time is on the path (LlamaIndex's ``FaqRetriever.aretrieve`` holds its
    ``FaqRetriever._retrieve``, both data, and dispatches its events after the inner one
    ends: one data step, the outer span's time)."""
    parent = by_id.get(rec.parent_id) if rec.parent_id is not None else None
    while parent is not None and parent.kind == rec.kind:
        rec = parent
        parent = by_id.get(rec.parent_id) if rec.parent_id is not None else None
    return rec


def _nested_steps_ns(call: SpanRecord, records: list[SpanRecord]) -> int:
    """The time inside ``call``'s span covered by its descendants read as data or tool."""
    by_id = {r.span_id: r for r in records}

    def under(rec: SpanRecord) -> bool:
        parent = by_id.get(rec.parent_id) if rec.parent_id is not None else None
        while parent is not None:
            if parent.span_id == call.span_id:
                return True
            parent = by_id.get(parent.parent_id) if parent.parent_id is not None else None
        return False

    spans = sorted(
        (max(r.start_ns, call.start_ns), min(r.end_ns, call.end_ns))
        for r in records
        if r.kind in ("data", "tool") and under(r)
    )
    covered, reach = 0, call.start_ns
    for start, end in spans:
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return covered


def _inference_ancestor(rec: SpanRecord, records: dict[int, SpanRecord]) -> SpanRecord | None:
    parent = records.get(rec.parent_id) if rec.parent_id is not None else None
    while parent is not None and parent.kind != "inference":
        parent = records.get(parent.parent_id) if parent.parent_id is not None else None
    return parent


def _inside_wire(rec: SpanRecord, records: dict[int, SpanRecord]) -> bool:
    """Whether a call lies in another wire-level call: chainlat's HTTP span of a request
    that the provider SDK traces itself (the anthropic SDK's ``anthropic.messages.create``
    carries ``http.request.method`` and is current while it sends). The outer span is
    the call, once; its tokens are the server's too."""
    outer = _inference_ancestor(rec, records)
    return outer is not None and outer.source == WIRE


def path_kinds(run: WorkflowRun) -> list[str]:
    """The kinds of the steps on the run's critical path, in order (nested workflows, which
    the path names too, left out): ``data, inference, tool, inference, inference,
    inference`` for the agent. Machine load moves times, never the order of the kinds
    (see `call_steps` for the number of model calls on it)."""
    kinds = {
        s.record.label: s.record.kind
        for s in run.spans
        if s.record.kind in ("inference", "data", "tool")
    }
    return [str(kinds[label]) for label in run.rollup.critical_path if label in kinds]


def live_rollup(run: WorkflowRun) -> dict[str, Any] | None:
    """The rollup chainlat recorded on the run's workflow span as the workflow ended (what
    a runtime budget, a pytest assertion and Jaeger's view of the span read), or None when
    the span holds none (the run is not chainlat's workflow)."""
    attributes = run.root.attributes if run.root is not None else {}
    r = Rollup.from_attributes(attributes)
    return None if r is None else _split(r)


def sim_tokens(run: WorkflowRun, server: list[dict[str, Any]]) -> dict[str, int]:
    """The tokens the sim counted for the requests served within the run (its SERVER
    spans that start and end inside it: the matrix runs one request at a time), whether or
    not its responses said them."""
    inside = [s for s in server if run.start_ns <= s["start_ns"] and s["end_ns"] <= run.end_ns]
    return {
        "input": sum(s.get("input_tokens") or 0 for s in inside),
        "output": sum(s.get("output_tokens") or 0 for s in inside),
    }


def _split(r: Rollup) -> dict[str, Any]:
    return {
        "counts": {"inference": r.inference_count, "data": r.data_count, "tool": r.tool_count},
        "tokens": {"input": r.input_tokens, "output": r.output_tokens},
        "uncounted_calls": r.uncounted_calls,
        "split_ms": {
            "total": r.total_ms,
            "inference": r.inference_ms,
            "data": r.data_ms,
            "tool": r.tool_ms,
            "overhead": r.overhead_ms,
        },
        "first_output_ms": r.first_output_ms,
    }


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def runs_of(path: str) -> dict[str, Any]:
    """The top-level runs of one file, or ``{"error": ...}``. The sim's server spans are
    read from ``sim-spans.jsonl`` in the file's folder, the agent's own intervals from
    the file's ``.intervals.json``."""
    try:
        runs = [r for r in read_runs([path], roots=True) if not r.nested]
        server = _json_lines(Path(path).parent / "sim-spans.jsonl")
        intervals = json.loads(Path(path + ".intervals.json").read_text())
        timed = {id(run): timed_calls(run, server) for run in runs}
        inside, functions = {}, {}
        for run in runs:
            records = read_calls(run)
            held = held_functions(run, records, intervals)
            inside[id(run)] = inside_ms(run, timed[id(run)], records, held)
            functions[id(run)] = functions_ms(held)
        served = {id(run): served_ms(timed[id(run)]) for run in runs}
    except Exception as exc:  # reported: the matrix goes on
        return {"error": f"{type(exc).__name__}: {exc}"}
    out: list[dict[str, Any]] = []
    for run in sorted(runs, key=lambda r: r.start_ns):
        r = run.rollup
        _wraps, wire = seen_twice(run)
        out.append(
            {
                "workflow": run.workflow,
                **_split(r),
                "critical_path": list(r.critical_path),
                "path_kinds": path_kinds(run),
                "call_steps": len(call_steps(run)),
                "answer_ttft_ms": answer_ttft_ms(run),
                "inside_ms": inside[id(run)],
                "functions_ms": functions[id(run)],
                "served_ms": served[id(run)],
                "wire_tokens": wire,
                "sim_tokens": sim_tokens(run, server),
                "unrecorded": list(r.unrecorded),
                "unrecorded_parts": list(r.unrecorded_parts),
                "live": live_rollup(run),
            }
        )
    return {"runs": out}


def main(argv: list[str]) -> int:
    """Print ``{file: runs_of(file)}``."""
    print(json.dumps({path: runs_of(path) for path in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
