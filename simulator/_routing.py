"""Global schedulers: which replica an arriving request goes to.

``cache_aware`` is the policy of vLLM's router and SGLang's gateway (their defaults, as
`CacheAwareThresholds`): the replica whose prefix cache holds the longest prefix of the
request, when that prefix is at least `cache_share` of its prompt blocks; below it, the
replica caching the fewest blocks; but when the busiest replica has more than `balance_abs`
requests beyond the idlest and more than `balance_rel` times as many, the least-loaded
replica.  Without prefix hashes (or prefix caching off) it routes by load alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from simulator._config import GlobalSchedulerKind

if TYPE_CHECKING:
    from simulator._replica import Replica
    from simulator._request import Request

Router = Callable[["Request"], "Replica"]


@dataclass(frozen=True, slots=True)
class CacheAwareThresholds:
    """vllm-router's and SGLang gateway's defaults (--cache-threshold,
    --balance-abs-threshold, --balance-rel-threshold)."""

    cache_share: float = 0.3
    balance_abs: int = 64
    balance_rel: float = 1.5


def make_router(kind: GlobalSchedulerKind, replicas: Sequence[Replica], seed: int) -> Router:
    """A function that picks the replica for an arriving request."""
    if len(replicas) == 1:
        only = replicas[0]
        return lambda _req: only
    if kind is GlobalSchedulerKind.ROUND_ROBIN:
        counter = [0]

        def round_robin(_req: Request) -> Replica:
            replica = replicas[counter[0] % len(replicas)]
            counter[0] += 1
            return replica

        return round_robin
    if kind is GlobalSchedulerKind.LEAST_OUTSTANDING:
        return lambda _req: _least_loaded(replicas)
    if kind is GlobalSchedulerKind.RANDOM:
        rng = np.random.default_rng(seed)
        return lambda _req: replicas[int(rng.integers(len(replicas)))]
    if kind is GlobalSchedulerKind.CACHE_AWARE:
        return _cache_aware(replicas, CacheAwareThresholds())
    raise ValueError(f"unknown global scheduler {kind!r}")


def _least_loaded(replicas: Sequence[Replica]) -> Replica:
    # ties go to the lowest replica id, so runs are reproducible
    return min(replicas, key=lambda r: (r.outstanding, r.id))


def _cache_aware(replicas: Sequence[Replica], t: CacheAwareThresholds) -> Router:
    def route(req: Request) -> Replica:
        loads = [r.outstanding for r in replicas]
        busiest, idlest = max(loads), min(loads)
        if busiest - idlest > t.balance_abs and busiest > t.balance_rel * idlest:
            return _least_loaded(replicas)
        if req.prefix is None or replicas[0].prefix_cache is None:
            return _least_loaded(replicas)
        matched = [r.prefix_cache.cached_blocks(req.prefix) for r in replicas]
        best = max(range(len(replicas)), key=lambda i: (matched[i], -loads[i], -i))
        if matched[best] >= t.cache_share * len(req.prefix):
            return replicas[best]
        return min(replicas, key=lambda r: (len(r.prefix_cache.blocks), r.outstanding, r.id))

    return route
