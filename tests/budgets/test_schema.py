"""The JSON Schema of budget files: each field described by the docstring under it, read
when the schema is asked for (loading a budget does not)."""

from __future__ import annotations

import inspect

import pytest
from pydantic._internal._docs_extraction import extract_docstrings_from_cls

from chainlat.budgets import json_schema, model


def test_json_schema_describes_each_field_by_its_docstring_as_pydantic_reads_them() -> None:
    """The descriptions pydantic's ``use_attribute_docstrings`` would give, read for the
    schema only (its own extraction is the reference here)."""
    schema = json_schema()
    described = 0
    for cls in vars(model).values():
        if not (isinstance(cls, type) and issubclass(cls, model.BudgetModel)):
            continue
        found = schema if cls is model.Budgets else schema["$defs"].get(cls.__name__)
        docs = extract_docstrings_from_cls(cls, use_inspect=True)
        if found is None:
            assert not docs, cls.__name__  # a model no budget file reaches
            continue
        for name, prop in found["properties"].items():
            assert list(prop) == sorted(prop), (cls.__name__, name)
            if name in docs:  # else its type's own description, if any (a duration, money)
                assert prop["description"] == docs[name], (cls.__name__, name)
                described += 1
    assert described == 34  # every documented field but the pNN mappings (pattern properties)


def test_json_schema_without_the_models_source_has_no_field_docstrings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Installed without ``model.py``'s source, the schema is still made (pydantic's own
    reading of the docstrings gave none then either)."""

    def no_source(obj: object) -> str:
        raise OSError("could not get source code")

    full = json_schema()
    monkeypatch.setattr(inspect, "getsource", no_source)
    bare = json_schema()
    min_runs = [s["$defs"]["WorkflowBudget"]["properties"]["min_runs"] for s in (full, bare)]
    assert ["description" in found for found in min_runs] == [True, False]
    assert bare["$defs"].keys() == full["$defs"].keys()
