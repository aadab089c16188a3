"""workflow / inference / data_stage / tool through the real SDK pipeline."""

from __future__ import annotations

import asyncio
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import chainlat
from chainlat.testing import Capture


def test_sequential_workflow_exports_the_expected_span_tree(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("support-chat", tracer_provider=p, tenant="acme") as run:
        clock.advance(1)
        with chainlat.data_stage("retrieve-docs", source="faq", tracer_provider=p):
            clock.advance(20)
        with chainlat.inference("big", provider="openai", tracer_provider=p) as call:
            clock.advance(300)
            call.first_token()
            clock.advance(100)
            call.record_usage(input_tokens=120, output_tokens=40, cache_read_tokens=100)
            call.response_model("big-2026-01")
        with chainlat.tool("lookup", tracer_provider=p) as step:
            step.cache_hit()
            clock.advance(5)
        with chainlat.inference("small", operation="text_completion", tracer_provider=p):
            clock.advance(50)
        clock.advance(4)

    spans = {s.name: s for s in cap.spans()}
    assert list(spans) == [
        "data retrieve-docs",
        "chat big",
        "execute_tool lookup",
        "text_completion small",
        "invoke_workflow support-chat",
    ]
    root = spans["invoke_workflow support-chat"]
    assert root.parent is None
    assert root.kind is SpanKind.INTERNAL
    assert all(
        s.parent is not None and s.parent.span_id == root.context.span_id
        for s in list(spans.values())[:4]
    )
    assert spans["chat big"].kind is SpanKind.CLIENT
    assert spans["text_completion small"].kind is SpanKind.CLIENT
    assert spans["data retrieve-docs"].kind is SpanKind.INTERNAL
    assert spans["execute_tool lookup"].kind is SpanKind.INTERNAL

    assert dict(spans["data retrieve-docs"].attributes or {}) == {
        "chainlat.step.kind": "data",
        "gen_ai.operation.name": "retrieval",  # a stage with a source is a retrieval
        "gen_ai.data_source.id": "faq",
        "chainlat.step.index": 0,
        "chainlat.workflow.name": "support-chat",
    }
    assert dict(spans["chat big"].attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "big",
        "gen_ai.provider.name": "openai",
        "chainlat.step.kind": "inference",
        "chainlat.step.index": 1,
        "chainlat.workflow.name": "support-chat",
        "gen_ai.response.time_to_first_chunk": 0.3,
        "chainlat.latency.ttft_ms": 300.0,
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 40,
        "gen_ai.usage.cache_read.input_tokens": 100,
        "gen_ai.response.model": "big-2026-01",
    }
    first_token = spans["chat big"].events[0]
    assert first_token.name == "chainlat.first_token"
    assert first_token.timestamp == spans["chat big"].start_time + 300_000_000  # type: ignore[operator]
    assert dict(spans["execute_tool lookup"].attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "chainlat.step.kind": "tool",
        "chainlat.step.index": 2,
        "chainlat.workflow.name": "support-chat",
        "chainlat.cache.hit": True,
    }
    assert spans["text_completion small"].attributes["chainlat.step.index"] == 3  # type: ignore[index]

    attrs = root.attributes or {}
    assert attrs["gen_ai.operation.name"] == "invoke_workflow"
    assert attrs["gen_ai.workflow.name"] == "support-chat"
    assert attrs["tenant"] == "acme"
    assert attrs["chainlat.chain.total_ms"] == 480.0
    assert attrs["chainlat.chain.inference_ms"] == 450.0
    assert attrs["chainlat.chain.data_ms"] == 20.0
    assert attrs["chainlat.chain.tool_ms"] == 5.0
    assert attrs["chainlat.chain.overhead_ms"] == 5.0
    assert attrs["chainlat.chain.step_count"] == 4
    assert attrs["chainlat.chain.input_tokens"] == 120
    assert attrs["chainlat.chain.critical_path"] == (
        "data retrieve-docs",
        "chat big",
        "execute_tool lookup",
        "text_completion small",
    )
    assert run.rollup is not None
    assert run.rollup.total_ms == 480.0
    assert run.duration_ms == 480.0


def test_step_that_raises_is_recorded_and_the_exception_reraised_unchanged(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    error = KeyError("missing")
    with pytest.raises(KeyError) as caught, chainlat.workflow("w", tracer_provider=p) as run:
        with chainlat.tool("t", tracer_provider=p):
            clock.advance(7)
            raise error
    assert caught.value is error
    tool_span = cap.span("execute_tool t")
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.attributes["error.type"] == "KeyError"  # type: ignore[index]
    assert tool_span.events[0].name == "exception"
    workflow_span = cap.span("invoke_workflow w")
    assert workflow_span.status.status_code is StatusCode.ERROR
    assert run.rollup is not None and run.rollup.tool_ms == 7


def test_error_type_names_the_module_of_non_builtin_exceptions(cap: Capture) -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom), chainlat.tool("t", tracer_provider=cap.provider):
        raise Boom
    assert cap.span("execute_tool t").attributes["error.type"] == (  # type: ignore[index]
        f"{__name__}.test_error_type_names_the_module_of_non_builtin_exceptions.<locals>.Boom"
    )


def test_base_exceptions_end_the_span_without_marking_it_failed(cap: Capture) -> None:
    with pytest.raises(KeyboardInterrupt), chainlat.tool("t", tracer_provider=cap.provider):
        raise KeyboardInterrupt
    assert cap.span("execute_tool t").status.status_code is StatusCode.UNSET


def test_sync_decorator_makes_a_span_per_call_and_keeps_the_signature(cap: Capture) -> None:
    @chainlat.tool("add", tracer_provider=cap.provider)
    def add(a: int, b: int) -> int:
        """Adds."""
        cap.clock.advance(2)
        return a + b

    assert add(1, 2) == 3
    assert add(3, 4) == 7
    assert add.__doc__ == "Adds."
    spans = cap.spans()
    assert [s.name for s in spans] == ["execute_tool add", "execute_tool add"]
    assert [s.end_time - s.start_time for s in spans] == [2_000_000, 2_000_000]  # type: ignore[operator]


@pytest.mark.anyio
async def test_async_decorator_span_covers_the_awaited_body(cap: Capture) -> None:
    release = anyio.Event()

    @chainlat.inference("m", tracer_provider=cap.provider)
    async def call() -> str:
        await release.wait()
        cap.clock.advance(250)
        return "done"

    async with anyio.create_task_group() as tg:

        async def run() -> None:
            assert await call() == "done"

        tg.start_soon(run)
        await anyio.sleep(0)
        cap.clock.advance(100)  # passes while the coroutine is suspended
        release.set()
    span = cap.span("chat m")
    assert span.end_time - span.start_time == 350_000_000  # type: ignore[operator]


@pytest.mark.anyio
async def test_async_context_managers_nest(cap: Capture) -> None:
    p = cap.provider
    async with chainlat.workflow("w", tracer_provider=p) as run:
        async with chainlat.data_stage("d", tracer_provider=p):
            cap.clock.advance(3)
    assert run.rollup is not None and run.rollup.data_ms == 3
    assert cap.span("data d").parent.span_id == cap.span("invoke_workflow w").context.span_id  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_gather_rollup_is_exact(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    done = {name: anyio.Event() for name in ("a", "b", "c")}

    async def call(name: str) -> None:
        async with chainlat.inference(name, tracer_provider=p):
            await done[name].wait()

    async with chainlat.workflow("fan-out", tracer_provider=p) as run:
        clock.advance(2)
        tasks = [asyncio.ensure_future(call(n)) for n in ("a", "b", "c")]
        await asyncio.sleep(0)  # all three start at t=2
        for name, step_ms in (("a", 10), ("c", 25), ("b", 40)):
            clock.advance(step_ms)
            done[name].set()
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        await asyncio.gather(*tasks)
        clock.advance(3)
    r = run.rollup
    assert r is not None
    assert r.total_ms == 2 + 10 + 25 + 40 + 3
    assert r.inference_ms == 75  # call b: 2 -> 77
    assert r.overhead_ms == 5
    assert r.inference_sum_ms == 10 + 35 + 75
    assert r.critical_path == ("chat b",)


def test_thread_pool_steps_join_the_workflow_through_bind_context(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    lock = threading.Lock()

    def fetch(i: int) -> int:
        with chainlat.data_stage(f"fetch-{i}", tracer_provider=p):
            with lock:
                clock.advance(10 * (i + 1))
        return i

    with chainlat.workflow("pool", tracer_provider=p) as run, ThreadPoolExecutor(3) as pool:
        assert sorted(pool.map(chainlat.bind_context(fetch), range(3))) == [0, 1, 2]
    r = run.rollup
    assert r is not None
    assert r.data_count == 3
    root_id = cap.span("invoke_workflow pool").context.span_id
    assert all(cap.span(f"data fetch-{i}").parent.span_id == root_id for i in range(3))  # type: ignore[union-attr]
    # the split stays exact whatever order the threads ran in
    assert r.data_ms + r.overhead_ms == r.total_ms == 60


def test_without_bind_context_a_thread_starts_its_own_trace(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("pool", tracer_provider=p) as run, ThreadPoolExecutor(1) as pool:

        def work() -> None:
            with chainlat.tool("t", tracer_provider=p):
                pass

        pool.submit(work).result()
    assert run.rollup is not None and run.rollup.step_count == 0


def test_foreign_spans_are_folded_into_the_rollup(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    other = p.get_tracer("opentelemetry.instrumentation.openai_v2")
    with chainlat.workflow("w", tracer_provider=p) as run:
        start = clock.advance(1)
        other.start_span(
            "chat gpt-4o",
            attributes={"gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 9},
            start_time=start,
        ).end(end_time=clock.advance(30))
        db = other.start_span(
            "SELECT docs", attributes={"db.system.name": "sqlite"}, start_time=clock()
        )
        db.end(end_time=clock.advance(4))
        http = other.start_span("GET", start_time=clock())
        http.end(end_time=clock.advance(6))
        clock.advance(1)
    r = run.rollup
    assert r is not None
    assert (r.inference_ms, r.data_ms, r.overhead_ms) == (30, 4, 8)
    assert r.input_tokens == 9
    foreign = cap.span("chat gpt-4o")
    assert foreign.attributes["chainlat.step.kind"] == "inference"  # type: ignore[index]
    assert foreign.attributes["chainlat.step.index"] == 0  # type: ignore[index]
    assert "chainlat.step.index" not in (cap.span("GET").attributes or {})


def test_nested_workflow_is_a_step_of_the_outer_one(cap: Capture) -> None:
    p, clock = cap.provider, cap.clock
    with chainlat.workflow("outer", tracer_provider=p) as outer:
        with chainlat.workflow("inner", tracer_provider=p) as inner:
            with chainlat.inference("m", tracer_provider=p):
                clock.advance(10)
        clock.advance(2)
    assert inner.rollup is not None and inner.rollup.inference_ms == 10
    assert outer.rollup is not None
    assert (outer.rollup.inference_ms, outer.rollup.overhead_ms, outer.rollup.step_count) == (
        10,
        2,
        2,
    )
    inner_span = cap.span("invoke_workflow inner")
    assert inner_span.attributes["chainlat.step.index"] == 0  # type: ignore[index]
    assert inner_span.attributes["chainlat.workflow.name"] == "outer"  # type: ignore[index]
    assert cap.span("chat m").attributes["chainlat.workflow.name"] == "inner"  # type: ignore[index]
    assert cap.processor.open_workflows() == 0


def test_current_step_and_current_workflow(cap: Capture) -> None:
    p = cap.provider
    assert chainlat.current_workflow() is None
    with (
        chainlat.workflow("w", tracer_provider=p) as run,
        chainlat.tool("t", tracer_provider=p) as t,
    ):
        assert chainlat.current_step() is t
        assert chainlat.current_workflow() is run
    assert chainlat.current_step() is None


def test_without_an_sdk_provider_steps_are_no_ops_and_rollup_is_none() -> None:
    from opentelemetry.trace import NoOpTracerProvider

    with chainlat.workflow("w", tracer_provider=NoOpTracerProvider()) as run:
        with chainlat.inference("m", tracer_provider=NoOpTracerProvider()) as call:
            call.record_usage(1, 2)
            call.first_token()
    assert run.rollup is None


def test_an_sdk_provider_without_the_processor_gets_it_on_first_use() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider(shutdown_on_exit=False)
    with chainlat.workflow("w", tracer_provider=provider) as run:
        with chainlat.tool("t", tracer_provider=provider):
            pass
    assert run.rollup is not None and run.rollup.tool_count == 1


@pytest.mark.anyio
async def test_a_thousand_concurrent_async_workflows_never_mix(live: Capture) -> None:
    p = live.provider
    rng = random.Random(7)
    plans = [
        [rng.choice(["inference", "data", "tool"]) for _ in range(rng.randint(1, 4))]
        for _ in range(1000)
    ]
    rollups: dict[int, chainlat.Rollup] = {}

    async def run(i: int) -> None:
        async with chainlat.workflow("w", tracer_provider=p, run_id=i) as handle:
            for j, kind in enumerate(plans[i]):
                step = (
                    chainlat.inference(f"m{i}-{j}", tracer_provider=p)
                    if kind == "inference"
                    else chainlat.data_stage(f"{i}-{j}", tracer_provider=p)
                    if kind == "data"
                    else chainlat.tool(f"{i}-{j}", tracer_provider=p)
                )
                async with step:
                    await asyncio.sleep(rng.random() * 0.003)
        assert handle.rollup is not None
        rollups[i] = handle.rollup

    await asyncio.gather(*(run(i) for i in range(1000)))

    spans = live.spans()
    by_parent: dict[int, list[ReadableSpan]] = {}
    for s in spans:
        if s.parent is not None:
            by_parent.setdefault(s.parent.span_id, []).append(s)
    for root in live.workflows():
        i = root.attributes["run_id"]  # type: ignore[index]
        assert isinstance(i, int)
        kids = by_parent.get(root.context.span_id, [])
        r = rollups[i]
        assert r.step_count == len(plans[i]) == len(kids)
        assert r.inference_count == plans[i].count("inference")
        assert r.data_count == plans[i].count("data")
        # every step of this workflow, and no other, is named on its critical path
        assert len(r.critical_path) == len(plans[i])
        assert all(name.endswith(f"{i}-{j}") for j, name in enumerate(r.critical_path))
        exact_sum = sum(
            (k.end_time or 0) - (k.start_time or 0)
            for k in kids
            if (k.attributes or {})["chainlat.step.kind"] == "data"
        )
        assert r.data_sum_ms == pytest.approx(exact_sum / 1e6)
    assert live.processor.open_workflows() == 0


def test_threads_running_workflows_never_mix(live: Capture) -> None:
    p = live.provider
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for k in range(50):
                with chainlat.workflow("w", tracer_provider=p) as run:
                    for j in range(t % 3 + 1):
                        with chainlat.tool(f"{t}-{k}-{j}", tracer_provider=p):
                            pass
                assert run.rollup is not None
                assert run.rollup.tool_count == t % 3 + 1
                assert all(n.startswith(f"execute_tool {t}-{k}-") for n in run.rollup.critical_path)
        except BaseException as exc:  # collected and re-raised in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=60)
    assert not errors
    assert len(live.workflows()) == 400


def test_real_clock_durations_cover_known_sleeps(live: Capture) -> None:
    """Against the real clock: a step around a 30 ms sleep measures the sleep, and little more."""
    import time

    extras_ms: list[float] = []
    for _ in range(5):
        with chainlat.workflow("w", tracer_provider=live.provider) as run:
            with chainlat.tool("sleep", tracer_provider=live.provider):
                started = time.perf_counter()
                time.sleep(0.030)
                slept_ms = (time.perf_counter() - started) * 1000
        assert run.rollup is not None
        # Never shorter than the sleep: the span's clock and perf_counter differ by
        # their granularity at most (0.1 ms is far above both).
        assert run.rollup.tool_ms >= 30.0
        assert run.rollup.tool_ms >= slept_ms - 0.1
        assert run.rollup.total_ms >= run.rollup.tool_ms
        # Load stretches the sleep itself (measured here as slept_ms), not what the
        # span adds around it: a few microseconds, 5 ms in the best of up to 5 runs.
        extras_ms.append(run.rollup.tool_ms - slept_ms)
        if min(extras_ms) < 5.0:
            break
    assert min(extras_ms) < 5.0, extras_ms


def test_internal_errors_are_logged_once_and_never_reach_user_code(
    cap: Capture, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import chainlat._core.errors
    import chainlat._runtime.deferred

    def broken(*args: object, **kwargs: object) -> chainlat.Rollup:
        raise RuntimeError("rollup bug")

    monkeypatch.setattr(chainlat._core.errors, "RAISE_INTERNAL_ERRORS", False)
    monkeypatch.setattr(chainlat._core.errors, "_reported", set())
    monkeypatch.setattr(chainlat._runtime.deferred, "compute_rollup", broken)
    results = []
    for _ in range(3):
        with chainlat.workflow("w", tracer_provider=cap.provider) as run:
            results.append("body ran")
        assert run.rollup is None
    assert results == ["body ran"] * 3
    assert len(cap.workflows()) == 3  # the spans still ended and were exported
    logged = [r for r in caplog.records if "internal error" in r.getMessage()]
    assert len(logged) == 1
    assert "rollup bug" in caplog.text
