"""Discrete-event, iteration-level simulator of an LLM serving cluster.

`Simulation` runs one deployment over one workload with a cost-model estimator;
`SimulationResult` turns the finished run into metrics and records.
For capacity searches: `servable_requests` (which requests a deployment can serve at
all), `service_bound` (the analytic ceiling of its throughput) and the early-stop hooks
`LateRequestCounter`, `SlowGapCounter` and `SlowTpotCounter` (with `waiting_delays` for
the values of a run they stopped).
"""

from __future__ import annotations

from simulator._admission import servable_requests
from simulator._config import (
    DEFAULT_CHUNK_SIZE,
    ClusterConfig,
    GlobalSchedulerKind,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
)
from simulator._deployment import (
    DECODE_ROUTERS,
    DecodePoolError,
    DecodeSpec,
    Deployment,
    KvLink,
    PreparedDeployment,
    engine_scheduler,
    prepare,
)
from simulator._early_stop import (
    EARLY_STOP_METRICS,
    LateRequestCounter,
    SlowGapCounter,
    SlowTpotCounter,
    slow_gap_share,
    waiting_delays,
)
from simulator._engine import Hardware, Simulation, SimulationStalled
from simulator._metrics import (
    request_arrays,
    request_token_times,
    summarize,
    weighted_percentiles,
)
from simulator._prefix_cache import prefix_reuse_tokens
from simulator._result import SimulationResult
from simulator._service_bound import ServiceBound, service_bound


def simulate(*args, **kwargs) -> SimulationResult:
    """Run a `Simulation(*args, **kwargs)` and return its result."""
    return SimulationResult(Simulation(*args, **kwargs).run())


__all__ = [
    "DECODE_ROUTERS",
    "DEFAULT_CHUNK_SIZE",
    "EARLY_STOP_METRICS",
    "ClusterConfig",
    "DecodePoolError",
    "DecodeSpec",
    "Deployment",
    "GlobalSchedulerKind",
    "Hardware",
    "KvLink",
    "LateRequestCounter",
    "PreparedDeployment",
    "RunOptions",
    "SchedulerConfig",
    "SchedulerKind",
    "ServiceBound",
    "Simulation",
    "SimulationResult",
    "SimulationStalled",
    "SlowGapCounter",
    "SlowTpotCounter",
    "engine_scheduler",
    "prefix_reuse_tokens",
    "prepare",
    "request_arrays",
    "request_token_times",
    "servable_requests",
    "service_bound",
    "simulate",
    "slow_gap_share",
    "summarize",
    "waiting_delays",
    "weighted_percentiles",
]
