"""Which requests a deployment can serve at all (the others are rejected on arrival)."""

from __future__ import annotations

import numpy as np

from simulator._config import ClusterConfig, SchedulerConfig
from simulator._deployment import PreparedDeployment
from simulator._kv import BlockPool
from simulator._policies import make_policy
from simulator._request import Request


def servable_requests(
    prepared: PreparedDeployment, prompt_tokens: np.ndarray, output_tokens: np.ndarray
) -> np.ndarray:
    """A boolean mask: True where a replica of `prepared` can serve the request.

    Mirrors `Replica.rejection`: the whole request (prompt and all but the last output
    token) must fit the KV blocks a replica can ever hold, and the scheduler policy must
    accept its length (vLLM's token limit).  The simulator rejects the others on arrival,
    at any rate; disaggregated, those a decode replica cannot take at the hand-off too,
    while a prefill replica holds only the prompt (`Replica._length_here`).
    """
    prompts = np.asarray(prompt_tokens).tolist()
    outputs = np.asarray(output_tokens).tolist()
    pool = prepared.decode_pool
    held = outputs if pool is None else [1] * len(prompts)  # a prefill pool's one token
    out = _fits(prepared.cluster, prepared.deployment.scheduler, prompts, held)
    if pool is not None:
        out &= _fits(pool.cluster, pool.scheduler, prompts, outputs)
    return out


def _fits(
    cluster: ClusterConfig, scheduler: SchedulerConfig, prompts: list[int], outputs: list[int]
) -> np.ndarray:
    """Which requests one replica of `cluster` running `scheduler` can ever hold."""
    policy = make_policy(scheduler)
    pool = BlockPool(
        cluster.num_kv_blocks, cluster.block_size, cluster.watermark, cluster.window_kv_blocks
    )
    max_blocks = pool.max_request_blocks()
    out = np.empty(len(prompts), dtype=bool)
    for i, (p, o) in enumerate(zip(prompts, outputs, strict=True)):
        req = Request(i, 0.0, p, o)
        out[i] = (
            pool.request_blocks(req.total_tokens) <= max_blocks
            and policy.rejection(req) is None
        )
    return out
