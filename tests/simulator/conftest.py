"""A linear cost model with known answers, so scheduler tests need no real estimator."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from estimators import BatchCost, BatchShape
from simulator import Simulation, request_arrays
from workloads import Workload


@dataclass
class LinearEstimator:
    """time = base + per_token * tokens + per_kv * decode KV + per_pair * prefill pairs."""

    base: float = 0.005
    per_token: float = 2e-5
    per_kv: float = 1e-7
    per_pair: float = 1e-9
    overhead: float = 0.001
    hop: float = 0.0005
    pp: int = 1
    calls: list[BatchShape] = field(default_factory=list)
    record: bool = False

    def stage_time(self, b: BatchShape) -> float:
        return (
            self.base
            + self.per_token * b.num_tokens
            + self.per_kv * b.decode_kv_tokens
            + self.per_pair * b.prefill_attn_pairs
        ) / self.pp

    def batch_cost(self, b: BatchShape) -> BatchCost:
        if self.record:
            self.calls.append(b)
        t = self.stage_time(b)
        return BatchCost((t,) * self.pp, self.hop, self.overhead, 1e9 * b.num_tokens, 1e6)


def make_workload(
    prompts, outputs, arrivals=None, concurrency: int | None = None, name: str = "test"
) -> Workload:
    prompts = np.asarray(prompts)
    if arrivals is None:
        arrivals = np.zeros(len(prompts))
    return Workload(name, np.asarray(arrivals, float), prompts, np.asarray(outputs), concurrency)


def poisson_workload(n: int, qps: float, seed: int = 0, prompt=(50, 600), output=(5, 200)):
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1 / qps, n))
    return make_workload(
        rng.integers(prompt[0], prompt[1], n), rng.integers(output[0], output[1], n), arrivals
    )


@pytest.fixture
def linear() -> LinearEstimator:
    return LinearEstimator()


def assert_same_run(a: Simulation, b: Simulation) -> None:
    """Two runs of one simulation (by two code paths) made the same batch log, ended at the
    same time in the same way, and gave every request the same times and token segments."""
    assert a.batches.rows == b.batches.rows
    assert (a.now, a.completed, a.stopped_early) == (b.now, b.completed, b.stopped_early)
    x, y = request_arrays(a), request_arrays(b)
    for column in ("scheduled", "first_token", "completed", "preemptions", "replica"):
        assert np.array_equal(x[column], y[column], equal_nan=True), column
    assert [r.segments for r in a.requests] == [r.segments for r in b.requests]


def assert_case_exercised(
    sim: Simulation, hook_calls: int, every: int, stop_after: int | None,
    max_time: float | None, preempts: bool, num_requests: int = 150,
) -> None:  # fmt: skip
    """A run of the fast-path tests did what its case is named after: decode-only batches
    (more than 100), progress-hook calls, a stop by the hook, a time limit, preemptions."""
    assert sum(1 for r in sim.batches.rows if r[4] == 0) > 100
    if every:
        assert hook_calls >= 3
    if stop_after:
        assert sim.stopped_early and sim.completed < num_requests
    if max_time:
        assert sim.completed < num_requests and sim.now <= max_time
    if preempts:
        assert sum(r.preemptions for r in sim.requests) > 0
