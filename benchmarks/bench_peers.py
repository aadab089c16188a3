"""Benchmark 5: chainlat and its peers, on one step and on one agent workload.

``python benchmarks/bench_peers.py -o out/peers.json`` runs ``benchmarks/peers/step.py``
once per peer, each in its own process and, where the peer's dependencies differ from
chainlat's, in its own environment:

* ``chainlat`` and ``util-genai`` (``opentelemetry-util-genai``, a dev dependency): this
  environment;
* ``traceloop`` (OpenLLMetry): the interop matrix's pins for it
  (``tests/interop/requirements/traceloop.txt``);
* ``logfire``: ``benchmarks/peers/logfire.txt``;

each of the last two in a venv under ``~/.cache/chainlat/bench-peers/<peer>-<hash of its
requirements>``, built once and reused while it exists.

Each ratio is taken inside one process, in interleaved rounds, so that the peers'
different environments and the machine's load between them do not enter it.

``python benchmarks/bench_peers.py --agent -o out/peers-agent.json`` measures the agent
workload instead (``benchmarks/peers/agent_run.py``: the real ``openai`` SDK against
``chainlat sim`` at zero latency, three calls, one streamed and read to the end, and a
tool): its CPU per run with each peer (``chainlat``, ``openai-v2``:
``opentelemetry-instrumentation-openai-v2``, ``traceloop``, ``logfire``), each in its
environment (``openai-v2`` from the interop matrix's pins), and with nothing instrumented
(``plain``) in that same environment, every measurement in a fresh process
(``--only chainlat,chainlat-calls`` splits chainlat's cost between its model calls and
the run around them); the
processes of a round are interleaved (their order rotates from round to round), and
the rounds are repeated (``--repeats``). What a peer adds is its run less the plain run
of its environment in the same round.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEERS = ("chainlat", "util-genai", "traceloop", "logfire")
STEP = HERE / "peers" / "step.py"
SETUP_TIMEOUT_S = 1800


def cache_root() -> Path:
    """Where the peers' environments live (``CHAINLAT_BENCH_CACHE`` moves them)."""
    default = Path.home() / ".cache" / "chainlat" / "bench-peers"
    return Path(os.environ.get("CHAINLAT_BENCH_CACHE", default))


REQUIREMENTS = {
    "traceloop": ROOT / "tests" / "interop" / "requirements" / "traceloop.txt",
    "logfire": HERE / "peers" / "logfire.txt",
    "openai-v2": ROOT / "tests" / "interop" / "requirements" / "openai-v2.txt",
}
AGENT = HERE / "peers" / "agent_run.py"
AGENT_PEERS = ("chainlat", "openai-v2", "traceloop", "logfire")
AGENT_MODEL = "bench-zero"
AGENT_OUTPUT_TOKENS = 16
"""Every answer's length: the streamed call's content chunks."""


def environment(name: str) -> Path:
    """A venv with the peer's requirements installed, built once and reused while it exists."""
    requirements = REQUIREMENTS[name]
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:10]
    venv = cache_root() / f"{name}-{digest}"
    stamp = venv / ".chainlat-bench"
    if stamp.exists():
        return venv
    if venv.exists():
        shutil.rmtree(venv)  # a set-up that did not finish
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
        check=True,
        timeout=SETUP_TIMEOUT_S,
        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1"),
    )
    stamp.write_text(requirements.read_text())
    return venv


def python_for(peer: str) -> str:
    """The interpreter the peer runs in."""
    if peer in ("chainlat", "chainlat-calls", "util-genai"):
        return sys.executable
    return str(environment(peer) / "bin" / "python")


