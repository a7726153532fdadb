"""What `llmcap profile run` measures: a model's TP-sharded operator shapes and the grids.

For each tensor-parallel degree the model's heads divide, the layer GEMMs (QKV, O,
gate-up, down) at their sharded ``(n, k)`` and the LM head (vocabulary split over TP), each
over a grid of token counts m; prefill attention over batch x prompt length (and a few
chunks after a cached prefix); decode attention over batch x KV length; all-reduce over
message sizes.  Shapes shared by several TP degrees are measured once.  A mixture of experts
adds its routed experts at each degree as MoE TP (every expert split over the GPUs) and as
expert parallelism (the experts spread whole), over a grid of tokens entering the layer.  A
model with multi-head latent attention keeps its MLPs and LM head: its attention is not
SDPA over heads of one width, so neither it nor its projections are timed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from estimators._op_tables import layer_gemm_shapes
from estimators._types import ModelArchitecture

__all__ = ["FULL_GRID", "QUICK_GRID", "MoeShape", "ProfileGrid", "ProfilePlan", "plan_profile"]

_GEMM_NAMES = {
    "attn_pre_proj": "qkv",
    "attn_post_proj": "o",
    "mlp_up_proj": "gate_up",
    "mlp_down_proj": "down",
}


@dataclass(frozen=True, slots=True)
class ProfileGrid:
    """The sizes measured, and how often each is run."""

    tokens: tuple[int, ...]  # GEMM m
    prefill_batches: tuple[int, ...]
    prompt_lens: tuple[int, ...]
    prefill_token_cap: int  # skip batch x prompt beyond this many tokens
    cached_prefills: tuple[tuple[int, int], ...]  # (chunk, cached prefix), batch 1
    decode_batches: tuple[int, ...]
    kv_lens: tuple[int, ...]
    kv_token_cap: int  # skip batch x KV length beyond this many tokens
    allreduce_bytes: tuple[int, ...]
    moe_tokens: tuple[int, ...]  # tokens entering a MoE layer
    warmup: int
    repeats: int


FULL_GRID = ProfileGrid(
    tokens=(1, 2, 4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048,
            3072, 4096, 6144, 8192, 16384),
    prefill_batches=(1, 2, 4, 8, 16),
    prompt_lens=(128, 256, 512, 1024, 2048, 4096, 8192, 16384),
    prefill_token_cap=32768,
    cached_prefills=((256, 1024), (512, 4096), (1024, 2048), (2048, 8192)),
    decode_batches=(1, 2, 4, 8, 16, 32, 64, 128, 256),
    kv_lens=(128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768),
    kv_token_cap=1 << 20,
    allreduce_bytes=tuple(1 << e for e in range(10, 29)),
    moe_tokens=tuple(1 << e for e in range(15)),
    warmup=5,
    repeats=20,
)  # fmt: skip

QUICK_GRID = ProfileGrid(
    tokens=(1, 8, 64),
    prefill_batches=(1, 2),
    prompt_lens=(16, 64),
    prefill_token_cap=128,
    cached_prefills=((16, 32),),
    decode_batches=(1, 4),
    kv_lens=(32, 128),
    kv_token_cap=512,
    allreduce_bytes=(1 << 10, 1 << 16, 1 << 20),
    moe_tokens=(1, 8, 64),
    warmup=1,
    repeats=3,
)


@dataclass(frozen=True, slots=True)
class GemmShape:
    n: int
    k: int
    dtype: str  # the layer GEMMs': bf16 or fp8; the LM head's: bf16 (engines keep it so)
    ops: tuple[str, ...]  # "tp2 qkv", ... (informational)


@dataclass(frozen=True, slots=True)
class HeadShape:
    heads: int  # per GPU
    kv_heads: int
    head_dim: int


@dataclass(frozen=True, slots=True)
class MoeShape:
    """One GPU's routed experts: the model's expert shape, split `moe_tp` x `moe_ep` ways."""

    hidden: int
    inter: int  # one expert's width before MoE TP
    topk: int
    experts: int
    moe_tp: int
    moe_ep: int
    dtype: str

    @property
    def width(self) -> int:
        return self.inter // self.moe_tp


@dataclass(slots=True)
class ProfilePlan:
    """Shapes to measure for one model over several TP degrees."""

    model: ModelArchitecture
    tps: list[int]
    gemms: list[GemmShape] = field(default_factory=list)
    heads: list[HeadShape] = field(default_factory=list)
    moes: list[MoeShape] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def plan_profile(
    model: ModelArchitecture, tps: list[int], dtypes: tuple[str, ...] = ("bf16",)
) -> ProfilePlan:
    """The distinct GEMM and attention shapes of `model` at each TP degree of `tps`, the
    layer GEMMs in each of `dtypes` (a degree that does not divide the heads is skipped,
    with a line in ``skipped``)."""
    plan = ProfilePlan(model, [])
    by_shape: dict[tuple[int, int, str], list[str]] = {}
    for tp in tps:
        if model.num_attention_heads % tp:
            plan.skipped.append(
                f"TP {tp}: does not divide the {model.num_attention_heads} attention heads"
            )
            continue
        plan.tps.append(tp)
        for name, (n, k) in layer_gemm_shapes(model, tp).items():
            if model.is_mla and name.startswith("attn_"):
                continue
            label = _GEMM_NAMES[name] if model.gated_mlp or name != "mlp_up_proj" else "up"
            for dtype in dtypes:
                by_shape.setdefault((n, k, dtype), []).append(f"tp{tp} {label}")
        vocab = -(-model.vocab_size // tp)
        by_shape.setdefault((vocab, model.hidden_size, "bf16"), []).append(f"tp{tp} lm_head")
        head = HeadShape(
            model.num_attention_heads // tp,
            max(1, model.num_key_value_heads // tp),
            model.head_dim,
        )
        if head not in plan.heads and not model.is_mla:
            plan.heads.append(head)
        for moe in _moe_shapes(model, tp, dtypes, plan.skipped):
            if moe not in plan.moes:
                plan.moes.append(moe)
    if model.is_mla:
        plan.skipped.append(
            "multi-head latent attention: not timed, nor its projections (the profiler times "
            "SDPA over heads of one width); the backend prices them by the roofline"
        )
    plan.gemms = [GemmShape(n, k, dt, tuple(ops)) for (n, k, dt), ops in by_shape.items()]
    return plan


def _moe_shapes(
    model: ModelArchitecture, tp: int, dtypes: tuple[str, ...], skipped: list[str]
) -> list[MoeShape]:
    """The routed experts of `model` on `tp` GPUs as MoE TP `tp` and as EP `tp` (TP 1: both
    the same), each split the experts allow (a line in `skipped` for one they do not)."""
    if not model.is_moe:
        return []
    splits = [(tp, 1)] if tp == 1 else [(tp, 1), (1, tp)]
    out = []
    for moe_tp, moe_ep in splits:
        if model.moe_intermediate_size % moe_tp or model.num_experts % moe_ep:
            skipped.append(
                f"experts at MoE TP {moe_tp}, EP {moe_ep}: {model.num_experts} experts of "
                f"width {model.moe_intermediate_size} do not split so"
            )
            continue
        for dtype in dtypes:
            out.append(
                MoeShape(model.hidden_size, model.moe_intermediate_size,
                         model.num_experts_per_tok, model.num_experts, moe_tp, moe_ep, dtype)
            )  # fmt: skip
    return out
