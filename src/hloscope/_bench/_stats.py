"""The statistics of a series of run times: what every benchmark figure is made of.

The minimum, median, mean, standard deviation (the sample's, ddof=1:
``statistics.stdev``; jax-hpc-profiler writes NumPy's default ``np.std``,
ddof=0, which is smaller by sqrt((n-1)/n)), interquartile range, maximum,
last time, a distribution-free 95% confidence interval of the median (order
statistics) and the runs flagged as outliers (beyond 1.5 IQR of the quartiles).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

__all__ = ["median_ci", "time_stats"]


def median_ci(xs: list[float], z: float = 1.959964) -> tuple[float, float]:
    """95% confidence interval of the median from order statistics (no distribution assumed)."""
    n = len(xs)
    s = sorted(xs)
    if n < 3:
        return s[0], s[-1]
    lo = max(0, math.floor(n / 2 - z * math.sqrt(n) / 2) - 1)
    hi = min(n - 1, math.ceil(1 + n / 2 + z * math.sqrt(n) / 2) - 1)
    return s[lo], s[hi]


def time_stats(xs: list[float]) -> dict[str, Any]:
    """min, median, mean, std, IQR, max, last, 95% CI of the median, outliers (indices
    beyond 1.5 IQR of the quartiles) of a series of times."""
    if not xs:
        return {}
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    iqr = q[2] - q[0]
    lo, hi = median_ci(xs)
    return {
        "runs": len(xs), "min": min(xs), "median": statistics.median(xs),
        "mean": statistics.fmean(xs), "std": statistics.stdev(xs) if len(xs) > 1 else 0.0,
        "iqr": iqr, "max": max(xs), "last": xs[-1], "median_ci95": [lo, hi],
        "outliers": [i for i, x in enumerate(xs) if x < q[0] - 1.5 * iqr or x > q[2] + 1.5 * iqr],
    }
