"""Disaggregated runs of random shapes conserve requests, tokens and KV blocks: whatever
each pool reserves (whole lengths or on demand), when the decode side reserves and where
the first token shows, every request finishes or is rejected and every block and
reservation comes back.  So do runs of every feature that shapes a decode step (speculative
bursts, shared prefix blocks, polling, batch waiting, pipeline stages, attention DP ranks
and their balance), aggregated or on a decode pool."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from estimators import (
    DECODE_RESERVE_MOMENTS,
    FIRST_TOKEN_DECODE_ADMIT,
    FIRST_TOKEN_DECODE_STEP,
    FIRST_TOKEN_PREFILL,
    SpeculativeConfig,
    SpeculativeEstimator,
)
from simulator import (
    ClusterConfig,
    GlobalSchedulerKind,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
)
from simulator._engine import DecodePool, Hardware
from tests.simulator.conftest import LinearEstimator, make_workload
from tests.simulator.test_invariants import check_conservation

_KINDS = [SchedulerKind.SARATHI, SchedulerKind.VLLM, SchedulerKind.ORCA, SchedulerKind.SGLANG]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 40),
    closed_loop=st.booleans(),
    prefill_kind=st.sampled_from(_KINDS),
    decode_kind=st.sampled_from(_KINDS),
    prefill_full=st.booleans(),
    decode_full=st.booleans(),
    prefill_replicas=st.integers(1, 2),
    decode_replicas=st.integers(1, 3),
    prefill_blocks=st.integers(60, 300),
    decode_blocks=st.integers(60, 300),
    batch=st.integers(1, 32),
    reserve=st.sampled_from(DECODE_RESERVE_MOMENTS),
    first_token=st.sampled_from(
        [FIRST_TOKEN_PREFILL, FIRST_TOKEN_DECODE_ADMIT, FIRST_TOKEN_DECODE_STEP]
    ),
    router=st.sampled_from(
        [GlobalSchedulerKind.LEAST_OUTSTANDING, GlobalSchedulerKind.ROUND_ROBIN]
    ),
    seed=st.integers(0, 2**16),
)
def test_random_disaggregated_runs_conserve_requests_tokens_and_memory(
    n, closed_loop, prefill_kind, decode_kind, prefill_full, decode_full, prefill_replicas,
    decode_replicas, prefill_blocks, decode_blocks, batch, reserve, first_token, router, seed,
):  # fmt: skip
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(0.02, n))
    workload = make_workload(
        rng.integers(1, 600, n), rng.integers(1, 400, n), arrivals,
        concurrency=int(rng.integers(1, 16)) if closed_loop else None,
    )  # fmt: skip
    pool = DecodePool(
        LinearEstimator(),
        SchedulerConfig(
            decode_kind, batch_size=batch, chunk_size=512, reserve_full_length=decode_full
        ),
        ClusterConfig(num_replicas=decode_replicas, num_kv_blocks=decode_blocks),
        Hardware(),
        transfer_seconds_per_token=float(rng.uniform(0, 1e-4)),
        transfer_layers=int(rng.integers(0, 4)),
        first_token=first_token,
        reserve=reserve,
        router=router,
    )
    sim = Simulation(
        workload, LinearEstimator(),
        SchedulerConfig(prefill_kind, batch_size=batch, chunk_size=512, max_tokens=2048,
                        reserve_full_length=prefill_full),
        ClusterConfig(num_replicas=prefill_replicas, num_kv_blocks=prefill_blocks),
        decode_pool=pool,
    )  # fmt: skip
    check_conservation(sim.run(), first_two_together=first_token == FIRST_TOKEN_DECODE_STEP)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 40),
    closed_loop=st.booleans(),
    disaggregated=st.booleans(),
    kind=st.sampled_from(_KINDS),
    full=st.booleans(),
    blocks=st.integers(60, 300),
    batch=st.integers(1, 32),
    speculative=st.sampled_from([None, 0.0, 0.6, 1.0]),
    prefix_cache=st.booleans(),
    recv_interval=st.integers(1, 3),
    schedule_ahead=st.booleans(),
    batch_wait_iters=st.integers(0, 2),
    pp=st.integers(1, 2),
    seed=st.integers(0, 2**16),
    dp=st.sampled_from([1, 2, 4]),
    balance=st.integers(0, 3),
)
# a decode replica whose preempted request lacked the blocks a transfer it deferred under
# schedule_ahead held: no batch formed, and it stalled until it took the transfer in at once
@example(n=39, closed_loop=False, disaggregated=True, kind=SchedulerKind.SARATHI, full=False,
         blocks=60, batch=1, speculative=None, prefix_cache=False, recv_interval=1,
         schedule_ahead=True, batch_wait_iters=0, pp=1, seed=91, dp=1, balance=0)  # fmt: skip
def test_random_runs_of_every_feature_conserve_requests_tokens_and_memory(
    n, closed_loop, disaggregated, kind, full, blocks, batch, speculative, prefix_cache,
    recv_interval, schedule_ahead, batch_wait_iters, pp, seed, dp, balance,
):  # fmt: skip
    """Speculative bursts, shared prefix blocks, a scheduler that polls for new requests
    or waits to batch, pipeline stages: aggregated, or on a disaggregated deployment's
    decode pool (its prefill pool plain)."""
    rng = np.random.default_rng(seed)
    prompts = rng.integers(1, 600, n)
    workload = make_workload(
        prompts, rng.integers(1, 400, n), np.cumsum(rng.exponential(0.02, n)),
        concurrency=int(rng.integers(1, 16)) if closed_loop else None,
    )  # fmt: skip
    if prefix_cache:  # one hash per 64-token block, the first full ones from one of three
        # shared prefixes (each hash stands for the prefix up to its block: Mooncake's)
        hashes = np.empty(n, dtype=object)
        for i, p in enumerate(prompts.tolist()):
            shared = int(rng.integers(0, min(p // 64, 3) + 1))
            family = int(rng.integers(0, 3)) * 100
            own = range(shared, -(-p // 64))
            hashes[i] = (*(family + j for j in range(shared)), *(10_000 + 100 * i + j for j in own))
        workload = replace(workload, prefix_blocks=hashes, prefix_block_tokens=64)
    scheduler = SchedulerConfig(
        kind, batch_size=batch, chunk_size=512, max_tokens=2048, reserve_full_length=full,
        recv_interval=recv_interval, schedule_ahead=schedule_ahead,
        batch_wait_iters=batch_wait_iters, decode_tokens=1 if speculative is None else 4,
        attention_dp=dp, adp_balance_timeout_iters=balance, adp_balance_batching_wait_iters=balance,
    )  # fmt: skip
    estimator = LinearEstimator(pp=pp)
    if speculative is not None:
        config = SpeculativeConfig("eagle", 3, speculative)
        estimator = SpeculativeEstimator(estimator, config, draft=LinearEstimator(base=0.001))
    if disaggregated:  # the prefix cache on the prefill pool, as deployments place it
        decode = ClusterConfig(num_kv_blocks=blocks, pp=pp, prefix_cache=False)
        pool = DecodePool(estimator, scheduler, decode, Hardware(),
                          transfer_seconds_per_token=1e-5)  # fmt: skip
        prefill = SchedulerConfig(SchedulerKind.SARATHI, chunk_size=512)
        sim = Simulation(workload, LinearEstimator(), prefill,
                         ClusterConfig(num_kv_blocks=1000, prefix_cache=prefix_cache),
                         RunOptions(seed=seed), decode_pool=pool)  # fmt: skip
    else:
        cluster = ClusterConfig(num_kv_blocks=blocks, pp=pp, prefix_cache=prefix_cache)
        sim = Simulation(workload, estimator, scheduler, cluster, RunOptions(seed=seed))
    check_conservation(sim.run(), bursts=speculative is not None)
