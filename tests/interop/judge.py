"""Print, as JSON, the workflow runs chainlat reads from each trace file given.

Run inside a stack's environment by ``run.py`` (which is stdlib only and cannot import
chainlat itself): ``python judge.py FILE...``. For each file, every run that is not
nested in another, with its counts, tokens and critical-path split; or the one-line
error that reading the file raised.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from chainlat.traces import read_runs


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
            }
        )
    return {"runs": out}


def main(argv: list[str]) -> int:
    """Print ``{file: runs_of(file)}``."""
    print(json.dumps({path: runs_of(path) for path in argv}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
