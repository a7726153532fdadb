"""Roofline cost model: FLOPs and bytes per operator against a SKU's peaks.

Each operator of one transformer layer costs

    max(flops / (peak * compute_eff), bytes / (hbm_bw * mem_eff)) + kernel_overhead

where matmul weights are read in full once per iteration.  Matmul compute
efficiency saturates with the token count ``M``::

    compute_eff(M) = eff_max * M / (M + m_half)

so the compute time is ``flops_per_token * (M + m_half) / (peak * eff_max)``: a
matmul of M tokens costs as much as an ideal one of ``M + m_half`` tokens (tile
padding, launch ramp).

Prefill attention is counted in query-key pairs: a pair against the cached
context costs ``4 * heads * head_dim / (peak * eff_max)``; a pair of the causal
(diagonal) part of a chunk costs ``causal_factor`` times that; each query token
adds ``query_pairs`` pair-equivalents and each context token of a chunk
``ctx_pairs`` (tile ramp, KV reads)::

    t = (context_pairs + causal_factor * diag_pairs + ctx_pairs * ctx + query_pairs * q)
        * 4 * heads * head_dim / (peak * eff_max) + overhead

with ``diag_pairs = sum q (q + 1) / 2`` estimated from the batch aggregates as if its
chunks were of equal length.  Decode attention is a read of the KV cache.

Communication follows a ring model:
``2 (n - 1) / n * bytes / (link_bw * bw_eff) + latency`` for an all-reduce,
``bytes / (link_bw * bw_eff) + latency`` for a point-to-point send.

The efficiency and overhead constants are fitted per GPU architecture family
against measured operator tables (``benchmarks/validate_roofline.py --fit``) and
stored in ``estimators/data/roofline.yaml``; SKUs of families without data use the
defaults there.  Engines with their own layer there (``engines.<engine>``: vLLM,
SGLang, TensorRT-LLM, fitted to aiconfigurator's GEMM and attention tables by
``benchmarks/fit_roofline_aic.py``) refine each level for deployments they run;
``vidur`` and deployments without an engine profile never see that layer.
`roofline_table` swaps the whole table for a block of code (leave-one-out folds).

Speed: everything shape-dependent is precomputed in ``__init__``; the token-level
part of an iteration is cached on ``(num_tokens, num_seqs)`` and the attention
terms are a few float operations, so a cache hit costs a few microseconds.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields, replace
from importlib import resources
from typing import Any

import numpy as np
import yaml

from estimators._attention_dp import busiest_rank
from estimators._contract import (
    BatchCost,
    BatchShape,
    DecodeStepCost,
    PipelineStepCost,
    priced_decode_steps,
    priced_pipeline_decode_steps,
)
from estimators._engines import EngineProfile
from estimators._moe import MoeShape, all_to_all_seconds, dispatch_ranks
from estimators._sliding_window import windowed_attention
from estimators._types import ModelArchitecture, Precision, resolve_kv_precision
from estimators._weight_precision import (
    WeightPrecisions,
    expert_format,
    gemm_format,
    gemm_kind,
    gemm_math,
)
from sku_catalog._types import GpuSku, LinkKind, NodeShape

__all__ = [
    "OPERATOR_NAMES",
    "AttentionRows",
    "RooflineConstants",
    "RooflineEstimator",
    "TokenOp",
    "attention_seconds",
    "constants_from_table",
    "load_roofline_constants",
    "roofline_table",
]

# Vidur's operator names, in the order of one layer's forward pass.
OPERATOR_NAMES: tuple[str, ...] = (
    "emb",
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_prefill",
    "attn_decode",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
    "all_reduce",
    "send_recv",
)

_ACT_BYTES = 2  # activations stay in 16-bit, also under FP8 weights
_EMB_BYTES = 2  # embedding and LM head stay in 16-bit, also under FP8 weights
_CACHE_LIMIT = 1 << 18  # entries of the token-level cache before it is cleared

# cached token-level part: (stage base seconds, pp hop, cpu overhead, flops, bytes)
_Entry = tuple[tuple[float, ...], float, float, float, float]


def _at_least(stages: tuple[float, ...], floor: float) -> tuple[float, ...]:
    """Each stage's seconds, no fewer than `floor`."""
    return tuple([s if s > floor else floor for s in stages])


def _add_to_stages(base: tuple[float, ...], a: float) -> tuple[float, ...]:
    """`base` with `a` added to each stage's time, as `batch_cost` adds attention."""
    return tuple([b + a for b in base])


# the same for two and four stages, written out: a third of the time, on the hot path
_ADD_TO_STAGES = {
    2: lambda base, a: (base[0] + a, base[1] + a),
    4: lambda base, a: (base[0] + a, base[1] + a, base[2] + a, base[3] + a),
}


def _priced_run(est: Any, nd: int, dkv: int, every_stage: bool) -> Iterator[tuple]:
    """`batch_cost`'s decode steps, as `pipeline_decode_steps` yields them or, without
    `every_stage`, as `decode_steps` does."""
    if every_stage:
        return priced_pipeline_decode_steps(est, nd, dkv)
    return priced_decode_steps(est, nd, dkv)


# --------------------------------------------------------------------------- constants


@dataclass(frozen=True, slots=True)
class RooflineConstants:
    """Fitted efficiencies and overheads of one GPU family (see data/roofline.yaml).

    Field names are ``<group>_<key>`` of the YAML file's nested groups.
    Efficiencies are fractions of the SKU's nominal peak / bandwidth.
    """

    # GEMMs (projections, LM head)
    matmul_eff_max: float = 0.72  # plateau fraction of the tensor-core peak
    matmul_m_half: float = 24.0  # tokens at which compute efficiency is half the plateau
    matmul_mem_eff: float = 0.78  # fraction of HBM bandwidth when weight-read bound
    matmul_overhead_us: float = 4.0  # per-kernel fixed cost
    # FP8 GEMMs (against the FP8 tensor peak, 1-byte weights); 0: as the 16-bit ones
    matmul_fp8_eff_max: float = 0.0
    matmul_fp8_m_half: float = 0.0
    matmul_fp8_mem_eff: float = 0.0
    matmul_fp8_overhead_us: float = 0.0
    # FP8 GEMMs of block-scaled checkpoints (128 x 128 weight blocks, 1 x 128 activation
    # groups: DeepSeek-V3, MiniMax-M2, Qwen3 FP8) and NVFP4 GEMMs (against the FP4 tensor
    # peak, 4.5-bit weights), each fitted to its engine's own rows of that format; 0: as the
    # per-tensor FP8 ones (`gemm_format`)
    matmul_fp8_block_eff_max: float = 0.0
    matmul_fp8_block_m_half: float = 0.0
    matmul_fp8_block_mem_eff: float = 0.0
    matmul_fp8_block_overhead_us: float = 0.0
    # FlashInfer's groupwise kernel for block-scaled FP8 GEMMs (an engine's `fp8_block_gemm`),
    # fitted to a public benchmark of it (benchmarks/fit_flashinfer_fp8_gemm.py); 0: as the
    # fp8_block ones
    matmul_fp8_block_flashinfer_eff_max: float = 0.0
    matmul_fp8_block_flashinfer_m_half: float = 0.0
    matmul_fp8_block_flashinfer_mem_eff: float = 0.0
    matmul_fp8_block_flashinfer_overhead_us: float = 0.0
    matmul_fp4_eff_max: float = 0.0
    matmul_fp4_m_half: float = 0.0
    matmul_fp4_mem_eff: float = 0.0
    matmul_fp4_overhead_us: float = 0.0
    # weight-only GEMMs of 4-bit weights in 16-bit math (MXFP4 experts on GPUs without FP4
    # tensor cores): weight elements the kernel unpacks and scales per second, in 1e12, a
    # third bound beside compute and the weight read; 0: not bounded
    matmul_dequant_tera_per_s: float = 0.0
    # rows of the kernel's M tile: each tile of a group's rows unpacks the group's weights
    # again (a CTA dequantizes the weight tile it multiplies); 0: once per weight
    matmul_dequant_tile_rows: float = 0.0
    # fixed cost of one MoE layer's weight-only routed experts beyond their GEMM kernels'
    # own (routing, permutation and finalization kernels), microseconds
    matmul_dequant_overhead_us: float = 0.0
    # fixed cost of one MoE layer's routed experts in low precision, microseconds, by the
    # experts' format (`expert_format`): the engine's fused MoE kernels' own (routing,
    # permutation, the grouped GEMMs' launches, their activation quantization,
    # finalization), fitted to its MoE table's rows of that format, in place of the two
    # dense GEMMs' fixed costs and the activation's; 0: not fitted, those
    moe_fp8_overhead_us: float = 0.0
    moe_fp8_block_overhead_us: float = 0.0
    moe_fp4_overhead_us: float = 0.0
    moe_w4a8_overhead_us: float = 0.0
    # and what that fixed cost adds, microseconds, per expert the GPU holds (kernels that
    # walk every local expert whether or not it receives rows: the grouped GEMM's problem
    # list, per-expert offsets and scale pointers; the MoE tables measure it as the fixed
    # cost shrinking with expert parallelism, TensorRT-LLM's Hopper CUTLASS block-scaled
    # FP8 experts about 46 us at 128 experts a GPU, 26 at 32) and per expert of the model
    # (routing and permutation over all of them, on every GPU); 0: not fitted
    moe_fp8_per_local_expert_us: float = 0.0
    moe_fp8_block_per_local_expert_us: float = 0.0
    moe_fp4_per_local_expert_us: float = 0.0
    moe_w4a8_per_local_expert_us: float = 0.0
    moe_fp8_per_routed_expert_us: float = 0.0
    moe_fp8_block_per_routed_expert_us: float = 0.0
    moe_fp4_per_routed_expert_us: float = 0.0
    moe_w4a8_per_routed_expert_us: float = 0.0
    # memory-bound elementwise kernels: fraction of HBM bandwidth each reaches
    elementwise_norm_mem_eff: float = 0.35
    elementwise_rope_mem_eff: float = 0.45
    elementwise_act_mem_eff: float = 0.5
    elementwise_add_mem_eff: float = 0.8
    elementwise_emb_mem_eff: float = 0.15
    elementwise_overhead_us: float = 4.0
    # attention (FlashAttention / paged decode)
    attention_prefill_eff_max: float = 0.6  # fraction of the 16-bit tensor peak, context pairs
    attention_prefill_causal_factor: float = 2.0  # causal (diagonal) pair cost / context pair
    attention_prefill_query_pairs: float = 1000.0  # pair-equivalents per query token
    attention_prefill_ctx_pairs: float = 100.0  # pair-equivalents per context token of a chunk
    attention_decode_mem_eff: float = 0.8  # fraction of HBM bandwidth reading the KV cache
    attention_decode_seq_kv: float = 0.0  # KV-token reads each decode sequence adds (its work
    # split, block table, partial-result merge), on top of its KV length
    attention_overhead_us: float = 12.0  # per attention kernel (prefill or decode)
    # NCCL all-reduce inside a node (ring model)
    allreduce_bw_eff: float = 0.85
    allreduce_latency_us: float = 30.0
    # MoE all-to-all (estimators/_moe.py) of an engine without its own fitted line
    # (engines.yaml all_to_all): the geometric mean of the vLLM, SGLang and TensorRT-LLM
    # lines on Hopper and Blackwell (benchmarks/fit_engine_all_to_all.py, 2026-11-24)
    alltoall_bw_eff: float = 0.347
    alltoall_latency_us: float = 39.0
    # point-to-point activation send between pipeline stages
    p2p_bw_eff: float = 1.0
    p2p_latency_us: float = 8.0
    p2p_inter_bw_eff: float = 0.6
    p2p_inter_latency_us: float = 20.0
    # links
    link_pcie_gbps: float = 25.0  # GB/s per GPU beyond the NVLink pair of a pairwise node
    # PCIe-only nodes (no table to fit: assumed fractions of the catalog's PCIe rate)
    allreduce_pcie_bw_eff: float = 0.6
    p2p_pcie_bw_eff: float = 0.8
    # host: scheduling, input preparation, sampling, output processing per iteration
    cpu_base_ms: float = 0.8
    cpu_per_seq_ms: float = 0.035

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    def with_values(self, values: Mapping[str, float]) -> RooflineConstants:
        unknown = sorted(set(values) - set(self.field_names()))
        if unknown:
            raise ValueError(
                f"unknown roofline constant(s) {unknown}; known: {list(self.field_names())}"
            )
        return replace(self, **{k: float(v) for k, v in values.items()})

    def to_nested(self) -> dict[str, dict[str, float]]:
        """The YAML form: ``{group: {key: value}}``."""
        out: dict[str, dict[str, float]] = {}
        for name in self.field_names():
            group, key = name.split("_", 1)
            out.setdefault(group, {})[key] = getattr(self, name)
        return out


