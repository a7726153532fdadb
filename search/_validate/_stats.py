"""Error statistics of predicted against measured values."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

T = TypeVar("T")

WITHIN = 0.10  # the share of points within +-10% of the measurement


@dataclass(frozen=True, slots=True)
class ErrorStats:
    """MAPE, median signed error (predicted / measured - 1) and share within +-10%."""

    n: int
    mape: float  # mean |predicted / measured - 1|, as a fraction
    median_signed: float  # median of predicted / measured - 1
    within: float  # share of points with |predicted / measured - 1| <= 10%


def error_stats(predicted: Sequence[float], measured: Sequence[float]) -> ErrorStats:
    """Statistics over the pairs where both values are finite and the measurement positive."""
    p = np.asarray(predicted, dtype=np.float64)
    m = np.asarray(measured, dtype=np.float64)
    keep = np.isfinite(p) & np.isfinite(m) & (m > 0)
    if not keep.any():
        return ErrorStats(0, math.nan, math.nan, math.nan)
    signed = p[keep] / m[keep] - 1.0
    return ErrorStats(
        n=int(keep.sum()),
        mape=float(np.mean(np.abs(signed))),
        median_signed=float(np.median(signed)),
        within=float(np.mean(np.abs(signed) <= WITHIN + 1e-12)),
    )


def best_single_value_mape(measured: Sequence[float]) -> float:
    """The smallest MAPE that any one value scores against `measured`: that of their median
    weighted by 1 / value, which minimises the sum of |value - m| / m.  NaN when empty."""
    m = np.sort(np.asarray(measured, dtype=np.float64))
    if not len(m):
        return math.nan
    weights = np.cumsum(1.0 / m)
    best = m[np.searchsorted(weights, weights[-1] / 2)]
    return float(np.mean(np.abs(best / m - 1.0)))


def concurrency_band(concurrency: int) -> str:
    """Bands of the concurrency axis: 1-8, 9-32, 33-128, 129+."""
    for upper, label in ((8, "1-8"), (32, "9-32"), (128, "33-128")):
        if concurrency <= upper:
            return label
    return "129+"


def grouped(
    items: Iterable[T],
    key: Callable[[T], str],
    stats: Callable[[list[T]], ErrorStats],
) -> list[tuple[str, ErrorStats]]:
    """`stats` of each group of `items` by `key`, groups in sorted order."""
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    return [(name, stats(groups[name])) for name in sorted(groups, key=_natural)]


def _natural(label: str) -> tuple:
    """Labels that start with a number ("9-32", "129+", "8192/1024") by their numbers,
    the others after them by name."""
    numbers = tuple(int(n) for n in re.findall(r"\d+", label))
    return (0, numbers, label) if label[:1].isdigit() else (1, (), label)
