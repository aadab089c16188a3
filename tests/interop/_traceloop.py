"""OpenLLMetry as the traceloop stacks start it (``agents/traceloop.py``,
``agents/traceloop-langchain.py``, ``agents/traceloop-openai-agents.py``).

``Traceloop.init`` makes its own global provider with the instrumentations it is given;
chainlat's processor and the file export are added to it (``configure()`` joins it), and
Traceloop's own export goes nowhere: its spans are kept in memory, unread.
"""

# mypy: ignore-errors
# (the framework is installed only in the stacks' environments, not in the dev one)

from __future__ import annotations

from collections.abc import Iterable

import _agent


def start(case: _agent.Case, stack: str, instruments: Iterable[str]) -> _agent.GatedExporter:
    """``Traceloop.init`` for ``stack`` with ``instruments`` (names of traceloop's
    ``Instruments``: what ``Traceloop.init()`` would find installed in the stack's
    environment, named so that nothing else is tried), then chainlat on its provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from traceloop.sdk import Instruments, Traceloop

    Traceloop.init(
        app_name=f"interop-{stack}",
        exporter=InMemorySpanExporter(),  # Traceloop's own export: kept in memory, unread
        disable_batch=True,
        telemetry_enabled=False,
        instruments={Instruments[name] for name in instruments},
    )
    return _agent.install(case, trace.get_tracer_provider(), set_global=False)
