"""One configuration's evaluation, as a worker runs it: capacity search, metrics at capacity.

Rejected requests count against a configuration: a deployment that can never serve
some requests (they need more KV memory than a replica has, or exceed its policy's
token limit) is not ranked on the easier rest of the workload.  Those requests are
known before any simulation (`search._capacity.servable`); when their share of the
workload exceeds the task's `max_rejected_share` the configuration fails at once,
with capacity 0 and a ``rejected_share`` entry in its SLO detail.  Otherwise the
rejected count is recorded with the capacity (`rejected_requests`, of `num_requests`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from search._capacity import (
    CAPACITY_MEASURED,
    CapacityResult,
    CapacitySearchOptions,
    LatencySLO,
    PruneCheck,
    find_capacity,
    first_requests,
    servable,
)
from simulator import Deployment, PreparedDeployment, prepare
from workloads import Workload

GB = 1e9


@dataclass(frozen=True, slots=True)
class EvaluationTask:
    """Everything a worker needs, as plain picklable data (no files, no database).

    The capacity is searched on the first `num_requests` requests of `workload` (all
    when None); `workload` may hold more, up to the spec's `capacity.max_requests`:
    the search lengthens into them when the first ones are too few to load the
    deployment (`search._capacity.find_capacity`).
    """

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
    num_requests: int | None = None  # requests the search starts on (None: all of workload)
    max_rejected_share: float = 0.0  # most of the workload the deployment may refuse
    # the job wants only the best configuration: the rate at which this one would tie the
    # best so far (0.0: no best yet); None: search it whatever (`search._capacity.PruneCheck`)
    prune_below_qps: float | None = None
    # with pruning, a result that meets its SLOs and would be the new best is refined at
    # once to this tolerance (None: never), so the best the others are held to is final
    refine_tolerance: float | None = None
    hint_qps: float | None = None  # where the search starts (a neighbour's capacity)


REJECTED_SHARE = "rejected_share"  # slo_detail key of the rejected-requests check


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


def _rejected_share(rejected: int, num_requests: int, max_share: float) -> dict:
    """The slo_detail entry of the rejected-requests check."""
    share = rejected / num_requests if num_requests else 0.0
    return {
        "passed": bool(share <= max_share), "value": share, "max": max_share,
        "rejected": rejected, "of": num_requests,
    }  # fmt: skip


def _too_many_rejected(
    task: EvaluationTask, prepared: PreparedDeployment, started: float
) -> Evaluation | None:
    """Capacity 0 without a simulation when more of the workload than the task allows can
    never be served (at any rate); None when the share is within the limit."""
    workload = first_requests(task.workload, task.num_requests or len(task.workload))
    rejected = len(workload) - int(servable(prepared, workload).sum())
    check = _rejected_share(rejected, len(workload), task.max_rejected_share)
    if check["passed"]:
        return None
    metrics = _base_metrics(task, prepared) | {
        "capacity_qps": 0.0, "capacity_upper_qps": 0.0, "qps_per_dollar": 0.0,
        "num_simulations": 0, "capacity_kind": CAPACITY_MEASURED,
        "num_requests": len(workload), "rejected_requests": rejected,
        "slo_passed": False, "slo_detail": {REJECTED_SHARE: check},
        "cost_per_million_output_tokens": math.nan,
    }  # fmt: skip
    return _finished(task, metrics, started)


def _finished(task: EvaluationTask, metrics: dict, started: float) -> Evaluation:
    metrics["wall_time_s"] = time.perf_counter() - started
    return Evaluation(task.configuration_id, metrics)


def _base_metrics(task: EvaluationTask, prepared: PreparedDeployment) -> dict:
    return {
        "tolerance": task.tolerance,
        "kv_capacity_tokens": prepared.memory.kv_capacity_tokens,
        "weights_gb_per_gpu": prepared.memory.weights_bytes / GB,
    }


def _sets_the_best(task: EvaluationTask, found: CapacityResult) -> bool:
    """Whether a pruning job's result meets its filters on a measured capacity above the
    best so far (and a refine tolerance finer than the search's is set)."""
    if task.prune_below_qps is None or task.refine_tolerance is None:
        return False
    if task.refine_tolerance >= task.tolerance or found.summary is None:
        return False
    if found.capacity_kind != CAPACITY_MEASURED or not math.isfinite(found.failing_qps):
        return False
    if found.capacity_qps <= task.prune_below_qps:
        return False
    return all(slo.passed(found.summary) for slo in task.filters)


def evaluate(task: EvaluationTask) -> Evaluation:
    started = time.perf_counter()
    prepared = prepare(task.deployment)
    refused = _too_many_rejected(task, prepared, started)
    if refused is not None:
        return refused
    options = CapacitySearchOptions(
        slo=task.capacity_slo,
        also=task.filters if task.capacity_meets_filters else (),
        tolerance=task.tolerance,
        max_simulations=task.max_simulations,
    )
    prune = None
    if task.prune_below_qps is not None:
        prune = PruneCheck(task.prune_below_qps, task.filters)
    found = find_capacity(
        prepared, task.workload, options,
        passing_qps=task.passing_qps, failing_qps=task.failing_qps,
        num_requests=task.num_requests, prune=prune, hint_qps=task.hint_qps,
    )  # fmt: skip
    if found.pruned is not None:  # cannot be the best: no result to store
        metrics = {
            "pruned": found.pruned, "pruned_by_best": found.pruned_by_best,
            "num_simulations": found.num_simulations,
        }  # fmt: skip
        return _finished(task, metrics, started)
    tolerance = task.tolerance
    if _sets_the_best(task, found):
        # as the driver refines a contender: from the bracket, on the length it decided on
        fine = find_capacity(
            prepared, task.workload, replace(options, tolerance=task.refine_tolerance),
            passing_qps=found.capacity_qps, failing_qps=found.failing_qps,
            num_requests=found.num_requests,
        )  # fmt: skip
        fine.num_simulations += found.num_simulations
        if fine.summary is None:  # no rate above passed: the coarse run stands
            fine.summary = found.summary
        found, tolerance = fine, task.refine_tolerance
    cost = task.deployment.cost_per_hour
    summary = found.summary
    rejected = _rejected_share(found.rejected_requests, found.num_requests, task.max_rejected_share)
    metrics: dict = _base_metrics(task, prepared) | {
        "tolerance": tolerance,
        "capacity_qps": found.capacity_qps,
        "capacity_upper_qps": found.failing_qps if math.isfinite(found.failing_qps) else None,
        "capacity_kind": found.capacity_kind,
        "num_requests": found.num_requests,
        "rejected_requests": found.rejected_requests,
        "qps_per_dollar": found.capacity_qps / cost if cost > 0 else math.nan,
        "num_simulations": found.num_simulations,
    }
    if summary is None and found.capacity_qps > 0:
        # refining: no rate above the coarser capacity passed; its metrics stand, only
        # the bracket narrowed (the driver merges the two)
        metrics["keeps_coarser_metrics"] = True
        return _finished(task, metrics, started)
    if summary is None:  # not even the lowest rate met the capacity SLO
        detail = {REJECTED_SHARE: rejected}
        if found.unmeetable is not None:  # shown missed with every request served alone
            slo, least = found.unmeetable
            detail[slo.column] = {
                "passed": False, "value": least, "max_s": slo.max_s, "at": "zero load",
            }  # fmt: skip
        metrics |= {"slo_passed": False, "slo_detail": detail}
        metrics["cost_per_million_output_tokens"] = math.nan
        return _finished(task, metrics, started)
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
    detail = {REJECTED_SHARE: rejected}
    for slo in task.filters:
        value = slo.value(summary)
        detail[slo.column] = {
            "passed": bool(value < slo.max_s),
            "value": value,
            "max_s": slo.max_s,
        }
    metrics["slo_detail"] = detail
    metrics["slo_passed"] = all(d["passed"] for d in detail.values())
    return _finished(task, metrics, started)
