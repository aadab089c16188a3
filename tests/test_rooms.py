"""Rooms talk through doors: no module imports or reaches another module's ``_private`` name,
and no room imports another room's private module. How long a module or function is, is no
rule: ``scripts/sizes.py`` reports the long ones, a reason to look, never a number to meet."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.privacy import PACKAGE, reaches


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
