"""Speculative decoding: what one emitted token of a decode costs when a drafter proposes
tokens that the target model verifies in one step.

A decode step under speculative decoding (vLLM, SGLang and TensorRT-LLM all run it this
way): a drafter proposes `k` tokens per sequence (`k` steps of a draft model, or of the
model's own MTP / EAGLE head layers), then the target model runs one forward over the
``k + 1`` positions of every sequence (its last accepted token and the `k` proposals) and
keeps the longest accepted run plus one token of its own.  With each proposal accepted with
probability `alpha` given the ones before it, a step emits on average

    E = (1 - alpha^(k + 1)) / (1 - alpha)        (k + 1 when alpha = 1)

tokens per sequence.  The target's verify pass is priced as a prompt chunk of ``k + 1``
tokens after the sequence's context (the estimator's prefill path: its GEMMs see
``n (k + 1)`` tokens, its attention ``k + 1`` queries over the KV), the drafter as `k` decode
steps of `n` sequences.

The simulator advances a decode one token per step, so `SpeculativeEstimator` answers for
one emitted token: a batch's decode part (verify + draft, the batch's cost beyond its prompt
chunks) divided by `E`, its prompt chunks at full price.  Throughput, TPOT and KV growth per
token are right on average; tokens come out evenly spaced rather than in bursts of `E`, so
TBT percentiles read as smoothed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from estimators._contract import (
    BatchCost,
    BatchShape,
    DecodeStepCost,
    ExecutionTimeEstimator,
    priced_decode_steps,
)

__all__ = ["SpeculativeConfig", "SpeculativeEstimator", "expected_tokens_per_step"]

METHODS = ("mtp", "eagle", "draft")


@dataclass(frozen=True, slots=True)
class SpeculativeConfig:
    """`method`: mtp or eagle (the drafter is `draft_layers` decoder layers of the target's
    shape, as DeepSeek's MTP module and EAGLE heads are) or draft (a separate model,
    `draft_model`, on the same GPUs and TP).  `num_speculative_tokens` (k) proposals per
    step, each accepted with probability `acceptance_rate` given the ones before it."""

    method: str = "mtp"
    num_speculative_tokens: int = 1
    acceptance_rate: float = 0.7
    draft_layers: int = 1
    draft_model: str | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"speculative method {self.method!r}: one of {', '.join(METHODS)}")
        if self.num_speculative_tokens < 1:
            raise ValueError(
                f"num_speculative_tokens {self.num_speculative_tokens}: at least 1 proposal"
            )
        if not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError(f"acceptance_rate {self.acceptance_rate}: must be within [0, 1]")
        if self.draft_layers < 1:
            raise ValueError(f"draft_layers {self.draft_layers}: at least 1")
        if (self.method == "draft") != (self.draft_model is not None):
            raise ValueError("speculative method 'draft' needs draft_model (and only it takes one)")

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens_per_step(self.num_speculative_tokens, self.acceptance_rate)


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """Tokens a sequence emits per verify step: the accepted run of k proposals (each kept
    with probability alpha given the earlier ones) plus the target's own token."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


class SpeculativeEstimator:
    """Wraps the target model's estimator (and the drafter's, for a draft model) to price one
    emitted token of a decode under speculative decoding (see the module docstring)."""

    def __init__(
        self,
        target: ExecutionTimeEstimator,
        config: SpeculativeConfig,
        draft: ExecutionTimeEstimator | None = None,
    ) -> None:
        """`draft`: the draft model's estimator (method draft); else the drafter is
        `config.draft_layers` decoder layers of the target plus its LM head."""
        self.target = target
        self.config = config
        self.draft = draft
        self.tokens_per_step = config.tokens_per_step

    def __getattr__(self, name: str) -> Any:  # describe(), backend_name, ... of the target
        return getattr(self.target, name)

    def decode_steps(self, num_decodes: int, decode_kv_tokens: int) -> Iterator[DecodeStepCost]:
        # its own, not the target's through __getattr__: a verify step is not a decode step
        return priced_decode_steps(self, num_decodes, decode_kv_tokens)

    def batch_cost(self, batch: BatchShape) -> BatchCost:
        n = batch.num_decodes
        if n == 0:
            return self.target.batch_cost(batch)
        q = self.config.num_speculative_tokens + 1
        ctx = batch.decode_kv_tokens / n
        verify = self.target.batch_cost(
            BatchShape(
                num_prefill_tokens=batch.num_prefill_tokens + n * q,
                num_prefills=batch.num_prefills + n,
                prefill_attn_pairs=batch.prefill_attn_pairs + n * q * (ctx + (q + 1) / 2),
                prefill_kv_tokens=batch.prefill_kv_tokens + batch.decode_kv_tokens + n * q,
            )
        )
        prompts = (
            self.target.batch_cost(
                BatchShape(
                    num_prefill_tokens=batch.num_prefill_tokens,
                    num_prefills=batch.num_prefills,
                    prefill_attn_pairs=batch.prefill_attn_pairs,
                    prefill_kv_tokens=batch.prefill_kv_tokens,
                )
            )
            if batch.num_prefill_tokens
            else None
        )
        draft_s, draft_flops, draft_bytes = self._draft_step(batch)
        k = self.config.num_speculative_tokens
        e = self.tokens_per_step
        last = len(verify.stage_times) - 1
        stages = []
        for s, v in enumerate(verify.stage_times):
            base = prompts.stage_times[s] if prompts is not None else 0.0
            drafting = k * draft_s if s == last else 0.0  # the drafter runs by the LM head
            stages.append(base + (v - base + drafting) / e)
        base_cpu = prompts.cpu_overhead if prompts is not None else 0.0
        return BatchCost(
            stage_times=tuple(stages),
            pp_hop_time=verify.pp_hop_time,
            cpu_overhead=base_cpu + (verify.cpu_overhead - base_cpu) / e,
            flops=(verify.flops + k * draft_flops) / e,
            bytes_moved=(verify.bytes_moved + k * draft_bytes) / e,
        )

    def _draft_step(self, batch: BatchShape) -> tuple[float, float, float]:
        """(seconds, FLOPs, bytes) of one drafting step of the batch's decodes (no CPU
        overhead: it runs inside the engine's step)."""
        decodes = BatchShape(num_decodes=batch.num_decodes, decode_kv_tokens=batch.decode_kv_tokens)
        if self.draft is not None:
            c = self.draft.batch_cost(decodes)
            return sum(c.stage_times), c.flops, c.bytes_moved
        # MTP / EAGLE: draft_layers layers of the target's shape, then its LM head (the last
        # stage's time beyond its layers and the embedding)
        c = self.target.batch_cost(decodes)
        ops = self.target.operator_times(decodes)
        layer = sum(t for name, t in ops.items() if name not in ("emb", "send_recv"))
        last = c.stage_times[-1]
        head = max(
            0.0,
            last
            - self.target.layers_per_stage * layer
            - (ops["emb"] if len(c.stage_times) == 1 else 0.0),
        )
        drafter = self.config.draft_layers * layer + head
        share = drafter / last if last > 0 else 0.0
        return drafter, c.flops * share, c.bytes_moved * share
