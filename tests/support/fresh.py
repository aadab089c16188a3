"""Python code run by a fresh interpreter: what importing chainlat loads, seen from nothing
imported before it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def fresh_python(code: str, cwd: Path | None = None) -> str:
    """What ``code`` prints, run by a fresh interpreter; it must exit 0 (else its stderr
    is the failure's message)."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout
