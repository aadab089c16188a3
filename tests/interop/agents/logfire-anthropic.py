"""The interop agent with the Anthropic SDK, traced by Pydantic Logfire.

``logfire.instrument_anthropic(client)`` traces the Messages API's calls as
``instrument_openai`` traces the OpenAI SDK's (a streamed call's span ends when the SDK
hands the stream back; a record at the stream's end: rule 20 of docs/attributes.md).
Logfire is configured as in the ``logfire`` stack (`_logfire.start`); the agent is the
``openllmetry-anthropic`` stack's (`_anthropic.agent`); each request is a ``logfire.span``.
The anthropic SDK (2.x) also writes spans of its own through the global provider, which
is Logfire's.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent
import _anthropic
import _logfire


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _logfire.start(case, "logfire-anthropic")

    import logfire

    client = _anthropic.client(case)
    logfire.instrument_anthropic(client)
    agent = _anthropic.agent(client, lambda: logfire.span("agent"))
    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
