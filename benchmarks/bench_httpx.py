"""Benchmark 2: what ``chainlat.instrument_httpx`` adds to a model call, against it plain.

A pyperf script; ``run.py`` drives it. The main process starts ``chainlat.sim`` in a
child process (``--serve``) on 127.0.0.1, with one model whose every latency is zero,
and passes its URL to the pyperf workers. Variants, each through an ``httpx.Client``:

* ``call-plain`` / ``call-chainlat``: one non-streaming chat completion;
* ``stream-plain`` / ``stream-chainlat``: one streamed chat completion of ``CHUNKS``
  content chunks, read line by line to the end, as an SDK reads it.

The instrumented client sends its spans through what ``chainlat.configure()`` builds,
over an exporter that drops every batch. Timings are CPU time of the client process
(every thread, so the batch processor's export counts; the server's CPU is in its own
process): on a shared machine, wall time would mostly measure waiting for a core.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pyperf

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _pipeline

from chainlat.httpx import instrument_httpx

MODEL = "bench-zero"
CHUNKS = 64
"""Output tokens of every answer: the streamed content chunks."""
MESSAGES = [{"role": "user", "content": "How long does my order take to arrive?"}]


def serve() -> None:
    """Run the simulator until stdin closes; print its base URL first."""
    from chainlat.sim import ModelProfile, SimServer

    zero = ModelProfile(
        MODEL,
        ttft_base_ms=0,
        ttft_per_input_token_ms=0,
        decode_ms_per_token=0,
        output_tokens=CHUNKS,
        slots=64,
        jitter=0,
    )
    with SimServer([zero]) as sim:
        print(sim.base_url, flush=True)
        sys.stdin.read()


_clients: dict[bool, httpx.Client] = {}


def _client(url: str, traced: bool) -> httpx.Client:
    if traced not in _clients:
        client = httpx.Client(base_url=url, headers={"Authorization": "Bearer sk-bench"})
        if traced:
            provider = _pipeline.provider()
            instrument_httpx(client, tracer_provider=provider)
        _clients[traced] = client
    return _clients[traced]


def _call(client: httpx.Client) -> None:
    response = client.post(
        "/v1/chat/completions", json={"model": MODEL, "messages": MESSAGES, "stream": False}
    )
    response.raise_for_status()
    response.json()


def _stream(client: httpx.Client) -> None:
    body = {"model": MODEL, "messages": MESSAGES, "stream": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        for _ in response.iter_lines():
            pass


def _time(body: Callable[[], object], loops: int) -> float:
    start = time.process_time()
    for _ in range(loops):
        body()
    return time.process_time() - start


def _variant(kind: Callable[[httpx.Client], None], traced: bool, url: str) -> Any:
    def timed(loops: int) -> float:
        client = _client(url, traced)
        return _time(lambda: kind(client), loops)

    return timed


def _forward(cmd: list[str], args: argparse.Namespace) -> None:
    cmd.extend(("--rounds", str(args.rounds), "--sim-url", args.sim_url))


def main() -> None:
    if "--serve" in sys.argv:
        serve()
        return
    runner = pyperf.Runner(add_cmdline_args=_forward)
    runner.argparser.add_argument("--rounds", type=int, default=5)
    runner.argparser.add_argument("--sim-url", default="")
    args = runner.parse_args()
    server: subprocess.Popen[str] | None = None
    if not args.sim_url:
        if args.worker:
            raise SystemExit("bench_httpx: a worker needs --sim-url")
        server = subprocess.Popen(
            [sys.executable, __file__, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None
        args.sim_url = server.stdout.readline().strip()
        meta = {"chunks": CHUNKS, "model": MODEL, "sim_url": args.sim_url}
        (Path(__file__).resolve().parent / "out" / "httpx-meta.json").write_text(json.dumps(meta))
    try:
        for number in range(1, args.rounds + 1):
            for name, kind, traced in (
                ("call-plain", _call, False),
                ("call-chainlat", _call, True),
                ("stream-plain", _stream, False),
                ("stream-chainlat", _stream, True),
            ):
                runner.bench_time_func(f"{name}#{number}", _variant(kind, traced, args.sim_url))
    finally:
        if server is not None:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(30)


if __name__ == "__main__":
    main()
