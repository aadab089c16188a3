"""chainlat.sim server lifecycle: stopping with streams open, the async context manager and
``serve()``, and a port already in use."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import openai
import pytest

from chainlat.sim import ModelProfile, SimServer, main
from support import free_port
from support.sim_checks import MESSAGES, PROFILE, ms_since


def test_stop_returns_promptly_with_streams_open() -> None:
    endless = ModelProfile("endless", ttft_base_ms=1, decode_ms_per_token=10, output_tokens=100_000)
    server = SimServer([endless]).start()
    streaming = [threading.Event() for _ in range(3)]
    failures: list[BaseException] = []

    def consume(started: threading.Event) -> None:
        with openai.OpenAI(base_url=server.base_url + "/v1", api_key="k", max_retries=0) as c:
            try:
                for _ in c.chat.completions.create(model="endless", messages=MESSAGES, stream=True):
                    started.set()
            except openai.APIConnectionError as exc:
                failures.append(exc)

    readers = [threading.Thread(target=consume, args=(event,)) for event in streaming]
    for reader in readers:
        reader.start()
    for event in streaming:
        assert event.wait(10)
    start = time.perf_counter()
    server.stop()
    stop_ms = ms_since(start)
    for reader in readers:
        reader.join(10)
    assert stop_ms < 2000, stop_ms
    assert len(failures) == 3  # each open stream was cut, none completed
    with pytest.raises(RuntimeError):
        _ = server.base_url


@pytest.mark.anyio
async def test_async_context_manager_and_serve() -> None:
    async with SimServer([PROFILE], port=0) as server, httpx.AsyncClient() as http:
        assert (await http.get(server.base_url + "/health")).status_code == 200
    port = free_port()
    task = asyncio.create_task(SimServer([PROFILE], port=port).serve())
    try:
        async with httpx.AsyncClient() as http:
            for _ in range(100):
                try:
                    response = await http.get(f"http://127.0.0.1:{port}/v1/models")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.02)
        assert response.json()["data"][0]["id"] == "sim-test"
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def test_port_in_use_raises_on_start() -> None:
    with SimServer([PROFILE]) as first:
        with pytest.raises(OSError, match="in use"):
            SimServer([PROFILE], port=first.port).start()
        assert main(["--port", str(first.port)]) == 2
