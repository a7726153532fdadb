"""One configuration's evaluation, as a worker runs it: capacity search, metrics at capacity."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from search._capacity import CapacitySearchOptions, LatencySLO, find_capacity
from simulator._deployment import Deployment, prepare
from workloads import Workload

GB = 1e9


@dataclass(frozen=True, slots=True)
class EvaluationTask:
    """Everything a worker needs, as plain picklable data (no files, no database)."""

    configuration_id: int
    deployment: Deployment
    workload: Workload
    capacity_slo: LatencySLO
    filters: tuple[LatencySLO, ...] = ()
    capacity_meets_filters: bool = False  # the capacity must meet the filters too
    tolerance: float = 0.05
    max_simulations: int = 20
    # refining an earlier, coarser result: its capacity and its smallest failing rate
    passing_qps: float | None = None
    failing_qps: float | None = None


@dataclass(slots=True)
class Evaluation:
    """What comes back: the capacity and the metrics at that rate."""

    configuration_id: int
    metrics: dict[str, float | int | bool | dict | None] = field(default_factory=dict)


PERCENTILE_COLUMNS = {
    "ttft": ("p50", "p90", "p95", "p99"),
    "tbt": ("p50", "p90", "p95", "p99"),
    "tpot": ("p50", "p90", "p99"),
    "e2e": ("p50", "p90", "p99"),
}


def evaluate(task: EvaluationTask) -> Evaluation:
    started = time.perf_counter()
    prepared = prepare(task.deployment)
    options = CapacitySearchOptions(
        slo=task.capacity_slo,
        also=task.filters if task.capacity_meets_filters else (),
        tolerance=task.tolerance,
        max_simulations=task.max_simulations,
    )
    found = find_capacity(
        prepared, task.workload, options,
        passing_qps=task.passing_qps, failing_qps=task.failing_qps,
    )  # fmt: skip
    deployment = task.deployment
    cost = deployment.cost_per_hour
    summary = found.summary
    metrics: dict = {
        "capacity_qps": found.capacity_qps,
        "capacity_upper_qps": found.failing_qps if math.isfinite(found.failing_qps) else None,
        "tolerance": task.tolerance,
        "qps_per_dollar": found.capacity_qps / cost if cost > 0 else math.nan,
        "num_simulations": found.num_simulations,
        "wall_time_s": time.perf_counter() - started,
        "kv_capacity_tokens": prepared.memory.kv_capacity_tokens,
        "weights_gb_per_gpu": prepared.memory.weights_bytes / GB,
    }
    if summary is None and found.capacity_qps > 0:
        # refining: no rate above the coarser capacity passed; its metrics stand, only
        # the bracket narrowed (the driver merges the two)
        metrics["keeps_coarser_metrics"] = True
        return Evaluation(task.configuration_id, metrics)
    if summary is None:  # not even the lowest rate met the capacity SLO
        detail = {}
        if found.unmeetable is not None:  # shown missed with every request served alone
            slo, least = found.unmeetable
            detail[slo.column] = {
                "passed": False, "value": least, "max_s": slo.max_s, "at": "zero load",
            }  # fmt: skip
        metrics |= {"slo_passed": False, "slo_detail": detail}
        metrics["cost_per_million_output_tokens"] = math.nan
        return Evaluation(task.configuration_id, metrics)
    latency = summary["latency_s"]
    for metric, percentiles in PERCENTILE_COLUMNS.items():
        for p in percentiles:
            metrics[f"{metric}_{p}"] = latency[metric][p]
    metrics["scheduling_delay_p99"] = latency["scheduling_delay"]["p99"]
    throughput = summary["throughput"]
    metrics["throughput_tokens_per_s"] = throughput["output_tokens_per_s"]
    metrics["throughput_requests_per_s"] = throughput["requests_per_s"]
    replicas = summary["replicas"]
    metrics["mfu"] = sum(r["mfu"] for r in replicas) / len(replicas)
    metrics["mbu"] = sum(r["mbu"] for r in replicas) / len(replicas)
    tokens_per_hour = throughput["output_tokens_per_s"] * 3600
    metrics["cost_per_million_output_tokens"] = (
        cost / tokens_per_hour * 1e6 if tokens_per_hour > 0 else math.nan
    )
    detail = {}
    for slo in task.filters:
        value = slo.value(summary)
        detail[slo.column] = {
            "passed": bool(value < slo.max_s),
            "value": value,
            "max_s": slo.max_s,
        }
    metrics["slo_detail"] = detail
    metrics["slo_passed"] = all(d["passed"] for d in detail.values())
    return Evaluation(task.configuration_id, metrics)
