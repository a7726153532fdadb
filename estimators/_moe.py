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
* Load imbalance: the layer lasts as long as its busiest EP rank (the next collective waits
  for it), and two things load one rank above the mean ``n * k / ep`` expert rows:
  - the router: routing is not uniform. The busiest rank receives `LOAD_SKEW` times the mean
    rows. The default 1.25 (a quarter more rows than the mean) is an assumption for routers
    trained with load balancing and no expert-placement rebalancing (EPLB); it is documented
    here, not measured by llmcap and not fitted to any end-to-end point (`MoeShape.skew`
    changes it).  Public measurements without EPLB bracket it where a rank holds many
    experts and exceed it where it holds few: 1.07 (Kimi-K3, 56 experts a rank at EP 16,
    GSM8K: vllm-project/vllm PR #50647), 1.35 (Qwen3.6-35B-A3B, 64 a rank at EP 4, random
    prompts: ai-dynamo/aiconfigurator collector/layerwise/fpm_ground_truth/
    EXPERT_ROUTING_CAPTURE.md), 2.56 (DeepSeek-R1, 8 a rank at EP 32, a translation set:
    TensorRT-LLM tech blog 4, Table 1, the mean over layers and iterations, whose per-expert
    loads spread 1.28 times their mean).  Wide EP without EPLB is therefore priced
    optimistically;
  - chance: a small batch's ``n * k`` choices land unevenly on the ranks even under uniform
    routing. Rank r's rows (the tokens' choices among its ``E / ep`` experts, about
    Binomial(n k, 1/ep)) and its touched experts (each of its ``E / ep`` hit with probability
    ``p = 1 - (1 - k/E)^n``, about Binomial(E/ep, p)) vary from rank to rank, and the
    busiest of ``ep`` ranks carries the expected maximum of ``ep`` such counts
    (`busiest_count`: summed exactly for small means, where the counts are skewed; mean +
    standard deviation x the expected maximum of ``ep`` standard normals, `busiest_of`,
    above). Checked against uniform top-k routing drawn at random (tests/estimators/
    test_moe.py: DeepSeek-V3's 256 experts over 4-32 ranks, 4-64 tokens). At batch 4 over
    8 ranks the busiest rank touches 6.6 of its experts where the mean is 3.8, so it reads
    1.7x the mean's weights; once every expert is touched (a few hundred tokens) the
    fluctuation is a few percent of the rows.
  The busiest rank's rows are the larger of the two (the router's skew dominates large
  batches, chance small ones), never more than every token on each of its experts; its
  touched experts are the chance bound, at most its experts. With ``ep = 1`` every GPU runs
  every expert (split by TP), so there is no rank imbalance.  A measured MoE table times a
  rank's mean share (balanced routing), so the profiled backends scale it by the busiest
  rank's time over the mean's, both priced here (`RooflineEstimator._routed_experts`).
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
  its tables of the kernels it runs, DeepEP's or its own, by
  benchmarks/fit_engine_all_to_all.py).  It replaces the MLP's TP all-reduce.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from estimators._types import ModelArchitecture

__all__ = [
    "LOAD_SKEW",
    "MoeShape",
    "all_to_all_seconds",
    "busiest_count",
    "busiest_of",
    "dispatch_ranks",
    "touched_experts",
]

LOAD_SKEW = 1.25  # busiest EP rank's expert rows / the mean (see module docstring)


@functools.cache
def busiest_of(ranks: int) -> float:
    """Expected maximum of `ranks` independent standard normal draws (0 for one rank):
    ``integral of x * ranks * phi(x) * Phi(x)^(ranks - 1)``, by the midpoint rule over
    [-8, 8]."""
    if ranks <= 1:
        return 0.0
    steps = 4000
    dx = 16.0 / steps
    total = 0.0
    for i in range(steps):
        x = -8.0 + (i + 0.5) * dx
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        cdf = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        total += x * ranks * pdf * cdf ** (ranks - 1)
    return total * dx


# below this mean a rank's count is summed exactly (`busiest_count`); above, its normal bound
EXACT_MAX_MEAN = 64.0


def busiest_count(trials: float, p: float, ranks: int) -> float:
    """Expected maximum over `ranks` independent Binomial(`trials`, `p`) counts.  Small
    means (up to `EXACT_MAX_MEAN`), where a count is skewed and the normal bound falls short
    (a quarter less at one expert row a rank): ``sum over m of 1 - F(m)^ranks``; larger
    ones: mean + sd x `busiest_of` (ranks)."""
    mean = trials * p
    if ranks <= 1 or mean <= 0.0 or p >= 1.0:
        return mean
    sd = math.sqrt(mean * (1.0 - p))
    if mean > EXACT_MAX_MEAN:
        return mean + sd * busiest_of(ranks)
    n = max(round(trials), 1)
    top = min(n, int(mean + 12.0 * sd) + 8)
    pmf = (1.0 - p) ** n
    cdf = 0.0
    total = 0.0
    ratio = p / (1.0 - p)
    for m in range(top):
        cdf += pmf
        total += 1.0 - cdf**ranks
        pmf *= (n - m) / (m + 1) * ratio
    return total


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

    def rows(self, tokens: float, busiest: bool = True) -> float:
        """Expert rows (token, expert pairs) on the busiest GPU for `tokens` tokens: the
        router's skew or chance, whichever loads it more (module docstring); with
        `busiest` False a GPU's mean share, as balanced routing gives every GPU."""
        k, ep = self.top_k, self.ep
        mean = tokens * k / ep
        if busiest and ep > 1 and tokens > 0:
            mean = max(mean * self.skew, busiest_count(tokens * k, 1.0 / ep, ep))
        return min(mean, tokens * min(k, self.local_experts))

    def touched(self, tokens: float, busiest: bool = True) -> float:
        """Experts of the busiest GPU that receive tokens: the expected count, above it by
        chance under EP (module docstring), at most the GPU's experts; with `busiest`
        False the expected count."""
        if self.num_experts <= 0:
            return 0.0
        # the chance that a given expert receives some of the tokens
        p = touched_experts(self.num_experts, self.top_k, tokens) / self.num_experts
        if not busiest:
            return self.local_experts * p
        return min(self.local_experts, busiest_count(self.local_experts, p, self.ep))

    def gemm_shapes(self) -> tuple[tuple[str, int, int], ...]:
        """(name, output width, input width) of the expert GEMMs."""
        up = (2 if self.gated else 1) * self.width
        return (("moe_up_proj", up, self.hidden), ("moe_down_proj", self.hidden, self.width))
