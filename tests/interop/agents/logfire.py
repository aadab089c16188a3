"""The interop agent traced by Pydantic Logfire's SDK, which writes OpenTelemetry spans.

Logfire is configured as its documentation shows it for an application that sends its
spans elsewhere than Logfire's service (`_logfire.start`). The request is a
``logfire.span``, the model calls are traced by ``logfire.instrument_openai(client)``;
Logfire has no span kind for a retrieval or a tool, so those are chainlat's (as in the
``openai-v2`` stack), and the loop is the reference's (`_agent.plain_openai_agent`).

What Logfire writes for a streamed call is its own: the call's ``CLIENT`` span ends when
the response's headers are in (the SDK returns the stream), and the stream, once read to
its end, is a zero-length log record (``logfire.span_type = "log"``) whose ``duration``
attribute, in seconds, is how long the reading took.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent
import _logfire


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _logfire.start(case, "logfire")

    import logfire
    import openai

    client = openai.OpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)
    logfire.instrument_openai(client)

    def agent() -> None:
        with logfire.span("agent"):
            _agent.plain_openai_agent(client.chat.completions.create)

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
