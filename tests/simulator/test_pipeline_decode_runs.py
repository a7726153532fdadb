"""A pipeline-parallel replica handles its own decode-only events at once, away from the
event heap (`Replica._run_pipeline_decodes`).  That must change nothing: with it and
without it (every event through `Simulation.run` and the policy's plan), the same batch
log, per-request times and token times (TBT), KV and busy-time accounting, and progress-hook
calls (at the same events, seeing the same state), for every scheduler, two and four
stages, early stops, closed loops, time limits and preemptions."""

from __future__ import annotations

import pytest

from estimators import FIRST_TOKEN_DECODE_STEP, FIRST_TOKEN_PREFILL, load_model, make_estimator
from simulator import (
    ClusterConfig,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
)
from simulator._engine import DecodePool, Hardware
from simulator._kv_transfer import TransferQueue
from simulator._replica import Replica
from sku_catalog import load_catalog
from tests.simulator.conftest import (
    LinearEstimator,
    assert_case_exercised,
    assert_same_run,
    poisson_workload,
)


def _every_event_through_the_loop(self: Replica, now: float) -> bool:
    return False


def _run(monkeypatch, fast: bool, workload, estimator, scheduler, cluster, every, stop_after,
         max_time, decode_pool: DecodePool | None = None):  # fmt: skip
    """The simulation, what the progress hook saw at each call, and the batch ends that
    went through `Simulation.run`."""
    seen: list[tuple] = []
    loop_batch_ends = [0]

    def hook(sim: Simulation) -> bool:
        gaps = [len(lane.step_end_times) for lane in sim.lanes]
        seen.append((sim.now, len(sim.batches), sim.completed, sim.batches.rows[-1:], gaps))
        return len(seen) >= stop_after

    on_batch_end = Replica.on_batch_end

    def counted(self, lane, plan, now):
        loop_batch_ends[0] += 1
        on_batch_end(self, lane, plan, now)

    options = RunOptions(on_progress=hook if every else None, progress_every=every or 4096,
                         max_time=max_time)  # fmt: skip
    with monkeypatch.context() as m:
        m.setattr(Replica, "on_batch_end", counted)
        if not fast:
            m.setattr(Replica, "_run_pipeline_decodes", _every_event_through_the_loop)
        sim = Simulation(workload, estimator, scheduler, cluster, options, None, decode_pool)
        sim.run()
    return sim, seen, loop_batch_ends[0]


def _roofline(pp: int):
    return make_estimator(
        "roofline", load_model("meta-llama/Llama-2-7b-hf"), load_catalog().get("a100-80gb"),
        pp=pp,
    )  # fmt: skip


# kind, stages, replicas, closed-loop concurrency, progress_every (0: no hook), hook calls
# before it stops the run, time limit, KV blocks per replica, arrival rate
CASES = {
    "orca_pp2": (SchedulerKind.ORCA, 2, 1, None, 0, None, None, 4000, 4),
    "sarathi_pp4": (SchedulerKind.SARATHI, 4, 1, None, 0, None, None, 4000, 6),
    "vllm_pp2_progress_every_7": (SchedulerKind.VLLM, 2, 1, None, 7, None, None, 4000, 6),
    "vllm_pp4_2_replicas": (SchedulerKind.VLLM, 4, 2, None, 0, None, None, 4000, 8),
    "sglang_pp2_stopped_by_the_hook": (SchedulerKind.SGLANG, 2, 1, None, 5, 150, None, 4000, 3),
    "orca_pp4_stopped_by_the_hook": (SchedulerKind.ORCA, 4, 1, None, 5, 300, None, 4000, 3),
    "sarathi_pp2_closed_loop": (SchedulerKind.SARATHI, 2, 1, 6, 3, None, None, 4000, 6),
    "static_pp2_time_limit": (SchedulerKind.STATIC, 2, 1, None, 0, None, 30.0, 4000, 1),
    "sarathi_pp4_kv_pressure": (SchedulerKind.SARATHI, 4, 1, None, 11, None, None, 120, 6),
    "vllm_pp2_kv_pressure": (SchedulerKind.VLLM, 2, 1, None, 0, None, None, 120, 6),
}


