"""The interop agent with the OpenAI Agents SDK, bridged to OpenTelemetry by OpenInference.

``OpenAIAgentsInstrumentor`` replaces the SDK's trace processors with its own (so
nothing is exported to OpenAI) and turns the SDK's spans into OpenTelemetry ones. The
agent is `_openai_agents.agent`; the application's root span holds each request.
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
    provider = _agent.tracer_provider("openai-agents")
    exporter = _agent.install(case, provider)

    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    OpenAIAgentsInstrumentor().instrument(tracer_provider=provider, exclusive_processor=True)
    agent = _openai_agents.agent(case, _agent.app_span)
    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