def measure(peer: str, rounds: int, loops: int) -> dict[str, Any]:
    done = subprocess.run(
        [python_for(peer), str(STEP), peer, "--rounds", str(rounds), "--loops", str(loops)],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, OTEL_SDK_DISABLED="false", TRACELOOP_TELEMETRY="false"),
    )
    if done.returncode != 0:
        raise RuntimeError(f"{peer}: exited {done.returncode}: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def agent_process(peer: str, variant: str, url: str, runs: int) -> dict[str, Any]:
    """One fresh process of the agent workload: ``variant`` (the peer or ``plain``) in the
    peer's environment."""
    done = subprocess.run(
        [python_for(peer), str(AGENT), variant, "--url", url, "--runs", str(runs)],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, OTEL_SDK_DISABLED="false", TRACELOOP_TELEMETRY="false"),
    )
    if done.returncode != 0:
        raise RuntimeError(f"{peer}/{variant}: exited {done.returncode}: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def agent(peers: list[str], rounds: int, repeats: int, runs: int) -> dict[str, Any]:
    """Every peer and its environment's plain run, in fresh processes, interleaved rounds."""
    from chainlat.sim import ModelProfile, SimServer

    zero = ModelProfile(
        AGENT_MODEL,
        ttft_base_ms=0,
        ttft_per_input_token_ms=0,
        decode_ms_per_token=0,
        output_tokens=AGENT_OUTPUT_TOKENS,
        slots=64,
        jitter=0,
    )
    cells = [(peer, variant) for peer in peers for variant in (peer, "plain")]
    measured: list[dict[str, Any]] = []
    with SimServer([zero]) as sim:
        for repeat in range(repeats):
            for number in range(rounds):
                shift = number % len(cells)
                for peer, variant in cells[shift:] + cells[:shift]:
                    found = agent_process(peer, variant, sim.base_url, runs)
                    found.update(environment=peer, repeat=repeat, round=number)
                    measured.append(found)
                    print(
                        f"  repeat {repeat + 1} round {number + 1}: {peer:<9} {variant:<9} "
                        f"{found['cpu_ms_per_run']:.2f} ms",
                        flush=True,
                    )
    summary = []
    for peer in peers:
        for repeat in range(repeats):
            own = {
                (m["round"], m["peer"]): m
                for m in measured
                if m["environment"] == peer and m["repeat"] == repeat
            }
            added = [
                own[(r, peer)]["cpu_ms_per_run"] - own[(r, "plain")]["cpu_ms_per_run"]
                for r in range(rounds)
            ]
            ratios = [
                own[(r, peer)]["cpu_ms_per_run"] / own[(r, "plain")]["cpu_ms_per_run"]
                for r in range(rounds)
            ]
            summary.append(
                {
                    "peer": peer,
                    "repeat": repeat,
                    "version": own[(0, peer)]["version"],
                    "openai": own[(0, peer)]["openai"],
                    "opentelemetry_sdk": own[(0, peer)]["opentelemetry_sdk"],
                    "spans_per_run": own[(0, peer)]["spans_per_run"],
                    "peer_ms": statistics.median(
                        own[(r, peer)]["cpu_ms_per_run"] for r in range(rounds)
                    ),
                    "plain_ms": statistics.median(
                        own[(r, "plain")]["cpu_ms_per_run"] for r in range(rounds)
                    ),
                    "added_ms": statistics.median(added),
                    "added_range": [min(added), max(added)],
                    "ratio": statistics.median(ratios),
                    "ratio_range": [min(ratios), max(ratios)],
                }
            )
    return {"rounds": rounds, "repeats": repeats, "runs": runs, "summary": summary,
            "processes": measured}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--loops", type=int, default=2000)
    parser.add_argument("--only", default=None, help="comma-separated peers")
    parser.add_argument("--agent", action="store_true", help="the agent workload")
    parser.add_argument("--repeats", type=int, default=2, help="agent: repeats of the rounds")
    parser.add_argument("--runs", type=int, default=200, help="agent: runs per process")
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.agent:
        chosen = args.only.split(",") if args.only else list(AGENT_PEERS)
        data = agent([p.strip() for p in chosen if p.strip()], args.rounds, args.repeats, args.runs)
        args.output.write_text(json.dumps(data, indent=1))
        for r in data["summary"]:
            low, high = r["added_range"]
            print(
                f"{r['peer']:<10} {r['version']:<8} repeat {r['repeat'] + 1}: "
                f"{r['peer_ms']:.2f} ms / plain {r['plain_ms']:.2f} ms: "
                f"+{r['added_ms']:.2f} ms ({low:.2f} to {high:.2f}), {r['ratio']:.2f}x"
            )
        return 0
    args.only = args.only or ",".join(PEERS)
    results = [
        measure(peer, args.rounds, args.loops) for peer in args.only.split(",") if peer.strip()
    ]
    args.output.write_text(json.dumps(results, indent=1))
    for r in results:
        print(
            f"{r['peer']:<11} {r['version']:<8} {r['peer_us']:7.1f} µs  "
            f"/ bare {r['ratio']:.2f}  / plain {r['ratio_plain']:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
