"""Disaggregated serving: a decode replica reserves a request's KV blocks before the bytes
move (at the hand-off, or when the request is routed, before its prefill: the engine's
`disagg_decode_reserve`), and queues the requests it has no room for until it frees blocks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators import DECODE_RESERVE_AT_HANDOFF, DECODE_RESERVE_AT_ROUTE, load_engine
from simulator import (
    ClusterConfig,
    GlobalSchedulerKind,
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
    reserve: str = DECODE_RESERVE_AT_HANDOFF,
    options: RunOptions | None = None,
    prefill_reserves_full_length: bool = False,
) -> Simulation:
    decode = SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=256,
                             reserve_full_length=reserve_full_length)  # fmt: skip
    pool = DecodePool(
        LinearEstimator(), decode,
        ClusterConfig(num_replicas=1, num_kv_blocks=decode_blocks, watermark=0.0),
        Hardware(), transfer_seconds_per_token=seconds_per_token, reserve=reserve,
    )  # fmt: skip
    sim = Simulation(
        workload, LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=2048,
                        reserve_full_length=prefill_reserves_full_length),
        ClusterConfig(num_kv_blocks=prefill_blocks, watermark=0.0),
        options or RunOptions(max_time=max_time), decode_pool=pool,
    )  # fmt: skip
    return sim


def _record_starts(sim: Simulation) -> list[tuple[int, float, bool]]:
    """(request id, time, at its hand-off) of every transfer the decode replica starts."""
    starts: list[tuple[int, float, bool]] = []
    queue = sim.replicas[1].transfers
    start = queue.reserved

    def recording(req, now, at_hand_off):
        starts.append((req.id, now, at_hand_off))
        start(req, now, at_hand_off)

    queue.reserved = recording
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


def test_a_full_length_prefill_replica_reserves_only_the_prompt_it_hands_off():
    # TensorRT-LLM's context server reserves a request's whole length (GUARANTEED_NO_EVICT),
    # but the disaggregated server asks it for one token: a 64-token prompt's 4 blocks, not
    # the 14 of 64 + 160 tokens.  Eight blocks hold two prompts at once; had the output's
    # blocks been reserved (and never freed by the hand-off), none would start, or the
    # first would leak its ten and the rest wait for ever
    workload = make_workload([64] * 6, [161] * 6)
    sim = _sim(workload, decode_blocks=10_000, reserve_full_length=True, prefill_blocks=8,
               prefill_reserves_full_length=True)  # fmt: skip
    sim.run()
    check_conservation(sim)  # every request done, every block and reservation back
    assert sim.replicas[0].pool.peak_used == 8


def test_the_engine_profiles_say_when_the_decode_side_reserves():
    assert load_engine("sglang").disagg_decode_reserve == DECODE_RESERVE_AT_ROUTE
    assert load_engine("sglang@0.4").disagg_decode_reserve == DECODE_RESERVE_AT_ROUTE
    assert load_engine("vllm").disagg_decode_reserve == DECODE_RESERVE_AT_HANDOFF
    assert load_engine("trtllm").disagg_decode_reserve == DECODE_RESERVE_AT_HANDOFF


def test_a_reservation_moment_the_profiles_do_not_know_names_the_field():
    from estimators._engines import _build, _engines_yaml

    body = dict(_engines_yaml()["sglang"]["profiles"]["0.5.4"], disagg_decode_reserve="early")
    with pytest.raises(ValueError, match="disagg_decode_reserve 'early' is not one of "
                                         "at_route, at_handoff"):  # fmt: skip
        _build("sglang", "0.5.4", body)


def test_reserving_at_route_holds_the_prefill_until_the_decode_pool_has_room():
    """Three 64-token prompts arrive together; the decode replica holds one request's whole
    length (5 blocks).  SGLang reserves when the request is routed: the second prompt's
    prefill starts only when the first request finished decoding, the third's when the
    second did, one prompt on the prefill replica at a time.  vLLM reserves at the hand-off:
    all three prefill at once and their transfers wait instead."""
    workload = make_workload([64] * 3, [17] * 3)
    route = _sim(workload, decode_blocks=5, reserve_full_length=True,
                 reserve=DECODE_RESERVE_AT_ROUTE)  # fmt: skip
    starts = _record_starts(route)
    route.run()
    check_conservation(route)
    first, second, third = route.requests
    assert first.scheduled_at == 0.0
    assert second.scheduled_at == first.completed_at > 0.0
    assert third.scheduled_at == second.completed_at > first.completed_at
    assert route.replicas[0].pool.peak_used == 4  # one prompt's blocks at a time
    # reserved on arrival, or when the request before it finished
    assert starts == [(0, 0.0, True), (1, first.completed_at, False),
                      (2, second.completed_at, False)]  # fmt: skip
    # each transfer then starts at its hand-off, the KV crossing after the prefill
    for req in route.requests:
        decoded = request_token_times(route, req.id)[1]
        assert decoded > req.scheduled_at + 64 * SECONDS_PER_TOKEN

    hand_off = _sim(workload, decode_blocks=5, reserve_full_length=True)
    hand_off.run()
    check_conservation(hand_off)
    assert [r.scheduled_at for r in hand_off.requests] == [0.0, 0.0, 0.0]
    assert hand_off.replicas[0].pool.peak_used == 12  # all three prompts held
    # the queue is the same either way: the decode side frees room at the same moments
    assert hand_off.requests[2].completed_at <= third.completed_at


def test_reserving_at_route_rejects_on_arrival_what_no_decode_replica_holds():
    workload = make_workload([64, 200], [17, 17])  # 216 KV tokens: 14 blocks, more than 10
    sim = _sim(workload, decode_blocks=10, reserve_full_length=False,
               reserve=DECODE_RESERVE_AT_ROUTE)  # fmt: skip
    sim.run()
    check_conservation(sim)
    kept, rejected = sim.requests
    assert rejected.rejected.startswith("decode pool:") and math.isnan(rejected.scheduled_at)
    assert not math.isnan(kept.completed_at)


def test_one_output_token_never_waits_for_the_decode_pool_at_route():
    # the decode replica is full with the first request; the second, of one output token,
    # finishes on the prefill replica without a reservation
    workload = make_workload([64, 64], [17, 1])
    sim = _sim(workload, decode_blocks=5, reserve_full_length=True,
               reserve=DECODE_RESERVE_AT_ROUTE)  # fmt: skip
    sim.run()
    check_conservation(sim)
    first, single = sim.requests
    assert single.scheduled_at == 0.0 and single.completed_at < first.completed_at


def _waiting_transfer_fits(sim: Simulation) -> bool:
    """A decode replica's first waiting request could reserve its blocks now."""
    for replica in sim.replicas:
        queue = replica.transfers
        if queue is None or not queue.waiting:
            continue
        head = replica.waiting[0] if replica.waiting else None
        if (head is None or head.blocks > 0) and queue.fits(queue.waiting[0]):
            return True
    return False


