"""promtool from collector/build.sh, or a visible skip (a failure under CI) without it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BUILD_SH = Path(__file__).resolve().parents[2] / "collector" / "build.sh"


def find_promtool() -> Path:
    """The cached promtool; skips with one line saying why when it is not built."""
    required = os.environ.get("CHAINLAT_REQUIRE_INTEGRATION") == "1"
    done = subprocess.run(
        [str(BUILD_SH), "--print" if required else "--check", "prometheus"],
        capture_output=True,
        text=True,
        timeout=60 * 60,
        check=False,
    )
    if done.returncode != 0:
        reason = f"promtool is not built (collector/build.sh prometheus): {done.stderr.strip()}"
        if required:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    return Path(done.stdout.splitlines()[-1])


def check_rules(promtool: Path, rules: Path) -> subprocess.CompletedProcess[str]:
    """``promtool check rules FILE``."""
    return subprocess.run(
        [str(promtool), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
