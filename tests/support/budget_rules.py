"""Budget files for the Prometheus-rules tests in tests/prometheus/test_budget_rules_*.py,
and the loader that reads them as ``chainlat.toml``."""

from __future__ import annotations

import tomllib

from chainlat.budgets import Budgets, parse_budgets

BUDGET_TOML = """
min_runs = 20

[workflows.chat]
total = "800ms"
data = "250ms"
p95 = { total = "700ms", data = "200ms" }

[workflows.chat.steps."chat gpt-4o"]
max = "600ms"
p95 = "500ms"
ttft_p95 = "250ms"
"""


BUDGET_KEYS_TOML = """
min_runs = 20

[prices]
"sim-model" = { input_per_mtok = "1.0", output_per_mtok = "2.0" }

[workflows.voice]
first_output = "300ms"
error_rate = "2%"
cost = "0.01"
cost_p95 = "0.008"
p95 = { first_output = "250ms" }
"""


def budgets_of(text: str = BUDGET_TOML) -> Budgets:
    return parse_budgets(tomllib.loads(text), source="chainlat.toml")
