"""The docs name code that exists: every module, symbol and path that README.md and
docs/*.md cite resolves."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.docrefs import ROOT, documents, problem, references, source_references


def test_every_code_reference_in_the_docs_resolves() -> None:
    broken = [
        f"{ref}: {why}"
        for doc in documents()
        for ref in references(doc)
        if (why := problem(ref)) is not None
    ]
    assert not broken, "\n".join(broken)


def test_every_code_reference_in_the_docstrings_resolves() -> None:
    broken = [f"{ref}: {why}" for ref in source_references() if (why := problem(ref)) is not None]
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize(
    ("text", "resolves"),
    [
        ("chainlat.traces.read_runs", True),
        ("traces.read_runs(sources)", True),
        ("chainlat.chain.total_ms", True),
        ("chainlat.chain.*", True),
        ("src/chainlat/_core/attributes.py", True),
        ("tests/*/test_fuzz_*.py", True),
        ("gen_ai.request.model", True),
        ("chainlat.traces.read_run_trees", False),
        ("traces.read_run_trees", False),
        ("chainlat.chian.total_ms", False),
        ("src/chainlat/_core/nowhere.py", False),
        ("_runtime/nowhere.py", False),
        ("tests/test_nothing_*.py", False),
    ],
)
def test_a_reference_resolves_only_when_the_code_is_there(text: str, resolves: bool) -> None:
    from support.docrefs import Reference

    assert (problem(Reference(ROOT / "README.md", 1, text)) is None) is resolves


def test_a_wrong_reference_in_a_document_is_reported_with_its_line(tmp_path: Path) -> None:
    doc = tmp_path / "wrong.md"
    doc.write_text("# Doc\n\nReads with `chainlat.traces.read_runs`.\n\nSee `rollup.clasify`.\n")
    found = [(ref.line, ref.text, problem(ref)) for ref in references(doc)]
    assert found[0] == (3, "chainlat.traces.read_runs", None)
    assert found[1][:2] == (5, "rollup.clasify")
    assert found[1][2] is not None
    assert "no clasify in chainlat._core.rollup" in found[1][2]
