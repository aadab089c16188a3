"""The resolution of a trace's clock, read from its timestamps.

OpenTelemetry's SDKs write nanoseconds, but not every clock behind them has them:
OpenTelemetry JS takes a span's start from ``Date.now()``, a whole millisecond, and its
end from the start plus ``performance.now()``'s difference, so every start is rounded down
to the millisecond and no end is; Jaeger's JSON holds microseconds. A span that started
after its sibling ended can then be written as starting up to one unit before that end.
The critical path (:mod:`chainlat._core.critical_path`) allows for it: a sibling that
overlaps its predecessor by no more than the resolution is sequential.

The resolution is the coarsest unit of :data:`UNITS_NS` that every start is a whole
multiple of. Two starts at least are needed; the chance that two starts of a nanosecond
clock fall on whole milliseconds by accident is one in 10^12.

Only starts coarser than ends mislead: a clock that writes starts and ends alike (Jaeger's
microseconds, a test's clock injected in whole milliseconds) rounds both down the same
way, so a span that started after another ended is still written as starting at or after
that end. OpenTelemetry JS writes its end as the rounded start plus a finer difference, so
both move back by the start's rounding, which differs between two spans by up to a
millisecond: that is the overlap the walk must allow for (:func:`slack_ns`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Final

UNITS_NS: Final = (1_000_000, 1_000)
"""The resolutions looked for, coarsest first: a millisecond, a microsecond."""

EXACT_NS: Final = 1
"""The resolution of a clock that writes nanoseconds."""


def resolution_ns(starts: Iterable[int]) -> int:
    """The coarsest unit of :data:`UNITS_NS` that divides every start, else 1 (ns); 1 too
    for fewer than two starts, which say nothing.

    Example:
        >>> resolution_ns([1_700_000_000_000_000_000, 1_700_000_000_031_000_000])
        1000000
        >>> resolution_ns([1_700_000_000_000_000_000, 1_700_000_000_031_000_417])
        1
    """
    # Runs for every run read: their greatest common divisor, found in C.
    values = starts if isinstance(starts, list) else list(starts)
    if len(values) < 2:
        return EXACT_NS
    common = math.gcd(*values)
    for unit in UNITS_NS:
        if common % unit == 0:
            return unit
    return EXACT_NS


def may_be_coarse(start_ns: int) -> bool:
    """Whether a clock that wrote this start may be coarser than a microsecond: a run's
    other starts need looking at only then (one start off the unit rules every unit out).

    Example:
        >>> may_be_coarse(1_700_000_000_000_417_000), may_be_coarse(1_700_000_000_000_000_417)
        (True, False)
    """
    return start_ns % UNITS_NS[-1] == 0


def describe(resolution: int) -> str:
    """``1 ms``, ``1 µs`` or ``1 ns``: a resolution as a person reads it.

    Example:
        >>> describe(1_000_000)
        '1 ms'
    """
    if resolution >= 1_000_000 and resolution % 1_000_000 == 0:
        return f"{resolution // 1_000_000} ms"
    if resolution >= 1_000 and resolution % 1_000 == 0:
        return f"{resolution // 1_000} µs"
    return f"{resolution} ns"


def slack_ns(starts: Iterable[int], ends: Iterable[int]) -> int:
    """How far a span may appear to start before its predecessor ended although it started
    after: the starts' resolution when it is coarser than the ends', else 0.

    Example:
        >>> slack_ns([1_000_000, 5_000_000], [3_000_417, 9_000_001])
        1000000
        >>> slack_ns([1_000_000, 5_000_000], [3_000_000, 9_000_000])
        0
    """
    start = resolution_ns(starts)
    if start == EXACT_NS:
        return 0
    return start if start > resolution_ns(ends) else 0