@pytest.mark.parametrize("reserve", [DECODE_RESERVE_AT_HANDOFF, DECODE_RESERVE_AT_ROUTE])
def test_no_queued_transfer_waits_while_its_blocks_are_free(reserve):
    """Checked before every event: a queued request's blocks never sit free, whoever freed
    them (a request finishing, a preempted one resumed after others finished, the first
    step's spare slots of a request admitted).  Before, queued transfers were retried only
    when a request finished, and one resumed after a preemption left them waiting."""
    rng = np.random.default_rng(5)
    n = 60
    workload = make_workload(
        rng.integers(40, 200, n), rng.integers(2, 60, n), np.cumsum(rng.exponential(0.002, n))
    )
    violations: list[float] = []

    def check(sim: Simulation) -> bool:
        if _waiting_transfer_fits(sim):
            violations.append(sim.now)
        return False

    sim = _sim(workload, decode_blocks=40, reserve_full_length=False, reserve=reserve,
               options=RunOptions(on_progress=check, progress_every=1))  # fmt: skip
    starts = _record_starts(sim)
    sim.run()
    check_conservation(sim)
    assert violations == []
    assert sum(not at_once for _, _, at_once in starts) > 5  # many did wait for room
    assert sum(r.preemptions for r in sim.requests) > 0  # and the decode replica preempted


