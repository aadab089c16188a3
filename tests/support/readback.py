"""A captured run two ways: read back from an OTLP JSON lines file and built from the SDK
spans in memory, for the rollup-rule tests that check a rule holds both ways."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.util.types import Attributes

from chainlat._core.runs import WorkflowRun
from chainlat._runtime.otlp_json import JsonLinesSpanExporter
from chainlat.testing import Capture
from chainlat.traces import read_runs
from chainlat.traces.sdk import runs_from_spans


def _read_back(cap: Capture, tmp_path: Path) -> WorkflowRun:
    path = tmp_path / "traces.jsonl"
    exporter = JsonLinesSpanExporter(str(path))
    exporter.export(cap.spans())
    exporter.shutdown()
    [run] = read_runs([path])
    return run


def both_ways(cap: Capture, tmp_path: Path) -> list[WorkflowRun]:
    """The run read back from a file and built from the SDK spans in memory."""
    [in_memory] = runs_from_spans(cap.spans())
    return [_read_back(cap, tmp_path), in_memory]


def openinference_llm(model: str, **extra: object) -> Attributes:
    """An OpenInference LLM span's attributes for ``model``, with ``extra`` beside."""
    return {"openinference.span.kind": "LLM", "llm.model_name": model, **extra}  # type: ignore[dict-item]
