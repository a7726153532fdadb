"""Global schedulers: which replica an arriving request goes to."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from simulator._config import GlobalSchedulerKind

if TYPE_CHECKING:
    from simulator._replica import Replica

Router = Callable[[], "Replica"]


def make_router(kind: GlobalSchedulerKind, replicas: Sequence[Replica], seed: int) -> Router:
    """A function that picks the replica for the next arrival."""
    if len(replicas) == 1:
        only = replicas[0]
        return lambda: only
    if kind is GlobalSchedulerKind.ROUND_ROBIN:
        counter = [0]

        def round_robin() -> Replica:
            replica = replicas[counter[0] % len(replicas)]
            counter[0] += 1
            return replica

        return round_robin
    if kind is GlobalSchedulerKind.LEAST_OUTSTANDING:
        # ties go to the lowest replica id, so runs are reproducible
        return lambda: min(replicas, key=lambda r: (r.outstanding, r.id))
    if kind is GlobalSchedulerKind.RANDOM:
        rng = np.random.default_rng(seed)
        return lambda: replicas[int(rng.integers(len(replicas)))]
    raise ValueError(f"unknown global scheduler {kind!r}")
