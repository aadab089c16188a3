"""Benchmark 5: a step of chainlat and of its peers, each against a bare SDK span.

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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
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
}


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
    if peer in ("chainlat", "util-genai"):
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--loops", type=int, default=2000)
    parser.add_argument("--only", default=",".join(PEERS))
    parser.add_argument("-o", "--output", type=Path, required=True)
    args = parser.parse_args(argv)
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
