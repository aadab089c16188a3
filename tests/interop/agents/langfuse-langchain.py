"""The interop agent as a LangGraph graph, traced by Langfuse's LangChain callback handler.

The graph is `_langgraph.graph`, the one the openinference-langchain and langsmith-otel
stacks trace. Langfuse traces a LangChain application through a callback handler passed
in the run's config (``langfuse.langchain.CallbackHandler``): each
LangChain run becomes a Langfuse observation, an OpenTelemetry span (a chat model's a
``generation``, with the usage LangChain reports in Langfuse's names and its first token's
instant; a retriever's a ``retriever``, a tool's a ``tool``; the graph and its nodes
``chain`` spans).

Langfuse adds its span processor to the global provider the agent set; its exporter, which
would send the spans to a Langfuse server, is one that drops them (no Langfuse server
here: `_langfuse.start`), as in the ``langfuse`` stack.
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
import _langgraph


def main() -> None:
    """Run the agent: a warm-up, then the recorded runs."""
    case = _agent.parse_case()
    exporter = _agent.install(case, _agent.tracer_provider("langfuse-langchain"))

    _langfuse.start()
    from langfuse.langchain import CallbackHandler

    app = _langgraph.graph(case)

    def agent() -> None:
        # A handler per request.
        app.invoke({"messages": [], "notes": []}, config={"callbacks": [CallbackHandler()]})

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
