"""Langfuse's client as the Langfuse stacks start it (``agents/langfuse.py``,
``agents/langfuse-langchain.py``): once, after the agent's provider is global.

Langfuse adds its span processor to the global tracer provider the agent set, so its spans
reach the agent's file. That processor's exporter, which would send them to a Langfuse
server, is one that drops them: no Langfuse server runs here (``span_exporter``, a
parameter of ``Langfuse()``). Imported only once the provider is set, as an application
starts Langfuse at start-up.
"""

# mypy: ignore-errors
# (the framework is installed only in the stacks' environments, not in the dev one)

from __future__ import annotations

from typing import Any


def start() -> Any:
    """The Langfuse client, with keys of its own and its export dropped."""
    from langfuse import Langfuse
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class NoServer(SpanExporter):
        """Langfuse's server's place: its spans are already in the application's file."""

        def export(self, spans):
            return SpanExportResult.SUCCESS

    return Langfuse(
        public_key="pk-lf-interop",
        secret_key="sk-lf-interop",
        base_url="http://127.0.0.1:9",
        span_exporter=NoServer(),
    )
