"""The JSON Schema of budget files, for editors and CI linters."""

from __future__ import annotations

from typing import Any

from chainlat.budgets._values import DURATION_SCHEMA, MONEY_SCHEMA, percentile_schema
from chainlat.budgets.model import Budgets


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a budget file (draft 2020-12), for editors and CI linters.

    Example::

        import json
        print(json.dumps(chainlat.budgets.json_schema(), indent=2))
    """
    schema = Budgets.model_json_schema()
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
