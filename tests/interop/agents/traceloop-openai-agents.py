"""The interop agent with the OpenAI Agents SDK, traced by OpenLLMetry (traceloop-sdk).

``Traceloop.init()`` instruments the Agents SDK (opentelemetry-instrumentation-openai-agents:
a trace processor added to the SDK's, turning its agent runs, model calls and function
tools into OpenTelemetry spans) and the openai SDK under it (opentelemetry-instrumentation-
openai), as it does every library it finds. It makes its own global provider; chainlat's
processor and the file export are added to it, and Traceloop's own export goes nowhere
(the ``traceloop`` stack's set-up). The agent is the ``openai-agents`` stack's
(`_openai_agents.agent`); the application's root span holds each request.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import asyncio
import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent
import _openai_agents


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()

    from opentelemetry import trace
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from traceloop.sdk import Instruments, Traceloop

    Traceloop.init(
        app_name="interop-traceloop-openai-agents",
        exporter=InMemorySpanExporter(),  # Traceloop's own export: kept in memory, unread
        disable_batch=True,
        telemetry_enabled=False,
        # What Traceloop.init() finds installed here, named so that nothing else is tried.
        instruments={Instruments.OPENAI_AGENTS, Instruments.OPENAI},
    )
    exporter = _agent.install(case, trace.get_tracer_provider(), set_global=False)
    agent = _openai_agents.agent(case, _agent.app_span)
    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
