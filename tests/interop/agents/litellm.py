"""The interop agent with LiteLLM and its OpenTelemetry callback (``callbacks = ["otel"]``).

LiteLLM's ``completion`` is OpenAI-shaped, so the loop is the reference's
(`_agent.plain_openai_agent`) with ``openai/<model>`` against the sim's ``api_base``;
LiteLLM has no retriever or tool of its own, so those steps are chainlat's. The callback
finds the global SDK provider and adds its spans to it.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import functools
import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _agent.install(case, _agent.tracer_provider("litellm"))

    # Without it, LiteLLM writes a call's attributes onto the caller's current span (here
    # the application's root) instead of a span of its own; documented for SDK callers.
    os.environ["USE_OTEL_LITELLM_REQUEST_SPAN"] = "true"
    import litellm

    litellm.callbacks = ["otel"]
    create = functools.partial(
        litellm.completion, api_base=case.base_url, api_key="sk-interop", num_retries=0
    )

    def agent() -> None:
        with _agent.app_span():
            _agent.plain_openai_agent(create, model_prefix="openai/")

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
