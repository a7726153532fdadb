"""Weight precision by layer kind: which matmul weights a checkpoint stores how, and the
precision each GEMM computes in on a given GPU.

A run names one weight precision (`--precision`), but quantised checkpoints do not store
every layer in it.  What the public checkpoints do (their ``hf_quant_config.json`` /
``quantization_config``):

* NVIDIA's NVFP4 checkpoints (ModelOpt) keep the LM head in 16 bits (every one of them
  excludes ``lm_head``) and the MoE router (``mlp.gate``) unquantised; a dense model's
  linear layers are all NVFP4 (Llama-3.1-70B, Qwen3).  Some families keep attention in 16
  bits too (`NVFP4_16_BIT_ATTENTION`): DeepSeek-V3/R1 (DeepSeek-V3.1/V3.2-NVFP4) its MLA latent
  projections (``q_a_proj``, ``q_b_proj``, ``kv_a_proj_with_mqa``, ``kv_b_proj``; the output
  projection is NVFP4), Kimi-K2.5-NVFP4 and MiniMax-M2.5-NVFP4 all of ``self_attn``; the
  dense MLPs, the shared and the routed experts are NVFP4 in all of them.
* FP8 checkpoints quantise every linear layer but the LM head and the MoE router: MiniMax-M2.5's
  ``modules_to_not_convert`` names ``gate``, DeepSeek-V3's checkpoint stores its gate in BF16
  without scales, and the engines build the routers unquantised whatever the checkpoint
  (vLLM's DeepSeek-V2/V3, Qwen3-MoE and MiniMax-M2 gates take ``quant_config=None``).
* gpt-oss ships MXFP4 experts and 16-bit everything else (``modules_to_not_convert``:
  self_attn, mlp.router, embed_tokens, lm_head): the model's `expert_precision`.
* Kimi-K2.5 ships INT4 routed experts (compressed-tensors ``pack-quantized``, 4-bit
  symmetric integers with a 16-bit scale per 32 weights, no activation quantisation) and
  16-bit everything else (its ``ignore`` list: lm_head, self_attn, the shared experts and
  the dense layers' MLP): its `expert_precision` too.

Storage decides the bytes (NVFP4 4.5 bits a weight, MXFP4 4.25, INT4 at a group of 32
4.5, block-scaled FP8 its scales; `ModelArchitecture.matmul_weight_bytes`).  The math runs
where the engines' kernels run it (`gemm_math`): NVFP4 on FP4 tensor cores, which only
Blackwell has (elsewhere refused: `validate_precision`); MXFP4 experts with 8-bit (MXFP8)
activations on Blackwell (the engines' W4A8 MoE kernels: TensorRT-LLM's and FlashInfer's
trtllm-gen, aiconfigurator's ``w4a8_mxfp4_mxfp8``) and weight-only elsewhere (W4A16: 4-bit
weights read from memory, dequantised in the kernel, 16-bit math; vLLM's Marlin/Triton and
TensorRT-LLM's Hopper kernels, aiconfigurator's ``w4a16_mxfp4``); INT4 experts weight-only
on every GPU (vLLM runs compressed-tensors W4A16 experts with its Marlin MoE kernel,
``CompressedTensorsWNA16MarlinMoEMethod``, Hopper and Blackwell alike; aiconfigurator's
``int4_wo`` rows time it).
"""

from __future__ import annotations

from dataclasses import dataclass

from estimators._types import ModelArchitecture, Precision
from sku_catalog._types import GpuSku

__all__ = ["WeightPrecisions", "expert_format", "gemm_format", "gemm_kind", "gemm_math"]

_SIXTEEN = (Precision.BF16, Precision.FP16)
# by model_type: the attention weights (`WeightPrecisions` kinds) NVIDIA's NVFP4 checkpoint
# of that family keeps in 16 bits (their hf_quant_config.json / quantization_config ignore
# lists); another model with multi-head latent attention as DeepSeek's
NVFP4_16_BIT_ATTENTION: dict[str, tuple[str, ...]] = {
    "deepseek_v3": ("attention",),
    "kimi_k2": ("attention", "attention_out"),
    "minimax_m2": ("attention", "attention_out"),
}


