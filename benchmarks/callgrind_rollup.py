"""Instructions of a workflow's rollup as the export computes it, by phase, counted by callgrind.

The rollup of a ten-step workflow runs on the export thread (``deferred.py``): reading its
spans into records, then computing the rollup and its attributes. Each phase runs under
``valgrind --tool=callgrind --collect-atstart=no --toggle-collect=functools_reduce`` in a
process of its own: only the work inside one ``functools.reduce`` over the workflows is
counted, so building them and starting Python are not. Per workflow::

    python benchmarks/callgrind_rollup.py                  # the benchmark's flat workflow
    python benchmarks/callgrind_rollup.py --shape nested   # tools around calls: the general
                                                           # phases, not the flat pass

``records``: the spans read into records; ``compute``: the rollup from those records;
``all``: both and the attributes, as the export does. Compare trees with
``PYTHONPATH=<tree>/src`` (the shapes are built here, not from the tree).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from pathlib import Path
from typing import Any

import chainlat

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pipeline
from _callgrind import thread_instructions

WARM_UP = 20
PHASES = ("records", "compute", "all")


def nested_workflow(p: Any) -> chainlat.WorkflowHandle:
    """Ten steps, three model calls inside tools: not flat, so the general phases run."""
    with chainlat.workflow("bench", tracer_provider=p) as run:
        with chainlat.data_stage("retrieve", tracer_provider=p):
            pass
        for _ in range(2):
            with chainlat.tool("lookup", tracer_provider=p):
                with chainlat.inference("gpt-4o", tracer_provider=p):
                    pass
                with chainlat.data_stage("retrieve", tracer_provider=p):
                    pass
        with chainlat.tool("lookup", tracer_provider=p):
            with chainlat.inference("gpt-4o", tracer_provider=p):
                pass
        with chainlat.inference("gpt-4o", tracer_provider=p):
            pass
    return run


def run_phase(phase: str, shape: str, count: int) -> None:
    from chainlat._core.rollup import compute_rollup

    # No export until the process ends: every rollup is still left to compute.
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "86400000"
    size = str(11 * (count + WARM_UP) + 100)
    os.environ["OTEL_BSP_MAX_QUEUE_SIZE"] = os.environ["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = size
    provider = _pipeline.provider()
    make = nested_workflow if shape == "nested" else _pipeline.chainlat_workflow
    runs = [make(provider) for _ in range(count + WARM_UP)]
    found = [d for run in runs if (d := run._deferred) is not None and d._rollup is None]
    assert len(found) == len(runs), "a rollup was not left to the export"
    for d in found[:WARM_UP]:
        d.rollup().to_attributes()
    deferred = found[WARM_UP:]
    if phase == "records":
        functools.reduce(lambda _, d: d._make_records(d._records), deferred, None)
    elif phase == "compute":
        items = [(d, d._make_records(d._records)) for d in deferred]
        functools.reduce(
            lambda _, item: compute_rollup(
                item[0].root, item[1], first_output_ns=item[0]._first_output_ns
            ).to_attributes(),
            items,
            None,
        )
    else:
        functools.reduce(lambda _, d: d.rollup().to_attributes(), deferred, None)
    os._exit(0)  # no export at exit: it would compute nothing, but costs time under valgrind


def phase_instructions(phase: str, shape: str, count: int) -> float:
    """Instructions per workflow inside the phase's reduce (the main thread: nothing else
    runs while it does)."""
    counts = thread_instructions(
        [sys.executable, __file__, "--phase", phase, "--shape", shape, "--count", str(count)],
        options=("--collect-atstart=no", "--toggle-collect=functools_reduce"),
    )
    return counts[0] / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--shape", choices=("flat", "nested"), default="flat")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.phase:
        run_phase(args.phase, args.shape, args.count)
        return 0
    for phase in PHASES:
        per = phase_instructions(phase, args.shape, args.count)
        print(f"{args.shape} ten-step workflow, {phase}: {per:,.0f} instructions per workflow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
