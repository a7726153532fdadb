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
steps of `n` sequences.  Those ``k + 1`` tokens also count against the iteration's token
budget (`verify_tokens`, `SchedulerConfig.decode_tokens`).  The drafter runs over every
prompt chunk too (a draft model prefills its own KV; vLLM's EAGLE / MTP proposer and SGLang's
draft extend run the head layers over the chunk's hidden states): its pass over the chunk
(a draft model's prefill of it, or `draft_layers` layers and the LM head) adds to the
iteration.

The simulator steps a speculative decode once per verify step: `SpeculativeEstimator` prices
a whole step (verify + `k` drafting steps), and every sequence of the step emits its own
random burst of accepted tokens (`AcceptedTokens`, drawn from the acceptance rate or a
per-position acceptance vector under the run's seed).  A burst's tokens reach the client
together: how its gaps count in TBT is `SpeculativeConfig.tbt_gaps` (see
`TBT_GAP_POLICIES`).  The drafter's memory (a draft model's weights and KV, or the
MTP / EAGLE head layers and theirs) is `drafter_memory`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from estimators._contract import (
    BatchCost,
    BatchShape,
    DecodeStepCost,
    ExecutionTimeEstimator,
    priced_decode_steps,
)
from estimators._memory import (
    DrafterMemory,
    kv_bytes_per_token_per_gpu,
    layer_weight_bytes_per_gpu,
    weights_bytes_per_gpu,
)

if TYPE_CHECKING:
    from estimators._types import ModelArchitecture, Precision

__all__ = [
    "TBT_GAP_POLICIES",
    "AcceptedTokens",
    "SpeculativeConfig",
    "SpeculativeEstimator",
    "drafter_memory",
    "expected_tokens_per_step",
]

METHODS = ("mtp", "eagle", "draft")

# How the gaps of a burst count in TBT.  vLLM, SGLang and TensorRT-LLM stream a sequence's
# accepted tokens of one verify step as one chunk (one detokenized delta per step), and the
# serving benchmarks take one inter-token latency per chunk: `vllm bench serve` (and
# InferenceMAX's benchmark_serving.py, its copy) appends ``timestamp - most_recent_timestamp``
# for every chunk that carries output, so a burst is one gap, the step time.
#   chunk: one gap per verify step (the default: what those clients report as ITL);
#   token: one gap per token as a client timing each token sees it: the step's gap for the
#          burst's first token, then 0 for each of the rest.
# TPOT ((e2e - TTFT) / (output - 1)) is the same under both.
TBT_GAP_POLICIES = ("chunk", "token")


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
    # per-position acceptance (position i's proposal accepted given the ones before it);
    # None: `acceptance_rate` at every position
    acceptance_rates: tuple[float, ...] | None = None
    tbt_gaps: str = "chunk"  # TBT_GAP_POLICIES

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"speculative method {self.method!r}: one of {', '.join(METHODS)}")
        if self.num_speculative_tokens < 1:
            raise ValueError(
                f"num_speculative_tokens {self.num_speculative_tokens}: at least 1 proposal"
            )
        if not 0.0 <= self.acceptance_rate <= 1.0:
            raise ValueError(f"acceptance_rate {self.acceptance_rate}: must be within [0, 1]")
        if self.acceptance_rates is not None:
            if len(self.acceptance_rates) != self.num_speculative_tokens:
                raise ValueError(
                    f"acceptance_rates has {len(self.acceptance_rates)} values: one per "
                    f"proposed token ({self.num_speculative_tokens})"
                )
            for rate in self.acceptance_rates:
                if not 0.0 <= rate <= 1.0:
                    raise ValueError(f"acceptance_rates {rate}: must be within [0, 1]")
        if self.tbt_gaps not in TBT_GAP_POLICIES:
            raise ValueError(f"tbt_gaps {self.tbt_gaps!r}: one of {', '.join(TBT_GAP_POLICIES)}")
        if self.draft_layers < 1:
            raise ValueError(f"draft_layers {self.draft_layers}: at least 1")
        if (self.method == "draft") != (self.draft_model is not None):
            raise ValueError("speculative method 'draft' needs draft_model (and only it takes one)")

    @property
    def verify_tokens(self) -> int:
        """Query tokens of one sequence's verify step: its last token and the k proposals
        (what the engines count against an iteration's token budget)."""
        return self.num_speculative_tokens + 1

    @property
    def tokens_per_step(self) -> float:
        """E: tokens a sequence emits per verify step, on average."""
        if self.acceptance_rates is None:
            return expected_tokens_per_step(self.num_speculative_tokens, self.acceptance_rate)
        return 1.0 + float(sum(self.run_at_least()))

    def run_at_least(self) -> tuple[float, ...]:
        """P(the accepted run is at least i long), i = 1..k: the product of the first i
        positions' acceptance."""
        rates = self.acceptance_rates or (self.acceptance_rate,) * self.num_speculative_tokens
        return tuple(float(p) for p in np.cumprod(rates))


def expected_tokens_per_step(k: int, alpha: float) -> float:
    """Tokens a sequence emits per verify step: the accepted run of k proposals (each kept
    with probability alpha given the earlier ones) plus the target's own token."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


class SpeculativeEstimator:
    """Wraps the target model's estimator (and the drafter's, for a draft model) to price one
    verify step of a decode under speculative decoding (see the module docstring): its
    decodes' verify pass of k + 1 tokens each and the k drafting steps before it."""

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
        k = self.config.num_speculative_tokens
        draft_s = draft_flops = draft_bytes = 0.0
        if batch.num_prefill_tokens:  # the drafter's own pass over the prompt chunks
            prompts = BatchShape(
                num_prefill_tokens=batch.num_prefill_tokens,
                num_prefills=batch.num_prefills,
                prefill_attn_pairs=batch.prefill_attn_pairs,
                prefill_kv_tokens=batch.prefill_kv_tokens,
            )
            draft_s, draft_flops, draft_bytes = self._drafter_pass(prompts)
        if n == 0:
            target = self.target.batch_cost(batch)
        else:
            q = self.config.verify_tokens
            ctx = batch.decode_kv_tokens / n
            target = self.target.batch_cost(
                BatchShape(
                    num_prefill_tokens=batch.num_prefill_tokens + n * q,
                    num_prefills=batch.num_prefills + n,
                    prefill_attn_pairs=batch.prefill_attn_pairs + n * q * (ctx + (q + 1) / 2),
                    prefill_kv_tokens=batch.prefill_kv_tokens + batch.decode_kv_tokens + n * q,
                )
            )
            decodes = BatchShape(num_decodes=n, decode_kv_tokens=batch.decode_kv_tokens)
            step_s, step_flops, step_bytes = self._drafter_pass(decodes)
            draft_s += k * step_s
            draft_flops += k * step_flops
            draft_bytes += k * step_bytes
        if not draft_s:
            return target
        last = len(target.stage_times) - 1
        stages = tuple(
            t + (draft_s if s == last else 0.0)  # the drafter runs by the LM head
            for s, t in enumerate(target.stage_times)
        )
        return BatchCost(
            stage_times=stages,
            pp_hop_time=target.pp_hop_time,
            cpu_overhead=target.cpu_overhead,
            flops=target.flops + draft_flops,
            bytes_moved=target.bytes_moved + draft_bytes,
        )

    def _drafter_pass(self, batch: BatchShape) -> tuple[float, float, float]:
        """(seconds, FLOPs, bytes) of the drafter running `batch` once: one drafting step of
        the decodes, or its pass over prompt chunks (the drafter keeps its own KV, or the
        MTP / EAGLE head its hidden states, of every prompt token).  No CPU overhead: it
        runs inside the engine's step."""
        if self.draft is not None:
            c = self.draft.batch_cost(batch)
            return sum(c.stage_times), c.flops, c.bytes_moved
        # MTP / EAGLE: draft_layers layers of the target's shape, then its LM head (the last
        # stage's time beyond its layers and the embedding)
        c = self.target.batch_cost(batch)
        ops = self.target.operator_times(batch)
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


