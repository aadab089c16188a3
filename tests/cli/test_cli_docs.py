"""docs/cli.md describes every option of every command, and no option that is not there."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from chainlat.cli import build_parser

REPO = Path(__file__).resolve().parents[2]


def _options(parser: argparse.ArgumentParser) -> set[str]:
    found: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
        found |= {o for o in action.option_strings if o.startswith("--") and o != "--help"}
    return found


def test_docs_cli_names_every_option_of_every_command() -> None:
    docs = (REPO / "docs" / "cli.md").read_text()
    options = _options(build_parser())
    assert {"--workflow", "--variant", "--settle-lines", "--format"} <= options
    missing = [o for o in options if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", docs)]
    assert sorted(missing) == []


def test_docs_cli_tables_name_no_option_the_commands_lack() -> None:
    docs = (REPO / "docs" / "cli.md").read_text()
    tabled = set(re.findall(r"^\| `(--[a-z-]+)", docs, re.MULTILINE))
    assert tabled and tabled <= _options(build_parser())


def test_the_readme_points_to_the_command_reference() -> None:
    assert "(docs/cli.md)" in (REPO / "README.md").read_text()
