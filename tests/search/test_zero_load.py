"""Zero-load latency: exact for a lone request, a lower bound at every load, and the
capacity search's shortcut for SLOs no rate can meet."""

from __future__ import annotations

import numpy as np
import pytest

from estimators import load_engine, load_model
from search._capacity import CapacitySearchOptions, LatencySLO, find_capacity, unit_arrival_times
from search._evaluate import EvaluationTask, evaluate
from search._zero_load import ZERO_LOAD_METRICS, zero_load_percentile
from simulator import SchedulerConfig, SchedulerKind
from simulator._deployment import Deployment, PreparedDeployment, prepare
from sku_catalog import load_catalog
from workloads import Workload, build_workload

SCHEDULERS = {
    "sarathi": SchedulerConfig(SchedulerKind.SARATHI, batch_size=64, chunk_size=512),
    "vllm": SchedulerConfig(SchedulerKind.VLLM, batch_size=64),
}


def _prepared(
    scheduler: str = "sarathi", pp: int = 1, engine: str | None = None
) -> PreparedDeployment:
    return prepare(
        Deployment(
            load_model("meta-llama/Llama-2-7b-hf"),
            load_catalog().get("a100-80gb"),
            pp=pp,
            scheduler=SCHEDULERS[scheduler],
            engine=load_engine(engine) if engine else None,
        )
    )


def _lone(prompt: int, output: int) -> Workload:
    return Workload("lone", np.zeros(1), np.array([prompt]), np.array([output]))


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
@pytest.mark.parametrize("pp", [1, 2])
# vLLM: its frontend tokenizes the prompt and adds its per-request latency
@pytest.mark.parametrize("engine", [None, "vllm"])
def test_a_lone_request_takes_exactly_its_zero_load_latency(
    scheduler: str, pp: int, engine: str | None
) -> None:
    prepared = _prepared(scheduler, pp, engine)
    assert (prepared.cluster.tokenize_seconds_per_token > 0) == (engine is not None)
    assert (prepared.cluster.frontend_latency > 0) == (engine is not None)
    workload = _lone(prompt=1300, output=2)  # three chunks under Sarathi; one decode step
    latency = prepared.simulate(workload).summary["latency_s"]
    for metric in ZERO_LOAD_METRICS:
        bound = zero_load_percentile(prepared, workload, metric, 50)
        assert bound == pytest.approx(latency[metric]["p50"], rel=1e-9), metric


@pytest.mark.parametrize("scheduler", sorted(SCHEDULERS))
def test_zero_load_is_a_lower_bound_at_every_rate(scheduler: str) -> None:
    prepared = _prepared(scheduler)
    workload = build_workload(
        {"source": "chat"}, num_requests=300, qps=1.0, concurrency=None, seed=5
    )
    unit = unit_arrival_times(workload)
    bounds = {
        (metric, p): zero_load_percentile(prepared, workload, metric, p)
        for metric in ZERO_LOAD_METRICS
        for p in (50, 90, 99)
    }
    for qps in (0.2, 2.0, 8.0, 30.0):  # from nearly idle to far past capacity
        latency = prepared.simulate(workload.with_arrival_times(unit / qps)).summary["latency_s"]
        for (metric, p), bound in bounds.items():
            assert latency[metric][f"p{p}"] >= bound * (1 - 1e-9), (qps, metric, p)


def test_an_slo_missed_at_zero_load_gives_capacity_zero_without_simulating() -> None:
    prepared = _prepared()
    workload = build_workload(
        {"source": "chat"}, num_requests=300, qps=1.0, concurrency=None, seed=5
    )
    impossible = LatencySLO("tbt", 99, 0.001)  # a decode step alone takes longer
    options = CapacitySearchOptions(also=(impossible,))
    result = find_capacity(prepared, workload, options)
    assert result.capacity_qps == 0.0 and result.summary is None
    assert result.num_simulations == 0 and not result.probes
    slo, least = result.unmeetable
    assert slo == impossible and least >= impossible.max_s
    assert least == zero_load_percentile(prepared, workload, "tbt", 99)

    met = LatencySLO("tbt", 99, 1.0)  # meetable: searched as before
    searched = find_capacity(prepared, workload, CapacitySearchOptions(also=(met,)))
    assert searched.unmeetable is None and searched.capacity_qps > 0


def test_the_evaluation_records_which_slo_was_missed_at_zero_load() -> None:
    prepared = _prepared()
    workload = build_workload(
        {"source": "chat"}, num_requests=200, qps=1.0, concurrency=None, seed=5
    )
    ttft = LatencySLO("ttft", 90, 0.001)
    task = EvaluationTask(
        configuration_id=7,
        deployment=prepared.deployment,
        workload=workload,
        capacity_slo=LatencySLO("scheduling_delay", 99, 5.0),
        filters=(ttft,),
        capacity_meets_filters=True,
    )
    metrics = evaluate(task).metrics
    assert metrics["capacity_qps"] == 0.0 and metrics["num_simulations"] == 0
    assert metrics["slo_passed"] is False
    detail = metrics["slo_detail"]["ttft_p90"]
    assert detail["at"] == "zero load" and not detail["passed"]
    assert detail["value"] >= 0.001 and detail["max_s"] == 0.001


def test_no_bound_for_the_scheduling_delay() -> None:
    with pytest.raises(ValueError, match="scheduling_delay"):
        zero_load_percentile(_prepared(), _lone(100, 10), "scheduling_delay", 99)
