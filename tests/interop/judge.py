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
from typing import Any

from chainlat import WorkflowRun
from chainlat.traces import read_runs


def llm_wrap_ms(run: WorkflowRun) -> float | None:
    """The median time a framework's model-call span adds around the call on the wire.

    Where chainlat's HTTP-level span of a call (the cases with ``instrument_httpx``) lies
    inside a framework's model-call span, as its descendant or only in time (OpenInference's
    LangChain spans are never current, so the HTTP span is their sibling), the difference
    of their durations is the framework's own processing inside its span: time that the
    reference, traced at the wire, counts as overhead. None when no call was seen twice.
    """
    records = [s.record for s in run.spans if s.record.kind == "inference"]
    wires = [r for r in records if r.source == "chainlat"]
    outers = [r for r in records if r.source != "chainlat"]
    wraps: list[float] = []
    for wire in wires:
        around = [o for o in outers if o.start_ns <= wire.start_ns and o.end_ns >= wire.end_ns]
        if around:
            outer = min(around, key=lambda o: o.end_ns - o.start_ns)
            wraps.append(((outer.end_ns - outer.start_ns) - (wire.end_ns - wire.start_ns)) / 1e6)
    return statistics.median(wraps) if wraps else None


def runs_of(path: str) -> dict[str, Any]:
    """The top-level runs of one file, or ``{"error": ...}``."""
    try:
        runs = [r for r in read_runs([path]) if not r.nested]
    except Exception as exc:  # reported: the matrix goes on
        return {"error": f"{type(exc).__name__}: {exc}"}
    out: list[dict[str, Any]] = []
    for run in sorted(runs, key=lambda r: r.start_ns):
        r = run.rollup
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
                "llm_wrap_ms": llm_wrap_ms(run),
            }
        )
    return {"runs": out}


def main(argv: list[str]) -> int:
    """Print ``{file: runs_of(file)}``."""
    print(json.dumps({path: runs_of(path) for path in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
