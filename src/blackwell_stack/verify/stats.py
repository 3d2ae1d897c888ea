"""Percentiles and summaries of latency samples (no numpy: the CLI has no such dependency)."""

from __future__ import annotations

import math
from collections.abc import Sequence

PERCENTILES = (50, 90, 99)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile with linear interpolation between ranks (numpy's default method)."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return float(ordered[0])
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    frac = rank - low
    return float(ordered[low] + (ordered[high] - ordered[low]) * frac)


def summary(values: Sequence[float]) -> dict:
    """count, mean and p50/p90/p99 of values; None where there are no samples."""
    result: dict = {"count": len(values), "mean": (sum(values) / len(values)) if values else None}
    for q in PERCENTILES:
        result[f"p{q}"] = percentile(values, q)
    return result
