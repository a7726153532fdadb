"""The analytic ceiling of a deployment's throughput: the least busy time one request of a
workload costs a replica (`service_bound`), from the estimator's prices of the best batches
the scheduler, its limits and the KV memory allow.  No run of the simulator serves faster;
capacity searches bracket with it (search/_capacity.py adds a finite run's slack) and prune
configurations by it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from estimators import BatchShape
from simulator._admission import servable_requests
from simulator._deployment import PreparedDeployment
from simulator._prefix_cache import prefix_reuse_tokens
from workloads import Workload


@dataclass(frozen=True, slots=True)
class ServiceBound:
    """The fastest a replica could serve the workload's average request (see `service_bound`)."""

    seconds_per_request: float  # per replica, at the best batching (bottleneck stage)
    batches_per_request: float  # fewest batches one request's work needs, on average
    max_in_flight: int  # most requests admitted and unfinished at once, per replica
    num_replicas: int
    num_servable: int  # requests the deployment can serve at all (the others are rejected)
    num_requests: int

    @property
    def steady_qps(self) -> float:
        """The sustained rate bound (all replicas), in arrivals/s of the whole workload."""
        if self.num_servable == 0:
            return 0.0
        share = self.num_servable / self.num_requests
        return self.num_replicas / self.seconds_per_request / share


def _stage_seconds(
    prepared: PreparedDeployment,
    prefill_tokens: int,
    prefills: float,
    pairs: float,
    decodes: float,
    kv_per_decode: float,
) -> np.ndarray:
    """Busy seconds of each pipeline stage for one batch (stage 0 with the CPU overhead).

    Fractional prompt-chunk and decode counts are the mix of batches with their floors
    and ceilings (an integer count of chunks may be 0 next to prompt tokens: the
    chunks' per-sequence costs then drop, their kernels stay).
    """
    out = np.zeros(prepared.cluster.pp)
    low_p, low_d = math.floor(prefills), math.floor(decodes)
    for npf, w_p in ((low_p, 1.0 - (prefills - low_p)), (low_p + 1, prefills - low_p)):
        for nd, w_d in ((low_d, 1.0 - (decodes - low_d)), (low_d + 1, decodes - low_d)):
            weight = w_p * w_d
            if weight <= 0:
                continue
            cost = prepared.estimator.batch_cost(
                BatchShape(
                    num_prefill_tokens=prefill_tokens,
                    num_prefills=npf if prefill_tokens else 0,
                    prefill_attn_pairs=pairs if prefill_tokens else 0.0,
                    prefill_kv_tokens=prefill_tokens,
                    num_decodes=nd,
                    decode_kv_tokens=round(kv_per_decode * nd),
                )
            )
            stages = np.asarray(cost.stage_times, dtype=np.float64)
            stages[0] += cost.cpu_overhead
            out += weight * stages
    return out


def _kernel_overheads(
    prepared: PreparedDeployment, prefill_tokens: int, decodes: int, kv_per_decode: float
) -> tuple[np.ndarray, np.ndarray]:
    """Fixed per-batch cost of having any prompt chunk, and of having any decode, per stage.

    Second differences of the estimator: the first chunk (decode) added to a batch costs
    its kernel plus its marginal work, the second only the marginal work.
    """

    def t(npt: int, npf: int, nd: int) -> np.ndarray:
        return _stage_seconds(prepared, npt, npf, float(npt), nd, kv_per_decode)

    nd = max(1, decodes)
    prefill = (t(1, 1, nd) - t(0, 0, nd)) - (t(2, 2, nd) - t(1, 1, nd))
    npt = max(1, prefill_tokens)
    pairs = npt * (npt + 1) / 2

    def u(nd: int) -> np.ndarray:
        return _stage_seconds(prepared, npt, 1, pairs, nd, kv_per_decode)

    decode = (u(1) - u(0)) - (u(2) - u(1))
    return np.maximum(prefill, 0.0), np.maximum(decode, 0.0)


