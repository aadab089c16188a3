"""Print, as JSON, the workflow runs chainlat reads from each trace file given.

Run inside a stack's environment by ``run.py`` (which is stdlib only and cannot import
chainlat itself): ``python judge.py FILE...``. For each file, every run that is not
nested in another, with its counts, tokens and critical-path split; or the one-line
error that reading the file raised.
"""

from __future__ import annotations

import json
import statistics
import sys
from dataclasses import replace
from typing import Any

from chainlat import WorkflowRun
from chainlat._core.rollup import WIRE, Rollup, SpanRecord, compute_rollup
from chainlat.traces import read_runs


def seen_twice(run: WorkflowRun) -> tuple[list[float], dict[str, int] | None]:
    """Model calls seen both by the framework and by chainlat at the wire (``+httpx``).

    A call's HTTP-level span (source ``http``) lies inside the framework's model-call span,
    as its descendant, or only in time (OpenInference's LangChain spans are never current,
    so the HTTP span is their sibling). Returns, per call seen twice, how much longer the
    framework's span is (its own processing: time the reference, traced at the wire,
    counts as overhead); and the tokens of the wire spans (what the sim counted), or None
    when no call was seen twice.
    """
    records = {s.record.span_id: s.record for s in run.spans}
    calls = [r for r in records.values() if r.kind == "inference"]
    wraps: list[float] = []
    wires: list[SpanRecord] = []
    for call in calls:
        if call.source != WIRE:
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
    wire = {
        "input": sum(c.input_tokens or 0 for c in wires),
        "output": sum(c.output_tokens or 0 for c in wires),
    }
    return wraps, wire


def framework_view(run: WorkflowRun) -> Rollup | None:
    """The run as chainlat reads it from the framework's spans alone (its wire spans made
    transparent), when it has wire spans: what the same run would read without
    ``instrument_httpx``. Its inference minus the run's is the framework's own work inside
    its model-call spans, on the critical path."""
    records = run.records
    calls = [r for r in records if r.kind == "inference"]
    if not any(r.source == WIRE for r in calls) or all(r.source == WIRE for r in calls):
        return None  # no wire span, or nothing but (the reference)
    blind = [replace(r, kind=None) if r.source == WIRE else r for r in records]
    return compute_rollup(run.root_record, blind)


def _inference_ancestor(rec: SpanRecord, records: dict[int, SpanRecord]) -> SpanRecord | None:
    parent = records.get(rec.parent_id) if rec.parent_id is not None else None
    while parent is not None and parent.kind != "inference":
        parent = records.get(parent.parent_id) if parent.parent_id is not None else None
    return parent


def path_kinds(run: WorkflowRun) -> list[str]:
    """The kinds of the steps on the run's critical path, in order (nested workflows, which
    the path names too, left out): ``data, inference, tool, inference, inference,
    inference`` for the agent. Machine noise moves times, never this."""
    kinds = {
        s.record.name: s.record.kind
        for s in run.spans
        if s.record.kind in ("inference", "data", "tool")
    }
    return [kinds[name] for name in run.rollup.critical_path if name in kinds]


def runs_of(path: str) -> dict[str, Any]:
    """The top-level runs of one file, or ``{"error": ...}``."""
    try:
        runs = [r for r in read_runs([path], roots=True) if not r.nested]
    except Exception as exc:  # reported: the matrix goes on
        return {"error": f"{type(exc).__name__}: {exc}"}
    out: list[dict[str, Any]] = []
    for run in sorted(runs, key=lambda r: r.start_ns):
        r = run.rollup
        wraps, wire = seen_twice(run)
        blind = framework_view(run)
        out.append(
            {
                "workflow": run.workflow,
                "counts": {
                    "inference": r.inference_count,
                    "data": r.data_count,
                    "tool": r.tool_count,
                },
                "tokens": {"input": r.input_tokens, "output": r.output_tokens},
                "split_ms": {
                    "total": r.total_ms,
                    "inference": r.inference_ms,
                    "data": r.data_ms,
                    "tool": r.tool_ms,
                    "overhead": r.overhead_ms,
                },
                "critical_path": list(r.critical_path),
                "path_kinds": path_kinds(run),
                "llm_wrap_ms": statistics.median(wraps) if wraps else None,
                "in_span_ms": None if blind is None else blind.inference_ms - r.inference_ms,
                "wire_tokens": wire,
            }
        )
    return {"runs": out}


def main(argv: list[str]) -> int:
    """Print ``{file: runs_of(file)}``."""
    print(json.dumps({path: runs_of(path) for path in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
