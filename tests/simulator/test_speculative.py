"""Speculative decoding in the simulator: one step per verify pass, a burst of accepted tokens
per sequence per step, TBT as the streaming clients count a burst, KV blocks of the bursts."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators import AcceptedTokens, SpeculativeConfig, SpeculativeEstimator
from simulator import (
    ClusterConfig,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    request_token_times,
)
from simulator._lane import BurstLane
from simulator._metrics import summarize, token_gaps
from tests.simulator.conftest import LinearEstimator, make_workload, poisson_workload


def _burst_moments(config: SpeculativeConfig) -> tuple[float, float]:
    """Mean and variance of one step's tokens: 1 + the accepted run, P(run >= i) given."""
    at_least = np.asarray(config.run_at_least())
    probs = np.append(1.0, at_least) - np.append(at_least, 0.0)  # P(run == 0..k)
    tokens = np.arange(1, len(probs) + 1)
    mean = float(probs @ tokens)
    return mean, float(probs @ tokens**2) - mean**2


@pytest.mark.parametrize(
    "config",
    [
        SpeculativeConfig("eagle", 3, 0.7),  # E = (1 - 0.7^4) / 0.3 = 2.533
        SpeculativeConfig("mtp", 1, 0.9),  # E = 1.9
        SpeculativeConfig("eagle", 3, 0.7, acceptance_rates=(0.9, 0.6, 0.3)),  # E = 2.602
    ],
)
def test_mean_accepted_tokens_per_step_is_e_within_sampling_error(config):
    mean, variance = _burst_moments(config)
    assert mean == pytest.approx(config.tokens_per_step)
    sampler = AcceptedTokens(config, 7)
    steps: list[int] = []
    for _ in range(500):  # 500 long sequences; their last (cut) bursts left out
        steps += sampler.bursts(1000)[:-1]
    n = len(steps)
    assert n > 150_000
    assert abs(np.mean(steps) - config.tokens_per_step) < 4 * math.sqrt(variance / n)
    assert set(steps) == set(range(1, config.num_speculative_tokens + 2))


def test_bursts_add_up_to_the_tokens_and_repeat_under_the_seed():
    config = SpeculativeConfig("eagle", 3, 0.7)
    a = AcceptedTokens(config, [0, 3]).bursts(101)
    assert sum(a) == 101 and all(1 <= b <= 4 for b in a)
    assert AcceptedTokens(config, [0, 3]).bursts(101) == a
    assert AcceptedTokens(config, [1, 3]).bursts(101) != a
    assert AcceptedTokens(SpeculativeConfig("eagle", 3, 1.0), 0).bursts(10) == [4, 4, 2]
    assert AcceptedTokens(SpeculativeConfig("eagle", 3, 0.0), 0).bursts(3) == [1, 1, 1]


def _run(config: SpeculativeConfig | None, workload, blocks: int = 100_000, seed: int = 0):
    target = LinearEstimator()
    estimator = (
        SpeculativeEstimator(target, config, draft=LinearEstimator(base=0.001))
        if config is not None
        else target
    )
    return Simulation(
        workload,
        estimator,
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=64),
        ClusterConfig(num_kv_blocks=blocks),
        RunOptions(seed=seed),
    ).run()


def _draft(**kwargs) -> SpeculativeConfig:
    return SpeculativeConfig("draft", 3, 0.7, draft_model="a drafter", **kwargs)


def _check_tokens(sim: Simulation) -> None:
    for req in sim.requests:
        times = request_token_times(sim, req.id)
        assert len(times) == req.output_tokens  # every output token, no more
        assert np.all(np.diff(times) >= 0)  # a burst's tokens share their step's time
        assert times[-1] == req.completed_at
    for replica in sim.replicas:
        assert replica.pool.used == 0  # every KV block written was given back
        assert replica.pool.peak_used <= replica.pool.total


def test_a_decode_steps_once_per_verify_and_emits_e_tokens_a_step():
    # 16 sequences of 1 + 600 output tokens decoding together from t = 0
    sim = _run(_draft(), make_workload([200] * 16, [601] * 16))
    _check_tokens(sim)
    lane = sim.lanes[0]
    assert isinstance(lane, BurstLane)
    steps = sum(k - j for r in sim.requests for _, _, j, k in r.segments)
    e = _draft().tokens_per_step
    assert 600 * 16 / steps == pytest.approx(e, rel=0.03)  # bursts cut at the end: a bit less
    # prompts finish over several chunked batches: each member joins at its own step
    assert len(lane.step_end_times) == max(j + len(b) for (_, j), b in lane.bursts.items())


def test_tbt_counts_a_burst_as_one_chunk_or_per_token_and_tpot_is_the_same():
    workload = make_workload([200] * 16, [601] * 16)
    chunk_sim, token_sim = _run(_draft(), workload), _run(_draft(tbt_gaps="token"), workload)
    chunk, token = summarize(chunk_sim), summarize(token_sim)
    plain = summarize(_run(None, workload))
    # the same steps: TPOT and the end of every request do not depend on how TBT is counted
    assert token["latency_s"]["tpot"] == chunk["latency_s"]["tpot"]
    step = chunk["latency_s"]["tbt"]["p50"]  # chunk: one gap per verify step
    e = _draft().tokens_per_step
    # a step emits E tokens a sequence: TPOT (the smoothed gap) is the step time over E
    assert chunk["latency_s"]["tpot"]["p50"] == pytest.approx(step / e, rel=0.05)
    # token: the chunk's gaps, plus a 0 for every token of a burst after its first
    a, b = token_gaps(chunk_sim), token_gaps(token_sim)
    steps = sum(k - j for r in token_sim.requests for _, _, j, k in r.segments)
    assert np.array_equal(b.values, np.append(a.values, 0.0))
    assert np.array_equal(b.weights, np.append(a.weights, 16 * 600 - steps))
    # 1 - 1/E = 61% of them are 0: the median gap is 0, P99 is a step's gap further down
    assert token["latency_s"]["tbt"]["p50"] == 0.0
    assert step < token["latency_s"]["tbt"]["p99"] <= chunk["latency_s"]["tbt"]["p99"]
    assert token["latency_s"]["tbt"]["mean"] == pytest.approx(
        chunk["latency_s"]["tpot"]["mean"], rel=0.03
    )
    # a verify step (4 tokens a sequence, 3 drafts) is dearer than a plain decode step
    assert step > 1.3 * plain["latency_s"]["tbt"]["p50"]


def test_kv_starved_bursts_preempt_and_still_conserve_tokens_and_blocks():
    workload = poisson_workload(300, 100, prompt=(100, 900), output=(50, 400))
    sim = _run(_draft(), workload, blocks=300)
    assert sum(r.preemptions for r in sim.requests) > 0
    _check_tokens(sim)


def test_same_seed_same_bursts_and_non_speculative_runs_draw_nothing():
    workload = poisson_workload(200, 40, seed=3)
    a, b, c = (summarize(_run(_draft(), workload, seed=s)) for s in (0, 0, 1))
    for summary in (a, b, c):
        summary["simulation"].pop("wall_time_s")
    assert a == b
    assert a["latency_s"]["e2e"] != c["latency_s"]["e2e"]
    assert not any(isinstance(lane, BurstLane) for lane in _run(None, workload).lanes)
