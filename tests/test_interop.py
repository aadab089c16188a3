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
    """Noise: 3 median absolute deviations of the reference's runs and the case's, combined,
    plus the reference's drift. The framework's work inside its model-call spans (8 ms on
    the critical path) is allowed on inference only where chainlat cannot see the wire."""
    reference = {
        **_run_dict(),
        "spread_ms": {"inference": 0.5, "tool": 0.5, "overhead": 1.0},
        "drift_ms": {"inference": 1.0, "tool": 0.0, "overhead": 0.0},
    }
    case = {"spread_ms": {"inference": 0.0, "tool": 1.2, "overhead": 0.0}}
    assert run.tolerance_ms("openai-v2", "inference", reference, 8.0, False, case) == (
        12.5,
        "2 + noise 2.5 + framework 8.0",
    )
    assert run.tolerance_ms("openai-v2", "inference", reference, 8.0, True, case) == (
        4.5,
        "2 + noise 2.5",
    )
    assert run.tolerance_ms("openai-v2", "overhead", reference, 8.0, True, case) == (
        5.0,
        "2 + noise 3.0",
    )
    assert run.tolerance_ms("openai-v2", "tool", reference, 8.0, False, case) == (
        pytest.approx(2 + 3 * 1.3),
        "2 + noise 3.9",
    )


def test_the_reference_drift_is_how_far_its_median_moved() -> None:
    before = [_run_dict(data=30.0), _run_dict(data=31.0), _run_dict(data=30.0)]
    after = [_run_dict(data=36.0), _run_dict(data=35.0), _run_dict(data=36.0)]
    reference = run.reference_of(before, after)
    assert reference["drift_ms"]["data"] == 6.0
    assert reference["split_ms"]["data"] == 33.0  # the median of all six
    assert reference["spread_ms"]["data"] == 3.0


def test_overhead_is_reported_not_judged() -> None:
    """Overhead is the total minus the judged kinds: above the reference's, it is the
    framework's own time."""
    case = _run_dict()
    case["split_ms"] = {**case["split_ms"], "total": 480.0, "overhead": 125.0}
    assert run.compare("x", _run_dict(), [case]) == []


def test_a_lost_step_is_wrong_whatever_the_noise() -> None:
    """The kinds on the critical path, compared run by run: load moves times, never them."""
    reference = {**_run_dict(), "path_kinds": ["data", "inference", "tool"]}
    case = {**_run_dict(), "path_kinds": ["inference", "tool"]}
    assert run.compare("x", reference, [case]) == [
        "critical path inference, tool, reference data, inference, tool"
    ]


def test_a_case_timed_by_the_wire_gets_no_framework_time_on_inference() -> None:
    """+httpx: the wire times the calls, so inference 6 ms over the reference is wrong even
    when the framework spends 8 ms inside its spans; without the wire it is right."""
    reference = _run_dict()
    case = _run_dict()
    case["split_ms"] = {**case["split_ms"], "inference": 306.0, "overhead": 39.0}
    wired = {**case, "in_span_ms": 8.0}
    assert run.compare("x", reference, [wired], in_span_ms=8.0) == [
        "inference +6.0 ms (tolerance 2 + noise 0.0)"
    ]
    assert run.compare("x", reference, [case], in_span_ms=8.0) == []


def test_budget_files_keep_and_break_the_reference(tmp_path: Path) -> None:
    """The keep budget leaves room over the reference's medians; a broken one halves one kind."""
    files = run.budget_files(_run_dict(), "my agent", tmp_path)
    assert files["keep"].read_text() == (
        '[workflows."my agent"]\n'
        'p50 = { inference = "370.0ms", data = "46.0ms", tool = "40.0ms" }\n'
    )
    assert files["data-broken"].read_text() == '[workflows."my agent"]\np50 = { data = "15.0ms" }\n'
    roomy = run.budget_files(_run_dict(), "w", tmp_path, {"inference": 95.0, "data": 3.0})
    assert roomy["keep"].read_text() == (
        '[workflows."w"]\np50 = { inference = "395.0ms", data = "46.0ms", tool = "40.0ms" }\n'
    )


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
