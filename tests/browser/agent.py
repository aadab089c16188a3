"""Trace files for the browser tests: an agent whose model calls run in parallel, traced for real.

Each run of ``research-agent``: a data stage, then two model calls at once under
``asyncio.gather`` (one answered whole, one streamed), then a tool call. The models
are served by :mod:`chainlat.sim` on 127.0.0.1 and called through an httpx client that
``chainlat.instrument_httpx`` traces, so every model call carries the measured latency
breakdown (queue, connect, send, server, network, first token, generation).
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import chainlat
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.sim import ModelProfile, SimServer
from chainlat.testing import capture

WORKFLOW = "research-agent"
PROFILES = (
    ModelProfile("sim-plan", ttft_base_ms=30, decode_ms_per_token=2, output_tokens=12, slots=8),
    ModelProfile("sim-write", ttft_base_ms=15, decode_ms_per_token=3, output_tokens=16, slots=8),
)


async def _run(client: httpx.AsyncClient, variant: str, i: int, provider: TracerProvider) -> None:
    async with chainlat.workflow(WORKFLOW, variant=variant, tracer_provider=provider):
        async with chainlat.data_stage("search-notes", tracer_provider=provider):
            await asyncio.sleep(0.004 + 0.001 * (i % 3))

        async def plan() -> None:
            response = await client.post(
                "/v1/chat/completions",
                json={"model": "sim-plan", "messages": [{"role": "user", "content": "plan"}]},
            )
            response.raise_for_status()

        async def write() -> None:
            body = {
                "model": "sim-write",
                "messages": [{"role": "user", "content": "draft"}],
                "stream": True,
                "stream_options": {"include_usage": True},
                "max_tokens": 8 + 4 * (i % 3),
            }
            async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                async for _ in response.aiter_bytes():
                    pass

        await asyncio.gather(plan(), write())
        async with chainlat.tool("cite-sources", tracer_provider=provider):
            await asyncio.sleep(0.003)


def write_agent_traces(path: Path, *, runs: int = 12) -> Path:
    """``runs`` runs in two variants (``fast-plan``, ``slow-plan``), as OTLP JSON lines."""
    with capture() as cap, SimServer(profiles=PROFILES, network_delay_ms=3, seed=5) as sim:
        cap.provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))

        async def main() -> None:
            async with chainlat.instrument_httpx(
                httpx.AsyncClient(base_url=sim.base_url, timeout=30),
                tracer_provider=cap.provider,
            ) as client:
                # Outside any workflow: the first request of a process pays for setup.
                await client.post(
                    "/v1/chat/completions",
                    json={"model": "sim-write", "messages": [{"role": "user", "content": "hi"}]},
                )
                for i in range(runs):
                    await _run(client, "fast-plan" if i % 2 else "slow-plan", i, cap.provider)

        # In a thread of its own: Playwright's sync API keeps an event loop in this one.
        failures: list[BaseException] = []

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:
                failures.append(exc)

        worker = threading.Thread(target=run)
        worker.start()
        worker.join(timeout=120)
        if worker.is_alive() or failures:
            raise RuntimeError("the agent's runs did not finish") from (
                failures[0] if failures else None
            )
        cap.provider.force_flush()
    return path
