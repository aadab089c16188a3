"""The interop agent as a LangGraph graph, traced by OpenLLMetry (traceloop-sdk).

The graph is `_langgraph.graph` (every step LangChain's; its own span is the run's root),
traced as OpenLLMetry's docs say for LangChain: ``Traceloop.init()``, which instruments
LangChain (opentelemetry-instrumentation-langchain: a span per chain, retriever, tool and
chat model run) and the openai SDK under it (opentelemetry-instrumentation-openai: a span
per request), as it does every library it finds. ``Traceloop.init`` makes its own global
provider; chainlat's processor and the file export are added to it, and Traceloop's own
export goes nowhere (the ``traceloop`` stack's set-up).
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
import _traceloop


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()

    exporter = _traceloop.start(case, "traceloop-langchain", ("LANGCHAIN", "OPENAI"))
    app = _langgraph.graph(case)
    _agent.run_recorded(case, exporter, lambda: app.invoke({"messages": [], "notes": []}))


if __name__ == "__main__":
    main()
