"""Model architectures and precisions: the shapes the cost model and memory planner read."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

# fields added after stored fingerprints existed: left out of `fingerprint_fields` while unset
_LATER_FIELDS = (
    "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
    "weight_scale_block", "sliding_window", "sliding_window_layers", "expert_precision",
    "qk_norm", "kv_cache_precision", "int4_group_size",
)  # fmt: skip


class Precision(StrEnum):
    """Storage precision of weights and KV cache for one run."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    FP4 = "fp4"  # NVFP4 weights (Blackwell): 4-bit values, an FP8 scale per 16
    # MXFP4 (OCP microscaling) expert weights, gpt-oss's checkpoint: 4-bit E2M1 values, an
    # E8M0 (power-of-two) scale per 32; an expert precision only (estimators/_weight_precision.py)
    MXFP4 = "mxfp4"
    # INT4 weight-only expert weights, Kimi-K2.5's checkpoint (compressed-tensors W4A16):
    # 4-bit integers, a 16-bit scale per group of `ModelArchitecture.int4_group_size`; an
    # expert precision only, always computed in 16 bits (estimators/_weight_precision.py)
    INT4 = "int4"

    @property
    def bytes(self) -> float:
        """Bytes of one value, scales not counted (`ModelArchitecture.matmul_weight_bytes`)."""
        return _BYTES[self]

    @property
    def low(self) -> bool:
        """FP8 or FP4: GEMMs run on the low-precision tensor cores."""
        return self in (Precision.FP8, Precision.FP4)

    @property
    def four_bit(self) -> bool:
        """NVFP4, MXFP4 or INT4: 4-bit values with block scales."""
        return self in (Precision.FP4, Precision.MXFP4, Precision.INT4)


# the precisions that are formats of routed experts only, never of a run's other weights, and
# the checkpoint that stores its experts so (`validate_precision`, the search spec's check)
EXPERT_ONLY_PRECISIONS: dict[Precision, str] = {
    Precision.MXFP4: "gpt-oss's", Precision.INT4: "Kimi-K2.5's",
}  # fmt: skip

_BYTES = {
    Precision.BF16: 2, Precision.FP16: 2, Precision.FP8: 1, Precision.FP4: 0.5,
    Precision.MXFP4: 0.5, Precision.INT4: 0.5,
}  # fmt: skip
NVFP4_BLOCK = 16  # weights per FP8 (E4M3) scale of an NVFP4 tensor
MXFP4_BLOCK = 32  # weights per E8M0 scale of an MXFP4 tensor
# weights per 16-bit scale of an INT4 weight-only tensor where its checkpoint names no group
# (compressed-tensors' group strategy as Kimi-K2/K2.5 ship it: group_size 32)
INT4_GROUP = 32
# weights per fp32 scale of the common block-scaled FP8 checkpoints (DeepSeek-V3, Qwen3-FP8,
# MiniMax-M2: quantization_config.weight_block_size [128, 128]) and of aiconfigurator's
# fp8_block GEMM rows
FP8_BLOCK_WEIGHTS = 128 * 128


def weight_bytes(
    precision: Precision, fp8_scale_block: int = 0, int4_group: int = INT4_GROUP
) -> float:
    """Bytes per matmul weight at `precision`, its scales included: block-scaled FP8 adds one
    fp32 scale per `fp8_scale_block` weights (128 x 128 blocks: 4 / 16384 B a weight; 0: a
    per-tensor scale); NVFP4 one 1-byte scale per 16 weights (0.5 + 1/16 B a weight, 4.5
    bits; its per-tensor fp32 scale is negligible); MXFP4 one 1-byte E8M0 scale per 32
    (0.5 + 1/32 B, 4.25 bits); INT4 one 16-bit scale per `int4_group` weights (symmetric,
    no zero points: 0.5 + 2/32 B, 4.5 bits, at Kimi-K2.5's group of 32)."""
    if precision is Precision.FP4:
        return precision.bytes + 1.0 / NVFP4_BLOCK
    if precision is Precision.MXFP4:
        return precision.bytes + 1.0 / MXFP4_BLOCK
    if precision is Precision.INT4:
        return precision.bytes + 2.0 / int4_group
    if precision is Precision.FP8 and fp8_scale_block:
        return precision.bytes + 4.0 / fp8_scale_block
    return precision.bytes


