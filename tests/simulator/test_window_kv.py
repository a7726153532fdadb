"""Requests hold their sliding-window layers' blocks beside their tokens' (vLLM's paged
layout: `ClusterConfig.window_kv_blocks`)."""

from __future__ import annotations

from simulator import ClusterConfig, RunOptions, SchedulerConfig, SchedulerKind, Simulation
from tests.simulator.conftest import LinearEstimator, make_workload


def _run(workload, blocks, window, **sched):
    return Simulation(
        workload,
        LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, **sched),
        ClusterConfig(num_kv_blocks=blocks, window_kv_blocks=window, watermark=0.0),
        RunOptions(),
    ).run()


def test_a_request_needs_its_window_blocks_to_fit_at_all():
    # a 33-token prompt and its one output token (whose KV is never written): 3 blocks of
    # 16, plus the window
    workload = make_workload([33], [1])
    assert not _run(workload, blocks=5, window=2).requests[0].rejected
    rejected = _run(workload, blocks=5, window=3).requests[0].rejected
    assert rejected and "33 KV tokens (6 blocks)" in rejected


def test_every_running_request_holds_its_window_and_gives_it_back():
    workload = make_workload([48] * 4, [9] * 4)  # arrive together, 56 KV tokens = 4 blocks each
    sim = _run(workload, blocks=1000, window=9)
    replica = sim.replicas[0]
    assert replica.pool.peak_used == 4 * (4 + 9)  # all four run at once, windows included
    assert replica.pool.used == 0  # every block returned
    # with room for two requests and their windows only, the other two wait for them
    tight = _run(workload, blocks=2 * (4 + 9), window=9)
    assert tight.replicas[0].pool.peak_used <= 2 * (4 + 9)
    firsts = sorted(r.first_token_at for r in tight.requests)
    done = sorted(r.completed_at for r in tight.requests)
    assert firsts[2] >= done[0]
    assert all(r.completed_at > 0 for r in tight.requests)


def test_a_decode_replica_reserves_the_window_with_a_hand_off():
    from collections import deque

    from simulator._kv import BlockPool
    from simulator._kv_transfer import TransferQueue
    from simulator._request import Request

    pool = BlockPool(16, 16, 0.0, window_blocks=9)
    started: list[Request] = []
    queue = TransferQueue(
        pool, SchedulerConfig(SchedulerKind.SARATHI), lambda r, now, at: started.append(r)
    )
    first, second = Request(0, 0.0, 33, 10), Request(1, 0.0, 33, 10)
    for req in (first, second):
        req.prefill_target = req.prompt_tokens
        queue.offer(req, 0.0, deque())
    # a 33-token prompt and its first decode slot: 3 blocks, and 9 for the window
    assert first.blocks == 12 and pool.used == 12
    assert started == [first] and list(queue.waiting) == [second]  # 12 + 12 > 16
