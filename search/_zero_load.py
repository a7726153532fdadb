"""Latency at zero load: every request served alone, the least any arrival rate gives it.

At zero load a request never waits and never shares an iteration: its prompt is
tokenized by the engine's frontend (`ClusterConfig.tokenize_seconds_per_token`, with the
frontend's per-request latency, `ClusterConfig.frontend_latency`), then runs
alone (in the scheduler's chunks, for Sarathi-Serve; whole otherwise), then each
decode step alone, every iteration passing through all pipeline stages.  Under the
cost model, adding work to an iteration never shortens it, and splitting a prompt
into more chunks never makes it cheaper; a loaded replica only adds waiting and
sharing.  So at any rate each request's TTFT, TBT, TPOT, e2e and normalised latency
is at least its zero-load value here, and so is every percentile of them.

`zero_load_percentile` is that lower bound for one SLO.  A capacity search whose SLO
is already missed at zero load has capacity 0, known without a simulation (the
search would otherwise halve the rate down to its floor, each probe a long run).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from estimators import BatchShape, ExecutionTimeEstimator
from simulator import PreparedDeployment, SchedulerConfig, weighted_percentiles
from workloads import Workload

__all__ = ["ZERO_LOAD_METRICS", "zero_load_headroom", "zero_load_percentile"]

# SLO metrics with a zero-load bound (the scheduling delay's is 0: nothing to learn)
ZERO_LOAD_METRICS = frozenset({"ttft", "tbt", "tpot", "e2e", "normalized_latency"})


class _AloneCosts:
    """Seconds of one iteration of a lone request, through every stage, memoised."""

    def __init__(
        self,
        estimator: ExecutionTimeEstimator,
        pp: int,
        sched: SchedulerConfig,
        tokenize_per_token: float = 0.0,
        frontend_latency: float = 0.0,
    ) -> None:
        self.estimator = estimator
        self.tokenize_per_token = tokenize_per_token
        self.frontend_latency = frontend_latency
        self.pp = pp
        self.chunk = sched.chunk_size if sched.kind.chunked else None
        self.prefill = lru_cache(maxsize=None)(self._prefill)
        self.decode = lru_cache(maxsize=None)(self._decode)

    def _iteration(self, shape: BatchShape) -> float:
        cost = self.estimator.batch_cost(shape)
        return cost.cpu_overhead + sum(cost.stage_times) + (self.pp - 1) * cost.pp_hop_time

    def _chunk(self, tokens: int, context: int) -> float:
        pairs = tokens * (context + (tokens + 1) * 0.5)
        return self._iteration(BatchShape(tokens, 1, pairs, context + tokens, 0, 0))

    def _prefill(self, prompt: int) -> float:
        """The prompt alone, from the client's send (its tokenizing first) to its first
        token."""
        size = self.chunk or prompt
        starts = range(0, prompt, size)
        chunks = sum(self._chunk(min(size, prompt - start), start) for start in starts)
        return self.frontend_latency + prompt * self.tokenize_per_token + chunks

    def _decode(self, context: int) -> float:
        """One decode step alone, reading `context` cached tokens."""
        return self._iteration(BatchShape(0, 0, 0.0, 0, 1, context))


def _decode_context_percentile(prompts: np.ndarray, outputs: np.ndarray, percentile: int) -> int:
    """The percentile of the cached context over every decode step of the workload.

    A request of prompt p and output o decodes o - 1 times, reading p .. p + o - 2
    tokens (its first gap, after the prompt's token, included); as
    `weighted_percentiles` does, the inverted CDF over that multiset.
    """
    steps = outputs - 1
    prompts, steps = prompts[steps > 0], steps[steps > 0]
    if len(steps) == 0:
        return -1
    count = np.zeros(int((prompts + steps).max()) + 1, dtype=np.int64)
    np.add.at(count, prompts, 1)
    np.add.at(count, prompts + steps, -1)
    cumulative = np.cumsum(np.cumsum(count), dtype=np.float64)
    target = percentile / 100.0 * cumulative[-1] - 1e-9
    return int(np.searchsorted(cumulative, target, side="left"))


def zero_load_percentile(
    prepared: PreparedDeployment,
    workload: Workload,
    metric: str,
    percentile: int,
    mask: np.ndarray | None = None,
) -> float:
    """A lower bound on `metric`'s percentile at any arrival rate (seconds; NaN: none).

    Over the requests of `mask` (those the deployment can serve; all when None).  TPOT
    and the decode part of e2e are bounded by the first decode step, the cheapest.
    """
    if metric not in ZERO_LOAD_METRICS:
        raise ValueError(f"no zero-load bound for {metric!r}; one of {sorted(ZERO_LOAD_METRICS)}")
    prompts = workload.prompt_tokens if mask is None else workload.prompt_tokens[mask]
    outputs = workload.output_tokens if mask is None else workload.output_tokens[mask]
    if len(prompts) == 0:
        return math.nan
    alone = _prefill_costs(prepared)
    decoding = alone  # disaggregated: decode steps run alone on a decode replica
    if prepared.decode_pool is not None:
        pool = prepared.decode_pool
        decoding = _AloneCosts(pool.estimator, pool.cluster.pp, pool.scheduler)
    if metric == "tbt":
        context = _decode_context_percentile(prompts, outputs, percentile)
        return math.nan if context < 0 else decoding.decode(context)
    ttft = np.array([alone.prefill(int(p)) for p in prompts])
    if metric == "ttft":
        values = ttft
    else:
        first_step = np.array([decoding.decode(int(p)) for p in prompts])
        steps = outputs - 1
        if metric == "tpot":
            values = first_step[steps > 0]
        else:
            e2e = ttft + steps * first_step
            values = e2e if metric == "e2e" else e2e / outputs
    if len(values) == 0:
        return math.nan
    return float(weighted_percentiles(values, None, (percentile,))[f"p{percentile}"])


def _prefill_costs(prepared: PreparedDeployment) -> _AloneCosts:
    """A lone request's iterations on the deployment's (prefill) replicas."""
    cluster = prepared.cluster
    return _AloneCosts(
        prepared.estimator, cluster.pp, prepared.deployment.scheduler,
        cluster.tokenize_seconds_per_token, cluster.frontend_latency,
    )  # fmt: skip


def zero_load_headroom(
    prepared: PreparedDeployment, workload: Workload, slos: Iterable[tuple[str, int, float]]
) -> float:
    """The least share of its bound each SLO (metric, percentile, max_s) leaves at zero load:
    1 - the zero-load value / max_s, at least 0 (1.0 with no SLO to judge).

    Cheap (for TTFT the prefill of the prompt at the percentile, which is the percentile
    of the prefills as they grow with the prompt; TBT and TPOT as `zero_load_percentile`;
    e2e and normalised latency are not judged): a search ranks configurations by it, the
    ones farthest from missing their filters alone being the likeliest to meet them loaded.
    """
    alone = _prefill_costs(prepared)
    least = 1.0
    for metric, percentile, max_s in slos:
        if metric == "ttft":
            prompts = workload.prompt_tokens
            share = percentile / 100.0 * len(prompts) - 1e-9
            index = min(max(math.ceil(share) - 1, 0), len(prompts) - 1)
            value = alone.prefill(int(np.sort(prompts)[index])) if len(prompts) else math.nan
        elif metric in ("tbt", "tpot"):
            value = zero_load_percentile(prepared, workload, metric, percentile)
        else:
            continue
        if math.isfinite(value):
            least = min(least, max(0.0, 1.0 - value / max_s))
    return least
