"""The interop agent as a LangGraph graph, traced by openinference-instrumentation-langchain.

The graph is `_langgraph.graph` (every step LangChain's; its own span is the run's root),
instrumented as OpenInference's docs say: ``LangChainInstrumentor().instrument()``.
"""

# mypy: ignore-errors
# (the framework is installed only in this stack's environment, not in the dev one)

from __future__ import annotations

import os
import sys

# The shared part lives one folder up, away from the scripts named after packages.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import _agent
import _langgraph


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    provider = _agent.tracer_provider("openinference-langchain")
    exporter = _agent.install(case, provider)

    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=provider)
    app = _langgraph.graph(case)
    _agent.run_recorded(case, exporter, lambda: app.invoke({"messages": [], "notes": []}))


if __name__ == "__main__":
    main()
