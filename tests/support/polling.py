"""Waiting for a condition another thread or process brings about, within a bound."""

from __future__ import annotations

import time
from collections.abc import Callable


def until(condition: Callable[[], bool], seconds: float = 10.0) -> bool:
    """Whether ``condition`` holds within ``seconds`` (polled every 10 ms; a bound, not a
    sleep: it returns as soon as the condition holds)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()
