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
    return sum(thread_instructions(args, check=check))


def thread_instructions(
    args: Sequence[str], *, check: bool = True, options: Sequence[str] = ()
) -> list[int]:
    """Instructions ``args`` executed, per thread, the main thread first (hash seed fixed).
    ``options``: more of callgrind's (``--toggle-collect=F`` counts only inside ``F``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                *options,
                f"--callgrind-out-file={out}",
                *args,
            ],
            check=check,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        counts = []
        # One file per thread, out-01 for the main thread (callgrind numbers them).
        for path in sorted(
            Path(tmp).glob("callgrind.out-*"), key=lambda p: int(p.name.split("-")[-1])
        ):
            found = _TOTAL.search(path.read_bytes())
            if found is None:
                raise RuntimeError(f"no callgrind summary for {list(args[:4])} in {path.name}")
            counts.append(int(found.group(1)))
        if not counts:
            raise RuntimeError(f"no callgrind output for {list(args[:4])}")
        return counts


_LINE = re.compile(r"^\s*([\d,]+)\s+\([^)]*\)\s+(.+?)\s*$")


def function_instructions(args: Sequence[str]) -> dict[str, int]:
    """Instructions ``args`` executed, all its threads, by function: each function's own
    (``callgrind_annotate``'s exclusive counts, every function it lists), the program's
    total under ``PROGRAM TOTALS`` (hash seed fixed)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
        listing = subprocess.run(
            ["callgrind_annotate", "--threshold=100", str(out)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    found: dict[str, int] = {}
    for line in listing.splitlines():
        match = _LINE.match(line)
        if match:
            name = match.group(2)
            found[name] = found.get(name, 0) + int(match.group(1).replace(",", ""))
    return found
