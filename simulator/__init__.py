"""Discrete-event, iteration-level simulator of an LLM serving cluster.

`Simulation` runs one deployment over one workload with a cost-model estimator;
`SimulationResult` turns the finished run into metrics and records.
"""

from __future__ import annotations

from simulator._config import (
    DEFAULT_CHUNK_SIZE,
    ClusterConfig,
    GlobalSchedulerKind,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
)
from simulator._deployment import (
    DecodeSpec,
    Deployment,
    PreparedDeployment,
    engine_scheduler,
    prepare,
)
from simulator._engine import Hardware, Simulation
from simulator._metrics import (
    request_arrays,
    request_token_times,
    summarize,
    weighted_percentiles,
)
from simulator._prefix_cache import prefix_reuse_tokens
from simulator._result import SimulationResult


def simulate(*args, **kwargs) -> SimulationResult:
    """Run a `Simulation(*args, **kwargs)` and return its result."""
    return SimulationResult(Simulation(*args, **kwargs).run())


__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "ClusterConfig",
    "DecodeSpec",
    "Deployment",
    "GlobalSchedulerKind",
    "Hardware",
    "PreparedDeployment",
    "RunOptions",
    "SchedulerConfig",
    "SchedulerKind",
    "Simulation",
    "SimulationResult",
    "engine_scheduler",
    "prefix_reuse_tokens",
    "prepare",
    "request_arrays",
    "request_token_times",
    "simulate",
    "summarize",
    "weighted_percentiles",
]
