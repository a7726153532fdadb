"""Arrival processes: when requests enter an open-loop system.

Each process answers one question, `times(n, rng)`: the arrival times (float64 seconds,
non-decreasing) of `n` requests, drawn from `rng`.  Open-loop processes start the clock at 0
and place the first request one inter-arrival time later (as Vidur does).  A closed loop has
no arrival process: it is a `Workload` with `concurrency=N` and all arrival times zero.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from workloads._errors import WorkloadError


def _check_n(n: int) -> None:
    if not isinstance(n, int | np.integer) or n < 1:
        raise WorkloadError(f"number of requests must be an integer >= 1, got {n!r}")


def _check_positive(name: str, value: float) -> None:
    if not (isinstance(value, int | float | np.floating | np.integer) and value > 0):
        raise WorkloadError(f"{name} must be a number > 0, got {value!r}")
    if not np.isfinite(value):
        raise WorkloadError(f"{name} must be finite, got {value!r}")


class ArrivalProcess(ABC):
    """A rule for the arrival times of `n` requests."""

    @abstractmethod
    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Arrival times of `n` requests in seconds, float64, non-decreasing, from `rng`."""


@dataclass(frozen=True, slots=True)
class Poisson(ArrivalProcess):
    """Exponential inter-arrival times with mean 1/qps."""

    qps: float

    def __post_init__(self) -> None:
        _check_positive("qps", self.qps)

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_n(n)
        return np.cumsum(rng.exponential(1.0 / self.qps, size=n))


@dataclass(frozen=True, slots=True)
class Gamma(ArrivalProcess):
    """Gamma inter-arrival times with mean 1/qps and coefficient of variation `cv`.

    shape = 1/cv^2, scale = cv^2/qps.  cv = 1 is Poisson; cv > 1 is burstier, cv < 1 more
    regular.
    """

    qps: float
    cv: float = 1.0

    def __post_init__(self) -> None:
        _check_positive("qps", self.qps)
        _check_positive("cv", self.cv)

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_n(n)
        shape = 1.0 / self.cv**2
        return np.cumsum(rng.gamma(shape, 1.0 / (shape * self.qps), size=n))


@dataclass(frozen=True, slots=True)
class Static(ArrivalProcess):
    """Every request arrives at t = 0 (a burst; also the times of a closed loop)."""

    def times(self, n: int, rng: np.random.Generator) -> np.ndarray:
        _check_n(n)
        return np.zeros(n, dtype=np.float64)


def mean_rate(arrival_times: np.ndarray) -> float | None:
    """Requests per second as the inverse of the mean inter-arrival time, (n-1)/(last-first).

    None when it is undefined (fewer than two requests, or all at the same instant).
    """
    t = np.asarray(arrival_times, dtype=np.float64)
    if len(t) < 2 or t[-1] <= t[0]:
        return None
    return float((len(t) - 1) / (t[-1] - t[0]))


def rescale_to_rate(arrival_times: np.ndarray, qps: float) -> np.ndarray:
    """Shift times to start at 0 and scale the gaps so that `mean_rate` equals `qps`."""
    _check_positive("qps", qps)
    t = np.asarray(arrival_times, dtype=np.float64)
    t = t - t[0] if len(t) else t
    rate = mean_rate(t)
    if rate is None:
        raise WorkloadError(
            "cannot rescale arrival times to a rate: all requests arrive at the same instant"
        )
    return t * (rate / qps)
