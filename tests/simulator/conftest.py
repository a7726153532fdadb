"""A linear cost model with known answers, so scheduler tests need no real estimator."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from estimators import BatchCost, BatchShape
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