@pytest.mark.parametrize("estimator", ["linear", "roofline"])
@pytest.mark.parametrize("case", list(CASES))
def test_pipeline_decode_runs_handled_at_once_change_nothing(monkeypatch, case, estimator):
    kind, pp, replicas, concurrency, every, stop_after, max_time, blocks, qps = CASES[case]
    workload = poisson_workload(150, qps=qps, seed=3, prompt=(20, 900), output=(1, 300))
    if concurrency is not None:
        workload.concurrency = concurrency
    cluster = ClusterConfig(num_replicas=replicas, pp=pp, num_kv_blocks=blocks)
    scheduler = SchedulerConfig(kind, batch_size=32, chunk_size=256)
    runs = []
    for fast in (True, False):
        est = LinearEstimator(pp=pp) if estimator == "linear" else _roofline(pp)
        runs.append(_run(monkeypatch, fast, workload, est, scheduler, cluster, every,
                         stop_after or 10**9, max_time))  # fmt: skip
    (fast, fast_seen, fast_loop_ends), (slow, slow_seen, slow_loop_ends) = runs
    assert_same_run(fast, slow)
    assert fast_seen == slow_seen
    assert fast._seq == slow._seq  # every event, numbered as the heap would number it
    assert [lane.step_end_times for lane in fast.lanes] == [
        lane.step_end_times for lane in slow.lanes
    ]  # every token's time
    for x, y in zip(fast.replicas, slow.replicas, strict=True):
        assert (x.busy_time, x.pool.used, x.pool.peak_used, x.stage_free, x.next_lane) == (
            y.busy_time, y.pool.used, y.pool.peak_used, y.stage_free, y.next_lane
        )  # fmt: skip
        assert [lane.prepared_step for lane in x.lanes] == [lane.prepared_step for lane in y.lanes]
    # the cases exercise what they are named after, with batch ends away from the loop:
    # most of them, unless two replicas' events interleave (each handles its own while it
    # is next), prompts wait for KV blocks, or the hook comes every few events
    most = replicas == 1 and blocks > 1000 and not 0 < every < 5
    assert fast_loop_ends < (0.5 if most else 1.0) * slow_loop_ends
    assert_case_exercised(fast, len(fast_seen), every, stop_after, max_time, blocks < 1000)


@pytest.mark.parametrize(
    ("decode_blocks", "first_token"), [(4000, FIRST_TOKEN_PREFILL), (160, FIRST_TOKEN_DECODE_STEP)]
)
def test_a_pipeline_decode_pool_is_the_same_either_way(monkeypatch, decode_blocks, first_token):
    """Disaggregated serving into a decode pool of two stages: the hand-offs reserve its KV
    blocks before their transfer, or wait for requests finishing there to free some."""
    workload = poisson_workload(150, qps=6, seed=3, prompt=(20, 900), output=(1, 300))
    prefill = SchedulerConfig(SchedulerKind.SARATHI, batch_size=32, chunk_size=512)
    queued = [0]  # hand-offs that waited for the decode replica's blocks
    offer = TransferQueue.offer

    def counted_offer(self, req, now, replica_waiting):
        before = len(self.waiting)
        offer(self, req, now, replica_waiting)
        queued[0] += len(self.waiting) > before

    monkeypatch.setattr(TransferQueue, "offer", counted_offer)
    runs = []
    for fast in (True, False):
        pool = DecodePool(
            LinearEstimator(pp=2), SchedulerConfig(SchedulerKind.ORCA, batch_size=32),
            ClusterConfig(pp=2, num_kv_blocks=decode_blocks, watermark=0.0), Hardware(),
            transfer_seconds_per_token=2e-5, first_token=first_token,
        )  # fmt: skip
        runs.append(_run(monkeypatch, fast, workload, LinearEstimator(), prefill,
                         ClusterConfig(num_kv_blocks=4000), 7, 10**9, None, pool))  # fmt: skip
    (fast, fast_seen, fast_loop_ends), (slow, slow_seen, slow_loop_ends) = runs
    assert_same_run(fast, slow)
    assert fast_seen == slow_seen and fast._seq == slow._seq
    assert [lane.step_end_times for lane in fast.lanes] == [
        lane.step_end_times for lane in slow.lanes
    ]
    assert fast.completed == 150 and fast_loop_ends < slow_loop_ends
    assert (queued[0] > 20) == (decode_blocks < 1000)
