"""The interop agent as a LangGraph graph, traced by LangSmith's OpenTelemetry export.

The graph is `_langgraph.graph`, the one the openinference-langchain stack traces.
LangSmith traces LangChain and LangGraph by itself once ``LANGSMITH_TRACING`` is on;
``LANGSMITH_TRACING_MODE=otel`` sends its runs as OpenTelemetry spans and nowhere else
(no LangSmith API key, no request to LangSmith), through the global tracer provider when
the application has set one. Its spans carry ``langsmith.span.kind`` and the GenAI keys.

LangSmith builds the spans from its run records on its background tracing thread, after
each run ends, with the runs' own start and end times, each under the OpenTelemetry span
that was current when its run was queued: a run's span is written, start to end, before
its children's. The agent waits for them at the end of each request
(``wait_for_all_tracers``, as LangSmith's docs tell an application that may stop after
one), inside the workflow in the wrapped cases: the rollup chainlat records as the
workflow ends then holds every step (the wait is in the workflow's overhead, about 60 ms
here). Spans written after the workflow ended would be in the file, and the readers
rebuild such a run, but not in that rollup.
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
    exporter = _agent.install(case, _agent.tracer_provider("langsmith-otel"))
    os.environ["LANGSMITH_TRACING"] = "true"
    os.environ["LANGSMITH_TRACING_MODE"] = "otel"
    from langchain_core.tracers.langchain import wait_for_all_tracers

    app = _langgraph.graph(case)

    def agent() -> None:
        app.invoke({"messages": [], "notes": []})
        wait_for_all_tracers()

    _agent.run_recorded(case, exporter, agent)


if __name__ == "__main__":
    main()
