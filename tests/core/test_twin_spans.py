"""A model call seen by two instrumentations: the second span says it is a twin
(chainlat.step.twin=true), so the Collector tier's span metrics count the call once."""

from __future__ import annotations

import chainlat
from chainlat._runtime.interface import finish_step, start_detached_step
from chainlat._runtime.processor import STEP_TWIN
from chainlat.testing import Capture

FRAMEWORK_LLM = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"}


def _twin(cap: Capture, name: str) -> object:
    return (cap.span(name).attributes or {}).get(STEP_TWIN)


def test_a_call_inside_a_call_is_the_twin_and_the_outer_one_counts(cap: Capture) -> None:
    p = cap.provider
    with chainlat.workflow("w", tracer_provider=p):
        with chainlat.inference("gpt-4o", tracer_provider=p):
            cap.clock.advance(1)
            with chainlat.inference("gpt-4o-wire", tracer_provider=p):
                cap.clock.advance(5)
    assert _twin(cap, "chat gpt-4o") is None
    assert _twin(cap, "chat gpt-4o-wire") is True


def test_a_call_beside_a_framework_span_of_the_same_model_is_the_twin(cap: Capture) -> None:
    """A framework callback span is not made current: the wire-level span starts beside it."""
    p = cap.provider
    tracer = p.get_tracer("framework")
    with chainlat.workflow("w", tracer_provider=p):
        framework = tracer.start_span("ChatOpenAI", attributes=FRAMEWORK_LLM)
        cap.clock.advance(1)
        with chainlat.inference("gpt-4o", tracer_provider=p):
            cap.clock.advance(5)
        framework.end()
    assert _twin(cap, "chat gpt-4o") is True
    assert _twin(cap, "ChatOpenAI") is None


def test_calls_of_one_instrumentation_are_never_twins(cap: Capture) -> None:
    """Two parallel calls of one model, both chainlat's, are two calls."""
    p = cap.provider
    with chainlat.workflow("w", tracer_provider=p):
        # As the HTTP transports start them: detached, neither current, both open at once.
        call = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "chainlat.step.kind": "inference",
        }
        first = start_detached_step("chat gpt-4o", call, p)
        second = start_detached_step("chat gpt-4o", call, p)
        cap.clock.advance(5)
        finish_step(second, None)
        finish_step(first, None)
    assert [
        (s.attributes or {}).get(STEP_TWIN) for s in cap.spans() if s.name == "chat gpt-4o"
    ] == [
        None,
        None,
    ]


def test_a_call_of_another_model_beside_a_framework_span_is_not_its_twin(cap: Capture) -> None:
    p = cap.provider
    tracer = p.get_tracer("framework")
    with chainlat.workflow("w", tracer_provider=p):
        framework = tracer.start_span("ChatOpenAI", attributes=FRAMEWORK_LLM)
        with chainlat.inference("claude-sonnet-4", tracer_provider=p):
            cap.clock.advance(5)
        framework.end()
        # Once the framework's call has ended, a later call of its model is a new call.
        with chainlat.inference("gpt-4o", tracer_provider=p):
            cap.clock.advance(5)
    assert _twin(cap, "chat claude-sonnet-4") is None
    assert _twin(cap, "chat gpt-4o") is None
