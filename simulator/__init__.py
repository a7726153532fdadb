"""Discrete-event, iteration-level simulator of an LLM serving cluster.

`Simulation` runs one deployment over one workload with a cost-model estimator;
`SimulationResult` turns the finished run into metrics and records.
"""

from __future__ import annotations

from simulator._config import (
    ClusterConfig,
    GlobalSchedulerKind,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
)
from simulator._engine import Hardware, Simulation
from simulator._metrics import request_token_times, weighted_percentiles
from simulator._result import SimulationResult


def simulate(*args, **kwargs) -> SimulationResult:
    """Run a `Simulation(*args, **kwargs)` and return its result."""
    return SimulationResult(Simulation(*args, **kwargs).run())


__all__ = [
    "ClusterConfig",
    "GlobalSchedulerKind",
    "Hardware",
    "RunOptions",
    "SchedulerConfig",
    "SchedulerKind",
    "Simulation",
    "SimulationResult",
    "request_token_times",
    "simulate",
    "weighted_percentiles",
]
