"""One configuration's evaluation: capacity kind, workload length and rejected requests."""

from __future__ import annotations

import pytest

from estimators import load_model
from search._capacity import LatencySLO, servable
from search._evaluate import REJECTED_SHARE, EvaluationTask, evaluate
from search._spec import parse_spec
from search._strategy import INFEASIBLE, constraint_value
from simulator import SchedulerConfig, SchedulerKind
from simulator._deployment import Deployment, prepare
from sku_catalog import load_catalog
from workloads import Workload, build_workload

LLAMA_7B = "meta-llama/Llama-2-7b-hf"
DELAY = LatencySLO("scheduling_delay", 99, 5.0)
TTFT = LatencySLO("ttft", 90, 2.0)


def _deployment(sku: str, scheduler: SchedulerConfig) -> Deployment:
    return Deployment(load_model(LLAMA_7B), load_catalog().get(sku), scheduler=scheduler)


def _chat(n: int, seed: int = 0) -> Workload:
    return build_workload({"source": "chat"}, num_requests=n, qps=1.0, concurrency=None, seed=seed)


def _task(deployment: Deployment, workload: Workload, **kwargs) -> EvaluationTask:
    return EvaluationTask(
        configuration_id=1, deployment=deployment, workload=workload, capacity_slo=DELAY,
        filters=(TTFT,), **kwargs,
    )  # fmt: skip


FAST = _deployment("h100-sxm", SchedulerConfig(SchedulerKind.SARATHI, 256, chunk_size=1024))
VLLM_2K = _deployment("a100-80gb", SchedulerConfig(SchedulerKind.VLLM, 128, max_tokens=2048))


def test_metrics_carry_the_capacity_kind_and_the_workload_it_was_decided_on() -> None:
    workload = _chat(800)
    lengthened = evaluate(_task(FAST, workload, num_requests=25)).metrics
    assert lengthened["capacity_kind"] == "measured" and lengthened["num_requests"] > 25
    assert lengthened["capacity_upper_qps"] is not None
    assert lengthened["rejected_requests"] == 0
    assert lengthened["slo_detail"][REJECTED_SHARE]["passed"] is True

    short = evaluate(_task(FAST, workload, num_requests=25, max_simulations=2)).metrics
    assert short["capacity_kind"] == "ceiling" and short["num_requests"] == 25
    assert short["capacity_upper_qps"] is None and short["capacity_qps"] > 0


def test_a_configuration_refusing_part_of_the_workload_fails_without_simulating() -> None:
    workload = _chat(300, seed=1)
    refused = int((~servable(prepare(VLLM_2K), workload)).sum())
    assert refused > 0  # chat prompts over vLLM's 2048-token iteration limit
    metrics = evaluate(_task(VLLM_2K, workload)).metrics
    assert metrics["slo_passed"] is False
    assert metrics["capacity_qps"] == 0.0 and metrics["num_simulations"] == 0
    assert metrics["rejected_requests"] == refused and metrics["num_requests"] == 300
    detail = metrics["slo_detail"][REJECTED_SHARE]
    assert detail == {
        "passed": False, "value": pytest.approx(refused / 300), "max": 0.0,
        "rejected": refused, "of": 300,
    }  # fmt: skip


def test_a_larger_max_rejected_share_ranks_it_on_the_rest() -> None:
    workload = _chat(300, seed=1)
    metrics = evaluate(_task(VLLM_2K, workload, max_rejected_share=0.2)).metrics
    assert metrics["capacity_qps"] > 0 and metrics["num_simulations"] > 0
    assert metrics["rejected_requests"] > 0
    assert metrics["slo_detail"][REJECTED_SHARE]["passed"] is True
    assert metrics["slo_passed"] is metrics["slo_detail"][TTFT.column]["passed"]
    # the samplers see a configuration refusing too much as infeasible, whatever its latency
    spec = parse_spec({"model": LLAMA_7B, "skus": ["a100-80gb"]})
    assert constraint_value(metrics, spec) != INFEASIBLE
    over = {**metrics["slo_detail"][REJECTED_SHARE], "passed": False}
    refusing = metrics | {"slo_detail": metrics["slo_detail"] | {REJECTED_SHARE: over}}
    assert constraint_value(refusing, spec) == INFEASIBLE
