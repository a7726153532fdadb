"""The estimator contract: the one question the simulator asks of a cost model.

Per iteration, the simulator describes the batch of one replica in aggregate (a
`BatchShape`) and asks how long each pipeline stage takes to run it.  Aggregates,
not per-request lists, keep the simulator's hot loop independent of batch size:

* token-level operators (matmuls, norms, activations, all-reduces) depend only on
  the number of tokens in the iteration;
* prefill attention depends on the query-key pairs of the prompt chunks;
* decode attention depends on how many KV tokens the decodes read.

Between two changes of a batch, a replica runs decode-only iterations that differ only by
one more KV token per sequence.  `decode_steps` prices such a run lazily, one step per
`next()`, without a `BatchShape` or `BatchCost` per step; an estimator may provide its own
(`RooflineEstimator.decode_steps`), which must give exactly what `batch_cost` gives.
`pipeline_decode_steps` does the same with every pipeline stage's time and the hop between
stages, for a replica of several stages.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


# BatchShape and BatchCost are values, built once per iteration and never changed; they are
# not frozen because a frozen dataclass takes about four times as long to build (0.6 against
# 0.15 us), on the simulator's hot path.  They hash by value, as frozen ones would.
@dataclass(slots=True, unsafe_hash=True)
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


@dataclass(slots=True, unsafe_hash=True)
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


# One decode-only iteration as `decode_steps` yields it: (cpu_overhead, seconds of the first
# pipeline stage, flops, bytes_moved), the `BatchCost` fields the simulator's decode path reads.
DecodeStepCost = tuple[float, float, float, float]


def priced_decode_steps(
    estimator: ExecutionTimeEstimator, num_decodes: int, decode_kv_tokens: int
) -> Iterator[DecodeStepCost]:
    """The default `decode_steps`: each step priced by `estimator.batch_cost`."""
    for host, stages, _, flops, nbytes in priced_pipeline_decode_steps(
        estimator, num_decodes, decode_kv_tokens
    ):
        yield host, stages[0], flops, nbytes


def decode_steps(
    estimator: ExecutionTimeEstimator, num_decodes: int, decode_kv_tokens: int
) -> Iterator[DecodeStepCost]:
    """Costs of consecutive decode-only iterations of the same `num_decodes` sequences: the
    first reads `decode_kv_tokens` KV tokens, each next one `num_decodes` more (every
    sequence's new token).  An endless iterator, priced as it is consumed: the estimator's
    own ``decode_steps(num_decodes, decode_kv_tokens)`` when it has one, else
    `priced_decode_steps`."""
    own = getattr(estimator, "decode_steps", None)
    if own is None:
        return priced_decode_steps(estimator, num_decodes, decode_kv_tokens)
    return own(num_decodes, decode_kv_tokens)


# One decode-only iteration as `pipeline_decode_steps` yields it: (cpu_overhead, stage_times,
# pp_hop_time, flops, bytes_moved), the `BatchCost` fields a pipeline-parallel replica reads.
PipelineStepCost = tuple[float, tuple[float, ...], float, float, float]


def priced_pipeline_decode_steps(
    estimator: ExecutionTimeEstimator, num_decodes: int, decode_kv_tokens: int
) -> Iterator[PipelineStepCost]:
    """The default `pipeline_decode_steps`: each step priced by `estimator.batch_cost`."""
    kv = decode_kv_tokens
    while True:
        c = estimator.batch_cost(BatchShape(num_decodes=num_decodes, decode_kv_tokens=kv))
        yield c.cpu_overhead, c.stage_times, c.pp_hop_time, c.flops, c.bytes_moved
        kv += num_decodes


def pipeline_decode_steps(
    estimator: ExecutionTimeEstimator, num_decodes: int, decode_kv_tokens: int
) -> Iterator[PipelineStepCost]:
    """`decode_steps` with every stage's time and the hop between stages: the estimator's
    own ``pipeline_decode_steps`` when its class has one (looked up on the class, so that
    a wrapper forwarding attributes to another estimator does not lend it that one's),
    else `priced_pipeline_decode_steps`."""
    own = getattr(type(estimator), "pipeline_decode_steps", None)
    if own is None:
        return priced_pipeline_decode_steps(estimator, num_decodes, decode_kv_tokens)
    return own(estimator, num_decodes, decode_kv_tokens)
