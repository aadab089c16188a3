"""The public surface is deliberate: this list changes only on purpose."""

from __future__ import annotations

import chainlat


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