@dataclass(frozen=True, slots=True)
class ModelArchitecture:
    """A decoder-only transformer, with the fields of a HuggingFace config.json."""

    name: str  # e.g. "meta-llama/Llama-2-7b-hf"
    num_layers: int  # num_hidden_layers
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int  # width of one MLP branch (gate and up are each this wide)
    vocab_size: int
    hidden_act: str = "silu"
    norm: str = "rmsnorm"  # "rmsnorm" or "layernorm"
    tie_word_embeddings: bool = False
    gated_mlp: bool = True  # SwiGLU-style gate*up; False for a plain up->act->down MLP
    max_position_embeddings: int = 4096
    head_dim_override: int | None = None  # HF "head_dim" where it is not hidden/heads
    attention_bias: bool = False
    parallel_attn_mlp: bool = False  # attention and MLP read the same input (Phi-2, GPT-J)
    # mixture of experts (0 routed experts: a dense model). An MoE layer is a router
    # (hidden -> experts), `num_experts_per_tok` of `num_experts` routed experts of width
    # `moe_intermediate_size` each, and a shared dense MLP of `shared_expert_intermediate_size`
    # (0: none) that every token runs. The first `num_dense_layers` layers (DeepSeek's
    # first_k_dense_replace, Qwen's mlp_only_layers) keep a dense MLP of `intermediate_size`.
    num_experts: int = 0
    num_experts_per_tok: int = 0
    moe_intermediate_size: int = 0
    shared_expert_intermediate_size: int = 0
    num_dense_layers: int = 0
    model_type: str = ""  # config.json's model_type (llama, qwen3, ...): which implementation
    # multi-head latent attention (MLA, DeepSeek-V2/V3; estimators/_mla.py), 0 kv_lora_rank:
    # standard attention. Queries come through a `q_lora_rank` latent (0: projected from the
    # hidden state directly), keys and values through a `kv_lora_rank` latent that is what the
    # KV cache holds, with one shared `qk_rope_head_dim` rotary key; per head, queries and keys
    # have `qk_nope_head_dim + qk_rope_head_dim` dimensions and values `v_head_dim`.
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # block-scaled FP8 checkpoint (quantization_config.weight_block_size, DeepSeek-V3): weights
    # per fp32 scale; 0: per-tensor scales, whose bytes are negligible
    weight_scale_block: int = 0
    # INT4 weight-only experts (`expert_precision` int4): weights per 16-bit scale, from the
    # checkpoint's quantization_config group_size; 0: `INT4_GROUP`
    int4_group_size: int = 0
    # sliding-window attention (gpt-oss, Mistral-7B-v0.1; estimators/_sliding_window.py):
    # `sliding_window_layers` of the layers attend to the last `sliding_window` keys only
    sliding_window: int = 0
    sliding_window_layers: int = 0
    # RMSNorm of the queries and keys before RoPE (estimators/_models.py `_qk_norm`): "head",
    # each head's own (Qwen3); "layer", one over all query heads and one over all key heads
    # (MiniMax-M2's qk_norm_type per_layer), whose fp32 sums of squares the attention's TP
    # ranks all-reduce before they normalize; "": none
    qk_norm: str = ""
    # the routed experts' storage precision where the checkpoint keeps them apart from the
    # other weights (gpt-oss: MXFP4 experts, 16-bit elsewhere; config.json's
    # quantization_config), or set for a run (`--expert-precision`); None: as the others
    expert_precision: Precision | None = None
    # the checkpoint's own weight precision where its config.json quantises the weights as a
    # whole (estimators/_models.py `_weight_precision`: DeepSeek-V3's and MiniMax-M2.5's FP8
    # blocks), None for a 16-bit one: what a run takes unless it sets one (`default_precision`)
    weight_precision: Precision | None = None
    # the KV-cache precision the checkpoint declares for itself (quantization_config's
    # kv_cache_quant_algo: ModelOpt's FP8 and NVFP4 checkpoints declare FP8), None where it
    # declares none: what an engine whose default follows the checkpoint uses at its own
    # weight precision (EngineProfile.kv_precision)
    kv_cache_precision: Precision | None = None

    def fingerprint_fields(self) -> dict[str, Any]:
        """The fields that identify the architecture in stored fingerprints: all of them, less
        the latent-attention and weight-scale ones where unset, so that models fingerprinted
        before those fields existed keep their fingerprints, and less `model_type` (the
        name and shapes identify the model already) and `weight_precision` (a default: the
        run's own precision enters the fingerprint)."""
        fields = asdict(self)
        del fields["model_type"], fields["weight_precision"]
        for name in _LATER_FIELDS:
            if not fields[name]:
                del fields[name]
        for name in ("expert_precision", "kv_cache_precision"):
            if fields.get(name) is not None:
                fields[name] = Precision(fields[name]).value
        return fields

    @property
    def default_precision(self) -> Precision:
        """The weight precision a run of this model takes when it names none: the
        checkpoint's own, as the serving engines load it (16-bit unless quantised)."""
        return self.weight_precision or Precision.BF16

    def matmul_weight_bytes(self, precision: Precision) -> float:
        """Bytes per matmul weight at `precision`, its scales included (`weight_bytes`, with
        this checkpoint's FP8 block and INT4 group)."""
        return weight_bytes(precision, self.weight_scale_block, self.int4_group_size or INT4_GROUP)

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def head_dim(self) -> int:
        return self.head_dim_override or self.hidden_size // self.num_attention_heads

    @property
    def q_size(self) -> int:
        return self.num_attention_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_key_value_heads * self.head_dim

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def num_moe_layers(self) -> int:
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    def mlp_params(self, intermediate: int) -> int:
        """Weights of one MLP (or one expert) of width `intermediate`."""
        return self.hidden_size * intermediate * (3 if self.gated_mlp else 2)

    @property
    def attention_params(self) -> int:
        if self.is_mla:
            return self.mla_attention_params(self.num_attention_heads, 1)
        return self.hidden_size * (self.q_size + 2 * self.kv_size) + self.q_size * self.hidden_size

    def mla_attention_params(self, heads: int, latent_norms: int = 0) -> int:
        """Matmul weights of one MLA attention layer holding `heads` heads: the query and KV
        down-projections (shared by every head, replicated under TP), the up-projections and
        the output projection; `latent_norms` adds the two latent RMSNorms' weights."""
        h = self.hidden_size
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        q = h * self.q_lora_rank + self.q_lora_rank * heads * qk if self.q_lora_rank else (
            h * heads * qk
        )
        kv_down = h * (self.kv_lora_rank + self.qk_rope_head_dim)
        kv_up = self.kv_lora_rank * heads * (self.qk_nope_head_dim + self.v_head_dim)
        norms = latent_norms * (self.q_lora_rank + self.kv_lora_rank)
        return q + kv_down + kv_up + heads * self.v_head_dim * h + norms

    @property
    def params_per_layer(self) -> int:
        """Weights of one dense layer (of a MoE model: one of its dense layers)."""
        return (
            self.attention_params + self.mlp_params(self.intermediate_size) + 2 * self.hidden_size
        )

    def moe_layer_params(self, experts: int) -> int:
        """Weights of one MoE layer holding `experts` routed experts (router included)."""
        return (
            self.attention_params
            + self.hidden_size * self.num_experts  # router
            + experts * self.mlp_params(self.moe_intermediate_size)
            + self.mlp_params(self.shared_expert_intermediate_size)
            + 2 * self.hidden_size
        )

    def _params(self, experts: int) -> int:
        lm_head = 0 if self.tie_word_embeddings else self.embedding_params
        dense_layers = self.num_layers - self.num_moe_layers
        return (
            dense_layers * self.params_per_layer
            + self.num_moe_layers * self.moe_layer_params(experts)
            + self.embedding_params
            + lm_head
        )

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def num_params(self) -> int:
        """All weights (of a MoE model: every expert)."""
        return self._params(self.num_experts)

    @property
    def active_params(self) -> int:
        """Weights one token runs through (of a MoE model: its top-k experts)."""
        return self._params(self.num_experts_per_tok)

    @property
    def kv_elements_per_token_layer(self) -> int:
        """KV-cache elements of one token in one layer (whole model, before TP): K and V of
        every KV head, or of MLA the compressed latent and its rotary key, which every head
        reads."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_size

    def kv_bytes_per_token(self, kv_bytes: int) -> int:
        """KV cache of one token over all layers, in bytes (whole model, before TP/PP)."""
        return self.num_layers * self.kv_elements_per_token_layer * kv_bytes


def resolve_kv_precision(precision: Precision, kv_precision: Precision | None) -> Precision:
    """KV-cache precision: `kv_precision` if given, else the weights' 16-bit type.

    As vLLM's "auto": FP8 and FP4 weights keep a 16-bit KV cache unless FP8 KV is asked for.
    """
    if kv_precision is not None:
        return kv_precision
    return Precision.BF16 if precision.low else precision
