"""The interop agent with OpenLIT's auto-instrumentation.

``openlit.init()`` on the application's provider (set global first: OpenLIT takes the
global one when there is one), with its metrics and its content events off: it traces the
openai SDK's calls (GenAI ``chat`` spans, ``telemetry.sdk.name = "openlit"``) and, by
default, httpx with OpenTelemetry's instrumentation (a ``POST`` span inside each call, which
ends at a streamed response's headers). The openai SDK has no agent loop, retriever or
tool: the loop is the reference's (`_agent.plain_openai_agent`), its data stage and tool
chainlat's.
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
    provider = _agent.tracer_provider("openlit")
    exporter = _agent.install(case, provider)

    import openai
    import openlit

    # No pricing file from the network (an empty one beside the traces), no metrics, no
    # events: spans to the provider only.
    pricing = case.traces + ".pricing.json"
    with open(pricing, "w") as f:
        f.write("{}")
    openlit.init(
        application_name="interop",
        disable_metrics=True,
        disable_events=True,
        capture_message_content=False,
        disable_batch=True,
        pricing_json=pricing,
    )
    client = openai.OpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)

    def agent() -> None:
        with _agent.app_span():
            _agent.plain_openai_agent(client.chat.completions.create)

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
