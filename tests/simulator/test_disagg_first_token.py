"""Disaggregated serving: where the client sees the first token, and what the hand-off moves."""

from __future__ import annotations

import numpy as np
import pytest

from estimators import (
    FIRST_TOKEN_DECODE_ADMIT,
    FIRST_TOKEN_DECODE_STEP,
    FIRST_TOKEN_PREFILL,
    load_engine,
    load_model,
)
from simulator import (
    ClusterConfig,
    SchedulerConfig,
    Simulation,
    request_token_times,
)
from simulator._engine import DecodePool, Hardware
from tests.simulator.conftest import LinearEstimator, make_workload
from tests.simulator.test_invariants import check_conservation

TRANSFER = 1e-4  # seconds per prompt token


def _run(
    workload,
    first_token: str,
    decoders: int = 1,
    schedule_ahead: bool = False,
    decode_tokenize: float = 0.0,
    decode_latency: float = 0.0,
) -> Simulation:
    decode_scheduler = SchedulerConfig(batch_size=32, chunk_size=256, schedule_ahead=schedule_ahead)
    decode_cluster = ClusterConfig(
        num_replicas=decoders, num_kv_blocks=2000, tokenize_seconds_per_token=decode_tokenize,
        frontend_latency=decode_latency,
    )  # fmt: skip
    pool = DecodePool(
        LinearEstimator(), decode_scheduler, decode_cluster, Hardware(),
        transfer_seconds_per_token=TRANSFER, first_token=first_token,
    )  # fmt: skip
    sim = Simulation(
        workload, LinearEstimator(), SchedulerConfig(batch_size=16, chunk_size=256),
        ClusterConfig(num_kv_blocks=2000), decode_pool=pool,
    ).run()  # fmt: skip
    if first_token != FIRST_TOKEN_DECODE_STEP:  # there the first two tokens share a time
        check_conservation(sim)
    assert all(s.completed_at > 0 for s in sim.requests)
    return sim


def _prefill_end(sim: Simulation, req_id: int) -> float:
    """When the prefill pool finished the request's prompt (the hand-off)."""
    prefill_rows = [row for row in sim.batches.rows if row[0] == 0 and row[4] > 0]
    return max(row[2] for row in prefill_rows)


def test_an_idle_decode_replica_shows_the_first_token_when_the_kv_arrives_or_after_a_step():
    w = make_workload([1000], [4])
    runs = {k: _run(w, k) for k in (FIRST_TOKEN_PREFILL, FIRST_TOKEN_DECODE_ADMIT,
                                     FIRST_TOKEN_DECODE_STEP)}  # fmt: skip
    end = _prefill_end(runs[FIRST_TOKEN_PREFILL], 0)
    kv_arrives = end + 1000 * TRANSFER
    ttft = {k: s.requests[0].first_token_at for k, s in runs.items()}
    assert ttft[FIRST_TOKEN_PREFILL] == end
    assert ttft[FIRST_TOKEN_DECODE_ADMIT] == pytest.approx(kv_arrives, abs=1e-12)
    # one decode step of one request reading 1000 KV tokens: overhead + base + 1 token + KV
    step = 0.001 + 0.005 + 2e-5 + 1e-7 * 1000
    assert ttft[FIRST_TOKEN_DECODE_STEP] == pytest.approx(kv_arrives + step, rel=1e-12)
    # the decode side runs the same steps whatever the rule: the last token is the same
    done = {s.requests[0].completed_at for s in runs.values()}
    assert len(done) == 1
    # decode_step: the first two tokens reach the client together, then one per step
    times = request_token_times(runs[FIRST_TOKEN_DECODE_STEP], 0)
    assert len(times) == 4 and times[0] == times[1] and np.all(np.diff(times)[1:] > 0)


def _step_end_after(step_ends: np.ndarray, t: float, later: int) -> float:
    """The first decode step end after `t`, or the one `later` steps on."""
    return float(step_ends[step_ends > t][later])


def test_a_busy_decode_replica_takes_the_hand_off_and_the_kv_at_its_batch_boundaries():
    """Request 1 is handed off while request 0 decodes on the only decode replica: its
    scheduler allocates the blocks, and the transfer into them starts, when the step in
    flight ends; the request joins at the first step end after its KV arrived.  Under
    schedule_ahead (the engines' overlap schedulers) the batch after the one in flight was
    formed before either was seen: each waits one step more.  An idle replica takes both at
    once either way."""
    w = make_workload([200, 300], [400, 3], [0.0, 0.2])
    for ahead in (False, True):
        sim = _run(w, FIRST_TOKEN_DECODE_ADMIT, schedule_ahead=ahead)
        hand_off = max(row[2] for row in sim.batches.rows if row[0] == 0 and row[4] > 0)
        step_ends = np.array(sorted(row[2] for row in sim.batches.rows if row[0] == 1))
        transfer_from = _step_end_after(step_ends, hand_off, int(ahead))
        kv_arrives = transfer_from + 300 * TRANSFER
        assert kv_arrives not in step_ends  # it arrives mid-step
        joins = _step_end_after(step_ends, kv_arrives, int(ahead))
        assert sim.requests[1].first_token_at == pytest.approx(joins, abs=1e-12)
        check_conservation(sim)
    alone = make_workload([1000], [4])
    assert (
        _run(alone, FIRST_TOKEN_DECODE_ADMIT, schedule_ahead=True).requests[0].first_token_at
        == _run(alone, FIRST_TOKEN_DECODE_ADMIT).requests[0].first_token_at
    )


