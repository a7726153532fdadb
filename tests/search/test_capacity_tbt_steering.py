"""Probes placed by the TBT estimate (`_Search.tbt_capacity_estimate`): a guess of where a
missed TBT SLO's slow gaps become few enough, used only to place probes; verdicts stay
those of the simulations, so the search finds the capacity the halving search finds,
within the tolerance, in fewer simulations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators import load_model
from search._capacity import CapacitySearchOptions, LatencySLO, _Search, find_capacity
from simulator import (
    Deployment,
    SchedulerConfig,
    SchedulerKind,
    prepare,
    slow_gap_share,
    summarize,
)
from sku_catalog import load_catalog
from workloads import build_workload

LLAMA_7B = "meta-llama/Llama-2-7b-hf"
LLAMA_70B = "meta-llama/Llama-2-70b-hf"
FILTERS = (LatencySLO("ttft", 90, 2.0), LatencySLO("tbt", 99, 0.2))


def _chat(n: int, seed: int = 0):
    return build_workload(
        {"source": "chat"}, num_requests=n, qps=1.0, concurrency=None, seed=seed
    )


def _prepared(model: str, sku: str, tp: int, pp: int, kind: SchedulerKind, **kwargs):
    return prepare(
        Deployment(
            model=load_model(model), sku=load_catalog().get(sku), tp=tp, pp=pp,
            scheduler=SchedulerConfig(kind, batch_size=128, chunk_size=512), **kwargs,
        )
    )  # fmt: skip


def _search_with(ratios: dict[float, float]) -> _Search:
    workload = _chat(20)
    options = CapacitySearchOptions(also=(LatencySLO("tbt", 99, 0.2),))
    prepared = _prepared(LLAMA_7B, "a100-80gb", 1, 1, SchedulerKind.SARATHI)
    search = _Search(prepared, workload, np.arange(20.0), options)
    search.slow_ratios = dict(ratios)
    return search


def test_the_estimate_needs_a_tbt_miss_at_the_upper_end():
    assert _search_with({0.2: 0.8}).tbt_capacity_estimate(0.0, 0.2) is None  # met there
    assert _search_with({}).tbt_capacity_estimate(0.0, 0.2) is None  # not measured
    assert _search_with({0.2: math.nan}).tbt_capacity_estimate(0.0, 0.2) is None


def test_the_estimate_is_proportional_from_one_end_and_a_power_from_two():
    # the failing end alone: slow gaps in proportion to the rate
    assert _search_with({0.2: 4.0}).tbt_capacity_estimate(0.0, 0.2) == pytest.approx(0.05)
    # both ends: ratio 0.25 at 0.1, 4 at 0.4 is the rate squared; 1 at 0.2
    both = _search_with({0.1: 0.25, 0.4: 4.0})
    assert both.tbt_capacity_estimate(0.1, 0.4) == pytest.approx(0.2)
    # no slow gap at the passing end: back to the failing end alone
    assert _search_with({0.1: 0.0, 0.4: 4.0}).tbt_capacity_estimate(0.1, 0.4) == (
        pytest.approx(0.1)
    )


def test_the_slow_gap_share_is_where_the_tbt_percentile_crosses_the_bound():
    prepared = _prepared(LLAMA_70B, "a100-80gb", 1, 2, SchedulerKind.ORCA)
    workload = _chat(300)
    sim = prepared.simulation(workload.with_arrival_times(workload.arrival_times / 0.3))
    sim.run()
    p99 = summarize(sim)["latency_s"]["tbt"]["p99"]
    assert slow_gap_share(sim, p99) >= 0.01  # at least 1 % of the gaps reach their P99
    above = np.nextafter(p99, math.inf)
    assert slow_gap_share(sim, above) <= 0.01
    assert slow_gap_share(sim, 0.0) == 1.0
    assert 0.0 < slow_gap_share(sim, 0.2) < 1.0


CASES = [
    (LLAMA_70B, "a100-80gb", 1, 2, SchedulerKind.ORCA),
    (LLAMA_70B, "a100-80gb", 1, 4, SchedulerKind.SARATHI),
    (LLAMA_70B, "h100-sxm", 2, 2, SchedulerKind.SARATHI),
    (LLAMA_7B, "a100-80gb", 1, 1, SchedulerKind.VLLM),
    (LLAMA_7B, "a100-80gb", 1, 2, SchedulerKind.SARATHI),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0][-6:]}-tp{c[2]}pp{c[3]}-{c[4].value}")
def test_steered_and_halving_searches_agree_within_the_tolerance(case):
    prepared = _prepared(*case)
    workload = _chat(400, seed=1)
    steered = find_capacity(prepared, workload, CapacitySearchOptions(also=FILTERS))
    halving = find_capacity(
        prepared, workload, CapacitySearchOptions(also=FILTERS, tbt_steering=False)
    )
    # each bracket [capacity, smallest failing rate) holds where the verdict turns: they meet
    assert max(steered.capacity_qps, halving.capacity_qps) < min(
        steered.failing_qps, halving.failing_qps
    )
    assert steered.failing_qps / steered.capacity_qps - 1 <= 0.05 + 1e-9
    assert steered.num_simulations <= halving.num_simulations + 1


@pytest.mark.parametrize("guess", [1e-9, 1e9])
def test_a_wrong_estimate_costs_simulations_not_the_answer(monkeypatch, guess):
    prepared = _prepared(LLAMA_70B, "a100-80gb", 1, 2, SchedulerKind.ORCA)
    workload = _chat(150, seed=2)
    halving = find_capacity(
        prepared, workload, CapacitySearchOptions(also=FILTERS, tbt_steering=False)
    )
    monkeypatch.setattr(_Search, "tbt_capacity_estimate", lambda self, lo, hi: guess)
    wrong = find_capacity(prepared, workload, CapacitySearchOptions(also=FILTERS))
    assert halving.capacity_qps > 0 and wrong.capacity_qps > 0
    assert max(wrong.capacity_qps, halving.capacity_qps) < min(
        wrong.failing_qps, halving.failing_qps
    )
    assert wrong.failing_qps / wrong.capacity_qps - 1 <= 0.05 + 1e-9
