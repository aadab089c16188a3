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

    ``against``: the limit the measured value is judged against. The value then shows
    as many decimals as it takes to be over the limit in the text when it is over it,
    and not over it when it is not.
    """
    if limit:
        number = f"{value:.6g}" if unit == "USD" else f"{value:g}"
    else:
        number = _measured(value, _DECIMALS.get(unit, 1), against)
    if unit == "USD":
        return f"${number}"
    if unit == "%":
        return f"{number}%"
    return f"{number} ms"


def _measured(value: float, decimals: int, against: float | None) -> str:
    text = f"{value:.{decimals}f}"
    if against is None or not (math.isfinite(value) and math.isfinite(against)):
        return text
    over = value > against
    for more in range(decimals, decimals + _MORE + 1):
        text = f"{value:.{more}f}"
        if (float(text) > against) == over:
            return text
    return repr(value)
