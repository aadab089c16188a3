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
from chainlat._core.rollup import Rollup
from chainlat._core.runs import BudgetViolation, StepTiming, WorkflowRun
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
