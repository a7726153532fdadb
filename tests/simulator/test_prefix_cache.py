"""Prefix caching: the LRU block cache, its effect on prefill work, and the Mooncake trace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulator import (
    ClusterConfig,
    GlobalSchedulerKind,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    simulate,
)
from simulator._prefix_cache import PrefixCache
from tests.simulator.conftest import LinearEstimator, make_workload
from tests.simulator.test_invariants import check_conservation
from workloads import Workload, load_trace

MOONCAKE = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "traces"
    / "mooncake_conversation.jsonl"
)  # fmt: skip
needs_trace = pytest.mark.skipif(not MOONCAKE.is_file(), reason="needs ../shared/data/traces")


def test_a_hit_is_the_leading_cached_blocks_and_one_token_is_always_computed():
    cache = PrefixCache(block_tokens=4, capacity=None)
    assert cache.match((1, 2, 3), 12) == 0
    cache.insert((1, 2, 3))
    assert cache.match((1, 2, 9, 3), 16) == 8  # blocks 1, 2; the miss at 9 ends the prefix
    assert cache.match((1, 2, 3), 12) == 11  # all cached: the last token is still computed
    assert cache.match((7, 1), 8) == 0  # a prefix starts at the first block
    assert cache.hit_tokens == 19 and cache.prompt_tokens == 48


def test_the_least_recently_used_blocks_leave_first():
    cache = PrefixCache(block_tokens=1, capacity=3)
    cache.insert((1, 2, 3))
    cache.match((1,), 5)  # refreshes block 1
    cache.insert((4,))  # evicts 2, the least recently used
    assert list(cache.blocks) == [3, 1, 4]
    assert cache.match((1, 2), 5) == 1


def _shared_prefix_workload(n: int = 12, kind_gap: float = 1.0) -> Workload:
    """Requests of 64-token prompts whose first 48 tokens (3 blocks of 16) are shared."""
    w = make_workload([64] * n, [8] * n, np.arange(n) * kind_gap)
    blocks = np.empty(n, dtype=object)
    blocks[:] = [(0, 1, 2, 100 + i) for i in range(n)]
    return replace(w, prefix_blocks=blocks, prefix_block_tokens=16)


@pytest.mark.parametrize("kind", list(SchedulerKind))
def test_every_scheduler_computes_only_the_uncached_prompt_tokens(kind):
    w = _shared_prefix_workload()
    est = LinearEstimator(record=True)
    cfg = SchedulerConfig(kind=kind, batch_size=8, chunk_size=32, max_tokens=256)
    sim = Simulation(w, est, cfg, ClusterConfig(num_kv_blocks=400))
    sim.run()
    check_conservation(sim)
    computed = sum(b.num_prefill_tokens for b in est.calls)
    # the first request computes its 64 tokens; the 11 others find 48 cached
    assert computed == 64 + 11 * 16
    assert [r.cached_tokens for r in sim.requests] == [0] + [48] * 11
    # attention still reads the cached prefix: a later prompt's chunk sees 48 tokens before it
    assert max(b.prefill_kv_tokens for b in est.calls if b.num_prefills == 1) >= 64


def test_prefix_cache_off_or_no_hashes_changes_nothing():
    w = _shared_prefix_workload()
    plain = replace(w, prefix_blocks=None, prefix_block_tokens=0)
    runs = [
        simulate(x, LinearEstimator(), SchedulerConfig(), ClusterConfig(prefix_cache=on))
        for x, on in ((w, False), (plain, True), (plain, False))
    ]
    ttfts = [r.requests["ttft"].to_numpy() for r in runs]
    assert all(np.array_equal(ttfts[0], t) for t in ttfts[1:])
    assert "prefix_cache" not in runs[0].summary


@needs_trace
def test_mooncake_hit_rate_with_an_unbounded_cache_is_the_traces_own_reuse():
    """One request at a time (a closed loop of one: every prompt is cached before the next
    arrives), the simulated hit rate equals the reuse computed from hash_ids directly,
    exactly; a smaller cache hits less; and TTFT falls with the hits."""
    w = replace(load_trace(MOONCAKE, num_requests=400), concurrency=1)
    assert w.prefix_block_tokens == 512 and len(w.prefix_blocks) == 400
    seen: set[int] = set()
    reused = 0
    for hashes, prompt in zip(w.prefix_blocks, w.prompt_tokens, strict=True):
        leading = next((i for i, h in enumerate(hashes) if h not in seen), len(hashes))
        reused += min(leading * 512, int(prompt) - 1)
        seen.update(hashes)
    direct = reused / int(w.prompt_tokens.sum())

    def run(tokens):
        cluster = ClusterConfig(num_kv_blocks=20_000, prefix_cache_tokens=tokens)
        return simulate(w, LinearEstimator(), SchedulerConfig(), cluster).summary

    unbounded = run(float("inf"))
    assert unbounded["prefix_cache"]["prefill_tokens_saved"] == reused
    assert unbounded["prefix_cache"]["hit_rate"] == pytest.approx(direct, abs=1e-15)
    assert 0.1 < direct < 0.5 and unbounded["prefix_cache"]["capacity_tokens"] is None
    rates = [run(t)["prefix_cache"]["hit_rate"] for t in (200_000, 20_000, 2_000)]
    assert direct > rates[0] > rates[1] > rates[2] > 0
    off = simulate(
        w, LinearEstimator(), SchedulerConfig(), ClusterConfig(num_kv_blocks=20_000,
                                                               prefix_cache=False)
    ).summary
    assert unbounded["latency_s"]["ttft"]["p50"] < off["latency_s"]["ttft"]["p50"]


def test_cache_aware_routing_sends_a_prefix_where_it_is_cached():
    """Three system prompts, four replicas: cache-aware routing keeps each prompt's requests
    on the replica that cached it (a new prompt goes to the emptiest cache), so only each
    prompt's first request misses; round robin misses each prompt once per replica."""
    n = 40
    w = make_workload([64] * n, [4] * n, np.arange(n) * 1.0)
    blocks = np.empty(n, dtype=object)
    blocks[:] = [(i % 3, 10 + i % 3, 1000 + i) for i in range(n)]
    w = replace(w, prefix_blocks=blocks, prefix_block_tokens=16)

    def run(kind):
        cluster = ClusterConfig(num_replicas=4, num_kv_blocks=400, global_scheduler=kind)
        return Simulation(w, LinearEstimator(), SchedulerConfig(), cluster).run()

    aware, rr = run(GlobalSchedulerKind.CACHE_AWARE), run(GlobalSchedulerKind.ROUND_ROBIN)
    by_prompt = [{r.replica for r in aware.requests if r.prefix[0] == p} for p in range(3)]
    assert [len(replicas) for replicas in by_prompt] == [1, 1, 1]
    assert len(set.union(*by_prompt)) == 3  # each prompt on its own replica
    hits = [sum(r.prefix_cache.hit_tokens for r in sim.replicas) for sim in (aware, rr)]
    assert hits == [(40 - 3) * 32, (40 - 12) * 32]


def test_cache_aware_routing_balances_load_past_the_thresholds():
    from simulator._routing import CacheAwareThresholds, make_router

    class Stub:
        def __init__(self, i, outstanding, cached):
            self.id, self.outstanding = i, outstanding
            self.prefix_cache = PrefixCache(16, None)
            self.prefix_cache.insert(cached)

    from simulator._request import Request

    t = CacheAwareThresholds()
    r = Request(0, 0.0, 64, 4, prefix=(7, 8))
    hot = Stub(0, t.balance_abs + 1, (7, 8))
    route = make_router(GlobalSchedulerKind.CACHE_AWARE, [hot, Stub(1, 0, ())], 0)
    assert route(r).id == 1  # 65 > 64 more and more than 1.5x: by load
    hot.outstanding = t.balance_abs
    assert route(r).id == 0  # within the thresholds: the cached prefix wins
