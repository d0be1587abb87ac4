"""Percentiles, one definition for tests and benchmarks."""

from __future__ import annotations

import math


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, linearly interpolated between the two
    nearest ranks; NaN when empty, ``inf`` when it falls on or next to an infinite value (a
    request that never succeeded)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    if math.isinf(ordered[high]):
        return math.inf
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def p50_p99(values: list[float]) -> str:
    """``"p50 / p99"`` of ``values`` with two decimals (``"- / -"`` for none)."""
    if not values:
        return "- / -"
    return f"{percentile(values, 50):.2f} / {percentile(values, 99):.2f}"
