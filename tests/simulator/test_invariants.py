"""Conservation, memory bounds, determinism, load response and known answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from simulator import (
    ClusterConfig,
    GlobalSchedulerKind,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    request_token_times,
    simulate,
)
from tests.simulator.conftest import LinearEstimator, make_workload, poisson_workload


def check_conservation(
    sim: Simulation, first_two_together: bool = False, bursts: bool = False
) -> None:
    """Every request finished once (or was rejected) with its tokens in order, and every KV
    block and reservation came back; `first_two_together`: a decode replica shows the first
    token with the second (FIRST_TOKEN_DECODE_STEP), the rest strictly apart; `bursts`: a
    speculative step emits its accepted tokens at once."""
    done = 0
    for req in sim.requests:
        if req.rejected:
            assert math.isnan(req.completed_at)
            continue
        assert not math.isnan(req.completed_at), f"request {req.id} never completed"
        times = request_token_times(sim, req.id)
        assert len(times) == req.output_tokens  # exactly its output tokens
        gaps = np.diff(times)
        if first_two_together and len(gaps):
            assert gaps[0] >= 0
            gaps = gaps[1:]
        assert np.all(gaps >= 0) if bursts else np.all(gaps > 0)
        assert times[-1] == req.completed_at
        assert req.arrival <= req.scheduled_at <= req.first_token_at == times[0]
        done += 1
    assert sim.completed == len(sim.requests)  # each request finished (or was rejected) once
    for replica in sim.replicas:
        assert replica.pool.peak_used <= replica.pool.total
        assert replica.pool.used == 0  # every block came back
        assert replica.pool.reserved == 0
        assert not replica.waiting and replica.outstanding == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 60),
    qps=st.floats(0.5, 200),
    kind=st.sampled_from(list(SchedulerKind)),
    pp=st.integers(1, 3),
    replicas=st.integers(1, 3),
    blocks=st.integers(40, 400),
    batch=st.integers(1, 64),
    chunk=st.integers(16, 1024),
    router=st.sampled_from(list(GlobalSchedulerKind)),
    seed=st.integers(0, 2**16),
)
# SGLang's decode iteration of 17 requests beside a 16-token prefill chunk (`max_iteration_tokens`)
@example(n=46, qps=10.0, kind=SchedulerKind.SGLANG, pp=1, replicas=1, blocks=349, batch=17,
         chunk=16, router=GlobalSchedulerKind.ROUND_ROBIN, seed=0)  # fmt: skip
def test_random_workloads_conserve_requests_tokens_and_memory(
    n, qps, kind, pp, replicas, blocks, batch, chunk, router, seed
):
    rng = np.random.default_rng(seed)
    workload = make_workload(
        rng.integers(1, 800, n), rng.integers(1, 300, n), np.cumsum(rng.exponential(1 / qps, n))
    )
    est = LinearEstimator(pp=pp, record=True)
    sched = SchedulerConfig(kind, batch_size=batch, chunk_size=chunk, max_tokens=2048)
    cluster = ClusterConfig(
        num_replicas=replicas, pp=pp, num_kv_blocks=blocks, global_scheduler=router
    )
    sim = Simulation(workload, est, sched, cluster).run()
    check_conservation(sim)
    budget = sched.token_budget()
    most = sched.max_iteration_tokens()
    assert all(b.num_seqs <= batch for b in est.calls)
    if budget is not None:  # SGLang's: its prefill iterations; its decodes hold every request
        assert all(b.num_prefill_tokens <= budget for b in est.calls)
        assert all(b.num_tokens <= most for b in est.calls)


def test_memory_pressure_conserves_everything():
    sim = Simulation(
        poisson_workload(500, 100, prompt=(100, 900), output=(50, 400)),
        LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=256),
        ClusterConfig(num_kv_blocks=300),
    ).run()
    assert sum(r.preemptions for r in sim.requests) > 0
    check_conservation(sim)


def test_same_seed_same_result_different_seed_different_result():
    def once(seed):
        return simulate(
            poisson_workload(300, 50, seed=1),
            LinearEstimator(),
            SchedulerConfig(),
            ClusterConfig(num_replicas=3, global_scheduler=GlobalSchedulerKind.RANDOM),
            RunOptions(seed=seed),
        ).requests.drop(columns="rejected")

    a, b, c = once(0), once(0), once(1)
    assert a.equals(b)
    assert not a.equals(c)


def test_latency_rises_with_load():
    means = []
    for qps in (2, 10, 40, 80):
        result = simulate(
            poisson_workload(600, qps, seed=3),
            LinearEstimator(),
            SchedulerConfig(),
            ClusterConfig(),
        )
        means.append(result.summary["latency_s"]["e2e"]["mean"])
    assert means == sorted(means)
    assert means[-1] > 2 * means[0]


@pytest.mark.parametrize("kind", list(SchedulerKind))
def test_single_request_known_answer(kind):
    prompt, output = 300, 40
    est = LinearEstimator(per_kv=0.0)  # decode time independent of context: an exact TPOT
    result = simulate(
        make_workload([prompt], [output]),
        est,
        SchedulerConfig(kind, chunk_size=1024),
        ClusterConfig(),
    )
    row = result.requests.iloc[0]
    prefill_time = (
        est.overhead + est.base + est.per_token * prompt + est.per_pair * prompt * (prompt + 1) / 2
    )
    decode_time = est.overhead + est.base + est.per_token * 1
    assert row.ttft == pytest.approx(prefill_time, rel=1e-9)
    assert row.tpot == pytest.approx(decode_time, rel=1e-9)
    assert row.e2e == pytest.approx(prefill_time + (output - 1) * decode_time, rel=1e-9)


def test_single_request_known_answer_with_pipeline_stages():
    est = LinearEstimator(per_kv=0.0, pp=2)
    result = simulate(make_workload([300], [10]), est, SchedulerConfig(), ClusterConfig(pp=2))
    row = result.requests.iloc[0]
    stage = (est.base + est.per_token * 300 + est.per_pair * 300 * 301 / 2) / 2
    assert row.ttft == pytest.approx(est.overhead + 2 * stage + est.hop, rel=1e-9)
    decode_stage = (est.base + est.per_token) / 2
    assert row.tpot == pytest.approx(est.overhead + 2 * decode_stage + est.hop, rel=1e-9)


def test_tbt_percentiles_match_token_times():
    result = simulate(
        poisson_workload(200, 20, seed=5), LinearEstimator(), SchedulerConfig(), ClusterConfig()
    )
    gaps = np.concatenate([np.diff(request_token_times(result.sim, i)) for i in range(200)])
    tbt = result.summary["latency_s"]["tbt"]
    assert tbt["mean"] == pytest.approx(gaps.mean(), rel=1e-9)
    assert tbt["p99"] == pytest.approx(np.quantile(gaps, 0.99, method="inverted_cdf"), rel=1e-9)
    assert tbt["p50"] == pytest.approx(np.quantile(gaps, 0.50, method="inverted_cdf"), rel=1e-9)


def test_tbt_counts_the_gap_across_a_preemption():
    sim = Simulation(
        make_workload([300] * 6, [400] * 6),
        LinearEstimator(),
        SchedulerConfig(SchedulerKind.VLLM),
        ClusterConfig(num_kv_blocks=60),
    ).run()
    result_gaps = np.concatenate([np.diff(request_token_times(sim, i)) for i in range(6)])
    from simulator._metrics import token_gaps

    tg = token_gaps(sim)
    assert tg.weights.sum() == len(result_gaps)
    assert np.dot(tg.values, tg.weights) == pytest.approx(result_gaps.sum(), rel=1e-9)


def test_progress_callback_sees_progress_and_can_stop_the_run():
    seen: list[int] = []

    def on_progress(sim):
        seen.append(sim.completed)
        return sim.completed >= 100

    workload = poisson_workload(1000, 200, seed=2)  # far over capacity: a growing queue
    options = RunOptions(on_progress=on_progress, progress_every=64)
    result = simulate(workload, LinearEstimator(), SchedulerConfig(), ClusterConfig(), options)
    assert result.sim.stopped_early
    assert seen == sorted(seen) and seen[-1] >= 100
    summary = result.summary
    assert summary["requests"]["unfinished"] > 0
    # requests still queued count with the delay they accrued: no survivor bias
    queued = [
        r for r in result.sim.requests if math.isnan(r.scheduled_at) and r.arrival <= result.sim.now
    ]
    assert queued
    worst = max(result.sim.now - r.arrival for r in queued)
    assert summary["latency_s"]["scheduling_delay"]["p99"] <= worst + 1e-9
    assert summary["latency_s"]["scheduling_delay"]["mean"] > 0
