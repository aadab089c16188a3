"""A step exited in another context than it was entered in is ended there, marked, counted
and logged each time; a step name never outlives its block in another thread."""

from __future__ import annotations

import threading
from collections.abc import Generator
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import NumberDataPoint

import chainlat
from chainlat.testing import Capture

OUT_OF_CONTEXT = "chainlat.step.out_of_context"


def _counted(cap: Capture) -> dict[str, int]:
    """The out-of-context counter's value by step kind."""
    data = cap.metric_reader.get_metrics_data()
    found: dict[str, int] = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name != OUT_OF_CONTEXT:
                    continue
                for point in metric.data.data_points:
                    kind = str(dict(point.attributes or {})["chainlat.step.kind"])
                    assert isinstance(point, NumberDataPoint)
                    found[kind] = int(point.value)
    return found


def _attrs(cap: Capture, name: str) -> dict[str, Any]:
    return dict(cap.span(name).attributes or {})


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "another context" in r.getMessage()]


def _stream(cap: Capture) -> Generator[str]:
    with chainlat.inference("m", tracer_provider=cap.provider):
        cap.clock.advance(5)
        yield "first"
        cap.clock.advance(7)
        yield "second"


def test_a_stream_consumed_after_its_workflow_block_is_ended_exported_and_marked(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with chainlat.workflow("w", tracer_provider=cap.provider):
        chunks = _stream(cap)
        assert next(chunks) == "first"
    assert list(chunks) == ["second"]
    call = cap.span("chat m")
    assert call.end_time is not None and call.start_time is not None
    assert (call.end_time - call.start_time) / 1e6 == 12.0
    assert _attrs(cap, "chat m")[OUT_OF_CONTEXT] is True
    assert OUT_OF_CONTEXT not in _attrs(cap, "invoke_workflow w")
    assert _counted(cap) == {"inference": 1}
    assert len(_warnings(caplog)) == 1 and "'chat m'" in _warnings(caplog)[0]
    assert chainlat.current_step() is None


def test_a_generator_closed_from_another_thread_ends_its_step_inside_the_run(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    with chainlat.workflow("w", tracer_provider=cap.provider) as run:
        chunks = _stream(cap)
        next(chunks)
        closer = threading.Thread(target=chunks.close)
        closer.start()
        closer.join(10)
        cap.clock.advance(3)
    assert _attrs(cap, "chat m")[OUT_OF_CONTEXT] is True
    assert run.rollup is not None
    assert (run.rollup.total_ms, run.rollup.inference_ms) == (8.0, 5.0)
    assert _counted(cap) == {"inference": 1}
    assert len(_warnings(caplog)) == 1
    assert chainlat.current_step() is None


def test_steps_exited_out_of_order_both_end_and_each_time_is_logged(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    p, clock = cap.provider, cap.clock
    for _ in range(2):
        first, second = chainlat.tool("a", tracer_provider=p), chainlat.tool("b", tracer_provider=p)
        with chainlat.workflow("w", tracer_provider=p):
            first.__enter__()
            clock.advance(1)
            second.__enter__()
            clock.advance(2)
            first.__exit__(None, None, None)
            clock.advance(3)
            second.__exit__(None, None, None)
    ends = [(s.name, (s.end_time or 0) - (s.start_time or 0)) for s in cap.spans()]
    assert (
        ends
        == [
            ("execute_tool a", 3_000_000),
            ("execute_tool b", 5_000_000),
            ("invoke_workflow w", 6_000_000),
        ]
        * 2
    )
    marked = [s.name for s in cap.spans() if (s.attributes or {}).get(OUT_OF_CONTEXT)]
    assert marked == ["execute_tool b", "execute_tool b"]
    assert _counted(cap) == {"tool": 2}
    assert len(_warnings(caplog)) == 2 and all("'execute_tool b'" in m for m in _warnings(caplog))


def test_a_step_entered_once_and_exited_twice_ends_once(
    cap: Capture, caplog: pytest.LogCaptureFixture
) -> None:
    step = chainlat.tool("t", tracer_provider=cap.provider)
    with step:
        cap.clock.advance(1)
    step.__exit__(None, None, None)
    assert len(cap.spans()) == 1
    assert _counted(cap) == {}
    assert [r.getMessage() for r in caplog.records if "never entered" in r.getMessage()]


def _named_generator(name: str) -> Generator[None]:
    with chainlat.step_name(name):
        yield


def test_a_step_name_closed_in_another_thread_leaves_no_name_on_later_steps(
    cap: Capture,
) -> None:
    blocks = _named_generator("plan")
    next(blocks)  # "plan" is entered in this thread's context
    closer = threading.Thread(target=blocks.close)
    closer.start()
    closer.join(10)
    with chainlat.workflow("w", tracer_provider=cap.provider):
        with chainlat.inference("m", tracer_provider=cap.provider):
            pass
    assert "chainlat.step.name" not in _attrs(cap, "chat m")


def test_a_step_name_closed_elsewhere_uncovers_the_open_block_around_it(cap: Capture) -> None:
    with chainlat.step_name("outer"):
        blocks = _named_generator("inner")
        next(blocks)
        closer = threading.Thread(target=blocks.close)
        closer.start()
        closer.join(10)
        with chainlat.workflow("w", tracer_provider=cap.provider):
            with chainlat.inference("m", tracer_provider=cap.provider):
                pass
    assert _attrs(cap, "chat m")["chainlat.step.name"] == "outer"
