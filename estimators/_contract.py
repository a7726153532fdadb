"""The estimator contract: the one question the simulator asks of a cost model.

Per iteration, the simulator describes the batch of one replica in aggregate (a
`BatchShape`) and asks how long each pipeline stage takes to run it.  Aggregates,
not per-request lists, keep the simulator's hot loop independent of batch size:

* token-level operators (matmuls, norms, activations, all-reduces) depend only on
  the number of tokens in the iteration;
* prefill attention depends on the query-key pairs of the prompt chunks;
* decode attention depends on how many KV tokens the decodes read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class BatchShape:
    """One iteration of one replica, in aggregate."""

    num_prefill_tokens: int = 0  # query tokens of prefill chunks in the batch
    num_prefills: int = 0  # prefill chunks in the batch
    # sum over chunks of q * (ctx + (q + 1) / 2): the causal query-key pairs
    prefill_attn_pairs: float = 0.0
    prefill_kv_tokens: int = 0  # sum over chunks of ctx + q: KV tokens the chunks' attention reads
    num_decodes: int = 0  # decode sequences (one query token each)
    decode_kv_tokens: int = 0  # sum over decodes of their KV context length

    @property
    def num_tokens(self) -> int:
        return self.num_prefill_tokens + self.num_decodes

    @property
    def num_seqs(self) -> int:
        return self.num_prefills + self.num_decodes


@dataclass(frozen=True, slots=True)
class BatchCost:
    """The estimator's answer for one iteration."""

    stage_times: tuple[float, ...]  # seconds of each pipeline stage (compute + its TP all-reduces)
    pp_hop_time: float  # seconds to send activations from one stage to the next
    cpu_overhead: float  # seconds of scheduling, input preparation and sampling per iteration
    flops: float  # model FLOPs of the iteration (all GPUs), for MFU
    bytes_moved: float  # HBM bytes of the iteration (all GPUs), for MBU


class ExecutionTimeEstimator(Protocol):
    """A cost-model backend for one deployment (model, SKU, TP, PP, precision)."""

    def batch_cost(self, batch: BatchShape) -> BatchCost:
        """Cost of running `batch` through every pipeline stage once."""
        ...
