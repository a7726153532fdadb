"""Mixture-of-experts costs: the experts a batch touches, the busiest GPU's expert rows and
the expert-parallel all-to-all.

An MoE layer runs a router GEMM (hidden -> experts, every token), the routed experts as
grouped GEMMs over the tokens each expert receives, and a shared dense MLP where the model
has one. Under expert parallelism (EP) the replica's ``tp`` GPUs hold ``experts / ep``
experts each, every expert split ``tp / ep`` ways (MoE tensor parallel), as
aiconfigurator's ``moe_tp x moe_ep = tp`` deployments; attention stays tensor parallel.

* Touched experts: with top-k routing of ``n`` tokens spread uniformly over ``E`` experts,
  an expert receives none of them with probability ``(1 - k/E)^n``, so the expected number
  of experts whose weights are read from HBM in one iteration is
  ``E * (1 - (1 - k/E)^n)``. At decode batch 1 that is k experts; from a few hundred tokens
  on, all of them: MoE decode is weight-bandwidth bound on the touched experts.
* Load imbalance: routing is not uniform. The busiest EP rank receives `LOAD_SKEW` times the
  mean ``n * k / ep`` expert rows (never more than every token on each of its experts). The
  default 1.25 (the busiest rank carries a quarter more rows than the mean) is an assumption
  for routers trained with load balancing and no expert-placement rebalancing (EPLB); it is
  documented here, not measured by llmcap and not fitted to any end-to-end point
  (`MoeShape.skew` changes it). With ``ep = 1`` every GPU runs every expert (split by TP), so
  there is no rank imbalance.
* Grouped GEMM: each touched expert is its own GEMM of ``rows`` tokens, priced as the
  roofline prices a GEMM: ``max(flops * (rows + m_half) / peak, bytes / bandwidth)``, summed
  over the rank's touched experts as one launch.
* All-to-all (``ep > 1`` under attention data parallelism, each rank with its own tokens;
  under attention TP every GPU holds every token, runs its experts on all of them and the
  outputs are all-reduced over TP as a dense MLP's: vLLM's FusedMoE uses its all2all
  kernels only when ``dp_size > 1``, TensorRT-LLM's ``select_alltoall_method_type`` only
  with ``enable_attention_dp``): each rank dispatches its ``n / ep`` tokens' hidden states to the
  ranks holding their experts and gets the expert outputs back (combine). DeepEP, the
  kernels the engines run, sends a token once to each rank that holds any of its k experts
  (its dispatch layout counts tokens per rank, not per expert; the combine reduces a rank's
  experts before sending back), so a token goes to `dispatch_ranks` ranks, the expected
  number of the ``ep`` ranks among its k experts drawn without replacement, (ep - 1) / ep of
  them another GPU: ``2 x n/ep x ranks x (ep-1)/ep x hidden x 2 B`` over the node's GPU link,
  plus one latency each phase, at the engine's measured efficiency (`AllToAllCost`, fitted to
  its DeepEP tables by benchmarks/fit_engine_all_to_all.py). It replaces the MLP's TP
  all-reduce.
"""

from __future__ import annotations

from dataclasses import dataclass

from estimators._types import ModelArchitecture

__all__ = ["LOAD_SKEW", "MoeShape", "all_to_all_seconds", "dispatch_ranks", "touched_experts"]

LOAD_SKEW = 1.25  # busiest EP rank's expert rows / the mean (see module docstring)


def touched_experts(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected experts that receive at least one of `tokens` tokens under uniform top-k."""
    if tokens <= 0 or num_experts <= 0:
        return 0.0
    return num_experts * (1.0 - (1.0 - top_k / num_experts) ** tokens)


def dispatch_ranks(num_experts: int, top_k: int, ep: int) -> float:
    """Expected EP ranks among a token's `top_k` distinct experts when `num_experts` experts
    sit `num_experts / ep` on each rank: each rank misses all of them with probability
    C(E - E/ep, k) / C(E, k)."""
    if ep <= 1:
        return 1.0
    per_rank = num_experts / ep
    miss = 1.0
    for i in range(min(top_k, num_experts)):
        miss *= max(0.0, (num_experts - per_rank - i) / (num_experts - i))
    return ep * (1.0 - miss)


def all_to_all_seconds(
    tokens: float, ranks: float, hidden: int, act_bytes: int, ep: int,
    link_bw: float, eff: float, latency: float,
) -> float:  # fmt: skip
    """Seconds of one MoE layer's dispatch plus combine on one EP rank (0 when ep == 1) for
    `tokens` tokens over every rank, each sent to `ranks` ranks (`dispatch_ranks`)."""
    if ep <= 1 or tokens <= 0:
        return 0.0
    nbytes = tokens / ep * ranks * hidden * act_bytes * (ep - 1) / ep
    return 2.0 * (nbytes / (link_bw * eff) + latency)


@dataclass(frozen=True, slots=True)
class MoeShape:
    """One GPU's share of an MoE layer: its experts, their width and its rows."""

    num_experts: int
    top_k: int
    hidden: int
    local_experts: float  # experts / ep
    width: int  # expert intermediate size / (tp / ep)
    gated: bool
    ep: int
    skew: float = LOAD_SKEW

    @classmethod
    def of(cls, model: ModelArchitecture, tp: int, ep: int, skew: float = LOAD_SKEW) -> MoeShape:
        return cls(
            num_experts=model.num_experts,
            top_k=model.num_experts_per_tok,
            hidden=model.hidden_size,
            local_experts=model.num_experts / ep,
            width=model.moe_intermediate_size // (tp // ep),
            gated=model.gated_mlp,
            ep=ep,
            skew=skew,
        )

    def rows(self, tokens: float) -> float:
        """Expert rows (token, expert pairs) on the busiest GPU for `tokens` tokens."""
        mean = tokens * self.top_k / self.ep
        if self.ep > 1:
            mean *= self.skew
        return min(mean, tokens * min(self.top_k, self.local_experts))

    def touched(self, tokens: float) -> float:
        """Expected experts of this GPU that receive tokens."""
        return touched_experts(self.num_experts, self.top_k, tokens) / self.ep

    def gemm_shapes(self) -> tuple[tuple[str, int, int], ...]:
        """(name, output width, input width) of the expert GEMMs."""
        up = (2 if self.gated else 1) * self.width
        return (("moe_up_proj", up, self.hidden), ("moe_down_proj", self.hidden, self.width))
