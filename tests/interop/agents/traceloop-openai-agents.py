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
import _traceloop


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()

    exporter = _traceloop.start(case, "traceloop-openai-agents", ("OPENAI_AGENTS", "OPENAI"))
    agent = _openai_agents.agent(case, _agent.app_span)
    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
