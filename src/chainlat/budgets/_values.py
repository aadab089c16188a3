"""Values in a budget file: durations, shares of runs, US dollars and percentile keys.

Pure parsing, for the models' validators; a bad value raises pydantic-core's custom error
(imported only then), which the models turn into a message naming the key.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from chainlat._core.errors import SHOWN_CHARS, shorten, shown


def _invalid(kind: str, message: str) -> Exception:
    from pydantic_core import PydanticCustomError

    return PydanticCustomError(kind, message)


_UNIT_MS: Final = {
    "ns": 1e-6,
    "us": 1e-3,
    "µs": 1e-3,
    "μs": 1e-3,
    "ms": 1.0,
    "s": 1000.0,
    "m": 60_000.0,
    "min": 60_000.0,
}
_DURATION_RE: Final = re.compile(r"^\s*(-?)\s*(\d+(?:\.\d*)?|\.\d+)\s*(ns|us|µs|μs|ms|s|min|m)\s*$")
_DURATION_HINT: Final = (
    'expected a duration like "800ms", "1.2s", "250us" or a number of milliseconds'
)
DURATION_SCHEMA: Final[dict[str, Any]] = {
    "description": 'A duration: "800ms", "1.2s", "250us", "90ns", "2m", or milliseconds.',
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*(\d+(\.\d*)?|\.\d+)\s*(ns|us|µs|μs|ms|s|min|m)\s*$"},
    ],
}
_PERCENTILE_RE: Final = re.compile(r"^p(\d+(?:\.\d+)?)$")
_PERCENTILE_KEY_SCHEMA: Final = r"^p([1-9][0-9]?(\.[0-9]+)?|0\.[0-9]*[1-9][0-9]*)$"


def parse_duration(value: object) -> float:
    """A budget duration in milliseconds.

    Example::

        assert parse_duration("1.2s") == 1200.0
        assert parse_duration("250us") == 0.25
        assert parse_duration(800) == 800.0
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _invalid("duration", f"{_DURATION_HINT}, got {show(value)}")
    if isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match is None:
            raise _invalid("duration", f"{_DURATION_HINT}, got {show(value)}")
        sign, number, unit = match.groups()
        ms = float(number) * _UNIT_MS[unit] * (-1 if sign else 1)
    else:
        ms = float(value)
    if math.isnan(ms) or math.isinf(ms):
        raise _invalid("duration", f"{_DURATION_HINT}, got {show(value)}")
    if ms < 0:
        raise _invalid("negative_duration", f"a limit cannot be negative, got {show(value)}")
    return ms


def show(value: object) -> str:
    if isinstance(value, str):
        return shorten(json.dumps(value[: 4 * SHOWN_CHARS], ensure_ascii=False))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def percentile_of_key(key: str, prefix: str) -> float:
    match = _PERCENTILE_RE.match(key[len(prefix) :]) if key.startswith(prefix) else None
    if match is None:
        raise _invalid(
            "percentile_key", f"expected a percentile key like {prefix}p95, got {shown(key)}"
        )
    q = float(match.group(1))
    if not 0 < q < 100:
        raise _invalid(
            "percentile_range",
            f"percentile out of range: {key} (expected {prefix}p1 ... {prefix}p99.9; "
            f"{'use max for the slowest run' if not prefix else 'use ttft to limit every call'})",
        )
    return q


def check_percentile_key(key: str) -> str:
    percentile_of_key(key, "")
    return key


def check_ttft_percentile_key(key: str) -> str:
    percentile_of_key(key, "ttft_")
    return key


_RATE_HINT: Final = 'expected a share of runs like "2%" or a fraction from 0 to 1'
_RATE_RE: Final = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")
RATE_SCHEMA: Final[dict[str, Any]] = {
    "description": 'A share of runs: "2%", "0.5%", or a fraction from 0 to 1.',
    "anyOf": [
        {"type": "number", "minimum": 0, "maximum": 1},
        {"type": "string", "pattern": r"^\s*(\d+(\.\d*)?|\.\d+)\s*%\s*$"},
    ],
}
_MONEY_HINT: Final = 'expected US dollars like "0.01", "$0.01" or a number'
_MONEY_RE: Final = re.compile(r"^\s*\$?\s*(\d+(?:\.\d*)?|\.\d+)\s*(?:USD)?\s*$")
MONEY_SCHEMA: Final[dict[str, Any]] = {
    "description": 'US dollars: 0.01, "0.01", "$0.01".',
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": r"^\s*\$?\s*(\d+(\.\d*)?|\.\d+)\s*(USD)?\s*$"},
    ],
}


def parse_rate(value: object) -> float:
    """A share of runs, in percent: ``"2%"`` and ``0.02`` are both 2.0."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _invalid("rate", f"{_RATE_HINT}, got {show(value)}")
    if isinstance(value, str):
        match = _RATE_RE.match(value)
        if match is None:
            raise _invalid("rate", f"{_RATE_HINT}, got {show(value)}")
        percent = float(match.group(1))
    else:
        if not (math.isfinite(value) and 0 <= value <= 1):
            raise _invalid(
                "rate", f'{_RATE_HINT} (write "{show(value)}%" for percent), got {show(value)}'
            )
        percent = float(value) * 100
    if percent > 100:
        raise _invalid("rate", f"a share of runs is at most 100%, got {show(value)}")
    return percent


def parse_money(value: object) -> float:
    """US dollars: ``"0.01"``, ``"$0.01"``, ``0.01``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _invalid("money", f"{_MONEY_HINT}, got {show(value)}")
    if isinstance(value, str):
        match = _MONEY_RE.match(value)
        if match is None:
            raise _invalid("money", f"{_MONEY_HINT}, got {show(value)}")
        dollars = float(match.group(1))
    else:
        dollars = float(value)
    if not math.isfinite(dollars) or dollars < 0:
        raise _invalid("money", f"{_MONEY_HINT} (0 or more), got {show(value)}")
    return dollars


def check_cost_percentile_key(key: str) -> str:
    percentile_of_key(key, "cost_")
    return key


def percentile_schema(value_schema: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The JSON Schema pattern property of a ``pNN`` key (``ttft_pNN`` with the prefix)."""
    return {f"^{prefix}{_PERCENTILE_KEY_SCHEMA[1:]}": value_schema}
