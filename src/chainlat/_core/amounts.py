"""How a measured value and its limit are written, in every report and message.

Pure and stdlib only. A measured value is shown to a fixed number of decimals (one for
milliseconds and percentages, four for dollars); beside its limit it takes as many more
as it needs for the text to agree with the verdict. A p99 of 9.8468 ms over a limit of
9.8 ms reads ``9.85 ms > 9.8 ms``, not ``9.8 ms > 9.8 ms``; a kept 409.96 ms under
409.99 ms reads ``409.96 ms``, not ``410.0 ms``.
"""

from __future__ import annotations

import math
from typing import Final

_DECIMALS: Final = {"USD": 4, "%": 1, "ms": 1}
_MORE: Final = 7
"""Decimals added at most before the shortest exact form (``repr``) is used: 0.1 ns."""


def amount(value: float, unit: str, *, limit: bool = False, against: float | None = None) -> str:
    """A measured value or a limit (as written, ``limit=True``) with its unit.

    ``against``: the limit the measured value is judged against; the value then takes the
    decimals it needs to read on the same side of it (see `agreeing`).
    """
    if limit:
        number = f"{value:.6g}" if unit == "USD" else f"{value:g}"
    else:
        number = agreeing(value, against, ".{}f", _DECIMALS.get(unit, 1))
    if unit == "USD":
        return f"${number}"
    if unit == "%":
        return f"{number}%"
    return f"{number} ms"


def over(actual: float, limit: float, unit: str) -> str:
    """A broken limit as ``410.04 ms > 410 ms``: the value in the decimals that agree, the
    limit as written."""
    return f"{amount(actual, unit, against=limit)} > {amount(limit, unit, limit=True)}"


def agreeing(value: float, against: float | None, spec: str, precision: int) -> str:
    """``value`` formatted by ``spec`` (``".{}f"``, ``"+.{}f"``, ``".{}g"``) at ``precision``,
    or a greater one when that text would not be on the same side of ``against`` as the
    value is (over it, under it, or on it): the text agrees with the comparison it stands
    for. Past seven more digits, the shortest exact form."""
    text = format(value, spec.format(precision))
    if against is None or not (math.isfinite(value) and math.isfinite(against)):
        return text
    side = (value > against) - (value < against)
    for more in range(precision, precision + _MORE + 1):
        text = format(value, spec.format(more))
        shown = float(text)
        if (shown > against) - (shown < against) == side:
            return text
    if side == 0:
        return format(value, spec.format(precision))
    return ("+" if "+" in spec and value >= 0 else "") + repr(value)
