"""Instructions a command executes, counted by ``valgrind --tool=callgrind``.

Load on a shared machine moves time, not instruction counts: the ``callgrind_*.py``
benchmarks count with this one helper.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

_TOTAL = re.compile(rb"^summary:\s*(\d+)", re.MULTILINE)


def instructions(args: Sequence[str], *, check: bool = True) -> int:
    """Instructions ``args`` executed, all its threads (hash seed fixed). ``check``: a
    non-zero exit is an error (``chainlat check`` exits 1 on a broken budget: not one)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *args],
            check=check,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        found = _TOTAL.search(out.read_bytes())
        if found is None:
            raise RuntimeError(f"no callgrind summary for {list(args[:4])}")
        return int(found.group(1))
