"""Load: 1,000 concurrent async workflows and 8 threads of workflows at the same time.

Every step must land in its own workflow (no cross-talk between rollups), nothing
may raise (chainlat's internal errors re-raise in this suite), and the processor
must hold no state once the workflows have ended.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

import chainlat
from chainlat._core import attributes as attr
from chainlat.testing import Capture

ASYNC_WORKFLOWS = 1000
THREADS = 8
WORKFLOWS_PER_THREAD = 40


def steps_for(run: int) -> int:
    return run % 4 + 1


async def async_workflow(
    p: TracerProvider, run: int, rng: random.Random
) -> chainlat.WorkflowHandle:
    @chainlat.tool("decorated", tracer_provider=p, run=run)
    async def decorated() -> None:
        await asyncio.sleep(rng.random() / 1000)

    async with chainlat.workflow("async", tracer_provider=p, run=run) as handle:
        for index in range(steps_for(run) - 1):
            step = chainlat.inference if index % 2 else chainlat.data_stage
            async with step("m" if index % 2 else "fetch", tracer_provider=p, run=run):
                await asyncio.sleep(rng.random() / 1000)
        await decorated()
    return handle


def thread_workflows(
    p: TracerProvider, worker: int, handles: list[chainlat.WorkflowHandle]
) -> None:
    rng = random.Random(worker)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for number in range(WORKFLOWS_PER_THREAD):
            run = 100_000 + worker * 1000 + number
            with chainlat.workflow("threaded", tracer_provider=p, run=run) as handle:

                def fetch(part: int, run: int = run) -> None:
                    with chainlat.data_stage(f"part-{part}", tracer_provider=p, run=run):
                        pass

                # a fan-out into a pool: bind_context carries the workflow into its threads
                list(pool.map(chainlat.bind_context(fetch), range(steps_for(run) - 1)))
                with chainlat.tool("lookup", tracer_provider=p, run=run):
                    rng.random()
            handles.append(handle)


def test_concurrent_workflows_never_mix(live: Capture) -> None:
    p = live.provider
    thread_handles: list[chainlat.WorkflowHandle] = []
    threads = [
        threading.Thread(target=thread_workflows, args=(p, worker, thread_handles))
        for worker in range(THREADS)
    ]

    async def main() -> list[chainlat.WorkflowHandle]:
        rng = random.Random(0)
        return await asyncio.gather(
            *(async_workflow(p, run, rng) for run in range(ASYNC_WORKFLOWS))
        )

    for thread in threads:
        thread.start()
    async_handles = asyncio.run(main())
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive()

    handles = [*async_handles, *thread_handles]
    assert len(handles) == ASYNC_WORKFLOWS + THREADS * WORKFLOWS_PER_THREAD
    spans = live.spans()
    by_id = {s.context.span_id: s for s in spans}
    children: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        if span.parent is not None:
            children[span.parent.span_id].append(span)

    for handle in handles:
        root = by_id[handle.span.get_span_context().span_id]
        found = dict(root.attributes or {})
        run = found["run"]
        assert isinstance(run, int)
        kids = children[root.context.span_id]
        assert len(kids) == steps_for(run), run
        for kid in kids:
            attributes = kid.attributes or {}
            assert attributes["run"] == run  # the step's own run, not a neighbour's
            assert attributes[attr.WORKFLOW_NAME] == found[attr.GEN_AI_WORKFLOW_NAME]
            assert kid.context.trace_id == root.context.trace_id
        assert sorted(int(k.attributes[attr.STEP_INDEX]) for k in kids) == list(  # type: ignore[index, arg-type]
            range(steps_for(run))
        )
        rollup = handle.rollup
        assert rollup is not None
        assert rollup.step_count == steps_for(run)
        assert rollup.total_ms >= rollup.inference_ms + rollup.data_ms + rollup.tool_ms - 1e-6

    # Nothing is kept once every workflow has ended: memory does not grow with runs.
    assert live.processor.open_workflows() == 0
    assert live.processor._owner == {}
    assert live.processor._tags == {}
