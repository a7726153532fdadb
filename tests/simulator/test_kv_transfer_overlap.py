"""Layer-wise KV transfer: the hand-off waits only for what remains after the last layer."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from estimators import load_engine, load_model
from simulator import (
    ClusterConfig,
    DecodeSpec,
    Deployment,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    engine_scheduler,
    prepare,
    request_token_times,
)
from simulator._engine import DecodePool, Hardware
from simulator._kv_transfer import layerwise_transfer_wait
from sku_catalog import load_catalog
from tests.simulator.conftest import LinearEstimator, make_workload


def test_a_link_that_keeps_up_leaves_one_layer_to_send():
    # 1 s of prefill over 10 layers, 0.5 s of transfer: layer 10's 0.05 s remains
    assert layerwise_transfer_wait(0.5, 1.0, 10) == pytest.approx(0.05)


def test_a_slow_link_is_the_bottleneck_less_all_but_one_layer_of_prefill():
    # 3 s of transfer, 1 s of prefill over 10 layers: 3 - 0.9 = 2.1 s after the prefill
    assert layerwise_transfer_wait(3.0, 1.0, 10) == pytest.approx(2.1)


def test_no_layers_means_no_overlap():
    assert layerwise_transfer_wait(0.7, 5.0, 0) == 0.7


def test_the_wait_matches_a_layer_by_layer_schedule():
    rng = np.random.default_rng(3)
    for _ in range(50):
        layers = int(rng.integers(1, 100))
        transfer, prefill = rng.uniform(0, 2, size=2)
        p, x = prefill / layers, transfer / layers
        sent = 0.0
        for i in range(1, layers + 1):  # layer i computed at i p, sent after layer i - 1
            sent = max(sent, i * p) + x
        assert layerwise_transfer_wait(transfer, prefill, layers) == pytest.approx(sent - prefill)


def _run(layers: int):
    pool = DecodePool(
        LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=8, chunk_size=4096),
        ClusterConfig(num_replicas=1, num_kv_blocks=400),
        Hardware(),
        transfer_seconds_per_token=1e-4,
        transfer_layers=layers,
    )
    sim = Simulation(
        make_workload([1000], [3]), LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=8, chunk_size=4096),
        ClusterConfig(num_kv_blocks=400), decode_pool=pool,
    )  # fmt: skip
    return sim.run()


def test_the_simulated_hand_off_overlaps_the_prefill_by_layer():
    after, layerwise = _run(0), _run(4)
    req = layerwise.requests[0]
    prefill = req.first_token_at - req.scheduled_at
    gap = [np.diff(request_token_times(s, 0))[0] for s in (after, layerwise)]
    # 1000 tokens x 1e-4 s = 0.1 s of transfer, less 3/4 of the prefill (or 1/4 of it)
    saved = 0.1 - layerwise_transfer_wait(0.1, prefill, 4)
    assert prefill > 0 and saved > 0
    assert gap[0] - gap[1] == pytest.approx(saved, rel=1e-9)
    assert after.requests[0].first_token_at == req.first_token_at  # TTFT is the prefill's


def test_the_engine_profile_says_whether_the_transfer_is_layerwise():
    cat = load_catalog()
    h200 = cat.get("h200")
    model = load_model("meta-llama/Llama-3.1-70B")
    for name in ("vllm", "sglang", "trtllm"):
        assert load_engine(name).kv_transfer_layerwise is False  # engines.yaml, with sources
    engine = load_engine("trtllm")
    d = Deployment(
        model, h200, tp=4, engine=engine, scheduler=engine_scheduler(engine, h200, 4),
        decode=DecodeSpec(h200, tp=4, scheduler=engine_scheduler(engine, h200, 4)),
    )  # fmt: skip
    assert prepare(d).decode_pool.transfer_layers == 0
    streaming = replace(d, engine=replace(engine, kv_transfer_layerwise=True))
    assert prepare(streaming).decode_pool.transfer_layers == 80  # Llama-3.1-70B's layers


def test_a_decode_pool_with_attention_dp_and_experts():
    cat = load_catalog()
    h200 = cat.get("h200")
    engine = load_engine("trtllm")
    d = Deployment(
        load_model("deepseek-ai/DeepSeek-V3"), h200, tp=8, ep=8, engine=engine,
        precision="fp8", scheduler=engine_scheduler(engine, h200, 8),
        decode=DecodeSpec(h200, tp=1, dp=8, ep=8, num_replicas=2,
                          scheduler=engine_scheduler(engine, h200, 1, dp=8)),
    )  # fmt: skip
    assert d.decode.gpus_per_replica == 8 and d.num_gpus == 8 + 16
    p = prepare(d)
    assert p.decode_pool.hardware.gpus_per_replica == 8
    # each of the 8 DP ranks keeps its own KV cache
    assert p.decode_pool.cluster.num_kv_blocks == 8 * p.decode_memory.num_kv_blocks
    assert p.decode_pool.estimator.dp == 8
