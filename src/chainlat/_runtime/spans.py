"""The step API in one place: what ``chainlat`` re-exports from the runtime.

Defined in :mod:`~chainlat._runtime.steps` (the step objects and their factories),
:mod:`~chainlat._runtime.handles` (the live handles), :mod:`~chainlat._runtime.naming`
(``step_name``) and :mod:`~chainlat._runtime.outcomes`.
"""

from __future__ import annotations

from chainlat._runtime.handles import (
    InferenceHandle,
    StepHandle,
    WorkflowHandle,
    bind_context,
    current_step,
    current_workflow,
)
from chainlat._runtime.naming import StepName, step, step_name
from chainlat._runtime.outcomes import outcome_attributes, record_outcome
from chainlat._runtime.steps import (
    DataStage,
    Inference,
    Tool,
    Workflow,
    data_stage,
    inference,
    tool,
    workflow,
)

__all__ = [
    "DataStage",
    "Inference",
    "InferenceHandle",
    "StepHandle",
    "StepName",
    "Tool",
    "Workflow",
    "WorkflowHandle",
    "bind_context",
    "current_step",
    "current_workflow",
    "data_stage",
    "inference",
    "outcome_attributes",
    "record_outcome",
    "step",
    "step_name",
    "tool",
    "workflow",
]
