"""Request streams for the simulator: synthetic generators, trace loaders, closed loops.

Entry point: `build_workload(spec, num_requests=..., qps=..., concurrency=..., seed=...)`.
"""

from __future__ import annotations

from workloads._arrivals import ArrivalProcess, Gamma, Poisson, Static, mean_rate, rescale_to_rate
from workloads._build import WorkloadSpec, build_workload, describe_workload
from workloads._builtin import (
    BuiltinWorkload,
    builtin_length_statistics,
    builtin_workload_names,
    get_builtin_workload,
)
from workloads._errors import WorkloadError
from workloads._lengths import (
    LENGTH_SPEC_FORMS,
    Empirical,
    Fixed,
    LengthDistribution,
    LogNormal,
    Uniform,
    Zipf,
    parse_length_spec,
)
from workloads._traces import TRACE_FORMATS, TraceData, hourly_shares, load_trace, read_trace
from workloads._types import Workload

__all__ = [
    "LENGTH_SPEC_FORMS",
    "TRACE_FORMATS",
    "ArrivalProcess",
    "BuiltinWorkload",
    "Empirical",
    "Fixed",
    "Gamma",
    "LengthDistribution",
    "LogNormal",
    "Poisson",
    "Static",
    "TraceData",
    "Uniform",
    "Workload",
    "WorkloadError",
    "WorkloadSpec",
    "Zipf",
    "build_workload",
    "builtin_length_statistics",
    "builtin_workload_names",
    "describe_workload",
    "get_builtin_workload",
    "hourly_shares",
    "load_trace",
    "mean_rate",
    "parse_length_spec",
    "read_trace",
    "rescale_to_rate",
]
