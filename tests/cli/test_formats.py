"""The output formats come from one registry (``chainlat.cli.formats``): every command
offers exactly the formats of the kinds of result it prints, and chooses no renderer itself."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from chainlat.cli import build_parser
from chainlat.cli.formats import RENDERERS, formats

CLI = Path(__file__).resolve().parents[2] / "src" / "chainlat" / "cli"

KINDS: dict[str, tuple[str, ...]] = {
    "check": ("check", "prometheus"),
    "report": ("stats",),
    "diff": ("diff",),
    "profile": ("profiles",),
    "whatif": ("whatif",),
    "compare": ("comparison",),
    "serve": ("check", "stats"),
    "run": ("check", "stats"),
}
"""The kinds of result each command prints, by the command's name."""


def _format_choices(
    parser: argparse.ArgumentParser, prefix: str = ""
) -> dict[str, tuple[object, ...]]:
    """Every (sub)command's ``--format`` choices, by the command's name."""
    found: dict[str, tuple[object, ...]] = {}
    for action in parser._actions:
        if "--format" in action.option_strings:
            found[prefix.strip()] = tuple(action.choices or ())
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_format_choices(sub, f"{prefix}{name} "))
    return found


CHOICES = _format_choices(build_parser())


def test_every_command_with_a_format_names_the_kinds_it_prints() -> None:
    assert set(CHOICES) == set(KINDS)


@pytest.mark.parametrize("command", sorted(KINDS))
def test_a_commands_format_choices_are_the_registrys_for_its_kinds(command: str) -> None:
    assert CHOICES[command] == formats(*KINDS[command])
    for kind in KINDS[command]:
        assert set(CHOICES[command]) == set(RENDERERS[kind])


def test_every_kind_in_the_registry_is_printed_by_a_command() -> None:
    assert {kind for kinds in KINDS.values() for kind in kinds} == set(RENDERERS)


def test_no_command_chooses_a_renderer_by_format_itself() -> None:
    for path in sorted(CLI.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"\b(format|fmt) *[!=]=", text), path.name