def service_bound(
    prepared: PreparedDeployment, workload: Workload, mask: np.ndarray | None = None
) -> ServiceBound:
    """A lower bound on the busy time one request costs a replica, on average.

    Over the requests the deployment can serve (`servable_requests`, or `mask`), per request on
    average: `P` prompt tokens in at least ``ceil(p / budget)`` chunks (causal query-key
    pairs ``p (p + 1) / 2``) and ``o - 1`` decode steps reading ``(o - 1) p + (o - 1)
    (o - 2) / 2`` KV tokens; under speculative decoding ``(o - 1) / E`` verify steps (E
    tokens emitted a step on average), their context read as often, each taking ``v = k +
    1`` tokens of the budget (`SchedulerConfig.decode_tokens` of the replicas' scheduler,
    `PreparedDeployment.scheduler`).  A batch holds at most the token budget (chunk size,
    vLLM's max tokens; the KV capacity where there is none), at most `batch_size` sequences
    and at most its share of the replica's KV capacity in decode context (under pipeline
    parallelism the `pp` micro-batches in flight hold their KV in one cache: capacity /
    pp each, on average).  Where decodes share a batch and its budget with prompt chunks
    (`SchedulerKind.mixes_decodes`: Sarathi, Orca) the work needs at least

        K = max((prompt tokens + v steps) / budget, sequences / batch_size,
                decode KV / (capacity / pp))

    batches; where prompts and decodes run in batches of their own (vLLM's prefill-first,
    SGLang, static), the decode batches limited by the batch cap alone, at least

        K = max(prompt tokens / budget, chunks / batch_size)
            + max(steps / batch_size, decode KV / (capacity / pp)).

    For a cost convex in the batch aggregates, as the roofline's is, K equal
    batches cost least (Jensen): the estimator prices the average batch.  The roofline's
    exceptions are the fixed costs of the attention kernels, paid only by batches that
    have prompt chunks (decodes): packing all chunks (decodes) into as few batches as the
    budget and the batch cap allow saves them in the other batches, which is taken off.
    Under pipeline parallelism the stages overlap: the bottleneck stage counts (stage 0
    with the CPU overhead).  Preemptions (recompute) and idle time only add to the cost.
    With prefix caching, a prompt computes only what an unbounded shared cache would not
    hold (`prefix_reuse_tokens`), its chunks' pairs as if no context preceded them; its
    decodes still read the whole prompt, but hold only those tokens' KV (running requests
    share the cached prefix's blocks).
    """
    sched = prepared.scheduler
    cluster = prepared.cluster
    if mask is None:
        mask = servable_requests(prepared, workload.prompt_tokens, workload.output_tokens)
    num = int(mask.sum())
    if num == 0:
        return ServiceBound(math.inf, 0.0, 1, cluster.num_replicas, 0, len(workload))
    p = workload.prompt_tokens[mask].astype(np.float64)
    o = workload.output_tokens[mask].astype(np.float64)
    if prepared.decode_pool is not None:
        # disaggregated: the prefill pool's part ends at the first token (the decode pool's
        # only adds a limit, so this bounds the whole deployment from above)
        o = np.ones_like(o)
    computed = p  # prompt tokens computed; less where a cached prefix may be reused
    if cluster.prefix_cache and workload.prefix_blocks is not None:
        reuse = prefix_reuse_tokens(
            workload.prefix_blocks, workload.prompt_tokens, workload.prefix_block_tokens
        )
        computed = p - reuse[mask]
    capacity = float(cluster.num_kv_blocks * cluster.block_size)
    budget = sched.token_budget()
    max_tokens = float(budget) if budget is not None else capacity + sched.batch_size
    chunks = np.ceil(computed / max_tokens)  # a chunk is never longer than the budget
    # decode steps: one per output token after the first, or per verify step of
    # speculative decoding, which emits E tokens on average (its context read E times less)
    spec = prepared.deployment.speculative
    per_step = spec.tokens_per_step if spec is not None else 1.0
    steps = (o - 1) / per_step
    decode_kv = ((o - 1) * p + (o - 1) * (o - 2) / 2) / per_step
    # the KV a decode holds: running requests share a cached prefix's blocks, so only the
    # tokens the cache would not hold are its own
    held_kv = ((o - 1) * computed + (o - 1) * (o - 2) / 2) / per_step
    held_kv += steps * cluster.window_kv_blocks * cluster.block_size  # sliding layers' window
    prefill, decodes = float(computed.mean()), float(steps.mean())
    # the pp micro-batches in flight share one KV cache: cap / pp of decode context each
    kv_batches = float(held_kv.mean()) / (capacity / cluster.pp)
    verify = sched.decode_tokens  # budget tokens of one decode (verify) step
    if sched.kind.mixes_decodes:
        k = max(
            (prefill + verify * decodes) / max_tokens,  # tokens
            float((chunks + steps).mean()) / sched.batch_size,  # sequences
            kv_batches,  # decode KV context
        )
        decodes_per_batch = min(max_tokens / verify, sched.batch_size)
    else:  # prompt batches, then decode batches
        k = max(prefill / max_tokens, float(chunks.mean()) / sched.batch_size) + max(
            decodes / sched.batch_size, kv_batches
        )
        decodes_per_batch = sched.batch_size
    kv_per_decode = float(decode_kv.mean()) / decodes if decodes > 0 else 0.0
    npt = max(1, round(prefill / k))
    nd = decodes / k
    stages = _stage_seconds(
        prepared, npt, float(chunks.mean()) / k,
        float((computed * (computed + 1) / 2).mean()) / k, nd, kv_per_decode,
    )  # fmt: skip
    # shares of the batches that must carry prompt chunks, and decodes
    with_chunks = min(1.0, max(prefill / max_tokens, float(chunks.mean()) / sched.batch_size) / k)
    with_decodes = min(1.0, decodes / decodes_per_batch / k)
    ovh_prefill, ovh_decode = _kernel_overheads(prepared, npt, round(nd), kv_per_decode)
    if decodes <= 0:
        with_decodes, ovh_decode = 1.0, 0.0 * ovh_decode  # the average batch has none
    stages = stages - (1.0 - with_chunks) * ovh_prefill - (1.0 - with_decodes) * ovh_decode
    seconds = k * float(stages.max())
    # an admitted request holds a batch slot and its prompt's KV blocks until it finishes
    prompt_blocks = np.sort(np.ceil(computed / cluster.block_size) + cluster.window_kv_blocks)
    fit = int(np.searchsorted(np.cumsum(prompt_blocks), cluster.num_kv_blocks, side="right"))
    in_flight = max(1, min(sched.batch_size * cluster.pp, fit))
    return ServiceBound(seconds, k, in_flight, cluster.num_replicas, num, len(workload))
