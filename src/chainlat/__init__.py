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

from chainlat._config import configure, shutdown
from chainlat._errors import (
    BudgetFileError,
    ChainlatError,
    ConfigError,
    InputError,
    LatencyBudgetExceeded,
    LatencyBudgetWarning,
    TraceSourceError,
)
from chainlat._processor import ChainlatSpanProcessor
from chainlat._rollup import Rollup
from chainlat._runs import BudgetViolation, StepTiming, WorkflowRun
from chainlat._spans import (
    DataStage,
    Inference,
    InferenceHandle,
    StepHandle,
    Tool,
    Workflow,
    WorkflowHandle,
    bind_context,
    current_step,
    current_workflow,
    data_stage,
    inference,
    record_outcome,
    tool,
    workflow,
)
from chainlat.compare import Comparison, compare
from chainlat.httpx import instrument_httpx, uninstrument_httpx
from chainlat.whatif import WhatIfResult, whatif

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
    "LatencyBudgetExceeded",
    "LatencyBudgetWarning",
    "Rollup",
    "StepHandle",
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
    "tool",
    "uninstrument_httpx",
    "whatif",
    "workflow",
]