def _flatten(nested: Mapping[str, Any], where: str) -> dict[str, float]:
    flat: dict[str, float] = {}
    for group, body in (nested or {}).items():
        if not isinstance(body, Mapping):
            raise ValueError(f"roofline.yaml {where}.{group}: expected a mapping, got {body!r}")
        for key, value in body.items():
            flat[f"{group}_{key}"] = float(value)
    return flat


def packaged_roofline_table() -> dict[str, Any]:
    """The packaged constants table (estimators/data/roofline.yaml) as a nested mapping:
    the base that `roofline_table` overrides and the calibration scripts refit."""
    return _roofline_yaml()


@functools.cache
def _data_yaml(name: str) -> dict[str, Any]:
    """estimators/data/`name` as a mapping."""
    text = resources.files("estimators").joinpath(f"data/{name}").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(f"estimators/data/{name}: expected a mapping at the top level")
    return data


def _roofline_yaml() -> dict[str, Any]:
    return _data_yaml("roofline.yaml")


def kernel_constants(architecture: str) -> dict[str, float]:
    """The matmul constants of the GEMM kernels an engine may run in place of its tables'
    (data/gemm_kernels.yaml: ``kernels.<format>_<kernel>.<family>``) for a GPU family, as
    ``matmul_<format>_<kernel>_*`` fields; {} where none was measured on it."""
    flat: dict[str, float] = {}
    for kernel, families in (_data_yaml("gemm_kernels.yaml").get("kernels") or {}).items():
        body = (families or {}).get(architecture.lower()) or {}
        flat |= _flatten({"matmul": {f"{kernel}_{k}": v for k, v in body.items()}}, kernel)
    return flat


def _layers(data: Mapping[str, Any], architecture: str, sku_id: str, engine: str | None):
    """(where, nested constants) in lookup order: each level (defaults, family, SKU) of the
    base table, each refined by the engine's own layer at that level when it has one."""
    family = architecture.lower()
    eng = ((data.get("engines", {}) or {}).get(engine) or {}) if engine else {}
    yield "defaults", data.get("defaults", {})
    yield f"engines.{engine}.defaults", eng.get("defaults")
    yield f"families.{family}", (data.get("families", {}) or {}).get(family)
    yield f"engines.{engine}.families.{family}", (eng.get("families", {}) or {}).get(family)
    yield f"skus.{sku_id}", (data.get("skus", {}) or {}).get(sku_id)
    yield f"engines.{engine}.skus.{sku_id}", (eng.get("skus", {}) or {}).get(sku_id)


def constants_from_table(
    data: Mapping[str, Any], architecture: str, sku_id: str, engine: str | None = None
) -> RooflineConstants:
    """The constants of (family, SKU, engine) in a table of roofline.yaml's form, and the
    family's GEMM-kernel constants (`kernel_constants`), which no table layer sets: a refit
    writing the defaults in full (zeros for those fields) leaves them in place."""
    consts = RooflineConstants()
    for where, nested in _layers(data, architecture, sku_id, engine):
        if nested:
            consts = consts.with_values(_flatten(nested, where))
    return consts.with_values(kernel_constants(architecture))


@functools.cache
def _constants_for(architecture: str, sku_id: str, engine: str | None = None) -> RooflineConstants:
    return constants_from_table(_roofline_yaml(), architecture, sku_id, engine)


# the table `roofline_table` put in place of roofline.yaml (None: the packaged one), and the
# constants looked up in it so far
_override: list[Mapping[str, Any] | None] = [None]
_override_cache: dict[tuple[str, str, str | None], RooflineConstants] = {}


@contextlib.contextmanager
def roofline_table(data: Mapping[str, Any] | None) -> Iterator[None]:
    """Estimators built inside the block read their constants from `data` (roofline.yaml's
    form) instead of the packaged table; None keeps the packaged one."""
    before = _override[0]
    _override[0] = data
    _override_cache.clear()
    try:
        yield
    finally:
        _override[0] = before
        _override_cache.clear()


def load_roofline_constants(sku: GpuSku, engine: str | None = None) -> RooflineConstants:
    """Constants for `sku` run by `engine` (an engine profile's name; None: none): defaults,
    its architecture family, SKU overrides, each refined by the engine's layer."""
    arch = sku.architecture or ""
    data = _override[0]
    if data is None:
        return _constants_for(arch, sku.id, engine)
    key = (arch, sku.id, engine)
    hit = _override_cache.get(key)
    if hit is None:
        hit = _override_cache[key] = constants_from_table(data, arch, sku.id, engine)
    return hit


# --------------------------------------------------------------------------- operators


# the weight formats of low-precision GEMMs (estimators/_weight_precision.py `gemm_format`),
# each the prefix of its matmul constants in RooflineConstants (matmul_<format>_eff_max ...)
GEMM_FORMATS = ("fp8", "fp8_block", "fp4")

# op kinds an engine may run inside another kernel (`fused_residual_adds`), and the suffix of the
# kind they then take (its bytes at the kind's rate, no fixed cost of its own)
_FUSABLE_KINDS = ("add",)
_FUSED = "_fused"


@dataclass(frozen=True, slots=True)
class TokenOp:
    """A token-level operator of one layer (or of the first/last stage), per GPU.

    Its cost for M tokens: ``flops = flops_per_token * M`` and
    ``bytes = fixed_bytes + bytes_per_token * M``; `kind` picks the efficiency
    constants (``matmul`` or an elementwise kind: norm, rope, act, add, emb; ``add_fused``
    where the engine runs the add inside another kernel, `fused_residual_adds`).
    `count` kernels of this shape run per layer (two residual adds).
    """

    name: str
    kind: str
    flops_per_token: float
    fixed_bytes: float
    bytes_per_token: float
    count: int = 1


