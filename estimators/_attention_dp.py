"""Attention data parallelism: the share of a replica's batch its slowest DP rank runs.

Under attention DP (SGLang's ``--enable-dp-attention``, TensorRT-LLM's
``enable_attention_dp``) a replica of ``dp x tp`` GPUs runs ``dp`` attention groups of ``tp``
GPUs; each takes its own requests, keeps their KV cache and runs attention (and the dense
and shared-expert MLPs) on its own tokens, while the routed experts of every MoE layer take
the tokens of all ranks at once. Every rank waits for the others at each MoE layer, so an
iteration lasts as long as its busiest rank.

The simulator keeps one batch per replica (its batch cap and token budget ``dp`` times one
rank's, its KV blocks ``dp`` times one rank's); the estimator prices that batch as the
busiest rank's share, assuming the requests are spread evenly (a router that balances the
ranks): that rank holds ``ceil(decodes / dp)`` of the decodes with their mean context, and
``ceil(prefill chunks / dp)`` of the prefill chunks with their mean length. Both ceilings
at once make it an upper bound on the slowest rank of a balanced assignment; a single long
prompt stays on one rank (its chunk is not split across ranks).
"""

from __future__ import annotations

from estimators._contract import BatchShape

__all__ = ["busiest_rank"]


def busiest_rank(batch: BatchShape, dp: int) -> BatchShape:
    """The part of a replica's `batch` that its busiest of `dp` attention DP ranks runs."""
    if dp <= 1:
        return batch
    nd = batch.num_decodes
    npf = batch.num_prefills
    rank_nd = -(-nd // dp)
    rank_pf = -(-npf // dp)
    fd = rank_nd / nd if nd else 0.0
    fp = rank_pf / npf if npf else 0.0
    return BatchShape(
        num_prefill_tokens=round(batch.num_prefill_tokens * fp),
        num_prefills=rank_pf,
        prefill_attn_pairs=batch.prefill_attn_pairs * fp,
        prefill_kv_tokens=round(batch.prefill_kv_tokens * fp),
        num_decodes=rank_nd,
        decode_kv_tokens=round(batch.decode_kv_tokens * fd),
    )
