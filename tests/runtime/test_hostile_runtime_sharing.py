"""One step object shared by concurrent tasks and threads, nested in itself and used as a
decorator, keeps each run apart and ends the right spans (times on the injected clock)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import chainlat
from chainlat.testing import Capture

pytestmark = pytest.mark.usefixtures("clean_runtime_environment")


# -- 8. one step object shared by concurrent tasks and threads ---------------------------------

support = chainlat.workflow("support")
answer = chainlat.inference("m")


def _bind(cap: Capture) -> tuple[chainlat.Workflow, chainlat.Inference]:
    # Module-level objects, as in an application, pointed at this test's provider.
    support._provider = cap.provider
    answer._provider = cap.provider
    return support, answer


@pytest.mark.anyio
async def test_a_shared_step_in_concurrent_tasks_keeps_each_run_apart(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    workflow, inference = _bind(cap)
    clock = cap.clock
    a_in, b_in, a_out = asyncio.Event(), asyncio.Event(), asyncio.Event()
    runs: dict[str, chainlat.WorkflowHandle] = {}

    async def first() -> None:
        async with workflow as run:
            runs["a"] = run
            async with inference:
                a_in.set()
                await b_in.wait()
                clock.advance(50)
        a_out.set()

    async def second() -> None:
        await a_in.wait()
        clock.advance(10)
        async with workflow as run:
            runs["b"] = run
            async with inference:
                b_in.set()
                await a_out.wait()
                clock.advance(264)
            clock.advance(40)

    await asyncio.wait_for(asyncio.gather(first(), second()), timeout=10)
    a, b = runs["a"].rollup, runs["b"].rollup
    assert a is not None and b is not None
    assert (a.total_ms, a.inference_ms) == (60.0, 60.0)
    assert (b.total_ms, b.inference_ms) == (354.0, 314.0)
    assert "Failed to detach context" not in caplog.text
    assert chainlat.current_step() is None


def test_a_shared_step_in_threads_keeps_each_run_apart(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    workflow, inference = _bind(cap)
    clock = cap.clock
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    runs: dict[str, chainlat.WorkflowHandle] = {}

    def first() -> None:
        with workflow as run:
            runs["a"] = run
            with inference:
                a_in.set()
                assert b_in.wait(10)
                clock.advance(50)
        a_out.set()

    def second() -> None:
        assert a_in.wait(10)
        clock.advance(10)
        with workflow as run:
            runs["b"] = run
            with inference:
                b_in.set()
                assert a_out.wait(10)
                clock.advance(264)
            clock.advance(40)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    a, b = runs["a"].rollup, runs["b"].rollup
    assert a is not None and b is not None
    assert (a.total_ms, a.inference_ms) == (60.0, 60.0)
    assert (b.total_ms, b.inference_ms) == (354.0, 314.0)
    assert "Failed to detach context" not in caplog.text


def test_a_shared_step_nested_in_itself_and_as_decorator_ends_the_right_spans(
    cap: Capture,
) -> None:
    step = chainlat.tool("again", tracer_provider=cap.provider)

    @step
    def decorated() -> None:
        cap.clock.advance(1)

    with step as outer:
        cap.clock.advance(2)
        with step as inner:
            decorated()
            cap.clock.advance(3)
        cap.clock.advance(4)
    assert (inner.duration_ms, outer.duration_ms) == (4.0, 10.0)
    step.__exit__(None, None, None)  # never entered here: logged, nothing raised
    assert len(cap.spans()) == 3
