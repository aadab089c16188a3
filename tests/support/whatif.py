"""Latency profiles for the ``chainlat whatif`` command tests: a big and a small model,
with known per-token costs, written beside their trace files as ``profiles.toml``."""

from __future__ import annotations

from typing import Final

PROFILES: Final = """
[models.big]
ttft_base_ms = 50
ttft_per_input_token_ms = 0.5
decode_ms_per_token = 10

[models.small]
ttft_base_ms = 20
ttft_per_input_token_ms = 0.1
decode_ms_per_token = 2
"""
