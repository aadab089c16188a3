"""The interop agent with openinference-instrumentation-openai.

The openai SDK has no agent loop, retriever or tool: the loop is the reference's
(`_agent.plain_openai_agent`), its data stage and tool are chainlat's, and the model
calls are traced by OpenInference's ``OpenAIInstrumentor`` (``LLM`` spans).
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("openinference-openai")
    exporter = _agent.install(case, provider)

    import openai
    from openinference.instrumentation.openai import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(tracer_provider=provider)
    client = openai.OpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)

    def agent() -> None:
        with _agent.app_span():
            _agent.plain_openai_agent(client.chat.completions.create)

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
