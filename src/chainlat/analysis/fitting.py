"""The least-squares fits latency profiles are made of, for model calls and speech calls."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def rounded(value: float) -> float:
    """A fitted figure to six significant digits, as profiles are written."""
    return float(f"{value:.6g}")


def fit_line(
    xs: Sequence[float], ys: Sequence[float], *, in_sample: bool = False
) -> tuple[float, float, bool]:
    """Least-squares intercept and slope, and whether the slope was kept.

    The slope is set to 0 (the line flat at the mean) without spread in x, when it
    is negative, or when it is within three standard errors of 0: over a narrow
    range of input tokens the noise decides the slope, and extrapolating a noisy
    slope to other prompt sizes is worse than assuming none. ``in_sample`` keeps a
    positive slope however noisy: the closest line to these points, for residuals.
    """
    n = len(xs)
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = math.fsum((x - mean_x) ** 2 for x in xs)
    if sxx <= 0:
        return mean_y, 0.0, False
    slope = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    base = mean_y - slope * mean_x
    if slope < 0:
        return mean_y, 0.0, False
    if n > 2 and not in_sample:
        sse = math.fsum((y - base - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
        if slope < 3 * math.sqrt(sse / (n - 2) / sxx):
            return mean_y, 0.0, False
    if base < 0:  # no negative time at zero tokens: the line through the origin instead
        slope = math.fsum(x * y for x, y in zip(xs, ys, strict=True)) / math.fsum(x * x for x in xs)
        return 0.0, slope, True
    return base, slope, True
