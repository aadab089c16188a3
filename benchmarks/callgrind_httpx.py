"""What ``chainlat.instrument_httpx`` adds to a model call, in instructions (callgrind).

Machine load cannot move an instruction count. ``bench_httpx.py``'s four variants
(non-streaming and streamed chat completions, plain and instrumented client) each run
in a client process under ``valgrind --tool=callgrind`` (every thread counted: the batch
processor's export too) against ``chainlat.sim`` on 127.0.0.1 in a process of its own,
not counted; the marginal instructions per call are the difference between two call
counts, which takes out starting Python::

    python benchmarks/callgrind_httpx.py --small 40 --large 200 -o out/callgrind-httpx.json

``--functions N`` says where a non-streamed call's added instructions go instead: the
``N`` functions (Python's C functions and the extension modules' included, each its own
instructions) whose marginal count per call grows most from the plain client to the
instrumented one::

    python benchmarks/callgrind_httpx.py --small 50 --large 250 --functions 15

The added instructions are also given as time at the rate the plain client runs here
(its CPU time per call outside valgrind, divided by its instructions per call): an
estimate beside the count, not a measurement of its own.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_httpx
from _callgrind import function_instructions, instructions

VARIANTS = {
    "call-plain": (bench_httpx._call, False),
    "call-chainlat": (bench_httpx._call, True),
    "stream-plain": (bench_httpx._stream, False),
    "stream-chainlat": (bench_httpx._stream, True),
}
WARM_UP = 5


def client(variant: str, calls: int, url: str) -> float:
    """Run ``calls`` calls of a variant after a warm-up; their CPU time per call."""
    kind, traced = VARIANTS[variant]
    http = bench_httpx._client(url, traced)
    for _ in range(WARM_UP):
        kind(http)
    start = time.process_time()
    for _ in range(calls):
        kind(http)
    return (time.process_time() - start) / max(calls, 1)


def client_instructions(variant: str, calls: int, url: str) -> int:
    return instructions(
        [sys.executable, __file__, "--client", variant, "--calls", str(calls), "--sim-url", url]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--small", type=int, default=40)
    parser.add_argument("--large", type=int, default=200)
    parser.add_argument("--timed-calls", type=int, default=300)
    parser.add_argument("--client", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--sim-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("-o", "--output", type=Path)
    parser.add_argument("--functions", type=int, default=0, help="where a call's cost goes")
    args = parser.parse_args(argv)
    if args.client:
        client(args.client, args.calls, args.sim_url)
        return 0
    if args.output is None and not args.functions:
        parser.error("-o is required")
    server = subprocess.Popen(
        [sys.executable, bench_httpx.__file__, "--serve"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        if args.functions:
            _print_functions(args.functions, args.small, args.large, url)
            return 0
        per_call = {}
        for variant in VARIANTS:
            small = client_instructions(variant, args.small, url)
            large = client_instructions(variant, args.large, url)
            per_call[variant] = (large - small) / (args.large - args.small)
        cpu_plain_s = client("call-plain", args.timed_calls, url)
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(30)
    chunks = bench_httpx.CHUNKS
    added_call = per_call["call-chainlat"] - per_call["call-plain"]
    added_stream = per_call["stream-chainlat"] - per_call["stream-plain"]
    added_chunk = (added_stream - added_call) / chunks
    us_per_instruction = cpu_plain_s * 1e6 / per_call["call-plain"]
    result = {
        "calls": [args.small, args.large],
        "chunks": chunks,
        "per_call": per_call,
        "added_per_call": added_call,
        "added_per_chunk": added_chunk,
        "plain_cpu_us_per_call": cpu_plain_s * 1e6,
        "us_per_instruction": us_per_instruction,
        "added_per_call_us": added_call * us_per_instruction,
        "added_per_chunk_us": added_chunk * us_per_instruction,
    }
    args.output.write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "per_call"}))
    return 0


def _print_functions(top: int, small: int, large: int, url: str) -> None:
    """The functions whose instructions per call grow most from the plain client to the
    instrumented one (marginal counts between ``small`` and ``large`` calls)."""
    per_call: dict[str, dict[str, float]] = {}
    for variant in ("call-plain", "call-chainlat"):
        argv = [sys.executable, __file__, "--client", variant, "--sim-url", url, "--calls"]
        few = function_instructions([*argv, str(small)])
        many = function_instructions([*argv, str(large)])
        per_call[variant] = {
            name: (many.get(name, 0) - few.get(name, 0)) / (large - small)
            for name in few.keys() | many.keys()
        }
    plain, ours = per_call["call-plain"], per_call["call-chainlat"]
    added = sorted(
        ((ours.get(n, 0.0) - plain.get(n, 0.0), n) for n in plain.keys() | ours.keys()),
        reverse=True,
    )
    print(f"{'added':>10} {'plain':>10} {'chainlat':>10}  function (instructions a call)")
    for extra, name in added[: top + 1]:  # PROGRAM TOTALS first
        short = name.split(" [", 1)[0].rsplit("/", 1)[-1]  # file:function, no object file
        counts = f"{extra:>10,.0f} {plain.get(name, 0.0):>10,.0f} {ours.get(name, 0.0):>10,.0f}"
        print(f"{counts}  {short}")


if __name__ == "__main__":
    raise SystemExit(main())