@dataclass(frozen=True, slots=True)
class WeightPrecisions:
    """Storage precision of each kind of matmul weight of one run."""

    attention: Precision  # QKV projections (MLA: the latent down- and up-projections)
    attention_out: Precision  # the attention output projection
    mlp: Precision  # dense layers' MLPs and shared experts
    router: Precision  # the MoE router (gate)
    experts: Precision  # routed experts
    lm_head: Precision

    @classmethod
    def of(cls, model: ModelArchitecture, precision: Precision) -> WeightPrecisions:
        """The layout of `model`'s checkpoint at weight precision `precision` (module
        docstring); the experts at the model's own `expert_precision` where it has one."""
        p = Precision(precision)
        sixteen = p if p in _SIXTEEN else Precision.BF16
        nvfp4 = p is Precision.FP4
        kept = ()
        if nvfp4:
            mla = ("attention",) if model.is_mla else ()
            kept = NVFP4_16_BIT_ATTENTION.get(model.model_type, mla)
        return cls(
            attention=sixteen if "attention" in kept else p,
            attention_out=sixteen if "attention_out" in kept else p,
            mlp=p,
            router=sixteen,
            experts=model.expert_precision or p,
            lm_head=sixteen,
        )

    def describe(self, model: ModelArchitecture) -> str:
        """"experts mxfp4, attention projections bf16, ..." for the kinds stored apart from
        the weight precision the MLPs hold ("" when every kind shares it)."""
        base = self.mlp
        parts = []
        if model.is_moe and self.experts is not base:
            parts.append(f"experts {self.experts.value}")
        if self.attention is not base:
            out = " and output" if self.attention_out is self.attention else ""
            parts.append(f"attention projections{out} {self.attention.value}")
        if model.is_moe and self.router is not base:
            parts.append(f"router {self.router.value}")
        return ", ".join(parts)


def gemm_math(sku: GpuSku, weight: Precision) -> Precision:
    """The precision a GEMM with `weight` weights computes in on `sku` (module docstring):
    16-bit weights in 16 bits, FP8 in FP8, NVFP4 in FP4, MXFP4 in FP8 on GPUs with FP4
    tensor cores (W4A8) and in 16 bits elsewhere (weight-only), INT4 in 16 bits
    (weight-only) everywhere."""
    w = Precision(weight)
    if w is Precision.MXFP4:
        return Precision.FP8 if sku.fp4_tflops is not None else Precision.BF16
    return Precision.BF16 if w in _SIXTEEN or w is Precision.INT4 else w


def gemm_format(model: ModelArchitecture, math: Precision) -> str:
    """The weight format of `model`'s GEMMs that compute in `math` (FP8 or FP4), as the
    engines' GEMM tables tell them apart and the roofline keeps constants for each: ``fp4``
    (NVFP4, 16-weight blocks with FP8 scales), ``fp8_block`` (a block-scaled FP8
    checkpoint, `ModelArchitecture.weight_scale_block`: 128 x 128 weight blocks, the
    activations quantized per 128-element group, as DeepGEMM and the engines' blockwise
    kernels run them) or ``fp8`` (per-tensor scales, ModelOpt's FP8 checkpoints)."""
    if Precision(math) is Precision.FP4:
        return "fp4"
    return "fp8_block" if model.weight_scale_block else "fp8"


def expert_format(model: ModelArchitecture, experts: Precision, math: Precision) -> str | None:
    """The format of `model`'s routed experts stored in `experts` and computing in `math`,
    as the engines' MoE tables tell them apart and the roofline fits each one's fixed cost
    (``moe_<format>_overhead_us``): ``w4a8`` (MXFP4 weights, 8-bit activations), ``fp4``
    (NVFP4), ``fp8_block`` or ``fp8`` (`gemm_format`); None where the experts compute in
    16 bits (16-bit or weight-only 4-bit weights)."""
    if not Precision(math).low:
        return None
    if Precision(experts) is Precision.MXFP4:
        return "w4a8"
    return gemm_format(model, math)


def gemm_kind(weight: Precision, dense: Precision) -> str:
    """The roofline's operator kind of a dense-layer GEMM with `weight` weights in a run of
    `dense` weights: ``matmul16`` for 16-bit weights a low-precision checkpoint keeps
    (16-bit math), else ``matmul`` (the run's GEMM constants)."""
    return "matmul16" if weight in _SIXTEEN and Precision(dense).low else "matmul"
