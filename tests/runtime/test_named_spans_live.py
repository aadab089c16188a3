"""A span known by its name alone is read live as the readers read it.

Haystack 2.x's agent writes each model call as ``haystack.agent.step.llm`` with no
attribute that says what it is (only its input and output, as JSON), the tool as
``haystack.agent.step.tool``. The readers know the call by its name
(``conventions.kind_by_name``), but the live rollup recorded on the workflow span did not:
in the interop matrix's Haystack stack (haystack-ai 2.x with opentelemetry's tracer), the
workflow recorded 3 model calls of 5, inference 205.5 ms where the readers counted 429.5,
and 250 ms of overhead. A runtime budget, a pytest assertion and Jaeger's view of the
workflow span read that rollup.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import chainlat
from chainlat.testing import Capture
from support.readback import both_ways


def _agent_step(cap: Capture, took_ms: int) -> None:
    tracer = cap.provider.get_tracer("haystack")
    span = tracer.start_span("haystack.agent.step.llm", start_time=cap.clock())
    span.set_attribute("haystack.agent.step.llm.output", '{"replies": []}')
    span.end(end_time=cap.clock.advance(took_ms))


def test_a_call_known_by_its_span_name_is_in_the_live_rollup(cap: Capture) -> None:
    with chainlat.workflow("agent", tracer_provider=cap.provider):
        cap.clock.advance(10)
        _agent_step(cap, 90)
        cap.clock.advance(5)
        _agent_step(cap, 110)
        cap.clock.advance(5)
    [rollup] = cap.rollups()
    assert rollup.inference_count == 2
    assert rollup.inference_ms == pytest.approx(200.0)
    assert rollup.overhead_ms == pytest.approx(20.0)
    assert rollup.total_ms == pytest.approx(220.0)


def test_the_live_rollup_is_the_readers(cap: Capture, tmp_path: Path) -> None:
    with chainlat.workflow("agent", tracer_provider=cap.provider):
        _agent_step(cap, 90)
        cap.clock.advance(3)
    [live] = cap.rollups()
    for run in both_ways(cap, tmp_path):
        assert run.rebuilt == ""
        assert (live.inference_count, live.inference_ms, live.overhead_ms) == (
            run.rollup.inference_count,
            run.rollup.inference_ms,
            run.rollup.overhead_ms,
        )