def test_a_decode_server_that_tokenizes_the_prompt_again_starts_the_transfer_after_it():
    """vLLM's P/D proxies send the prompt text to the decode server once the prefill has
    returned: its frontend takes the request in (its latency) and tokenizes it again before
    the scheduler allocates the blocks and the transfer starts, on the first token's path;
    the other engines' do not."""
    w = make_workload([1000], [4])
    plain = _run(w, FIRST_TOKEN_DECODE_ADMIT)
    again = _run(w, FIRST_TOKEN_DECODE_ADMIT, decode_tokenize=2e-5)
    end = _prefill_end(plain, 0)
    assert plain.requests[0].first_token_at == pytest.approx(end + 1000 * TRANSFER, abs=1e-12)
    assert again.requests[0].first_token_at == pytest.approx(
        end + 1000 * 2e-5 + 1000 * TRANSFER, abs=1e-12
    )
    check_conservation(again)
    # and the decode request's way through that second frontend, with or without tokenizing
    for tokenize in (0.0, 2e-5):
        through = _run(w, FIRST_TOKEN_DECODE_ADMIT, decode_tokenize=tokenize, decode_latency=0.0087)
        assert through.requests[0].first_token_at == pytest.approx(
            end + 1000 * tokenize + 0.0087 + 1000 * TRANSFER, abs=1e-12
        )
    assert load_engine("vllm").disagg_decode_tokenizes
    assert not load_engine("sglang").disagg_decode_tokenizes
    assert not load_engine("trtllm").disagg_decode_tokenizes
    # a deployment's decode pool tokenizes at its engine's frontend rate, or not at all
    vllm, _ = _deepseek("vllm", 8, 1, 8, 1)
    trt, _ = _deepseek("trtllm", 8, 1, 8, 1)
    rate = load_engine("vllm").frontend.seconds_per_token
    assert vllm.decode_pool.cluster.tokenize_seconds_per_token == rate > 0
    assert trt.decode_pool.cluster.tokenize_seconds_per_token == 0.0
    latency = load_engine("vllm").frontend.request_seconds
    assert vllm.decode_pool.cluster.frontend_latency == latency > 0
    assert trt.decode_pool.cluster.frontend_latency == 0.0


def test_the_engine_profiles_say_where_the_first_token_comes_from():
    assert load_engine("vllm").disagg_first_token == FIRST_TOKEN_DECODE_STEP
    assert load_engine("trtllm").disagg_first_token == FIRST_TOKEN_DECODE_STEP
    assert load_engine("sglang").disagg_first_token == FIRST_TOKEN_DECODE_ADMIT
    assert load_engine("vidur").disagg_first_token == FIRST_TOKEN_PREFILL


def _deepseek(engine: str, prefill_tp: int, prefill_dp: int, decode_tp: int, decode_dp: int):
    from estimators import Precision
    from simulator import DecodeSpec, Deployment, engine_scheduler, prepare
    from sku_catalog import load_catalog

    b200, profile = load_catalog().get("b200"), load_engine(engine)
    d = Deployment(
        load_model("deepseek-ai/DeepSeek-V3"), b200, tp=prefill_tp, dp=prefill_dp, ep=8,
        precision=Precision.FP8, kv_precision=Precision.FP8, engine=profile,
        scheduler=engine_scheduler(profile, b200, prefill_tp, dp=prefill_dp),
        decode=DecodeSpec(b200, tp=decode_tp, dp=decode_dp, ep=8, num_replicas=1,
                          scheduler=engine_scheduler(profile, b200, decode_tp, dp=decode_dp)),
    )  # fmt: skip
    return prepare(d), b200


def test_mla_latent_goes_to_every_decode_rank_of_the_request():
    """DeepSeek-V3's KV is one 576-element latent per layer (61 layers, in the FP8 KV cache
    its launch recipes set: 35,136 bytes a token), held whole by every attention rank.
    Prefill with attention DP (TP 1) into decode TP 8: the prefill GPU sends the latent to
    all 8 decode ranks; into decode attention DP 8 (TP 1), to one."""
    latent = 61 * (512 + 64) * 1
    to_tp8, b200 = _deepseek("trtllm", 1, 8, 8, 1)
    to_dp8, _ = _deepseek("trtllm", 1, 8, 1, 8)
    link = b200.default_node.intra_node_bandwidth_gbps * 1e9  # 16 GPUs: not one node
    link = min(link, b200.default_node.inter_node_bandwidth_gbps * 1e9)
    assert to_dp8.decode_pool.transfer_seconds_per_token == pytest.approx(latent / link)
    assert to_tp8.decode_pool.transfer_seconds_per_token == pytest.approx(8 * latent / link)
    assert to_tp8.decode_pool.first_token == FIRST_TOKEN_DECODE_STEP