class AcceptedTokens:
    """Draws the bursts of a sequence's decode: the tokens each verify step emits (its
    accepted run of proposals plus the target's own token), from `config`'s per-position
    acceptance, with a generator seeded by the run's seed (deterministic given the order of
    the draws, which the simulation's event order fixes)."""

    def __init__(self, config: SpeculativeConfig, seed: int | Sequence[int]) -> None:
        self.config = config
        self.rng = np.random.default_rng(seed)
        # a burst is 1 + the number of i with u < P(run >= i): u uniform in [0, 1)
        self._run_at_least = -np.asarray(config.run_at_least(), dtype=np.float64)

    def bursts(self, num_tokens: int) -> list[int]:
        """Tokens of each verify step until `num_tokens` are out (the last burst cut at the
        request's length, as the engines stop at max_tokens)."""
        if num_tokens <= 0:
            return []
        u = -self.rng.random(num_tokens)  # at most num_tokens steps: each emits >= 1
        drawn = 1 + np.searchsorted(self._run_at_least, u, side="left")
        total = np.cumsum(drawn)
        steps = int(np.searchsorted(total, num_tokens, side="left")) + 1
        out = drawn[:steps].tolist()
        out[-1] -= int(total[steps - 1]) - num_tokens
        return out


def drafter_memory(
    config: SpeculativeConfig,
    model: ModelArchitecture,
    draft: ModelArchitecture | None,
    tp: int,
    precision: Precision,
    kv_precision: Precision,
) -> DrafterMemory:
    """Per-GPU memory of the drafter (it sits with the target's last pipeline stage, at the
    target's TP): a draft model's weights and KV per token; or `draft_layers` decoder layers
    of the target's shape (DeepSeek's MTP module and an EAGLE head are one such layer) and
    their KV, plus the layer's input projection of [embedding; hidden] (2h x h, replicated as
    vLLM loads it).  The drafter shares the target's embedding and LM head."""
    if draft is not None:
        return DrafterMemory(
            f"draft model {draft.name}",
            weights_bytes_per_gpu(draft, tp, 1, precision),
            kv_bytes_per_token_per_gpu(draft, tp, 1, kv_precision),
        )
    layers = config.draft_layers
    projection = 2 * model.hidden_size * model.hidden_size * 2  # bf16
    per_layer_kv = kv_bytes_per_token_per_gpu(model, tp, 1, kv_precision) / model.num_layers
    return DrafterMemory(
        f"{config.method} head ({layers} layer{'s' if layers > 1 else ''})",
        layers * (layer_weight_bytes_per_gpu(model, tp, precision) + projection),
        layers * per_layer_kv,
    )
