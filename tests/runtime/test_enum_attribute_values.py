"""Attribute values of a ``str`` subclass, as the Microsoft Agent Framework writes them.

Agent Framework 1.23.0 sets its GenAI attributes with the members of ``OtelAttr(str,
Enum)``: ``gen_ai.operation.name`` is ``OtelAttr.AGENT_INVOKE_OPERATION`` or
``OtelAttr.TOOL_EXECUTION_OPERATION``, a ``str`` to the SDK, which keeps it as given. A
file holds the plain string (tests/data/foreign/agent-framework/wrapped.jsonl: its readers
count 5 model calls and the tool), but the live rollup on the workflow span classified the
values by ``type(value) is str``: each ``invoke_agent`` was read as a model call (its
model and token usage), hiding the ``chat`` spans under it, and ``execute_tool`` as glue,
its time counted as inference (recorded: 4 model calls, no tool, ``tool_ms`` 0). The
readings now take any ``str``, its subclasses too.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

import pytest
from opentelemetry import trace

import chainlat
from chainlat.testing import Capture


class _OtelAttr(str, Enum):  # noqa: UP042  # not StrEnum: the framework's own spelling
    """A few members of Agent Framework's ``OtelAttr``, spelled as it spells them."""

    OPERATION = "gen_ai.operation.name"
    AGENT_INVOKE_OPERATION = "invoke_agent"
    CHAT_COMPLETION_OPERATION = "chat"
    TOOL_EXECUTION_OPERATION = "execute_tool"
    TOOL_NAME = "gen_ai.tool.name"
    AGENT_NAME = "gen_ai.agent.name"
    REQUEST_MODEL = "gen_ai.request.model"
    INPUT_TOKENS = "gen_ai.usage.input_tokens"
    OUTPUT_TOKENS = "gen_ai.usage.output_tokens"

    def __str__(self) -> str:
        return self.value


def _agent_run(cap: Capture) -> None:
    tracer = cap.provider.get_tracer("agent_framework")
    a = _OtelAttr
    usage = {a.REQUEST_MODEL: "sim-plan", a.INPUT_TOKENS: 10, a.OUTPUT_TOKENS: 5}

    def span(name: str, attributes: Mapping[_OtelAttr, object]) -> trace.Span:
        # Started bare, its attributes set right after, as Agent Framework's `_get_span` does.
        started = tracer.start_span(name, start_time=cap.clock())
        started.set_attributes(attributes)  # type: ignore[arg-type]
        return started

    def call(name: str, attributes: Mapping[_OtelAttr, object], took_ms: int) -> None:
        span(name, attributes).end(end_time=cap.clock.advance(took_ms))

    with chainlat.workflow("agent", tracer_provider=cap.provider):
        agent = span("invoke_agent planner", {a.OPERATION: a.AGENT_INVOKE_OPERATION, **usage})
        with trace.use_span(agent):
            chat = {a.OPERATION: a.CHAT_COMPLETION_OPERATION, **usage}
            call("chat sim-plan", chat, 90)
            tool = {a.OPERATION: a.TOOL_EXECUTION_OPERATION, a.TOOL_NAME: "lookup_order"}
            call("execute_tool lookup_order", tool, 25)
            call("chat sim-plan", chat, 110)
        agent.end(end_time=cap.clock())


def test_a_str_enum_operation_is_read_live_as_its_string(cap: Capture) -> None:
    """Two model calls and the tool between them, as the file's readers count them; before,
    one model call (the ``invoke_agent``) and no tool."""
    _agent_run(cap)
    [rollup] = cap.rollups()
    assert (rollup.inference_count, rollup.tool_count) == (2, 1)
    assert rollup.tool_ms == pytest.approx(25.0)


def test_the_recorded_trace_is_read_with_its_five_calls_and_the_tool() -> None:
    """The file's readers rebuild the run from its spans (plain strings in the file), not
    from the rollup recorded on the workflow span before the fix."""
    from pathlib import Path

    from chainlat.traces import read_runs

    fixture = Path(__file__).parents[1] / "data" / "foreign" / "agent-framework" / "wrapped.jsonl"
    # the agent's run, and each invoke_agent's run nested in it
    [run] = [r for r in read_runs([str(fixture)]) if r.workflow == "agent"]
    assert (run.rollup.inference_count, run.rollup.tool_count) == (5, 1)
    assert run.rollup.tool_ms == pytest.approx(25.8, abs=0.05)
