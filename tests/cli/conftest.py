"""Fixtures of the CLI tests; plain helpers live in tests/support/.

good_traces  Path  a traces file of three runs of workflow ``answer``, within budget
budgets      Path  ``chainlat.toml`` with budgets for ``answer`` (a module may override it)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.check_input import VALID_TOML, workflow_request


@pytest.fixture
def good_traces(tmp_path: Path) -> Path:
    """Three runs of workflow ``answer`` (`workflow_request`), within the `budgets`."""
    path = tmp_path / "traces.jsonl"
    path.write_text(json.dumps(workflow_request()) + "\n")
    return path


@pytest.fixture
def budgets(tmp_path: Path) -> Path:
    """``chainlat.toml`` holding `VALID_TOML`: budgets for workflow ``answer``."""
    path = tmp_path / "chainlat.toml"
    path.write_text(VALID_TOML)
    return path
