"""The budgets package: its public names, and what importing it costs."""

from __future__ import annotations

from pathlib import Path

import chainlat.budgets
from support.fresh import fresh_python


def test_importing_budgets_loads_neither_pydantic_nor_yaml(tmp_path: Path) -> None:
    """Only loading (or building) a budget imports pydantic, and only a YAML file YAML's
    parser: judging runs needs neither, a TOML or JSON file no YAML."""
    (tmp_path / "chainlat.toml").write_text('[workflows.w]\ntotal = "1s"\n')
    (tmp_path / "chainlat.json").write_text('{"workflows": {"w": {"total": "1s"}}}')
    (tmp_path / "chainlat.yaml").write_text("workflows:\n  w:\n    total: 1s\n")
    code = (
        "import sys, chainlat.budgets\n"
        "from chainlat.budgets import BudgetReport, LimitVerdict, evaluate, check_run\n"
        "def loaded():\n"
        "    return sorted(m for m in ('pydantic', 'pydantic_core', 'yaml') if m in sys.modules)\n"
        "print(loaded())\n"
        "chainlat.budgets.parse_budgets({'workflows': {'w': {'total': '1s'}}})\n"
        "print(loaded())\n"
        "for name in ('chainlat.toml', 'chainlat.json', 'chainlat.yaml'):\n"
        "    budgets = chainlat.budgets.load_budgets(name)\n"
        "    print(name, budgets.workflows['w'].total, loaded())\n"
    )
    assert fresh_python(code, tmp_path).splitlines() == [
        "[]",
        "['pydantic', 'pydantic_core']",
        "chainlat.toml 1000.0 ['pydantic', 'pydantic_core']",
        "chainlat.json 1000.0 ['pydantic', 'pydantic_core']",
        "chainlat.yaml 1000.0 ['pydantic', 'pydantic_core', 'yaml']",
    ]


def test_loading_a_budget_parses_no_source() -> None:
    """The models' field docstrings are read for the JSON Schema only: pydantic's reading of
    them (``use_attribute_docstrings``) parsed each model class's source, twice, at load."""
    code = (
        "import sys\n"
        "parsed = []\n"
        "def hook(event, args):\n"
        "    if event == 'compile':\n"
        "        source = args[0].decode() if isinstance(args[0], bytes) else args[0]\n"
        "        if isinstance(source, str) and source.lstrip().startswith('class '):\n"
        "            parsed.append(source.split('(')[0])\n"
        "sys.addaudithook(hook)\n"
        "import chainlat.budgets\n"
        "chainlat.budgets.parse_budgets({'workflows': {'w': {'total': '1s'}}})\n"
        "print(parsed)\n"
    )
    assert fresh_python(code).splitlines() == ["[]"]


def test_every_public_name_resolves() -> None:
    for name in chainlat.budgets.__all__:
        assert getattr(chainlat.budgets, name) is not None, name