@dataclass(frozen=True, slots=True)
class _Coeffs:
    """Constants folded with the SKU's peaks: seconds per FLOP / per byte."""

    sec_per_flop: float  # matmul: 1 / (peak * eff_max)
    m_half: float
    sec_per_byte: dict[str, float]  # by op kind: 1 / (bw * mem_eff)
    overhead: dict[str, float]  # by op kind, seconds
    # the 16-bit GEMM constants for ``matmul16`` ops (16-bit weights a low-precision
    # checkpoint keeps: estimators/_weight_precision.py); None: as ``matmul``
    math16: _Coeffs | None = None
    # seconds per weight element a weight-only kernel dequantizes (0: not bounded), and
    # the rows of its M tile, each of which dequantizes the weights again (0: once)
    sec_per_weight_elem: float = 0.0
    dequant_tile_rows: float = 0.0
    # seconds an MoE layer's routed experts add beyond their GEMMs' own: weight-only ones
    # (`weight_only_coeffs`), or low-precision ones' fitted fixed cost (`expert_coeffs`),
    # and the seconds that cost adds per expert the GPU holds and per expert of the model
    experts_overhead: float = 0.0
    experts_overhead_per_local: float = 0.0
    experts_overhead_per_routed: float = 0.0

    def experts_fixed(self, moe: MoeShape) -> float:
        """Seconds the routed experts of `moe` pay beyond their GEMMs' own."""
        return (
            self.experts_overhead
            + self.experts_overhead_per_local * moe.local_experts
            + self.experts_overhead_per_routed * moe.num_experts
        )


def _coeffs(
    consts: RooflineConstants,
    peak: float,
    bw: float,
    fp8: bool = False,
    fp8_quant_fused: bool = False,
    math16: _Coeffs | None = None,
    gemm_format: str = "fp8",
    gemm_kernel: str = "",
) -> _Coeffs:
    """`fp8`: the GEMMs run in low precision, `gemm_format` (`GEMM_FORMATS`) saying which:
    its own matmul constants where fitted, else the per-tensor FP8 ones, else the 16-bit;
    `gemm_kernel` names a kernel of that format with constants of its own
    (``matmul_<format>_<kernel>_*``, e.g. the engine's `fp8_block_gemm`), where fitted.

    The FP8 constants are fitted to tables that time an engine's FP8 linear layer from a
    16-bit input: the GEMM and the quantization of its input.  The GEMM kernel alone has
    the fixed cost of a 16-bit one (timed in CUDA graphs on H100 and H200, llmcap's op
    tables: 4.3-4.8 us over the weight-read time for FP8, 3.9-5.5 us for 16-bit, against
    the 11-17 us the fitted `fp8_overhead_us` holds), so with `fp8_quant_fused` (the
    engine quantizes inside the kernel before the GEMM) the GEMM keeps the 16-bit fixed
    cost."""
    c = consts
    eff, m_half, mem_eff, ovh = (
        c.matmul_eff_max, c.matmul_m_half, c.matmul_mem_eff, c.matmul_overhead_us
    )  # fmt: skip
    if fp8:
        low_ovh = 0.0
        # per-tensor FP8, then the format's own, then its kernel's
        kernel = (f"{gemm_format}_{gemm_kernel}",) if gemm_kernel else ()
        for prefix in dict.fromkeys(("fp8", gemm_format, *kernel)):
            eff = getattr(c, f"matmul_{prefix}_eff_max") or eff
            m_half = getattr(c, f"matmul_{prefix}_m_half") or m_half
            mem_eff = getattr(c, f"matmul_{prefix}_mem_eff") or mem_eff
            low_ovh = getattr(c, f"matmul_{prefix}_overhead_us") or low_ovh
        if not fp8_quant_fused:
            ovh = low_ovh or ovh
    sec_per_byte = {
        "matmul": 1.0 / (bw * mem_eff),
        "norm": 1.0 / (bw * c.elementwise_norm_mem_eff),
        "rope": 1.0 / (bw * c.elementwise_rope_mem_eff),
        "act": 1.0 / (bw * c.elementwise_act_mem_eff),
        "add": 1.0 / (bw * c.elementwise_add_mem_eff),
        "emb": 1.0 / (bw * c.elementwise_emb_mem_eff),
    }
    overhead = {"matmul": ovh * 1e-6} | {
        kind: c.elementwise_overhead_us * 1e-6 for kind in sec_per_byte if kind != "matmul"
    }
    for kind in _FUSABLE_KINDS:  # run inside another kernel: its traffic, no launch
        sec_per_byte[kind + _FUSED] = sec_per_byte[kind]
        overhead[kind + _FUSED] = 0.0
    return _Coeffs(
        sec_per_flop=1.0 / (peak * eff),
        m_half=m_half,
        sec_per_byte=sec_per_byte,
        overhead=overhead,
        math16=math16,
    )


def fused_residual_adds(ops: list[TokenOp], engine: EngineProfile | None) -> list[TokenOp]:
    """A layer's `ops` with its residual adds where the engine runs them
    (`EngineProfile.fused_residual_add`): inside the RMSNorm kernel after them, where an add
    keeps its memory traffic and launches no kernel of its own, so it loses the elementwise
    fixed cost."""
    if engine is None or not engine.fused_residual_add:
        return ops
    return [replace(op, kind=op.kind + _FUSED) if op.name == "add" else op for op in ops]


def fused_shared_experts(
    model: ModelArchitecture, engine: EngineProfile | None, ep: int, kernel: str
) -> int:
    """How many experts every token adds to the routed experts' kernel `kernel` where the
    engine fuses the model's shared experts into it (`EngineProfile.fuses_shared_experts`):
    the shared MLP counted in experts of the routed experts' width, 0 where it runs on its
    own (no such engine rule, expert parallelism, a kernel that does not fuse, or a width
    the kernel's experts do not share)."""
    shared, width = model.shared_expert_intermediate_size, model.moe_intermediate_size
    if not shared or engine is None:
        return 0
    if not engine.fuses_shared_experts(model.model_type, ep, kernel):
        return 0
    return shared // width if shared % width == 0 else 0


def expert_coeffs(
    c: RooflineConstants,
    sku: GpuSku,
    math: Precision,
    fmt: str | None,
    fp8_quant_fused: bool = False,
) -> _Coeffs:
    """The routed experts' coefficients: their GEMMs in `math` against its tensor peak, with
    the FP8 constants in low precision (the per-format ones, `gemm_format`, are fitted to
    dense GEMMs, and a grouped GEMM pays their M floor once per expert).  In low precision,
    where `c` has a fixed cost fitted to the engine's MoE table for expert format `fmt`
    (``moe_<fmt>_overhead_us``, `expert_format`, with ``moe_<fmt>_per_local_expert_us`` for
    each expert the GPU holds and ``moe_<fmt>_per_routed_expert_us`` for each of the
    model's), the experts pay it in place of the two
    GEMMs' and the activation's own fixed costs: a dense GEMM's fitted fixed cost includes
    the kernel that quantizes its input, which the fused MoE kernels do not launch apart."""
    k = _coeffs(
        c, sku.peak_flops(fp8=math is Precision.FP8, fp4=math is Precision.FP4),
        sku.memory_bandwidth_bytes, fp8=math.low, fp8_quant_fused=fp8_quant_fused,
    )  # fmt: skip
    if not fmt:
        return k
    fixed, per_local, per_routed = (getattr(c, name) * 1e-6 for name in moe_overhead_terms(fmt))
    if not fixed:
        return k
    overhead = {**k.overhead, "matmul": 0.0, "act": 0.0}
    return replace(
        k, overhead=overhead, experts_overhead=fixed,
        experts_overhead_per_local=per_local, experts_overhead_per_routed=per_routed,
    )  # fmt: skip


def moe_overhead_terms(fmt: str) -> tuple[str, str, str]:
    """The `RooflineConstants` of expert format `fmt`'s fixed cost and its shares per expert
    the GPU holds and per expert of the model (`expert_coeffs`)."""
    return (f"moe_{fmt}_overhead_us", f"moe_{fmt}_per_local_expert_us",
            f"moe_{fmt}_per_routed_expert_us")  # fmt: skip


def weight_only_coeffs(k: _Coeffs, c: RooflineConstants) -> _Coeffs:
    """`k` for weight-only kernels (4-bit weights in 16-bit math): with the constants'
    unpacking rate (0: not bounded), M tile and the experts' fixed cost."""
    rate = c.matmul_dequant_tera_per_s
    return replace(
        k,
        sec_per_weight_elem=1e-12 / rate if rate else 0.0,
        dequant_tile_rows=c.matmul_dequant_tile_rows,
        experts_overhead=c.matmul_dequant_overhead_us * 1e-6,
    )


def _entry_key(nt: int, ns: int, moe_nt: int, shared_beside: bool) -> int:
    """`RooflineEstimator._cache`'s key of a batch's token-level part."""
    return (shared_beside << 72) | (moe_nt << 48) | (nt << 24) | ns


def _token_op_time(op: TokenOp, m: Any, k: _Coeffs) -> Any:
    """Seconds of `op` for `m` tokens (a float, or a numpy array of token counts)."""
    kind = op.kind
    if kind == "matmul16":  # a 16-bit GEMM of a low-precision run: the 16-bit constants
        k = k.math16 or k
        kind = "matmul"
    mem = (op.fixed_bytes + op.bytes_per_token * m) * k.sec_per_byte[kind]
    if kind == "matmul":
        comp = op.flops_per_token * (m + k.m_half) * k.sec_per_flop
        t = np.maximum(comp, mem) if isinstance(m, np.ndarray) else max(comp, mem)
    else:
        t = mem
    return (t + k.overhead[kind]) * op.count


