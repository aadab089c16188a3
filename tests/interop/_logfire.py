"""Pydantic Logfire as the Logfire stacks configure it (``agents/logfire.py``,
``agents/logfire-openai-agents.py``).

Configured as Logfire's documentation shows it for an application that sends its spans
elsewhere than Logfire's service (``send_to_logfire=False``, no console): Logfire makes
its own tracer provider global, and chainlat's processor and the file export are added to
it, as to any provider with ``add_span_processor`` (``configure()`` joins it).
"""

# mypy: ignore-errors
# (the framework is installed only in the stacks' environments, not in the dev one)

from __future__ import annotations

import _agent


def start(case: _agent.Case, stack: str) -> _agent.GatedExporter:
    """Configure Logfire for ``stack``, then chainlat on the provider Logfire made global."""
    import logfire
    from opentelemetry import trace

    logfire.configure(
        send_to_logfire=False,
        console=False,
        service_name=f"interop-{stack}",
        inspect_arguments=False,
    )
    return _agent.install(case, trace.get_tracer_provider(), set_global=False)
