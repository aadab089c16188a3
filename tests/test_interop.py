"""The interop matrix: each framework stack's traces read by chainlat as chainlat's own.

Every stack runs ``tests/interop/run.py --stack NAME`` (its environment is built from
PyPI the first time, then cached under ``~/.cache/chainlat/interop``): each case must be
right (the reference's counts, tokens and critical-path split) and judged by ``chainlat
check`` with the reference's verdicts. A stack whose environment cannot be set up fails
with pip's one-line reason. ``CHAINLAT_INTEROP=0`` skips the stacks, visibly.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

RUN = Path(__file__).parent / "interop" / "run.py"


def _load_run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chainlat_interop_run", RUN)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


run = _load_run()
STACKS = cast("tuple[str, ...]", run.STACKS)


def _run_dict(inference: int = 5, data: float = 30.0, tool: float = 25.0) -> dict[str, Any]:
    return {
        "workflow": "agent",
        "counts": {"inference": inference, "data": 1, "tool": 1},
        "tokens": {"input": 100, "output": 100},
        "split_ms": {
            "total": 400.0,
            "inference": 300.0,
            "data": data,
            "tool": tool,
            "overhead": 45.0,
        },
    }


def test_compare_holds_within_the_tolerance() -> None:
    """A case 1.5 ms off the reference in one kind is right."""
    reference = _run_dict()
    assert run.compare("openai-v2", reference, [_run_dict(data=31.5)] * 3) == []


def test_compare_names_each_difference() -> None:
    """Counts, and a kind beyond its tolerance, are named in the verdict."""
    differs = run.compare("openai-v2", _run_dict(), [_run_dict(inference=4, tool=20.0)] * 3)
    assert differs == ["inference count 4, reference 5", "tool -5.0 ms (tolerance 2 + noise 0.0)"]


def test_tokens_may_be_what_the_framework_sent() -> None:
    """Other tokens than the reference's are right when they are the wire's for the stack."""
    case = {**_run_dict(), "tokens": {"input": 90, "output": 100}}
    assert run.compare("x", _run_dict(), [case], wire_tokens={"input": 90, "output": 100}) == []
    assert run.compare("x", _run_dict(), [case], wire_tokens={"input": 95, "output": 100}) == [
        "input tokens 90, reference 100, on the wire 95"
    ]


def test_tolerance_adds_the_noise_and_the_frameworks_own_time() -> None:
    """Inference may differ by the framework's time per call on the critical path, plus noise."""
    reference = {**_run_dict(), "spread_ms": {"inference": 1.5, "tool": 0.5}}
    assert run.tolerance_ms("openai-v2", "inference", reference, 2.0) == (
        11.5,
        "2 + noise 1.5 + framework 4 x 2.0",
    )
    assert run.tolerance_ms("openai-v2", "tool", reference, 2.0) == (2.5, "2 + noise 0.5")


def test_budget_files_keep_and_break_the_reference(tmp_path: Path) -> None:
    """The keep budget leaves room over the reference's medians; a broken one halves one kind."""
    files = run.budget_files(_run_dict(), "my agent", tmp_path)
    assert files["keep"].read_text() == (
        '[workflows."my agent"]\n'
        'p50 = { total = "490.0ms", inference = "370.0ms", data = "46.0ms", tool = "40.0ms" }\n'
    )
    assert files["data-broken"].read_text() == '[workflows."my agent"]\np50 = { data = "15.0ms" }\n'


@pytest.mark.interop
@pytest.mark.parametrize("stack", STACKS)
def test_stack_is_read_like_the_reference(stack: str, tmp_path: Path) -> None:
    """Every case of the stack is right and judged (see tests/interop/README.md)."""
    if os.environ.get("CHAINLAT_INTEROP") == "0":
        pytest.skip("CHAINLAT_INTEROP=0: the interop matrix is turned off")
    done = subprocess.run(
        [sys.executable, str(RUN), "--stack", stack, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    summary_file = tmp_path / "summary.json"
    if not summary_file.exists():
        pytest.fail(f"{stack}: run.py wrote no summary: {done.stderr.strip()[-300:]}", False)
    entry = json.loads(summary_file.read_text())["stacks"][stack]
    if "setup_error" in entry:
        pytest.fail(entry["setup_error"], pytrace=False)
    bad = [line for line in done.stdout.splitlines() if "WRONG" in line or "NOT JUDGED" in line]
    assert not bad, "\n".join(bad)
    assert done.returncode == 0, done.stdout + done.stderr
