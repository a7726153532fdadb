"""Disaggregated serving: a decode replica reserves a hand-off's KV blocks before the bytes
move, and queues the transfers it has no room for until running requests finish."""

from __future__ import annotations

import numpy as np
import pytest

from simulator import (
    ClusterConfig,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
    request_token_times,
)
from simulator._engine import DecodePool, Hardware
from tests.simulator.conftest import LinearEstimator, make_workload
from tests.simulator.test_invariants import check_conservation

SECONDS_PER_TOKEN = 1e-5  # a 64-token prompt's KV: 0.64 ms over the link


def _sim(
    workload,
    decode_blocks: int,
    reserve_full_length: bool,
    max_time=None,
    seconds_per_token: float = SECONDS_PER_TOKEN,
    prefill_blocks: int = 10_000,
) -> Simulation:
    decode = SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=256,
                             reserve_full_length=reserve_full_length)  # fmt: skip
    pool = DecodePool(
        LinearEstimator(), decode,
        ClusterConfig(num_replicas=1, num_kv_blocks=decode_blocks, watermark=0.0),
        Hardware(), transfer_seconds_per_token=seconds_per_token,
    )  # fmt: skip
    sim = Simulation(
        workload, LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=2048),
        ClusterConfig(num_kv_blocks=prefill_blocks, watermark=0.0), RunOptions(max_time=max_time),
        decode_pool=pool,
    )  # fmt: skip
    return sim


def _record_starts(sim: Simulation) -> list[tuple[int, float, bool]]:
    """(request id, time, at its hand-off) of every transfer the decode replica starts."""
    starts: list[tuple[int, float, bool]] = []
    queue = sim.replicas[1].transfers
    start = queue.start

    def recording(req, now, at_hand_off):
        starts.append((req.id, now, at_hand_off))
        start(req, now, at_hand_off)

    queue.start = recording
    return starts


def test_a_decode_pool_with_room_for_four_holds_the_fifth_transfer_until_one_finishes():
    # 64-token prompts and 17 output tokens: 64 + 16 KV tokens = 5 blocks of 16 each, so 20
    # blocks hold four requests' whole length (reserved up front, as GUARANTEED_NO_EVICT);
    # the one with fewest outputs finishes first and frees room for the fifth
    workload = make_workload([64] * 5, [17, 17, 9, 17, 17])
    sim = _sim(workload, decode_blocks=20, reserve_full_length=True)
    starts = _record_starts(sim)
    sim.run()
    check_conservation(sim)
    hand_off = sim.requests[0].first_token_at  # one prefill batch: all five hand off then
    assert [(i, t, a) for i, t, a in starts[:4]] == [(i, hand_off, True) for i in range(4)]
    first_done = min(r.completed_at for r in sim.requests[:4])
    assert first_done == sim.requests[2].completed_at > hand_off
    assert starts[4] == (4, first_done, False)  # not before request 2 gave its blocks back
    # its first decoded token comes after its transfer, started then
    fifth = sim.requests[4]
    assert request_token_times(sim, 4)[1] > first_done + 64 * SECONDS_PER_TOKEN
    # with room for five, every transfer starts at the hand-off
    roomy = _sim(workload, decode_blocks=25, reserve_full_length=True)
    starts = _record_starts(roomy)
    roomy.run()
    assert [a for _, _, a in starts] == [True] * 5
    assert roomy.requests[4].completed_at < fifth.completed_at


def test_kv_in_flight_counts_against_the_decode_replicas_blocks():
    # a slow link: 1000 tokens x 1e-3 s = 1 s in flight; stop the clock half-way through
    workload = make_workload([1000], [20])
    sim = _sim(workload, decode_blocks=200, reserve_full_length=False, max_time=0.5,
               seconds_per_token=1e-3)  # fmt: skip
    sim.run()
    prefill, decoder = sim.replicas
    assert not decoder.waiting and not decoder.lanes[0].members  # not arrived yet
    # reserved: the prompt's 63 blocks of 16 (its first decode token's slot in the last)
    assert decoder.pool.used == 63 == sim.requests[0].blocks
    assert prefill.pool.used == 63  # the prefill side keeps its copy until it is sent
    assert len(decoder.transfers.waiting) == 0


def test_on_demand_blocks_queue_transfers_and_conserve_every_block():
    # prompts reserve only their own blocks; decodes grow into the rest and may preempt
    rng = np.random.default_rng(5)
    n = 60
    workload = make_workload(
        rng.integers(40, 200, n), rng.integers(2, 60, n), np.cumsum(rng.exponential(0.002, n))
    )
    sim = _sim(workload, decode_blocks=40, reserve_full_length=False)
    starts = _record_starts(sim)
    sim.run()
    check_conservation(sim)
    assert len(starts) == n  # every hand-off's transfer started once
    assert any(not a for _, _, a in starts)  # some waited for room
    decoder = sim.replicas[1]
    assert decoder.pool.used == 0 and decoder.pool.reserved == 0
    assert decoder.pool.peak_used <= 40
    assert all(r.completed_at == r.completed_at for r in sim.requests)  # all finished


@pytest.mark.parametrize("reserve", [False, True])
def test_a_transfer_that_waited_sends_after_its_reservation_not_before(reserve):
    workload = make_workload([64] * 6, [17] * 6)
    sim = _sim(workload, decode_blocks=20, reserve_full_length=reserve)
    starts = _record_starts(sim)
    sim.run()
    started = {i: t for i, t, _ in starts}
    for req in sim.requests:  # its first decoded token
        decoded = request_token_times(sim, req.id)[1]
        assert decoded > started[req.id] + 64 * SECONDS_PER_TOKEN


def test_a_prefill_replica_frees_a_prompts_kv_only_once_it_reached_the_decode_pool():
    # the prefill replica holds two 64-token prompts (8 blocks), the decode replica one
    # request's whole length (5 blocks): the second hand-off waits for the first request to
    # finish, its prompt's blocks still held on the prefill side, and the third prompt
    # starts there only when the first one's KV has arrived
    workload = make_workload([64] * 3, [17] * 3)
    sim = _sim(workload, decode_blocks=5, reserve_full_length=True, prefill_blocks=8)
    starts = _record_starts(sim)
    sim.run()
    check_conservation(sim)
    first, _, third = sim.requests
    hand_off = first.first_token_at
    assert starts[0] == (0, hand_off, True)
    assert third.scheduled_at == pytest.approx(hand_off + 64 * SECONDS_PER_TOKEN, rel=1e-12)
    assert starts[1] == (1, first.completed_at, False)  # room at the decode replica at last
    assert sim.replicas[0].pool.peak_used == 8 and sim.replicas[0].pool.used == 0
