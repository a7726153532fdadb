"""What `llmcap profile run` measures: a model's TP-sharded operator shapes and the grids.

For each tensor-parallel degree the model's heads divide, the layer GEMMs (QKV, O,
gate-up, down) at their sharded ``(n, k)`` and the LM head (vocabulary split over TP), each
over a grid of token counts m; prefill attention over batch x prompt length (and a few
chunks after a cached prefix); decode attention over batch x KV length; all-reduce over
message sizes.  Shapes shared by several TP degrees are measured once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from estimators._op_tables import layer_gemm_shapes
from estimators._types import ModelArchitecture

__all__ = ["FULL_GRID", "QUICK_GRID", "ProfileGrid", "ProfilePlan", "plan_profile"]

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


@dataclass(slots=True)
class ProfilePlan:
    """Shapes to measure for one model over several TP degrees."""

    model: ModelArchitecture
    tps: list[int]
    gemms: list[GemmShape] = field(default_factory=list)
    heads: list[HeadShape] = field(default_factory=list)
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
        if head not in plan.heads:
            plan.heads.append(head)
    plan.gemms = [GemmShape(n, k, dt, tuple(ops)) for (n, k, dt), ops in by_shape.items()]
    return plan
