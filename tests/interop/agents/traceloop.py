"""The interop agent with OpenLLMetry (traceloop-sdk): ``@workflow`` and ``@tool``.

``Traceloop.init`` makes its own global provider (with its OpenAI instrumentation);
chainlat's processor and the file export are added to it, and Traceloop's own export goes
nowhere. The agent is a ``@workflow``, the tool a ``@tool``; OpenLLMetry has no retrieval
decorator (a ``@task`` is any step), so the retrieval is chainlat's data stage.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent
import _traceloop


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()

    exporter = _traceloop.start(case, "traceloop", ("OPENAI",))

    import openai
    from traceloop.sdk.decorators import tool, workflow

    client = openai.OpenAI(base_url=case.base_url, api_key="sk-interop", max_retries=0)

    @tool(name=_agent.TOOL_NAME)
    def lookup_order(order_id: str) -> str:
        return _agent.lookup_order(order_id)

    @workflow(name="agent")
    def agent() -> None:
        _agent.plain_openai_agent(client.chat.completions.create, run_tool=lookup_order)

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
