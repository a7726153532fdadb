"""Disaggregated serving: a prefill pool hands each prompt's KV cache to a decode pool."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import ClusterConfig, SchedulerConfig, SchedulerKind, Simulation, request_token_times
from simulator._engine import DecodePool, Hardware
from tests.simulator.conftest import LinearEstimator, make_workload, poisson_workload
from tests.simulator.test_invariants import check_conservation


def _sim(workload, transfer=1e-5, decode_kind=SchedulerKind.SARATHI, decoders=2, blocks=400):
    prefill, decode = LinearEstimator(record=True), LinearEstimator(record=True)
    pool = DecodePool(
        decode,
        SchedulerConfig(decode_kind, batch_size=32, chunk_size=256),
        ClusterConfig(num_replicas=decoders, num_kv_blocks=blocks),
        Hardware(gpus_per_replica=2),
        transfer_seconds_per_token=transfer,
    )
    sim = Simulation(
        workload, prefill, SchedulerConfig(SchedulerKind.SARATHI, batch_size=16, chunk_size=256),
        ClusterConfig(num_kv_blocks=blocks), decode_pool=pool,
    )  # fmt: skip
    return sim.run(), prefill, decode


@pytest.mark.parametrize("kind", [SchedulerKind.SARATHI, SchedulerKind.VLLM,
                                  SchedulerKind.ORCA, SchedulerKind.SGLANG])  # fmt: skip
def test_every_request_prefills_on_one_pool_and_decodes_on_the_other(kind):
    sim, prefill, decode = _sim(poisson_workload(60, qps=20, seed=2), decode_kind=kind)
    check_conservation(sim)
    assert all(b.num_decodes == 0 for b in prefill.calls)  # the prefill pool never decodes
    assert all(b.num_prefill_tokens == 0 for b in decode.calls)  # nor the decode pool prefill
    decoders = {r.id for r in sim.replicas[1:]}
    assert {r.replica for r in sim.requests if r.output_tokens > 1} <= decoders
    assert sum(b.num_decodes for b in decode.calls) == sum(
        r.output_tokens - 1 for r in sim.requests
    )  # every token after the first is decoded once


def test_the_first_decode_token_waits_for_the_kv_transfer():
    w = make_workload([1000], [3])
    fast, _, _ = _sim(w, transfer=1e-6)
    slow, _, _ = _sim(w, transfer=1e-4)  # 1000 tokens: 0.1 s more
    gaps = [np.diff(request_token_times(s, 0))[0] for s in (fast, slow)]
    assert gaps[1] - gaps[0] == pytest.approx(1000 * (1e-4 - 1e-6), rel=1e-9)
    assert slow.requests[0].first_token_at == fast.requests[0].first_token_at  # TTFT: prefill


def test_decodes_spread_over_the_decode_pool_by_load():
    sim, _, _ = _sim(make_workload([100] * 8, [50] * 8), decoders=4)
    counts = np.bincount([r.replica for r in sim.requests], minlength=5)
    assert counts[0] == 0 and list(counts[1:]) == [2, 2, 2, 2]


def test_the_summary_names_each_replica_s_pool():
    """The decode pool's replicas are numbered after the prefill pool's; the summary says
    which is which, and an aggregated deployment's replicas are "aggregated"."""
    from simulator import SimulationResult

    w = poisson_workload(30, qps=10, seed=3)
    sim, _, _ = _sim(w, decoders=3)
    roles = [r["role"] for r in SimulationResult(sim).summary["replicas"]]
    assert roles == ["prefill", "decode", "decode", "decode"]
    alone = Simulation(w, LinearEstimator(), SchedulerConfig(SchedulerKind.SARATHI),
                       ClusterConfig(num_replicas=2)).run()  # fmt: skip
    assert [r["role"] for r in SimulationResult(alone).summary["replicas"]] == ["aggregated"] * 2


def test_a_disaggregated_deployment_pays_for_both_pools_and_moves_kv_over_the_network():
    from estimators import load_engine, load_model
    from simulator import DecodeSpec, Deployment, engine_scheduler, prepare
    from sku_catalog import load_catalog

    cat, engine = load_catalog(), load_engine("vllm")
    h100, h200 = cat.get("h100-sxm"), cat.get("h200")
    d = Deployment(
        load_model("meta-llama/Llama-3.1-70B"), h100, tp=4, engine=engine,
        scheduler=engine_scheduler(engine, h100, 4),
        decode=DecodeSpec(h200, tp=4, num_replicas=2, scheduler=engine_scheduler(engine, h200, 4)),
    )  # fmt: skip
    assert d.num_gpus == 12
    assert d.cost_per_hour == 4 * h100.price_per_gpu_hour + 8 * h200.price_per_gpu_hour
    p = prepare(d)
    # 80 layers x 8 KV heads x 128 x K and V x 2 bytes / TP 4 per token, over the network
    per_gpu = 80 * 8 * 128 * 2 * 2 / 4
    link = min(h100.default_node.inter_node_bandwidth_gbps,
               h200.default_node.inter_node_bandwidth_gbps) * 1e9  # fmt: skip
    assert p.decode_pool.transfer_seconds_per_token == pytest.approx(per_gpu / link)
    assert p.decode_memory.num_kv_blocks > p.memory.num_kv_blocks  # H200's larger HBM


