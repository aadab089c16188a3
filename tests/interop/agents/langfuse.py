"""The interop agent traced by Langfuse's Python SDK, which writes OpenTelemetry spans.

The loop is the reference's (`_agent.plain_openai_agent`), written with Langfuse's own
decorator and OpenAI client, as its docstrings show them: the request is an
``@observe()`` function, the retrieval an ``@observe(as_type="retriever")`` and the tool
an ``@observe(as_type="tool")``, and the model calls go through Langfuse's drop-in OpenAI
client (``langfuse.openai``), which writes each as a ``generation`` with its model, usage
and the first chunk's time.

Langfuse adds its own span processor to the global tracer provider when the application
has set one, so its spans go wherever the application's go. Its processor's exporter,
which would send them to the Langfuse server, is handed one that drops them: no Langfuse
server runs here (`_langfuse.start`).
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent
import _langfuse


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _agent.install(case, _agent.tracer_provider("langfuse"))

    _langfuse.start()
    from langfuse import observe
    from langfuse.openai import OpenAI

    client = OpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)

    @observe(as_type="retriever")
    def retrieve() -> list[str]:
        return _agent.INDEX.search(_agent.QUESTION)

    @observe(name=_agent.TOOL_NAME, as_type="tool")
    def run_tool(order_id: str) -> str:
        return _agent.lookup_order(order_id)

    @observe(name="agent")
    def agent() -> None:
        _agent.plain_openai_agent(
            client.chat.completions.create, retrieve=retrieve, run_tool=run_tool
        )

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
