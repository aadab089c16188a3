"""Rooms talk through doors, and each room holds one concern: no module imports or reaches
another module's ``_private`` name, no room imports another room's private module, no module
is over 600 lines and no function over 80 (or it says why it is better whole); no test module
over 600 lines either (one topic each)."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.privacy import MAX_MODULE_LINES, PACKAGE, long_functions, long_modules, reaches


def test_no_module_reaches_past_another_rooms_door() -> None:
    found = reaches()
    assert not found, "\n".join(map(str, found))


def test_a_private_name_used_across_modules_is_found(tmp_path: Path) -> None:
    copy = tmp_path / "chainlat"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "cli" / "sneaky.py").write_text(
        "from chainlat._runtime import spans\n"
        "from chainlat.traces._parse import loads\n"
        "from chainlat._core.errors import _reported\n"
        "spans._private_thing()\n"
    )
    found = {(r.line, r.what) for r in reaches(copy) if r.file.name == "sneaky.py"}
    assert found == {
        (2, "imports from chainlat.traces._parse (_parse)"),
        (3, "imports chainlat._core.errors._reported"),
        (4, "uses chainlat._runtime.spans._private_thing"),
    }


def test_no_module_over_600_lines() -> None:
    found = long_modules()
    assert not found, "\n".join(found)


def test_no_test_module_over_600_lines() -> None:
    tests = Path(__file__).resolve().parent
    found = [
        f"{path}: {lines} lines"
        for path in sorted(tests.rglob("test_*.py"))
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not found, "\n".join(found)


def test_no_function_over_80_lines_unless_it_says_why() -> None:
    found = long_functions()
    assert not found, "\n".join(found)