def routed_experts_part(
    moe: MoeShape, rows: float, groups: float, weight_bytes: float, k: _Coeffs
) -> tuple[float, float, float]:
    """(seconds, flops, bytes) of an MoE layer's routed experts on one GPU: its grouped
    GEMMs (`moe.gemm_shapes`) of `rows` token rows over `groups` experts, and the
    activation between them.  A GEMM is bound by its compute (each group's tile floor,
    m_half rows, included), its weight and activation reads, or, for weight-only kernels,
    the unpacking of its weights (`_Coeffs.sec_per_weight_elem`), repeated for each M tile
    of a group's rows (`_Coeffs.dequant_tile_rows`); weight-only experts also pay their
    kernels' fixed cost (`_Coeffs.experts_overhead`); low-precision experts with a fitted
    fixed cost pay it, with its shares per expert, in place of their GEMMs' own
    (`expert_coeffs`)."""
    t = k.experts_fixed(moe)
    fl = by = 0.0
    # seconds per element of one expert's weight matrix, over all groups and their M tiles
    unpacked = groups * k.sec_per_weight_elem
    if k.dequant_tile_rows and groups:
        unpacked *= math.ceil(rows / groups / k.dequant_tile_rows - 1e-9)
    for _, n, kdim in moe.gemm_shapes():
        flops = 2.0 * n * kdim
        nbytes = groups * n * kdim * weight_bytes + rows * (n + kdim) * _ACT_BYTES
        comp = flops * (rows + groups * k.m_half) * k.sec_per_flop
        unpack = n * kdim * unpacked
        t += max(comp, nbytes * k.sec_per_byte["matmul"], unpack) + k.overhead["matmul"]
        fl += flops * rows
        by += nbytes
    act = rows * 3 * moe.width * _ACT_BYTES
    t += act * k.sec_per_byte["act"] + k.overhead["act"]
    return t, fl, by + act


def _ring_allreduce(nbytes: Any, n: int, link_bw: float, eff: float, latency: float) -> Any:
    if n <= 1:
        return 0.0 * nbytes
    return 2.0 * (n - 1) / n * nbytes / (link_bw * eff) + latency


def fastest_allreduce(
    nbytes: Any, n: Any, link_bw: float, lines: tuple[tuple[float, float], ...]
) -> Any:
    """Seconds of an all-reduce of `nbytes` over `n` >= 2 GPUs (numbers or numpy arrays)
    run by the fastest of an engine's algorithms, each a ring line (bw_eff, latency s)."""
    ring = 2.0 * (n - 1) / n * nbytes
    eff, latency = lines[0]
    t = ring / (link_bw * eff) + latency
    for eff, latency in lines[1:]:
        t = np.minimum(t, ring / (link_bw * eff) + latency)
    return t


def _ring_allgather(nbytes: Any, n: int, link_bw: float, eff: float, latency: float) -> Any:
    if n <= 1:
        return 0.0 * nbytes
    return (n - 1) / n * nbytes / (link_bw * eff) + latency


def tp_link(node: NodeShape, tp: int, consts: RooflineConstants) -> tuple[float, float]:
    """(bytes/s per GPU, efficiency) of the link the TP group's all-reduce runs over."""
    if node.intra_node_link is LinkKind.PCIE:
        return node.intra_node_bandwidth_gbps * 1e9, consts.allreduce_pcie_bw_eff
    if node.intra_node_link is LinkKind.NVLINK_PAIRWISE and tp > 2:
        return consts.link_pcie_gbps * 1e9, consts.allreduce_bw_eff  # ring leaves the pair
    return node.intra_node_bandwidth_gbps * 1e9, consts.allreduce_bw_eff


def pp_link(
    node: NodeShape, tp: int, pp: int, consts: RooflineConstants
) -> tuple[float, float, float]:
    """(bytes/s, efficiency, latency seconds) of the link between pipeline stages."""
    if tp * pp > node.gpus_per_node:
        return (
            node.inter_node_bandwidth_gbps * 1e9,
            consts.p2p_inter_bw_eff,
            consts.p2p_inter_latency_us * 1e-6,
        )
    lat = consts.p2p_latency_us * 1e-6
    if node.intra_node_link is LinkKind.PCIE:
        return node.intra_node_bandwidth_gbps * 1e9, consts.p2p_pcie_bw_eff, lat
    if node.intra_node_link is LinkKind.NVLINK_PAIRWISE and not (tp == 1 and pp <= 2):
        return consts.link_pcie_gbps * 1e9, consts.p2p_pcie_bw_eff, lat  # across NVLink pairs
    return node.intra_node_bandwidth_gbps * 1e9, consts.p2p_bw_eff, lat


@dataclass(frozen=True, slots=True)
class AttentionRows:
    """Attention kernels of one layer on one GPU, as arrays (one row per measurement):
    per-GPU head shape, and the batch as the estimator's hooks see it."""

    heads: np.ndarray
    kv_heads: np.ndarray
    head_dim: np.ndarray
    kv_bytes: float
    num_prefill_tokens: np.ndarray  # prefill rows (0 on decode rows)
    num_prefills: np.ndarray
    prefill_attn_pairs: np.ndarray
    prefill_kv_tokens: np.ndarray
    num_decodes: np.ndarray  # decode rows (0 on prefill rows)
    decode_kv_tokens: np.ndarray


def attention_seconds(
    rows: AttentionRows, c: RooflineConstants, attn_peak: float, hbm_bw: float
) -> np.ndarray:
    """Seconds of each row: the vectorised twin of `RooflineEstimator._prefill_attn` and
    `_decode_attn` (tests hold them equal), for fitting the attention constants."""
    hd = rows.head_dim
    flops_per_pair = 4.0 * rows.heads * hd
    kv_row = 2.0 * rows.kv_heads * hd * rows.kv_bytes
    q_row2 = 2.0 * rows.heads * hd * _ACT_BYTES
    sec_per_pair = flops_per_pair / (attn_peak * c.attention_prefill_eff_max)
    sec_per_byte = 1.0 / (hbm_bw * c.attention_decode_mem_eff)
    ovh = c.attention_overhead_us * 1e-6
    npt = rows.num_prefill_tokens
    npf = np.maximum(rows.num_prefills, 1)
    pairs, kvt = rows.prefill_attn_pairs, rows.prefill_kv_tokens
    diag = np.minimum(0.5 * (npt * npt / npf + npt), pairs)
    comp = sec_per_pair * (
        pairs
        + (c.attention_prefill_causal_factor - 1.0) * diag
        + c.attention_prefill_ctx_pairs * (kvt - npt)
        + c.attention_prefill_query_pairs * npt
    )
    mem = (kvt * kv_row + npt * q_row2) * sec_per_byte
    prefill = np.where(npt > 0, np.maximum(comp, mem) + ovh, 0.0)
    nd, dkv = rows.num_decodes, rows.decode_kv_tokens
    dmem = ((dkv + c.attention_decode_seq_kv * nd) * kv_row + nd * q_row2) * sec_per_byte
    decode = np.where(nd > 0, np.maximum(sec_per_pair * dkv, dmem) + ovh, 0.0)
    return prefill + decode


# --------------------------------------------------------------------------- estimator


