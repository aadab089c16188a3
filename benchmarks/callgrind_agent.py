"""The peers' agent workload in instructions (callgrind): what each peer adds to a run.

Machine load cannot move an instruction count. ``benchmarks/peers/agent_run.py`` (a chat
completion, a tool, a streamed completion read to the end, a last completion, with the
real ``openai`` SDK against ``chainlat sim`` at zero latency in a process of its own, not
counted) runs under ``valgrind --tool=callgrind`` in each peer's own environment (as
``bench_peers.py --agent`` runs it, every thread counted: the batch processor's export
too), for two run counts after the same warm-up; the marginal instructions per run are
their difference over the runs between them, which takes out starting Python and the
set-up. Each peer is set against ``plain`` (the same workload, nothing instrumented) in
its own environment::

    python benchmarks/callgrind_agent.py --runs 30 --peers chainlat,chainlat-calls,openai-v2

``chainlat-calls`` is ``instrument_httpx()`` alone (no workflow, no tool step): with
``chainlat``, where chainlat's added instructions go, its model calls or the run around
them. Each count takes a minute or two under callgrind.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_peers
from _callgrind import instructions

AGENT = Path(__file__).resolve().parent / "peers" / "agent_run.py"
WARM_UP = 20


def per_run(python: str, peer: str, url: str, runs: int) -> float:
    """The marginal instructions of one run of ``peer`` (every thread), between ``runs``
    and twice as many runs after the same warm-up."""
    counts = [
        instructions(
            [python, str(AGENT), peer, "--url", url, "--runs", str(n), "--warm-up", str(WARM_UP)]
        )
        for n in (runs, 2 * runs)
    ]
    return (counts[1] - counts[0]) / runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--peers", default="chainlat,chainlat-calls,openai-v2")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args(argv)
    from chainlat.sim import ModelProfile, SimServer

    zero = ModelProfile(
        bench_peers.AGENT_MODEL,
        ttft_base_ms=0,
        ttft_per_input_token_ms=0,
        decode_ms_per_token=0,
        output_tokens=bench_peers.AGENT_OUTPUT_TOKENS,
        slots=64,
    )
    peers = [p for p in args.peers.split(",") if p]
    results: dict[str, dict[str, float]] = {}
    plains: dict[str, float] = {}
    with SimServer([zero]) as sim:
        for peer in peers:
            python = bench_peers.python_for(peer)  # chainlat's in this one, the others their own
            if python not in plains:
                plains[python] = per_run(python, "plain", sim.base_url, args.runs)
            found = per_run(python, peer, sim.base_url, args.runs)
            plain = plains[python]
            results[peer] = {"per_run": found, "plain": plain, "added": found - plain}
            print(
                f"{peer:15} {found:14,.0f} a run, plain {plain:14,.0f}, "
                f"added {found - plain:+13,.0f} ({found / plain:.3f}x)",
                flush=True,
            )
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"runs": args.runs, "peers": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
