"""The interop agent with the Anthropic SDK, traced by OpenLLMetry and by the SDK itself.

OpenLLMetry's ``opentelemetry-instrumentation-anthropic`` (without traceloop-sdk) writes
an ``anthropic.chat`` span per call; the anthropic SDK (2.x) writes its own span of the
same call, ``anthropic.messages.create`` (scope ``com.anthropic.sdk.python``, GenAI
attributes and ``http.request.method``), from the global provider. The agent is
`_anthropic.agent`, the reference's loop against the Messages API.
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


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("openllmetry-anthropic")
    exporter = _agent.install(case, provider)

    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    AnthropicInstrumentor().instrument(tracer_provider=provider)
    agent = _anthropic.agent(_anthropic.client(case), _agent.app_span)
    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
