"""Running requests share the KV blocks of a cached prefix (reference counts)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulator import ClusterConfig, SchedulerConfig, SchedulerKind, Simulation
from simulator._prefix_cache import PrefixCache
from tests.simulator.conftest import LinearEstimator, make_workload
from tests.simulator.test_invariants import check_conservation

SYSTEM = 2048  # tokens of the shared system prompt: 4 prefix blocks of 512, 128 KV blocks
OWN = 256  # tokens of each request's own question
N = 8


def _system_prompt_workload() -> tuple:
    """A first request caches the system prompt; N more arrive together a second later,
    each the system prompt and a question of its own, 50 output tokens."""
    prompts = [SYSTEM + OWN] * (N + 1)
    w = make_workload(prompts, [2] + [50] * N, [0.0] + [1.0] * N)
    blocks = np.empty(N + 1, dtype=object)
    blocks[:] = [(0, 1, 2, 3, 99)] + [(0, 1, 2, 3, 100 + i) for i in range(N)]
    return replace(w, prefix_blocks=blocks, prefix_block_tokens=512)


def _run(kv_blocks: int, prefix_cache: bool, kind=SchedulerKind.SARATHI) -> Simulation:
    sim = Simulation(
        _system_prompt_workload(), LinearEstimator(),
        SchedulerConfig(kind, batch_size=16, chunk_size=512, max_tokens=4096),
        ClusterConfig(num_kv_blocks=kv_blocks, prefix_cache=prefix_cache),
    ).run()  # fmt: skip
    check_conservation(sim)  # every block came back, shared ones included
    assert not sim.replicas[0].prefix_cache or not sim.replicas[0].prefix_cache.refs
    return sim


@pytest.mark.parametrize("kind", [SchedulerKind.SARATHI, SchedulerKind.VLLM,
                                  SchedulerKind.ORCA, SchedulerKind.SGLANG])  # fmt: skip
def test_requests_admitted_together_hold_one_copy_of_the_system_prompt(kind):
    shared, alone = _run(2000, True, kind), _run(2000, False, kind)
    assert [r.cached_tokens for r in shared.requests] == [0] + [SYSTEM] * N
    # each request: 144 blocks of prompt, 148 at its end (2,353 tokens of 16)
    own_prompt, own_end = (SYSTEM + OWN) // 16 - SYSTEM // 16, -(-(SYSTEM + OWN + 49) // 16)
    peak = shared.replicas[0].pool.peak_used
    assert SYSTEM // 16 + N * own_prompt <= peak <= SYSTEM // 16 + N * (own_end - SYSTEM // 16)
    assert alone.replicas[0].pool.peak_used >= N * (SYSTEM + OWN) // 16  # 8 copies
    assert max(shared.batches.columns()["num_decodes"]) == N


def test_more_requests_fit_the_same_kv_cache():
    """700 blocks: 8 requests of 148 blocks each do not fit (4 do); sharing the system
    prompt's 128 blocks, all 8 decode together."""
    shared, alone = _run(700, True), _run(700, False)
    assert max(alone.batches.columns()["num_decodes"]) == 4
    assert max(shared.batches.columns()["num_decodes"]) == N
    done = [max(r.completed_at for r in s.requests) for s in (shared, alone)]
    assert done[0] < done[1]


def test_reference_counts_free_a_block_with_its_last_holder():
    cache = PrefixCache(block_tokens=32, capacity=None, kv_block_size=16)
    cache.insert((1, 2, 3))
    held, saved = cache.reusable((1, 2, 3, 4), 64)  # two blocks hit, nobody holds them yet
    assert held == (1, 2) and saved == 0  # taken out of the free memory: no saving
    cache.hold(held)
    held2, saved2 = cache.reusable((1, 2, 3, 4), 64)
    assert held2 == (1, 2) and saved2 == 4  # already held: 2 blocks x 2 KV blocks
    cache.hold(held2)
    # a prefill of 100 tokens ends: its 3 whole blocks after the 2 held ones: block 3 only
    assert cache.adopt((1, 2, 3, 4), 2, 100) == (3,)
    assert cache.adopt((1, 2, 3, 4), 2, 100) == ()  # 3 is held now: a second copy stays own
    assert cache.release((1, 2)) == 0  # the other holder keeps them
    assert cache.release((1, 2, 3)) == 6  # last references: 3 blocks x 2 back to free memory
    assert cache.refs == {} and list(cache.blocks) == [1, 2, 3]  # still cached


def test_prefix_blocks_of_part_of_a_kv_block_share_nothing():
    cache = PrefixCache(block_tokens=24, capacity=None, kv_block_size=16)
    cache.insert((1, 2))
    assert cache.reusable((1, 2), 48) == ((), 0)
    assert cache.adopt((1, 2), 0, 48) == ()
