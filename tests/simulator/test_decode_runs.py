"""A replica handles the ends of its decode-only steps at once while each is the next event
(`Replica._run_decode_steps`), not through the event heap.  That must change nothing: the
same per-request times, batch log and progress-hook calls (at the same events, seeing the
same state) as a run whose every batch end goes through the heap."""

from __future__ import annotations

import math

import pytest

from estimators import load_model, make_estimator
from simulator import (
    ClusterConfig,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    Simulation,
)
from sku_catalog import load_catalog
from tests.simulator.conftest import (
    LinearEstimator,
    assert_case_exercised,
    assert_same_run,
    poisson_workload,
)


def _no_inline(self: Simulation) -> tuple[float, bool]:
    return -math.inf, False  # no batch end is ever "next": every one goes through the heap


def _run(workload, estimator, scheduler, cluster, every, stop_after, max_time, inline):
    """The simulation, and what the progress hook saw at each call."""
    seen: list[tuple] = []

    def hook(sim: Simulation) -> bool:
        seen.append((sim.now, len(sim.batches), sim.completed, sim.batches.rows[-1:]))
        return len(seen) >= stop_after

    options = RunOptions(on_progress=hook if every else None, progress_every=every or 4096,
                         max_time=max_time)  # fmt: skip
    sim = Simulation(workload, estimator, scheduler, cluster, options)
    if not inline:
        sim.batch_end_horizon = _no_inline.__get__(sim)
    sim.run()
    return sim, seen


def _roofline():
    return make_estimator(
        "roofline", load_model("meta-llama/Llama-2-7b-hf"), load_catalog().get("a100-80gb")
    )


# kind, replicas, closed-loop concurrency, progress_every (0: no hook), hook calls before
# it stops the run, time limit, arrival rate
CASES = {
    "sarathi": (SchedulerKind.SARATHI, 1, None, 0, None, None, 6),
    "vllm_2_replicas": (SchedulerKind.VLLM, 2, None, 0, None, None, 6),
    "orca_progress_every_7": (SchedulerKind.ORCA, 1, None, 7, None, None, 6),
    "sglang_stopped_by_the_hook": (SchedulerKind.SGLANG, 1, None, 5, 40, None, 6),
    "sarathi_closed_loop": (SchedulerKind.SARATHI, 1, 6, 3, None, None, 6),
    "static_time_limit": (SchedulerKind.STATIC, 1, None, 0, None, 30.0, 1),
    "sarathi_kv_pressure": (SchedulerKind.SARATHI, 1, None, 11, None, None, 6),
}


@pytest.mark.parametrize("estimator", ["linear", "roofline"])
@pytest.mark.parametrize("case", list(CASES))
def test_decode_runs_handled_at_once_change_nothing(case, estimator):
    kind, replicas, concurrency, every, stop_after, max_time, qps = CASES[case]
    workload = poisson_workload(150, qps=qps, seed=3, prompt=(20, 900), output=(1, 300))
    if concurrency is not None:
        workload.concurrency = concurrency
    blocks = 120 if case == "sarathi_kv_pressure" else 4000
    cluster = ClusterConfig(num_replicas=replicas, num_kv_blocks=blocks)
    scheduler = SchedulerConfig(kind, batch_size=32, chunk_size=256)
    runs = []
    for inline in (True, False):
        est = LinearEstimator() if estimator == "linear" else _roofline()
        runs.append(
            _run(workload, est, scheduler, cluster, every, stop_after or 10**9, max_time, inline)
        )
    (fast, fast_seen), (slow, slow_seen) = runs
    assert_same_run(fast, slow)
    assert fast_seen == slow_seen
    # the cases exercise what they are named after, with batch ends that skipped the heap
    # (each heap event takes one sequence number)
    assert fast._seq < slow._seq
    if case in ("sarathi", "orca_progress_every_7"):
        assert fast._seq < 0.5 * slow._seq
    assert_case_exercised(
        fast, len(fast_seen), every, stop_after, max_time, case == "sarathi_kv_pressure"
    )