def test_a_request_the_decode_pool_can_never_hold_is_rejected_not_stuck():
    """The decode pool holds 20 blocks of 16 tokens: the 400-token prompt prefills on the
    larger prefill pool, then is rejected at the hand-off instead of waiting for ever."""
    pool = DecodePool(
        LinearEstimator(), SchedulerConfig(), ClusterConfig(num_kv_blocks=20), Hardware(),
        transfer_seconds_per_token=0.0,
    )
    sim = Simulation(make_workload([100, 400], [5, 5], [0.0, 0.1]), LinearEstimator(),
                     SchedulerConfig(), ClusterConfig(num_kv_blocks=400),
                     decode_pool=pool).run()  # fmt: skip
    assert sim.requests[1].rejected.startswith("decode pool: request needs")
    assert sim.requests[0].completed_at > 0 and sim.completed == 2


def test_a_prefill_pool_needs_room_for_the_prompt_alone():
    """A request longer than a prefill replica's KV cache, its prompt not: the prefill pool
    holds only the prompt before the hand-off, so the request is servable where the decode
    pool holds its whole length, and the simulator serves it (it is not rejected)."""
    from estimators import load_engine, load_model
    from simulator import DecodeSpec, Deployment, engine_scheduler, prepare, servable_requests
    from sku_catalog import load_catalog
    from workloads import Workload

    cat, engine = load_catalog(), load_engine("trtllm")  # reserves whole lengths
    h100, h200 = cat.get("h100-sxm"), cat.get("h200")
    d = Deployment(
        load_model("meta-llama/Llama-3.1-8B"), h100, engine=engine,
        scheduler=engine_scheduler(engine, h100, 1),
        decode=DecodeSpec(h200, tp=1, num_replicas=1, scheduler=engine_scheduler(engine, h200, 1)),
    )  # fmt: skip
    p = prepare(d)
    prefill_tokens = p.memory.num_kv_blocks * d.block_size
    decode_tokens = p.decode_memory.num_kv_blocks * d.block_size
    output = (prefill_tokens + decode_tokens) // 2  # too long for a prefill replica
    prompts, outputs = np.array([1000, 1000]), np.array([output, decode_tokens + 10])
    assert list(servable_requests(p, prompts, outputs)) == [True, False]
    arrival = np.zeros(2)
    workload = Workload("long", arrival, prompts, np.array([output, 5]))
    sim = p.simulate(workload)
    assert sim.requests["rejected"].tolist() == ["", ""]
    assert sim.requests["completed"].notna().all()


def test_a_decode_pool_takes_its_own_memory_fraction_else_the_deployments():
    """Each pool's servers are launched with a memory fraction of their own (SGLang's
    mem-fraction-static differs between a recipe's prefill and decode workers): the decode
    pool's KV cache follows `DecodeSpec.gpu_memory_utilization`, and the deployment's where
    that is None; the prefill pool keeps the deployment's either way."""
    from dataclasses import replace

    from estimators import load_engine, load_model
    from simulator import DecodeSpec, Deployment, engine_scheduler, prepare
    from sku_catalog import load_catalog

    engine, h100 = load_engine("vllm"), load_catalog().get("h100-sxm")
    decode = DecodeSpec(h100, tp=1, num_replicas=1, scheduler=engine_scheduler(engine, h100, 1))
    d = Deployment(load_model("meta-llama/Llama-3.1-8B"), h100, engine=engine,
                   scheduler=engine_scheduler(engine, h100, 1), gpu_memory_utilization=0.9,
                   decode=decode)  # fmt: skip
    shared = prepare(d)
    own = prepare(replace(d, decode=replace(decode, gpu_memory_utilization=0.5)))
    assert shared.decode_memory.gpu_memory_utilization == 0.9
    assert own.decode_memory.gpu_memory_utilization == 0.5
    assert own.memory.gpu_memory_utilization == shared.memory.gpu_memory_utilization == 0.9
    assert own.decode_memory.num_kv_blocks < shared.decode_memory.num_kv_blocks
    assert own.memory.num_kv_blocks == shared.memory.num_kv_blocks


def test_a_run_whose_requests_can_never_start_raises_instead_of_returning_partial_metrics():
    # blocks held by nothing the simulation will ever free (a defect such as a leaked
    # reservation): the request neither starts nor is rejected, and no event is left
    from simulator import SimulationStalled

    sim = Simulation(make_workload([64], [5]), LinearEstimator(), SchedulerConfig(),
                     ClusterConfig(num_kv_blocks=100))  # fmt: skip
    sim.replicas[0].pool.reserved = 100
    with pytest.raises(SimulationStalled, match="1 of 1 requests never finished"):
        sim.run()
