"""Early-stop hooks against full runs: a hook stops a run only where the full run's count of
late values already reaches its limit (so the percentile's verdict is "fails"), on many
random deployments, rates and bounds."""

from __future__ import annotations

import numpy as np
import pytest

from estimators import load_model
from simulator import (
    LateRequestCounter,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
    SlowGapCounter,
    SlowTpotCounter,
    request_arrays,
)
from simulator._deployment import Deployment, PreparedDeployment, prepare
from simulator._metrics import token_gaps
from sku_catalog import load_catalog
from workloads import Workload, build_workload

SCHEDULERS = (SchedulerKind.SARATHI, SchedulerKind.VLLM, SchedulerKind.ORCA)


def _case(seed: int) -> tuple[PreparedDeployment, Workload]:
    rng = np.random.default_rng(seed)
    kind = SCHEDULERS[seed % len(SCHEDULERS)]
    deployment = Deployment(
        load_model("meta-llama/Llama-2-7b-hf"),
        load_catalog().get(str(rng.choice(["a100-80gb", "h100-sxm"]))),
        pp=int(rng.choice([1, 2])),
        scheduler=SchedulerConfig(
            kind, batch_size=int(rng.choice([8, 32, 128])), chunk_size=int(rng.choice([256, 512]))
        ),
    )
    workload = build_workload(
        {"source": "chat"}, num_requests=200, qps=float(rng.uniform(2.0, 30.0)),
        concurrency=None, seed=seed,
    )  # fmt: skip
    return prepare(deployment), workload


def _full(prepared: PreparedDeployment, workload: Workload):
    return prepared.simulation(workload, RunOptions()).run()


def _stops(prepared, workload, hook) -> bool:
    sim = prepared.simulation(workload, RunOptions(on_progress=hook, progress_every=16)).run()
    return sim.stopped_early


CASES = range(12)


@pytest.fixture(scope="module")
def runs():
    out = {}
    for seed in CASES:
        prepared, workload = _case(seed)
        out[seed] = (prepared, workload, _full(prepared, workload))
    return out


def _bounds(values: np.ndarray) -> list[float]:
    """Bounds at several quantiles of `values`, each one of the values."""
    ordered = np.sort(values)
    return [float(ordered[int(q * (len(ordered) - 1))]) for q in (0.5, 0.9, 0.99)]


@pytest.mark.parametrize("seed", CASES)
def test_tpot_counter_stops_only_where_the_full_run_has_that_many_late(runs, seed):
    prepared, workload, full = runs[seed]
    cols = request_arrays(full)
    tpot = cols["tpot"][~np.isnan(cols["tpot"])]
    for bound in _bounds(tpot):
        late = int((tpot >= bound).sum())
        # one more than the full run has: never certain while the run goes
        assert not _stops(prepared, workload, SlowTpotCounter(bound, late + 1))
        # on the finished run the count is exact
        counter = SlowTpotCounter(bound, late)
        assert counter(full) and counter.late == late
        # and a limit well under it stops the run before its end
        assert _stops(prepared, workload, SlowTpotCounter(bound, max(1, late // 2)))


@pytest.mark.parametrize("seed", CASES)
def test_gap_counter_never_counts_more_slow_gaps_than_the_full_run_has(runs, seed):
    prepared, workload, full = runs[seed]
    gaps = token_gaps(full)
    for bound in _bounds(np.repeat(gaps.values, gaps.weights)):
        slow = int(gaps.weights[gaps.values >= bound].sum())
        assert not _stops(prepared, workload, SlowGapCounter(bound, slow + 1))
        counter = SlowGapCounter(bound, 10**12)
        counter(full)
        assert counter.slow <= slow


@pytest.mark.parametrize("seed", CASES)
@pytest.mark.parametrize("metric", ["scheduling_delay", "ttft", "e2e"])
def test_late_request_counter_is_exact(runs, seed, metric):
    prepared, workload, full = runs[seed]
    values = request_arrays(full)[metric]
    values = values[~np.isnan(values)]
    for bound in _bounds(values):
        late = int((values >= bound).sum())
        assert not _stops(prepared, workload, LateRequestCounter(metric, bound, late + 1))
        counter = LateRequestCounter(metric, bound, late)
        assert counter(full) and counter.late == late
