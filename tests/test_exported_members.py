"""The public surface is deliberate: this list changes only on purpose."""

from __future__ import annotations

import pytest

import chainlat

# The public names, written out: adding, renaming or removing one is a change of this list.
PUBLIC = [
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


def test_all_is_exactly_the_pinned_list() -> None:
    assert chainlat.__all__ == PUBLIC


def test_every_error_the_public_api_raises_is_exported() -> None:
    from chainlat._core import errors

    raised = {
        name
        for name, value in vars(errors).items()
        if isinstance(value, type) and issubclass(value, (errors.ChainlatError, Warning))
    }
    assert raised <= set(PUBLIC)


def test_old_names_stay_as_aliases_that_warn() -> None:
    """``chainlat.step`` is the former name of ``chainlat.step_name``: same object type,
    and a ``DeprecationWarning`` that names the new one, pointing at the caller's line."""
    with pytest.warns(DeprecationWarning, match=r"use chainlat\.step_name\(\)") as caught:
        old = chainlat.step("x")
    assert type(old) is type(chainlat.step_name("x")) is chainlat.StepName
    assert [w.filename for w in caught] == [__file__]
    assert "Deprecated" in (chainlat.step.__doc__ or "")


def test_the_file_exporter_is_public_under_its_documented_name() -> None:
    from pathlib import Path

    readme = (Path(__file__).parent.parent / "README.md").read_text()
    assert "chainlat.JsonLinesSpanExporter" in readme
    assert chainlat.JsonLinesSpanExporter.__module__ == "chainlat._runtime.otlp_json"


def test_all_is_sorted_and_complete() -> None:
    assert chainlat.__all__ == sorted(chainlat.__all__)
    for name in chainlat.__all__:
        assert hasattr(chainlat, name), name
    classes_and_functions = {
        name
        for name, value in vars(chainlat).items()
        if not name.startswith("_") and (isinstance(value, type) or callable(value))
    }
    assert classes_and_functions <= set(chainlat.__all__)


def test_core_api_is_present() -> None:
    for name in ("configure", "shutdown", "workflow", "inference", "data_stage", "tool", "Rollup"):
        assert name in chainlat.__all__


def test_import_is_cheap() -> None:
    import subprocess
    import sys

    code = (
        "import sys, chainlat; "
        "heavy = ('pytest', 'rich', 'plotly', 'chainlat.cli', 'openai', 'httpx2'); "
        "heavy = [m for m in heavy if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_the_errors_the_api_raises_are_exported() -> None:
    """``whatif`` raises ``SpecError``: exported, and caught as a ``ChainlatError``."""
    from chainlat.analysis.whatif import SpecError

    assert chainlat.SpecError is SpecError
    assert "SpecError" in chainlat.__all__
    assert issubclass(chainlat.SpecError, chainlat.ChainlatError)
