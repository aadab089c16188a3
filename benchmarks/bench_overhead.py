"""Benchmark 1: what a chainlat step costs against a bare SDK span through the same pipeline.

A pyperf script (``python benchmarks/bench_overhead.py -o out.json``); ``run.py``
drives it. The benchmarks are registered in rounds, each round measuring every
variant once, so that a change in the machine's load during the run shows up
as spread between rounds instead of as a bias between variants.

Variants, each through a TracerProvider with a BatchSpanProcessor over a
dropping exporter:

* ``step-otel``: a bare span, provider without chainlat's processor (plain OpenTelemetry).
* ``step-bare``: a bare span, provider with chainlat's processor (the baseline).
* ``step-chainlat``: ``with chainlat.inference("gpt-4o")`` on that provider.
* ``workflow-bare``: a root span and ten children (11 bare spans).
* ``workflow-chainlat``: ``chainlat.workflow`` with ten steps, rollup included.

Timings are CPU time of the process (``time.process_time``: every thread, so the
batch processor's export work counts), not wall time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyperf
from opentelemetry.sdk.trace import TracerProvider

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pipeline

_providers: dict[bool, TracerProvider] = {}


def _provider(with_chainlat: bool) -> TracerProvider:
    # Built on first use, so that a pyperf worker starts only the pipeline it measures.
    if with_chainlat not in _providers:
        _providers[with_chainlat] = _pipeline.provider(with_chainlat=with_chainlat)
    return _providers[with_chainlat]


def _time(body: Callable[[], object], loops: int) -> float:
    # CPU time of the whole process, the batch processor's thread included: on a shared
    # machine, wall time would mostly measure the wait for a core.
    start = time.process_time()
    for _ in range(loops):
        body()
    return time.process_time() - start


def step_otel(loops: int) -> float:
    tracer = _provider(False).get_tracer("bench")
    return _time(lambda: _pipeline.bare_step(tracer), loops)


def step_bare(loops: int) -> float:
    tracer = _provider(True).get_tracer("bench")
    return _time(lambda: _pipeline.bare_step(tracer), loops)


def step_chainlat(loops: int) -> float:
    p = _provider(True)
    return _time(lambda: _pipeline.chainlat_step(p), loops)


def workflow_bare(loops: int) -> float:
    tracer = _provider(True).get_tracer("bench")
    return _time(lambda: _pipeline.bare_workflow(tracer), loops)


def workflow_chainlat(loops: int) -> float:
    p = _provider(True)
    return _time(lambda: _pipeline.chainlat_workflow(p), loops)


VARIANTS: dict[str, Callable[[int], float]] = {
    "step-otel": step_otel,
    "step-bare": step_bare,
    "step-chainlat": step_chainlat,
    "workflow-bare": workflow_bare,
    "workflow-chainlat": workflow_chainlat,
}


def _forward(cmd: list[str], args: argparse.Namespace) -> None:
    cmd.extend(("--rounds", str(args.rounds)))


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_forward)
    runner.argparser.add_argument("--rounds", type=int, default=5)
    args = runner.parse_args()
    runner.metadata["description"] = "chainlat step overhead vs bare SDK spans"
    for round_number in range(1, args.rounds + 1):
        for name, func in VARIANTS.items():
            runner.bench_time_func(f"{name}#{round_number}", func)


if __name__ == "__main__":
    main()