def test_a_request_waiting_for_its_decode_reservation_counts_against_its_prefill_replica():
    """Least-outstanding routing over two prefill replicas, the decode replica full after
    the first request: the second, held, is counted on the replica it was routed to, so the
    third goes to the other one."""
    decode = SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=256,
                             reserve_full_length=True)  # fmt: skip
    pool = DecodePool(
        LinearEstimator(), decode, ClusterConfig(num_kv_blocks=5, watermark=0.0), Hardware(),
        transfer_seconds_per_token=SECONDS_PER_TOKEN, reserve=DECODE_RESERVE_AT_ROUTE,
    )  # fmt: skip
    prefill = ClusterConfig(num_replicas=2, num_kv_blocks=1000, watermark=0.0,
                            global_scheduler=GlobalSchedulerKind.LEAST_OUTSTANDING)  # fmt: skip
    sim = Simulation(
        make_workload([64] * 3, [17] * 3), LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=2048), prefill,
        RunOptions(max_time=0.0), decode_pool=pool,
    )  # fmt: skip
    sim.run()  # the arrivals at 0 only
    assert [r.replica for r in sim.requests] == [0, 1, 0]
    assert [r.outstanding for r in sim.replicas] == [2, 1, 3]
    assert len(sim.replicas[2].transfers.waiting) == 2


def _polling_sim(workload, recv_interval: int) -> Simulation:
    """One prefill and one decode replica, SGLang's reservation when a request is routed,
    the decode replica taking in new requests every `recv_interval` decode iterations."""
    decode = SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=256,
                             recv_interval=recv_interval)  # fmt: skip
    pool = DecodePool(
        LinearEstimator(), decode, ClusterConfig(num_kv_blocks=1000, watermark=0.0),
        Hardware(), transfer_seconds_per_token=SECONDS_PER_TOKEN, reserve=DECODE_RESERVE_AT_ROUTE,
    )  # fmt: skip
    return Simulation(
        workload, LinearEstimator(),
        SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=2048),
        ClusterConfig(num_kv_blocks=1000, watermark=0.0), RunOptions(), decode_pool=pool,
    )  # fmt: skip


def test_a_decode_replica_reserves_a_routed_request_when_its_scheduler_polls():
    """SGLang's decode server takes a routed request in (scheduler-recv-interval: every N
    decode iterations while it decodes) before it reserves its KV, and only then may the
    prefill start.  A second request routed while the first decodes waits for that poll;
    polling every iteration, it is reserved and prefilled on arrival."""
    arrival = 0.05  # the first request decodes from about 8 ms to about 0.2 s
    workload = make_workload([64, 64], [40, 10], [0.0, arrival])
    every = _polling_sim(workload, recv_interval=1)
    every.run()
    check_conservation(every)
    assert every.requests[1].scheduled_at == arrival

    sim = _polling_sim(workload, recv_interval=4)
    starts = _record_starts(sim)
    sim.run()
    check_conservation(sim)
    first, second = sim.requests
    assert first.scheduled_at == 0.0  # an idle decode replica polls at once
    batches = sim.batches.columns()
    ends = zip(batches["replica"], batches["end"], strict=True)
    decode_ends = sorted(e for r, e in ends if r == 1)
    after = [e for e in decode_ends if e > arrival]
    # taken in at the end of a decode iteration, within four of its arrival: its KV
    # reserved then, its prefill started at once on the idle prefill replica
    assert second.scheduled_at in after[:4] and second.scheduled_at > arrival
    assert [t for i, t, _ in starts if i == 1] == [second.scheduled_at]
    assert second.first_token_at > every.requests[1].first_token_at