class RooflineEstimator:
    """Roofline `ExecutionTimeEstimator` for one deployment (model, SKU, TP, PP, precision).

    ``batch_cost`` answers the simulator's per-iteration question; ``operator_times``
    breaks one layer down by Vidur operator for validation.
    """

    backend_name = "roofline"
    selection_note = ""  # why this backend was chosen, when `auto` chose it
    # a measured routed-experts curve used above a token count (`use_measured_experts`)
    _measured_experts: tuple[Any, float, str] | None = None

    def __init__(
        self,
        model: ModelArchitecture,
        sku: GpuSku,
        tp: int = 1,
        pp: int = 1,
        precision: Precision = Precision.BF16,
        kv_precision: Precision | None = None,
        node: NodeShape | None = None,
        constants: RooflineConstants | None = None,
        engine: EngineProfile | None = None,
        ep: int = 1,
        dp: int = 1,
    ) -> None:
        from estimators._memory import select_node, validate_parallelism, validate_precision

        validate_parallelism(model, tp, pp, sku, node=node, ep=ep, dp=dp)
        validate_precision(sku, precision, kv_precision, model.expert_precision)
        self.ep = ep
        # attention data parallelism: `batch_cost` prices the busiest of `dp` ranks
        # (estimators/_attention_dp.py); the experts take every rank's tokens
        self.dp = dp
        node = node or select_node(sku, tp, pp * dp)
        self.model = model
        self.sku = sku
        self.tp = tp
        self.pp = pp
        self.precision = Precision(precision)
        self.kv_precision = resolve_kv_precision(self.precision, kv_precision)
        self.node = node
        self.engine = engine
        consts = constants or load_roofline_constants(sku, engine.name if engine else None)
        family = sku.family
        ar_large = None
        if engine is not None and family in engine.allreduce:
            # the engine's own all-reduce (custom kernels), fitted to its measured tables
            ar = engine.allreduce[family]
            consts = replace(consts, allreduce_latency_us=ar.latency_us, allreduce_bw_eff=ar.bw_eff)
            ar_large = ar.large
        self.constants = consts
        c = self.constants

        # FP4 GEMMs against the FP4 peak, with the FP8 GEMM constants (no FP4 table fitted)
        self.peak = sku.peak_flops(
            fp8=self.precision is Precision.FP8, fp4=self.precision is Precision.FP4
        )
        self.attn_peak = sku.peak_flops(fp8=False)
        self.hbm_bw = sku.memory_bandwidth_bytes
        self.layers_per_stage = model.num_layers // pp
        # each kind of weight as the checkpoint stores it (estimators/_weight_precision.py)
        self.weights = WeightPrecisions.of(model, self.precision)
        fused = engine is not None and engine.fp8_quant_fused(model.model_type)
        k16 = _coeffs(c, self.attn_peak, self.hbm_bw) if self.precision.low else None
        dense_format = gemm_format(model, gemm_math(sku, self.precision))
        # the engine's own kernel for block-scaled FP8 GEMMs where it runs another than the
        # tables time: on the GPU families that kernel has constants for (FlashInfer's
        # groupwise kernel is Blackwell's; elsewhere the engine keeps the tables' kernel)
        kernel = engine.fp8_block_gemm if engine is not None and dense_format == "fp8_block" else ""
        measured = kernel and getattr(c, f"matmul_fp8_block_{kernel}_eff_max")
        self.fp8_block_gemm = kernel if measured else ""
        self._k = _coeffs(
            c, self.peak, self.hbm_bw, fp8=self.precision.low, fp8_quant_fused=fused, math16=k16,
            gemm_format=dense_format, gemm_kernel=self.fp8_block_gemm,
        )  # fmt: skip
        # the routed experts' GEMMs in the precision their kernels compute in (`gemm_math`):
        # MXFP4 experts W4A8 on Blackwell, weight-only (16-bit math) elsewhere
        expert_math = gemm_math(sku, self.weights.experts)
        self._expert_format = expert_format(model, self.weights.experts, expert_math)
        self._k_experts = expert_coeffs(
            c, sku, expert_math, self._expert_format, fp8_quant_fused=fused
        )  # fmt: skip
        if self.weights.experts.four_bit and not expert_math.low and c.matmul_dequant_tera_per_s:
            self._k_experts = weight_only_coeffs(self._k_experts, c)

        # ---- per-GPU shapes
        h = model.hidden_size
        hd = model.head_dim
        heads = model.num_attention_heads // tp
        kv_heads = max(1, model.num_key_value_heads // tp)  # replicated when kv_heads < tp
        inter = model.intermediate_size // tp
        a = _ACT_BYTES
        kvb = self.kv_precision.bytes
        self.heads_per_gpu = heads
        self.kv_heads_per_gpu = kv_heads

        def matmul(name: str, n: int, kdim: int, weight: Precision | None = None) -> TokenOp:
            """A GEMM with `weight` weights (the run's precision unless given), its bytes
            with their scales (FP8 blocks, NVFP4, MXFP4)."""
            weight = weight or self.precision
            w = model.matmul_weight_bytes(weight)
            return TokenOp(
                name, gemm_kind(weight, self.precision), 2.0 * n * kdim, float(n * kdim * w),
                float((n + kdim) * a),
            )  # fmt: skip

        wp = self.weights

        qkv = (heads + 2 * kv_heads) * hd
        parallel = model.parallel_attn_mlp  # attention and MLP share one norm and one add
        ops = [
            TokenOp("input_layernorm", "norm", 5.0 * h, float(h * a), float(2 * h * a)),
            matmul("attn_pre_proj", qkv, h, wp.attention),
            *self._qk_norm_ops(heads + kv_heads),
            TokenOp(
                "attn_rope",
                "rope",
                6.0 * (heads + kv_heads) * hd,
                0.0,
                float(2 * (heads + kv_heads) * hd * a),
            ),
            matmul("attn_post_proj", h, heads * hd, wp.attention_out),
            TokenOp("post_attention_layernorm", "norm", 5.0 * h, float(h * a), float(2 * h * a)),
            *self._mlp_ops("mlp", inter, matmul),
            TokenOp("add", "add", float(h), 0.0, float(3 * h * a), count=1 if parallel else 2),
        ]
        self._dense_mlp_ops: tuple[TokenOp, ...] = ()
        self._moe = None
        self._fused_shared = 0
        # the measured MoE kernel the engine runs for these experts on this GPU family
        # (`EngineProfile.moe_kernel`; "": none named)
        self.moe_kernel = ""
        if model.is_moe:  # routed experts priced apart (`_moe_part`); the rest are token ops
            mlp_names = {"mlp_up_proj", "mlp_act", "mlp_down_proj"}
            self._dense_mlp_ops = tuple(op for op in ops if op.name in mlp_names)
            ops = [op for op in ops if op.name not in mlp_names]
            ops.append(matmul("moe_router", model.num_experts, h, wp.router))
            if engine is not None:
                self.moe_kernel = engine.moe_kernel(self.weights.experts, sku.family)
            self._fused_shared = fused_shared_experts(model, engine, ep, self.moe_kernel)
            if model.shared_expert_intermediate_size and not self._fused_shared:
                ops += self._mlp_ops(
                    "shared_expert", model.shared_expert_intermediate_size // tp, matmul
                )
            self._moe = MoeShape.of(model, tp * dp, ep)
            self._a2a_ranks = dispatch_ranks(model.num_experts, model.num_experts_per_tok, ep)
        self._moe_layer_share = model.num_moe_layers / model.num_layers
        # the ops an engine may run beside the routed experts (`_moe_part`)
        self._shared_expert_ops = tuple(op for op in ops if op.name.startswith("shared_expert_"))
        self._router_ops = tuple(op for op in ops if op.name == "moe_router")
        # the engine's auxiliary stream for them, where this model has them
        self._shared_stream = (
            engine.shared_experts_stream if engine is not None and self._shared_expert_ops else None
        )
        if parallel:
            ops = [op for op in ops if op.name != "post_attention_layernorm"]
        ops = fused_residual_adds(ops, engine)
        self.layer_ops: tuple[TokenOp, ...] = tuple(ops)
        self.operator_counts: dict[str, int] = {op.name: op.count for op in self.layer_ops}
        # under attention DP the MoE layer's own exchange replaces the MLP's all-reduce: an
        # all-to-all where the engine runs one for this EP degree, else an all-gather and a
        # reduce-scatter; under attention TP every GPU holds every token, and the expert
        # outputs are all-reduced over TP as a dense MLP's, with EP or without
        # (estimators/_moe.py)
        self._moe_exchange = model.is_moe and dp > 1
        self._moe_all_to_all = (
            self._moe_exchange and ep > 1
            and (engine is None or engine.runs_all_to_all(ep, model.num_experts_per_tok))
        )  # fmt: skip
        self.operator_counts["all_reduce"] = (1 if self._moe_exchange else 2) if tp > 1 else 0
        # the query and key norms' sums of squares, all-reduced over the attention's TP ranks
        # (`ModelArchitecture.qk_norm` "layer"): 4 bytes each a token
        self._qk_norm_stat_bytes = 8.0 if model.qk_norm == "layer" and tp > 1 else 0.0
        self.emb_op = TokenOp("emb", "emb", 0.0, 0.0, float(2 * h * a))
        self.final_norm_op = TokenOp("final_norm", "norm", 5.0 * h, float(h * a), float(2 * h * a))
        vocab = -(-model.vocab_size // tp)
        self.lm_head_op = TokenOp(
            "lm_head",
            "matmul",
            2.0 * vocab * h,
            float(vocab * h * _EMB_BYTES),
            float((vocab + h) * a),
        )
        # sampling: softmax / top-k over fp32 logits of each sequence (read, write, read)
        self.sampler_op = TokenOp(
            "sampler", "act", 5.0 * model.vocab_size, 0.0, float(3 * model.vocab_size * 4)
        )

        # ---- communication
        self.tp_link_bw, self._ar_eff = tp_link(node, tp, c)
        self._ar_lat = c.allreduce_latency_us * 1e-6
        # the all-reduce's algorithms as ring lines (bw_eff, latency s): with the engine's
        # large-message one on NVLink nodes
        self._ar_lines: tuple[tuple[float, float], ...] = ((self._ar_eff, self._ar_lat),)
        if ar_large is not None and node.intra_node_link is not LinkKind.PCIE:
            self._ar_lines += ((ar_large[1], ar_large[0] * 1e-6),)
        self._act_row_bytes = float(h * a)  # one token's hidden state
        self.pp_link = pp_link(node, tp, pp, c)
        # the experts' all-to-all, and the DP gather and scatter without EP: over NVLink
        # inside a node, the all-to-all at the engine's measured line (engines.yaml
        # all_to_all: the GPU's own, else its family's); the nodes' network when the DP x TP
        # GPUs span nodes (wide EP)
        self._moe_link = (self.tp_link_bw, self._ar_eff, self._ar_lat)
        a2a = None
        if engine is not None:
            a2a = engine.all_to_all.get(sku.id) or engine.all_to_all.get(family)
        self._a2a_link = (
            self.tp_link_bw,
            a2a.bw_eff if a2a else c.alltoall_bw_eff,
            (a2a.latency_us if a2a else c.alltoall_latency_us) * 1e-6,
        )
        self._moe_across_nodes = tp * dp > node.gpus_per_node
        if self._moe_across_nodes:
            self._moe_link = self._a2a_link = (
                node.inter_node_bandwidth_gbps * 1e9, c.p2p_inter_bw_eff,
                c.p2p_inter_latency_us * 1e-6,
            )  # fmt: skip

        # ---- attention (per layer, per GPU)
        self._kv_row = 2.0 * kv_heads * hd * kvb  # K and V of one token
        self._q_row2 = 2.0 * heads * hd * a  # query in + output out, one token
        flops_per_pair = 4.0 * heads * hd
        self._attn_flops_per_pair = flops_per_pair  # per GPU
        self._pf_sec_per_pair = flops_per_pair / (self.attn_peak * c.attention_prefill_eff_max)
        self._pf_causal_m1 = c.attention_prefill_causal_factor - 1.0
        self._pf_q = c.attention_prefill_query_pairs
        self._pf_ctx = c.attention_prefill_ctx_pairs
        self._attn_sec_per_byte = 1.0 / (self.hbm_bw * c.attention_decode_mem_eff)
        self._dec_sec_per_kv = flops_per_pair / (self.attn_peak * c.attention_prefill_eff_max)
        self._attn_ovh = c.attention_overhead_us * 1e-6
        self._dec_seq_kv = c.attention_decode_seq_kv
        if model.sliding_window_layers:  # the average layer's (estimators/_sliding_window.py)
            self._prefill_attn, self._decode_attn = windowed_attention(
                self._prefill_attn, self._decode_attn, model.sliding_window,
                model.sliding_window_layers, model.num_layers,
            )  # fmt: skip

        # ---- cpu: the roofline's fitted overhead, or the engine profile's host work
        self._cpu_a = c.cpu_base_ms * 1e-3
        self._cpu_b = c.cpu_per_seq_ms * 1e-3
        has_own = engine is not None and (
            engine.decode_overhead is not None or engine.prefill_overhead is not None
        )
        self._engine_cpu = engine if has_own else None
        self._overlap = bool(engine is not None and engine.overlap)
        # ---- eager launches: a stage's iteration outside the engine's CUDA graphs lasts at
        # least as long as its host takes to launch the stage's layers' kernels one by one
        launch = engine.eager_launch if engine is not None else None
        self._eager_stage = 0.0
        if launch is not None:
            dense = model.num_layers - model.num_moe_layers
            per_layer = launch.layer_seconds(dense, model.num_moe_layers, model.is_mla)
            self._eager_stage = self.layers_per_stage * per_layer

        self._cache: dict[int, _Entry] = {}
        # `decode_steps`: whether it still mirrors `batch_cost`, and the batch sizes checked
        self._decode_steps_mirror = True
        self._decode_steps_checked: set[int] = set()
        self._pipeline_steps_checked: set[int] = set()  # `pipeline_decode_steps`'s
        self._layer_cache: dict[int, tuple[float, float, float]] = {}
        self._seq_cache: dict[int, tuple[float, float, float]] = {}

    # ---------------------------------------------------------------- token level

    def _layer_token_part(
        self, nt: int, moe_nt: int = 0, shared_beside: bool = False
    ) -> tuple[float, float, float]:
        """(seconds incl. all-reduces, flops, bytes) of one layer's token-level ops, per GPU;
        `moe_nt`: the tokens the experts take under attention DP (0: `nt`); `shared_beside`:
        the shared experts run beside the routed ones (`_moe_part`)."""
        key = (shared_beside << 48) | (moe_nt << 24) | nt
        hit = self._layer_cache.get(key)
        if hit is not None:
            return hit
        fl = 0.0
        by = 0.0
        m = float(nt)
        for op in self.layer_ops:
            fl += op.flops_per_token * m * op.count
            by += (op.fixed_bytes + op.bytes_per_token * m) * op.count
        t = self._layer_seconds(m)
        if self._moe is not None:
            mt, mf, mb = self._moe_part(m, float(moe_nt or nt), shared_beside)
            t, fl, by = t + mt, fl + mf, by + mb
        hit = (t, fl, by)
        self._layer_cache[key] = hit
        return hit

    def _layer_seconds(self, m: float) -> float:
        """Seconds of one layer's token-level ops and its TP all-reduces for m tokens (the
        `_layer_token_part` hook, which backends override; FLOPs and bytes stay counted
        there)."""
        k = self._k
        t = 0.0
        for op in self.layer_ops:
            t += _token_op_time(op, m, k)
        return t + self._tp_all_reduces(m)

    def _tp_all_reduces(self, m: float) -> float:
        """Seconds of one layer's TP all-reduces for m tokens: the hidden states' (the
        attention's output, and the MLP's unless under EP or DP `_moe_part`'s exchange
        replaces it) and the query and key norms' statistics where the model has them."""
        if self.tp == 1:
            return 0.0
        t = self.operator_counts["all_reduce"] * self.all_reduce_time(self._act_row_bytes * m)
        if self._qk_norm_stat_bytes:
            t += self.all_reduce_time(self._qk_norm_stat_bytes * m)
        return t

    def _qk_norm_ops(self, heads: int) -> list[TokenOp]:
        """The RMSNorm of a token's `heads` query and key heads on this GPU before RoPE
        (`ModelArchitecture.qk_norm`), priced as one kernel that reads and writes them (none
        where the model has no such norm).  TensorRT-LLM runs Qwen3's as one fused QK-norm +
        RoPE kernel; SGLang its query and key norms on two streams in its CUDA graphs; how many
        kernels vLLM's compiled graph makes of them is not checked.  MiniMax-M2's is a
        reduction, the all-reduce of its statistics (`_tp_all_reduces`) and the scaling."""
        if not self.model.qk_norm:
            return []
        width = heads * self.model.head_dim
        return [TokenOp("attn_qk_norm", "norm", 5.0 * width, 0.0, float(2 * width * _ACT_BYTES))]

    def _mlp_ops(self, prefix: str, inter: int, matmul: Callable[..., TokenOp]) -> list[TokenOp]:
        """Up (gate and up), activation and down projections of a `inter`-wide MLP."""
        a = _ACT_BYTES
        h = self.model.hidden_size
        up = (2 if self.model.gated_mlp else 1) * inter
        return [
            matmul(f"{prefix}_up_proj", up, h),
            TokenOp(f"{prefix}_act", "act", 5.0 * inter, 0.0, float((up + inter) * a)),
            matmul(f"{prefix}_down_proj", h, inter),
        ]

    def _moe_part(
        self, m: float, moe_m: float, shared_beside: bool = False
    ) -> tuple[float, float, float]:
        """(seconds, flops, bytes) of the routed experts of one layer on the busiest GPU for
        `moe_m` tokens (every DP rank's), averaged with the model's dense-MLP layers of `m`
        tokens (this rank's), plus, under attention DP, the exchange of the ranks' tokens: the
        EP all-to-all where the engine runs one, else their gather and scatter (see
        estimators/_moe.py).  With `shared_beside` the layer's shared experts run on an
        auxiliary stream while the router, the exchange and the routed experts run on the
        main one (`EngineProfile.shared_experts_stream`): the layer waits for the longer of
        the two, so the time the shorter one took, counted with the layer's token ops, is
        taken off here."""
        moe = self._moe
        a = _ACT_BYTES
        t, fl, by = self._routed_experts(moe_m)
        if self._moe_all_to_all:
            t += all_to_all_seconds(moe_m, self._a2a_ranks, moe.hidden, a, self.ep, *self._a2a_link)
        elif self.dp > 1:  # all-gather then reduce-scatter: one all-reduce's ring traffic
            t += self._gather_scatter_time(moe_m * self._act_row_bytes)
        if shared_beside and self._shared_expert_ops:
            shared = sum(self._op_seconds(op, m) for op in self._shared_expert_ops)
            main = t + sum(self._op_seconds(op, m) for op in self._router_ops)
            t -= shared if shared < main else main
        share = self._moe_layer_share
        if share < 1.0:  # dense-MLP layers of the model, by their share of the layers
            dt = self._dense_mlp_seconds(m)
            df = sum(op.flops_per_token * m for op in self._dense_mlp_ops)
            db = sum(op.fixed_bytes + op.bytes_per_token * m for op in self._dense_mlp_ops)
            return (share * t + (1 - share) * dt, share * fl + (1 - share) * df,
                    share * by + (1 - share) * db)  # fmt: skip
        return t, fl, by

    def _dense_mlp_seconds(self, m: float) -> float:
        """Seconds of the MLP of one of the model's dense (non-MoE) layers for m tokens."""
        return sum(_token_op_time(op, m, self._k) for op in self._dense_mlp_ops)

    def _op_seconds(self, op: TokenOp, m: float) -> float:
        """Seconds of one of the layer's token ops for m tokens, as `_layer_seconds` prices
        it (the hook backends override with their measured GEMMs)."""
        return _token_op_time(op, m, self._k)

    def _routed_experts(self, moe_m: float) -> tuple[float, float, float]:
        """(seconds, flops, bytes) of one MoE layer's routed experts (grouped GEMMs and
        their activation) on the busiest GPU for `moe_m` tokens; the time from a measured
        table instead where one is attached (`use_measured_experts`).  Shared experts the
        engine fuses into the kernel (`fused_shared_experts`) are experts every token
        picks: their rows and weights join the grouped GEMMs, and a measured table, which
        times the routed experts alone, gets the roofline's price of that addition.

        A table times one EP rank under balanced routing, its mean share of the rows and
        experts; the layer waits for the busiest rank (`MoeShape.rows`, `touched`: the
        router's skew or chance), so an EP deployment's measured time is scaled by the
        roofline's busiest-to-mean ratio of the same experts (1 without EP)."""
        moe = self._moe
        w = self.model.matmul_weight_bytes(self.weights.experts)
        k = self._k_experts
        rows, groups = moe.rows(moe_m), moe.touched(moe_m)
        s = self._fused_shared if moe_m > 0 else 0
        t, fl, by = routed_experts_part(moe, rows + s * moe_m, groups + s, w, k)
        measured = self._measured_experts
        if measured is not None and moe_m > measured[1]:
            alone = routed_experts_part(moe, rows, groups, w, k)[0] if s else t
            busiest = 1.0
            if moe.ep > 1 and moe_m > 0:
                mean_rows, mean_groups = moe.rows(moe_m, False), moe.touched(moe_m, False)
                busiest = alone / routed_experts_part(moe, mean_rows, mean_groups, w, k)[0]
            t = measured[0](moe_m) * busiest + (t - alone)
        return t, fl, by

    def use_measured_experts(self, curve: Any, above_tokens: float, label: str) -> None:
        """Time the routed experts of iterations of more than `above_tokens` tokens (over
        every attention-DP rank) from `curve` (seconds over the tokens entering the layer,
        a measured table: `label`); FLOPs and bytes stay the roofline's count.  Call before
        the first `batch_cost`."""
        self._measured_experts = (curve, float(above_tokens), label)

    def _head_part(self, ns: int) -> tuple[float, float, float]:
        """(seconds, flops, bytes) of LM head + logits gather + sampling for `ns` sequences."""
        hit = self._seq_cache.get(ns)
        if hit is not None:
            return hit
        m = float(ns)
        t = self._head_seconds(m)
        fl = (self.lm_head_op.flops_per_token + self.sampler_op.flops_per_token) * m
        by = (
            self.lm_head_op.fixed_bytes
            + self.lm_head_op.bytes_per_token * m
            + self.sampler_op.bytes_per_token * m
        )
        hit = (t, fl, by)
        self._seq_cache[ns] = hit
        return hit

    def _head_seconds(self, m: float) -> float:
        """Seconds of the LM head, the logits gather and sampling for m sequences (the
        `_head_part` hook)."""
        k = self._k
        t = _token_op_time(self.lm_head_op, m, k) + _token_op_time(self.sampler_op, m, k)
        if self.tp > 1:  # gather the vocab-parallel logits
            t += _ring_allgather(
                m * self.model.vocab_size * _ACT_BYTES,
                self.tp,
                self.tp_link_bw,
                self._ar_eff,
                self._ar_lat,
            )
        return t

    def _token_entry(
        self, nt: int, ns: int, moe_nt: int = 0, shared_beside: bool = False
    ) -> _Entry:
        """(stage base times, pp hop, cpu overhead, flops, bytes) of the token-level part;
        `shared_beside`: the shared experts run beside the routed ones (`_moe_part`)."""
        k = self._k
        lt, lf, lb = self._layer_token_part(nt, moe_nt, shared_beside)
        ht, hf, hb = self._head_part(ns)
        m = float(nt)
        L = self.layers_per_stage
        emb_t = _token_op_time(self.emb_op, m, k)
        if self.tp > 1:
            emb_t += self.all_reduce_time(self._act_row_bytes * m)  # vocab-parallel embedding
        fn_t = _token_op_time(self.final_norm_op, m, k)
        stages = [L * lt] * self.pp
        stages[0] += emb_t
        stages[-1] += fn_t + ht
        hop = self.send_recv_time(self._act_row_bytes * m) if self.pp > 1 else 0.0
        cpu = self._cpu_a + self._cpu_b * ns
        tp = self.tp * self.dp  # every DP rank's GPUs (each priced as the busiest)
        flops = tp * (self.model.num_layers * lf + self.final_norm_op.flops_per_token * m + hf)
        nbytes = tp * (
            self.model.num_layers * lb
            + self.emb_op.bytes_per_token * m
            + self.final_norm_op.fixed_bytes
            + self.final_norm_op.bytes_per_token * m
            + hb
        )
        entry = (tuple(stages), hop, cpu, flops, nbytes)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[_entry_key(nt, ns, moe_nt, shared_beside)] = entry
        return entry

    # ---------------------------------------------------------------- communication

    def _gather_scatter_time(self, nbytes: float) -> float:
        """Seconds of the all-gather of every DP rank's tokens (`nbytes` in all) before the
        experts and the reduce-scatter after: one all-reduce's ring traffic over the DP x TP
        GPUs, at the engine's all-reduce algorithms inside a node."""
        n = self.tp * self.dp
        if self._moe_across_nodes:
            return _ring_allreduce(nbytes, n, *self._moe_link)
        return float(fastest_allreduce(nbytes, n, self.tp_link_bw, self._ar_lines))

    def all_reduce_time(self, nbytes: Any) -> Any:
        """Seconds of one TP all-reduce of `nbytes` (float or numpy array); 0 when tp == 1."""
        if self.tp <= 1:
            return 0.0 * nbytes
        return fastest_allreduce(nbytes, self.tp, self.tp_link_bw, self._ar_lines)

    def send_recv_time(self, nbytes: Any) -> Any:
        """Seconds of one stage-to-stage send of `nbytes` over this deployment's PP link."""
        bw, eff, lat = self.pp_link
        return nbytes / (bw * eff) + lat

    # ---------------------------------------------------------------- attention

    def _attention(self, batch: BatchShape) -> tuple[float, float, float]:
        """(seconds, flops, bytes) of one layer's attention on one GPU."""
        t = 0.0
        fl = 0.0
        by = 0.0
        npt = batch.num_prefill_tokens
        if npt:
            pairs = batch.prefill_attn_pairs
            kvt = batch.prefill_kv_tokens
            t += self._prefill_attn(npt, batch.num_prefills or 1, pairs, kvt)
            fl += self._attn_flops_per_pair * pairs
            by += kvt * self._kv_row + npt * self._q_row2
        nd = batch.num_decodes
        if nd:
            dkv = batch.decode_kv_tokens
            t += self._decode_attn(nd, dkv)
            fl += self._attn_flops_per_pair * dkv
            by += dkv * self._kv_row + nd * self._q_row2
        return t, fl, by

    def _prefill_attn(self, npt: int, npf: int, pairs: float, kv_tokens: int) -> float:
        """Seconds of one layer's prefill attention on one GPU (the `batch_cost` hook)."""
        diag = 0.5 * (npt * npt / npf + npt)  # sum q (q + 1) / 2 for equal chunks
        if diag > pairs:
            diag = pairs
        comp = self._pf_sec_per_pair * (
            pairs + self._pf_causal_m1 * diag + self._pf_ctx * (kv_tokens - npt) + self._pf_q * npt
        )
        mem = (kv_tokens * self._kv_row + npt * self._q_row2) * self._attn_sec_per_byte
        return (comp if comp > mem else mem) + self._attn_ovh

    def _decode_attn(self, nd: int, dkv: int) -> float:
        """Seconds of one layer's decode attention on one GPU for `nd` sequences reading
        `dkv` KV tokens in all (the `batch_cost` hook): a read of the KV cache."""
        mem = ((dkv + self._dec_seq_kv * nd) * self._kv_row + nd * self._q_row2) * (
            self._attn_sec_per_byte
        )
        comp = self._dec_sec_per_kv * dkv
        return (comp if comp > mem else mem) + self._attn_ovh

    # ---------------------------------------------------------------- contract

    def batch_cost(self, batch: BatchShape) -> BatchCost:
        """Cost of running `batch` through every pipeline stage once."""
        moe_nt = 0
        if self.dp > 1:  # the busiest attention DP rank; its experts take every rank's tokens
            moe_nt = batch.num_tokens
            batch = busiest_rank(batch, self.dp)
        npt = batch.num_prefill_tokens
        nd = batch.num_decodes
        nt = npt + nd
        ns = batch.num_prefills + nd
        beside = self._shared_beside(nt, npt == 0, ns)
        entry = self._cache.get(_entry_key(nt, ns, moe_nt, beside))
        if entry is None:
            if nt <= 0:
                return BatchCost((0.0,) * self.pp, 0.0, 0.0, 0.0, 0.0)
            entry = self._token_entry(nt, ns, moe_nt, beside)
        base, hop, cpu, flops, nbytes = entry

        # attention: two narrow hooks (per-operator times), which backends override
        at = 0.0
        pairs = 0.0
        ab = 0.0
        if npt:
            pairs = batch.prefill_attn_pairs
            kvt = batch.prefill_kv_tokens
            at = self._prefill_attn(npt, batch.num_prefills or 1, pairs, kvt)
            ab = kvt * self._kv_row + npt * self._q_row2
        if nd:
            dkv = batch.decode_kv_tokens
            at += self._decode_attn(nd, dkv)
            ab += dkv * self._kv_row + nd * self._q_row2
            pairs += dkv
        a = self.layers_per_stage * at
        stages = (base[0] + a,) if self.pp == 1 else tuple([s + a for s in base])
        if self._eager_stage and not self.engine.graphed(nt, npt == 0, ns):
            stages = _at_least(stages, self._eager_stage)
        if self._engine_cpu is not None:
            cpu = self._engine_host_time(npt == 0, batch.num_prefills + nd, cpu)
        if self._overlap:  # host work of the next step runs during this GPU step
            cpu = cpu - stages[0] if cpu > stages[0] else 0.0
        scale = self.tp * self.dp * self.model.num_layers
        return BatchCost(
            stages,
            hop,
            cpu,
            flops + scale * self._attn_flops_per_pair * pairs,
            nbytes + scale * ab,
        )

    def decode_steps(self, num_decodes: int, decode_kv_tokens: int) -> Iterator[DecodeStepCost]:
        """`batch_cost` of consecutive decode-only steps (see `estimators.decode_steps`),
        with the token-level part looked up once: the same arithmetic in the same order,
        so every value equals `batch_cost`'s exactly.  The first step of each batch size is
        also priced by `batch_cost` and compared: should `batch_cost` ever do what this does
        not mirror (a subclass, a new parallelism), every run falls back to it."""
        return self._decode_run(num_decodes, decode_kv_tokens, False)

    def pipeline_decode_steps(
        self, num_decodes: int, decode_kv_tokens: int
    ) -> Iterator[PipelineStepCost]:
        """`decode_steps` with every stage's time and the hop between stages (see
        `estimators.pipeline_decode_steps`), exact and checked in the same way."""
        return self._decode_run(num_decodes, decode_kv_tokens, True)

    def _decode_run(self, nd: int, dkv: int, every_stage: bool) -> Iterator[tuple]:
        """`decode_steps`, or with `every_stage` `pipeline_decode_steps`."""
        if nd <= 0 or not self._decode_steps_mirror:
            yield from _priced_run(self, nd, dkv, every_stage)
            return
        base, hop, cpu, flops, nbytes = self._decode_entry(nd)
        base0 = base[0]
        layers = self.layers_per_stage
        scale = self.tp * self.model.num_layers
        flops_per_kv = scale * self._attn_flops_per_pair
        kv_row = self._kv_row
        q_bytes = nd * self._q_row2
        decode_attn = self._decode_attn  # the backend's hook (measured tables when profiled)
        overlap = self._overlap
        checked_sizes = self._pipeline_steps_checked if every_stage else self._decode_steps_checked
        add_to_stages = _ADD_TO_STAGES.get(len(base), _add_to_stages)
        checked = nd in checked_sizes
        eager = self._eager_stage
        if eager and self.engine.graphed(nd, True, nd):
            eager = 0.0
        while True:
            a = layers * decode_attn(nd, dkv)
            stage = base0 + a  # the first stage's time, as `batch_cost` adds it up
            if stage < eager:
                stage = eager
            host = (cpu - stage if cpu > stage else 0.0) if overlap else cpu
            moved = nbytes + scale * (dkv * kv_row + q_bytes)
            if every_stage:
                stages = add_to_stages(base, a)
                if eager:
                    stages = _at_least(stages, eager)
                step = host, stages, hop, flops + flops_per_kv * dkv, moved
            else:
                step = host, stage, flops + flops_per_kv * dkv, moved
            if not checked:
                if step != next(_priced_run(self, nd, dkv, every_stage)):
                    self._decode_steps_mirror = False
                    yield from _priced_run(self, nd, dkv, every_stage)
                    return
                checked_sizes.add(nd)
                checked = True
            yield step
            dkv += nd

    def _shared_beside(self, nt: int, decode_only: bool, ns: int) -> bool:
        """Whether an iteration of `nt` tokens and `ns` sequences per attention-DP rank runs
        the shared experts beside the routed ones (the engine's `shared_experts_stream`)."""
        stream = self._shared_stream
        return stream is not None and stream.covers(nt, self.engine.graphed(nt, decode_only, ns))

    def _decode_entry(self, nd: int) -> _Entry:
        """The token-level part of a decode-only step of `nd` sequences (`_token_entry`),
        with the engine profile's host time when it has one."""
        beside = self._shared_beside(nd, True, nd)
        entry = self._cache.get(_entry_key(nd, nd, 0, beside))
        if entry is None:
            entry = self._token_entry(nd, nd, 0, beside)
        if self._engine_cpu is None:
            return entry
        base, hop, cpu, flops, nbytes = entry
        return base, hop, self._engine_host_time(True, nd, cpu), flops, nbytes

    def _engine_host_time(self, decode_only: bool, num_seqs: int, fallback: float) -> float:
        """Seconds of host work of one iteration under the engine profile."""
        ovh = self._engine_cpu.iteration_overhead(decode_only, num_seqs)
        return fallback if ovh is None else ovh.seconds(num_seqs)

    # ---------------------------------------------------------------- inspection

    def operator_times(self, batch: BatchShape) -> dict[str, float]:
        """Seconds by Vidur operator: per layer for the layer operators (``add`` and
        ``all_reduce`` summed over their ``operator_counts`` kernels), per iteration for
        ``emb`` (first stage) and ``send_recv`` (one stage-to-stage hop)."""
        k = self._k
        m = float(batch.num_tokens)
        out = dict.fromkeys(OPERATOR_NAMES, 0.0)
        if m <= 0:
            return out
        for op in self.layer_ops:
            out[op.name] = _token_op_time(op, m, k)
        out["emb"] = _token_op_time(self.emb_op, m, k)
        out["all_reduce"] = self._tp_all_reduces(m)
        if self._moe is not None:
            out["moe_experts"] = self._moe_part(m, m)[0]
        out["send_recv"] = self.send_recv_time(self._act_row_bytes * m) if self.pp > 1 else 0.0
        pre = BatchShape(
            num_prefill_tokens=batch.num_prefill_tokens,
            num_prefills=batch.num_prefills,
            prefill_attn_pairs=batch.prefill_attn_pairs,
            prefill_kv_tokens=batch.prefill_kv_tokens,
        )
        dec = BatchShape(num_decodes=batch.num_decodes, decode_kv_tokens=batch.decode_kv_tokens)
        out["attn_prefill"] = self._attention(pre)[0] if batch.num_prefill_tokens else 0.0
        out["attn_decode"] = self._attention(dec)[0] if batch.num_decodes else 0.0
        return out

    def token_op_times(self, num_tokens: np.ndarray | float) -> dict[str, Any]:
        """Seconds of each token-level layer operator (one kernel each) for `num_tokens`
        (vectorised over a numpy array), plus ``emb``; used by calibration."""
        k = self._k
        out = {
            op.name: _token_op_time(replace(op, count=1), num_tokens, k) for op in self.layer_ops
        }
        out["emb"] = _token_op_time(self.emb_op, num_tokens, k)
        return out

    def describe(self) -> str:
        m = self.model
        c = self.constants
        lines = [
            f"roofline estimator: {m.name} on {self.sku.name} ({self.sku.id}, "
            f"family {self.sku.architecture or 'default'})",
            f"  parallelism: TP={self.tp} PP={self.pp} ({self.layers_per_stage} layers per stage), "
            f"weights {self.precision.value}"
            + (f" ({layout})" if (layout := self.weights.describe(m)) else "")
            + f", KV cache {self.kv_precision.value}",
            f"  peaks: {self.peak / 1e12:.0f} TFLOP/s matmul, {self.attn_peak / 1e12:.0f} TFLOP/s "
            f"attention, {self.hbm_bw / 1e12:.2f} TB/s HBM",
            f"  matmul: eff_max {c.matmul_eff_max:.2f}, m_half {c.matmul_m_half:.0f} tokens, "
            f"mem_eff {c.matmul_mem_eff:.2f}, overhead {c.matmul_overhead_us:.1f} us",
        ]
        if self.fp8_block_gemm:
            k = self._k
            lines.append(
                f"  block-FP8 GEMMs: the engine's {self.fp8_block_gemm} kernel, eff_max "
                f"{1 / (k.sec_per_flop * self.peak):.2f} of the FP8 peak"
            )
        lines += [
            f"  attention: prefill eff_max {c.attention_prefill_eff_max:.2f} "
            f"(causal x{c.attention_prefill_causal_factor:.2f}), decode mem_eff "
            f"{c.attention_decode_mem_eff:.2f}, overhead {c.attention_overhead_us:.1f} us",
            f"  TP link: {self.tp_link_bw / 1e9:.0f} GB/s ({self.node.intra_node_link.value}), "
            f"all-reduce eff {c.allreduce_bw_eff:.2f} + {c.allreduce_latency_us:.0f} us"
            + (
                f" (large messages: eff {self._ar_lines[1][0]:.2f} + "
                f"{self._ar_lines[1][1] * 1e6:.0f} us)"
                if len(self._ar_lines) > 1
                else ""
            ),
            f"  PP link: {self.pp_link[0] / 1e9:.0f} GB/s",
            f"  cpu overhead: {c.cpu_base_ms:.2f} ms + {c.cpu_per_seq_ms * 1e3:.0f} us/seq",
        ]
        if self._moe is not None:
            moe = self._moe
            lines.append(
                f"  experts: top-{moe.top_k} of {moe.num_experts}, EP={self.ep} "
                + (f"over DP={self.dp} x TP={self.tp} GPUs " if self.dp > 1 else "")
                + f"({moe.local_experts:g} per GPU, {moe.width} wide), load skew {moe.skew:g}, "
                f"{m.num_moe_layers} of {m.num_layers} layers MoE"
            )
            k = self._k_experts
            if self._expert_format and k.experts_overhead:
                fixed = k.experts_fixed(moe)
                lines.append(
                    f"  experts' fixed cost ({self._expert_format}, fitted to the engine's MoE "
                    f"table): {fixed * 1e6:.1f} us a layer at {moe.local_experts:g} experts a GPU"
                )
            if self._measured_experts is not None:
                _, above, label = self._measured_experts
                lines.append(f"  experts above {above:g} tokens: measured, {label}")
            if self._fused_shared:
                lines.append(
                    f"  shared expert: inside the routed experts' kernel, {self._fused_shared} "
                    "more expert every token picks (the engine's shared_experts_fusion)"
                )
        e = self.engine
        if e is not None:
            lines.append(f"  engine: {e.describe()}")
            if self._eager_stage:
                graphs = f"decode batches up to {e.graph_max_batch}"
                if e.piecewise_max_tokens:
                    graphs += f", iterations up to {e.piecewise_max_tokens} tokens"
                lines.append(
                    f"  eager launches: an iteration outside CUDA graphs ({graphs} in graphs) "
                    f"takes at least {self._eager_stage * 1e3:.1f} ms a stage"
                )
            if e.decode_overhead is not None:
                d = e.decode_overhead
                lines.append(
                    f"  engine host work: {d.base_ms:.3f} ms + {d.per_seq_ms * 1e3:.1f} us/seq"
                    + (" (overlapped with the GPU step)" if e.overlap else "")
                )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"RooflineEstimator({self.model.name!r}, {self.sku.id!r}, tp={self.tp}, pp={self.pp}, "
            f"precision={self.precision.value!r})"
        )
