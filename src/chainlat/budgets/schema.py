"""The JSON Schema of budget files, for editors and CI linters."""

from __future__ import annotations

import ast
import inspect
from typing import Any

from chainlat.budgets import model
from chainlat.budgets._values import DURATION_SCHEMA, MONEY_SCHEMA, percentile_schema
from chainlat.budgets.model import Budgets


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a budget file (draft 2020-12), for editors and CI linters.

    Example::

        import json
        print(json.dumps(chainlat.budgets.json_schema(), indent=2))
    """
    schema = Budgets.model_json_schema()
    _describe_fields(schema)
    # The pNN keys are gathered into internal mappings by the models; in the file
    # they are plain keys, so the schema shows them as pattern properties.
    defs = schema["$defs"]
    step = defs["StepBudget"]
    step["properties"].pop("percentiles")
    step["properties"].pop("ttft_percentiles")
    step["patternProperties"] = {
        **percentile_schema(DURATION_SCHEMA),
        **percentile_schema(DURATION_SCHEMA, "ttft_"),
    }
    step["description"] = (
        "Limits on one step, by span name: max (each occurrence), pNN (a percentile "
        "of all occurrences), ttft and ttft_pNN (time to first token of model calls)."
    )
    operation = defs["OperationBudget"]
    operation["properties"].pop("percentiles")
    operation["patternProperties"] = percentile_schema({"$ref": "#/$defs/OperationLimits"})
    operation["description"] = (
        "Limits on every call of one operation (text_to_speech, speech_to_text, chat, ...) "
        "in a workflow's runs: latency and first_output (each call), pNN = { latency, "
        "first_output } (a percentile over all the calls)."
    )
    workflow = defs["WorkflowBudget"]
    workflow["properties"].pop("percentiles")
    workflow["properties"].pop("cost_percentiles")
    workflow["patternProperties"] = {
        **percentile_schema({"anyOf": [DURATION_SCHEMA, {"$ref": "#/$defs/QuantityLimits"}]}),
        **percentile_schema(MONEY_SCHEMA, "cost_"),
    }
    workflow["description"] = (
        "The budget of one workflow: per-run limits (total, inference, data, tool, "
        "overhead, first_output, cost), percentile limits over many runs (p50, p90, p95, "
        "p99 or any pNN; cost_pNN), the share of failed runs (error_rate), per-step "
        "limits and limits on every call of an operation."
    )
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "chainlat latency budgets"
    schema["description"] = (
        "Latency budgets for multi-step AI workflows (chainlat.toml, [tool.chainlat] in "
        'pyproject.toml, or chainlat.yaml). Durations are strings like "800ms", "1.2s", '
        '"250us", or numbers of milliseconds.'
    )
    return schema


def _describe_fields(schema: dict[str, Any]) -> None:
    """Each model's fields described by the string written under them in ``model.py``, as
    pydantic's ``use_attribute_docstrings`` would (each property's keys kept in the sorted
    order pydantic writes them in)."""
    defs = schema["$defs"]
    for name, docs in _field_docs().items():
        found = schema if name == Budgets.__name__ else defs.get(name)
        if found is None:
            continue
        properties = found["properties"]
        for field, doc in docs.items():
            if field in properties:
                properties[field] = dict(sorted({**properties[field], "description": doc}.items()))


def _field_docs() -> dict[str, dict[str, str]]:
    """The string under each annotated field of each class in ``model.py``, by class."""
    found: dict[str, dict[str, str]] = {}
    try:
        source = inspect.getsource(model)
    except (OSError, TypeError):  # installed without its source: no descriptions, as pydantic
        return found
    for node in ast.parse(source).body:
        if not isinstance(node, ast.ClassDef):
            continue
        docs = found[node.name] = {}
        for field, after in zip(node.body, node.body[1:], strict=False):
            if (
                isinstance(field, ast.AnnAssign)
                and isinstance(field.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[field.target.id] = inspect.cleandoc(after.value.value)
    return found
