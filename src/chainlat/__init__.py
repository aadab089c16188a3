"""chainlat: the latency of multi-step AI workflows, traced, rolled up and budgeted.

Example::

    import chainlat
    chainlat.configure("support-bot")
    with chainlat.workflow("answer") as run:
        with chainlat.data_stage("retrieve-docs"):
            docs = search(question)
        with chainlat.inference("gpt-4o", provider="openai") as call:
            reply = ask(question, docs)
    print(run.rollup)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from chainlat._core.errors import (
    BudgetFileError,
    ChainlatError,
    ConfigError,
    InputError,
    LatencyBudgetExceeded,
    LatencyBudgetWarning,
    ProfileError,
    SpecError,
    TraceSourceError,
)
from chainlat._core.lazy import lazy_names as _lazy_names
from chainlat._core.rollup import Rollup
from chainlat._core.runs import BudgetViolation, StepTiming, WorkflowRun

if TYPE_CHECKING:
    from chainlat._runtime.config import configure, shutdown
    from chainlat._runtime.otlp_json import JsonLinesSpanExporter
    from chainlat._runtime.processor import ChainlatSpanProcessor
    from chainlat._runtime.spans import (
        DataStage,
        Inference,
        InferenceHandle,
        StepHandle,
        StepName,
        Tool,
        Workflow,
        WorkflowHandle,
        bind_context,
        current_step,
        current_workflow,
        data_stage,
        inference,
        record_outcome,
        step,
        step_name,
        tool,
        workflow,
    )
    from chainlat.analysis.tradeoff import Comparison, compare
    from chainlat.analysis.whatif import WhatIfResult, whatif
    from chainlat.httpx import instrument_httpx, uninstrument_httpx

# Names whose module imports the OpenTelemetry SDK, the analysis or the httpx instrumentation:
# imported on first use, so that a command that only reads traces (``chainlat check``) or the
# pytest plugin does not start them (``tests/test_architecture.py`` holds it).
_SPANS = "chainlat._runtime.spans"
_LAZY: dict[str, str] = {
    "ChainlatSpanProcessor": "chainlat._runtime.processor",
    "Comparison": "chainlat.analysis.tradeoff",
    "DataStage": _SPANS,
    "Inference": _SPANS,
    "InferenceHandle": _SPANS,
    "JsonLinesSpanExporter": "chainlat._runtime.otlp_json",
    "StepHandle": _SPANS,
    "StepName": _SPANS,
    "Tool": _SPANS,
    "WhatIfResult": "chainlat.analysis.whatif",
    "Workflow": _SPANS,
    "WorkflowHandle": _SPANS,
    "bind_context": _SPANS,
    "compare": "chainlat.analysis.tradeoff",
    "configure": "chainlat._runtime.config",
    "current_step": _SPANS,
    "current_workflow": _SPANS,
    "data_stage": _SPANS,
    "inference": _SPANS,
    "instrument_httpx": "chainlat.httpx",
    "record_outcome": _SPANS,
    "shutdown": "chainlat._runtime.config",
    "step": _SPANS,
    "step_name": _SPANS,
    "tool": _SPANS,
    "uninstrument_httpx": "chainlat.httpx",
    "whatif": "chainlat.analysis.whatif",
    "workflow": _SPANS,
}

_lazy_getattr, __dir__ = _lazy_names(__name__, _LAZY, globals())


def __getattr__(name: str) -> object:
    return _lazy_getattr(name)


__version__ = "0.1.0"

__all__ = [
    "BudgetFileError",
    "BudgetViolation",
    "ChainlatError",
    "ChainlatSpanProcessor",
    "Comparison",
    "ConfigError",
    "DataStage",
    "Inference",
    "InferenceHandle",
    "InputError",
    "JsonLinesSpanExporter",
    "LatencyBudgetExceeded",
    "LatencyBudgetWarning",
    "ProfileError",
    "Rollup",
    "SpecError",
    "StepHandle",
    "StepName",
    "StepTiming",
    "Tool",
    "TraceSourceError",
    "WhatIfResult",
    "Workflow",
    "WorkflowHandle",
    "WorkflowRun",
    "bind_context",
    "compare",
    "configure",
    "current_step",
    "current_workflow",
    "data_stage",
    "inference",
    "instrument_httpx",
    "record_outcome",
    "shutdown",
    "step",
    "step_name",
    "tool",
    "uninstrument_httpx",
    "whatif",
    "workflow",
]
