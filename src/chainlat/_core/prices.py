"""Model prices, and what a model call cost. Pure, stdlib only.

Prices are never built in: they change, and a stale table would report a wrong cost
with confidence. The application passes them (``configure(prices=...)``) and the CLI
reads them from the budget file's ``[prices]`` table or ``--prices FILE``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

_PER_MTOK: Final = 1_000_000
_SNAPSHOT: Final = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens of one model."""

    input_per_mtok: float
    output_per_mtok: float
    cache_read_per_mtok: float | None = None
    """Input tokens read from the provider's prompt cache; the input price when not set."""

    def cost(self, input_tokens: int, output_tokens: int, cache_read_tokens: int = 0) -> float:
        """The cost of one call; cached input tokens are part of ``input_tokens``."""
        cached = min(max(cache_read_tokens, 0), input_tokens)
        cache_price = (
            self.cache_read_per_mtok
            if self.cache_read_per_mtok is not None
            else self.input_per_mtok
        )
        return (
            (input_tokens - cached) * self.input_per_mtok
            + cached * cache_price
            + output_tokens * self.output_per_mtok
        ) / _PER_MTOK


Prices = Mapping[str, Price]
"""Prices by model name."""


def model_key(model: str) -> str:
    """One model as instrumentations name it: without a snapshot date or a router's prefix.

    Example:
        >>> model_key("openai/gpt-4o-mini-2024-07-18")
        'gpt-4o-mini'
    """
    return _SNAPSHOT.sub("", model.rsplit("/", 1)[-1].lower())


def price_of(prices: Prices, model: str | None) -> Price | None:
    """The price of ``model``: by its exact name, else by :func:`model_key`."""
    if model is None:
        return None
    found = prices.get(model)
    if found is not None:
        return found
    key = model_key(model)
    for name, price in prices.items():
        if model_key(name) == key:
            return price
    return None


def valid_price(value: float) -> bool:
    """A price is a finite number of dollars, zero or more."""
    return math.isfinite(value) and value >= 0
