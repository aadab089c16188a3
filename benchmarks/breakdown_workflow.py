"""Where a ten-step workflow's time goes beyond 11 bare spans: one part switched off at a time.

``python benchmarks/breakdown_workflow.py`` runs, in one process and in interleaved
rounds, the benchmark's ten-step workflow in full and with one of chainlat's parts
replaced by a no-op, and the 11 bare spans; the difference to the full run is what
that part costs. A diagnostic for BENCHMARKS.md's notes, not a benchmark of its own:
switching a part off changes nothing else, but the parts are not independent (no
rollup attributes also means smaller spans to end).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pipeline

from chainlat._core import rollup as _rollup
from chainlat._runtime import processor as _processor
from chainlat._runtime import spans as _spans


@contextmanager
def replaced(owner: Any, name: str, value: object) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--loops", type=int, default=200)
    args = parser.parse_args(argv)

    provider = _pipeline.provider()
    tracer = provider.get_tracer("bench")
    fixed = _rollup.compute_rollup(_rollup.SpanRecord(1, None, "w", 0, 1, "workflow"), [])

    def full() -> None:
        _pipeline.chainlat_workflow(provider)

    variants: dict[str, tuple[Callable[[], None], Callable[[], AbstractContextManager[None]]]] = {
        "chainlat, full": (full, nullcontext),
        "without computing the rollup": (
            full,
            lambda: replaced(_spans, "compute_rollup", lambda root, records: fixed),
        ),
        "without the 17 rollup attributes": (
            full,
            lambda: replaced(_rollup.Rollup, "to_attributes", lambda self: {}),
        ),
        "without the step tags (index, workflow name)": (
            full,
            lambda: replaced(_processor.ChainlatSpanProcessor, "_tag_step", lambda *a: None),
        ),
        "11 bare spans": (lambda: _pipeline.bare_workflow(tracer), nullcontext),
    }
    for _ in range(args.loops):
        full()
        _pipeline.bare_workflow(tracer)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (body, setup) in variants.items():
            with setup():
                start = time.process_time()
                for _ in range(args.loops):
                    body()
                samples[name].append((time.process_time() - start) / args.loops * 1e6)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    whole = medians["chainlat, full"]
    bare = medians["11 bare spans"]
    print(f"{'variant':48s} {'µs/workflow':>12s} {'part':>8s}")
    for name, value in medians.items():
        part = "" if name in ("chainlat, full", "11 bare spans") else f"{whole - value:8.1f}"
        print(f"{name:48s} {value:12.1f} {part:>8s}")
    print(f"{'chainlat over bare':48s} {whole - bare:12.1f}   ratio {whole / bare:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
