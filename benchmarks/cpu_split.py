"""Where the ten-step workflow's CPU time goes, by thread and by mode, against 11 bare spans.

``bench_overhead.py`` times the process's CPU time (``time.process_time``: every thread,
user and system), and ``callgrind_workflow.py`` counts the user-space instructions of every
thread. When the two ratios differ, this says where: each variant runs in a fresh process
(rounds interleaved, the variants' order alternating), and reports per workflow the
process's user and system time (``os.times``) and the application thread's own CPU time
(``time.thread_time``); the rest of the user time is the other threads', the batch
processor's export among them::

    python benchmarks/cpu_split.py --rounds 10 --workflows 3000

With ``--cpu N``, every process is pinned to CPU N (one core: the threads take turns on it).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

VARIANTS = ("workflow-bare", "workflow-chainlat")


def _child(variant: str, workflows: int) -> None:
    import _pipeline

    chainlat = variant == "workflow-chainlat"
    # Both through chainlat's pipeline, as bench_overhead.py's and callgrind_workflow.py's
    # baselines are: the bare spans pass its processor too.
    provider = _pipeline.provider(with_chainlat=True)
    tracer = provider.get_tracer("bench")

    def body() -> None:
        if chainlat:
            _pipeline.chainlat_workflow(provider)
        else:
            _pipeline.bare_workflow(tracer)

    for _ in range(200):  # warm-up: caches, specialisation, the batch thread started
        body()
    provider.force_flush()
    before, thread_before = os.times(), time.thread_time()
    for _ in range(workflows):
        body()
    provider.force_flush()  # the export of every span of the loop, counted
    after, thread_after = os.times(), time.thread_time()
    per = 1e6 / workflows
    print(
        json.dumps(
            {
                "user_us": (after.user - before.user) * per,
                "system_us": (after.system - before.system) * per,
                "app_thread_us": (thread_after - thread_before) * per,
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--workflows", type=int, default=3000)
    parser.add_argument("--cpu", type=int, help="pin every process to this CPU")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.child, args.workflows)
        return 0
    found: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    for number in range(args.rounds):
        for variant in VARIANTS if number % 2 == 0 else VARIANTS[::-1]:
            command = [sys.executable, __file__, "--child", variant]
            command += ["--workflows", str(args.workflows)]
            if args.cpu is not None:
                command = ["taskset", "-c", str(args.cpu), *command]
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            found[variant].append(json.loads(output))
    print(f"per workflow, medians of {args.rounds} rounds of {args.workflows:,} workflows")
    print("| | user | system | application thread | other threads (user + system − app) |")
    print("|---|---|---|---|---|")
    medians: dict[str, dict[str, float]] = {}
    for variant, rounds in found.items():
        m = {key: statistics.median(r[key] for r in rounds) for key in rounds[0]}
        m["other_us"] = statistics.median(
            r["user_us"] + r["system_us"] - r["app_thread_us"] for r in rounds
        )
        medians[variant] = m
        print(
            f"| {variant} | {m['user_us']:.1f} µs | {m['system_us']:.1f} µs | "
            f"{m['app_thread_us']:.1f} µs | {m['other_us']:.1f} µs |"
        )
    bare, chain = medians["workflow-bare"], medians["workflow-chainlat"]
    ratios = [
        (c["user_us"] + c["system_us"]) / (b["user_us"] + b["system_us"])
        for b, c in zip(found["workflow-bare"], found["workflow-chainlat"], strict=True)
    ]
    print(
        f"- process CPU time, chainlat / bare: {statistics.median(ratios):.2f} "
        f"(rounds {min(ratios):.2f}–{max(ratios):.2f}); user only "
        f"{chain['user_us'] / bare['user_us']:.2f}; application thread "
        f"{chain['app_thread_us'] / bare['app_thread_us']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
