"""The benchmark scripts (``benchmarks/*.py``) as modules, for the tests that hold them."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def bench_script(name: str) -> ModuleType:
    """``benchmarks/{name}.py`` as a module, without putting the benchmarks on sys.path."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
