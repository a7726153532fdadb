"""The capacity bound under speculative decoding: each running decode's verify step takes
k + 1 tokens of an iteration's budget where decodes share it with prompt chunks (Sarathi),
and none where prompts and decodes run in iterations of their own (SGLang)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from estimators import SpeculativeConfig, load_model
from search._capacity import (
    CapacitySearchOptions,
    find_capacity,
    servable,
    throughput_upper_bound,
    unit_arrival_times,
)
from simulator import SchedulerConfig, SchedulerKind, service_bound
from simulator._deployment import Deployment, PreparedDeployment, prepare
from sku_catalog import load_catalog
from tests.search.test_capacity import LLAMA_7B, _chat

EAGLE = SpeculativeConfig("eagle", 3, 0.7)  # 4 budget tokens a verify step, E = 2.53


def _prepared(kind: SchedulerKind, speculative: SpeculativeConfig | None = EAGLE):
    return prepare(
        Deployment(
            load_model(LLAMA_7B),
            load_catalog().get("a100-80gb"),
            scheduler=SchedulerConfig(kind, batch_size=128, chunk_size=512),
            speculative=speculative,
        )
    )


def _one_token_a_step(prepared: PreparedDeployment) -> PreparedDeployment:
    """The same deployment with each verify step counted as one budget token (the bound
    before it counted k + 1)."""
    return replace(prepared, scheduler=replace(prepared.scheduler, decode_tokens=1))


@pytest.fixture(scope="module")
def workload():
    return _chat(300)


def test_the_replicas_scheduler_counts_k_plus_one_tokens_a_verify_step():
    assert _prepared(SchedulerKind.SARATHI).scheduler.decode_tokens == 4
    assert _prepared(SchedulerKind.SARATHI, None).scheduler.decode_tokens == 1


def test_sarathi_bound_counts_k_plus_one_budget_tokens_a_verify_step(workload):
    prepared = _prepared(SchedulerKind.SARATHI)
    mask = servable(prepared, workload)
    p = workload.prompt_tokens[mask].astype(np.float64)
    steps = (workload.output_tokens[mask] - 1) / EAGLE.tokens_per_step
    # the 512-token budget binds: (prompt + 4 x verify steps) / 512 batches a request
    assert service_bound(prepared, workload).batches_per_request == pytest.approx(
        float((p + 4 * steps).mean()) / 512, rel=1e-9
    )
    assert service_bound(_one_token_a_step(prepared), workload).batches_per_request == (
        pytest.approx(float((p + steps).mean()) / 512, rel=1e-9)
    )


@pytest.mark.parametrize("kind", [SchedulerKind.SARATHI, SchedulerKind.SGLANG])
def test_the_bound_still_holds_the_searched_capacity_and_the_saturated_run(kind, workload):
    prepared = _prepared(kind)
    steady = service_bound(prepared, workload).steady_qps
    upper = throughput_upper_bound(prepared, workload)
    found = find_capacity(prepared, workload, CapacitySearchOptions(tolerance=0.02))
    assert found.capacity_kind == "measured"
    assert 0 < found.capacity_qps <= upper
    assert found.failing_qps <= upper  # the search found a failing rate under the bound
    # saturated: arrivals at 3x the steady-state bound, the served rate stays under it
    scaled = workload.with_arrival_times(unit_arrival_times(workload) / (3 * steady))
    summary = prepared.simulate(scaled).summary
    assert summary["requests"]["completed"] == len(workload)
    assert 0.7 * steady < summary["throughput"]["requests_per_s"] <= steady


def test_sarathi_bound_is_tighter_than_with_one_budget_token_a_step(workload):
    prepared = _prepared(SchedulerKind.SARATHI)
    old = _one_token_a_step(prepared)
    assert service_bound(prepared, workload).steady_qps < (
        0.99 * service_bound(old, workload).steady_qps
    )
    assert throughput_upper_bound(prepared, workload) < (
        0.99 * throughput_upper_bound(old, workload)
    )


def test_separate_prompt_and_decode_batches_add_up_and_take_no_budget_for_verify_steps(
    workload,
):
    """SGLang's iterations prefill or decode: the prompt batches (512-token chunks) and the
    decode batches (at most 128 a batch, their context at most the KV cache) add up, and a
    verify step's tokens count against no budget."""
    prepared = _prepared(SchedulerKind.SGLANG)
    mask = servable(prepared, workload)
    p = workload.prompt_tokens[mask].astype(np.float64)
    o = workload.output_tokens[mask].astype(np.float64)
    e = EAGLE.tokens_per_step
    steps = (o - 1) / e
    context = float((((o - 1) * p + (o - 1) * (o - 2) / 2) / e).mean())
    capacity = prepared.cluster.num_kv_blocks * prepared.cluster.block_size
    decode_batches = max(float(steps.mean()) / 128, context / capacity)
    expected = float(p.mean()) / 512 + decode_batches
    bound = service_bound(prepared, workload)
    assert bound.batches_per_request == pytest.approx(expected, rel=1e-9)
    assert service_bound(_one_token_a_step(prepared), workload).batches_per_request == (
        bound.batches_per_request
    )
    # tighter than one batch count taken as the max of tokens and sequences
    sequences = float((np.ceil(p / 512) + steps).mean()) / 128
    tokens = float((p + steps).mean()) / 512
    assert bound.batches_per_request > 1.1 * max(sequences, tokens)
