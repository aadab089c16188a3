"""The interop agent with the OpenAI Agents SDK, traced by Pydantic Logfire.

``logfire.instrument_openai_agents()`` wraps the SDK's trace provider, so that each span
the SDK makes (an agent's run, a model call, a function tool's call) is also a Logfire
span, written through Logfire's provider (configured as in the ``logfire`` stack:
`_logfire.start`). The agent is the ``openai-agents`` stack's (`_openai_agents.agent`);
each request is a ``logfire.span``.
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
import _logfire
import _openai_agents


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _logfire.start(case, "logfire-openai-agents")

    import logfire

    logfire.instrument_openai_agents()
    agent = _openai_agents.agent(case, lambda: logfire.span("agent"))
    asyncio.run(_agent.run_recorded_async(case, exporter, agent))


if __name__ == "__main__":
    main()
