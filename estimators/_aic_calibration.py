"""Fit the roofline's GEMM and attention constants to aiconfigurator-core's operator tables.

For one GPU and one engine (vLLM, SGLang, TensorRT-LLM: their attention kernels differ),
the measured tables of aiconfigurator-core (the ``llmcap[aic]`` extra, read from the
installed package, see `estimators._aic_tables`) give:

* GEMMs: seconds of ``[m, k] x [k, n]`` by dtype; the rows with ``n, k >= MIN_DIM``
  (the shapes of models' TP-sharded projections and LM heads), plus rows at the built-in
  models' own TP-sharded shapes interpolated from the table (the profiled backend's
  bilinear interpolation, inside the measured range), fit the matmul constants,
  16-bit rows the 16-bit ones, each low-precision format's rows its own (`GEMM_DTYPES`:
  per-tensor FP8, block-scaled FP8, NVFP4; not `aic.UNREPRESENTATIVE_GEMM_ROWS`), kept
  only where they beat the constants the format falls back to, each row's squared log error
  weighted by the square root of its time (an iteration's time is the sum of its GEMMs');
  each shape's times are made non-decreasing in m first, as the profiled backend does;
* attention: seconds of one layer's context (prefill, causal, no cached prefix) and
  generation (decode) attention of the engine's main kernel, 16-bit KV cache, full
  attention, at the per-GPU head shapes of the built-in models (TP 1, 2, 4, 8) that the
  table measured, over its batch sizes and lengths; they fit the attention constants.

The fit reuses `estimators._calibration`'s machinery (Nelder-Mead over the log of one
group's constants, mean squared log error); the matmul groups are fitted with their
efficiencies bounded by 1, from several starts (`fit_matmul`).  Where the engine's MoE
table measures MXFP4 experts in 16-bit math (``w4a16_mxfp4``: GPUs without FP4 tensor
cores), the rate at which such kernels unpack weights, the M tile whose every copy
unpacks them again and the experts' fixed cost are fitted to those rows on the fitted
16-bit constants (`fit_dequant_rate`), from a table version all the family's fitted
GPUs share (`_family_moe_version`).  Every 5th (n, k) GEMM shape, every 4th
attention head shape and every 3rd MoE shape is held out of the fit and scored apart
(``FitResult.errors``).
`fit_all` fits every (GPU, engine) pair, optionally without one GPU's tables or without
the rows at one model's shapes (leave-one-out), caching each fit on disk keyed by a hash
of the rows it saw.  `engine_layer` turns the fits into roofline.yaml's ``engines:``
section: per SKU, and the geometric mean per family and over all GPUs of the engine.

Nothing here runs in the simulator: `benchmarks/fit_roofline_aic.py` writes the data file
and `llmcap validate --hold-out` refits its folds.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from estimators import _aic_tables as aic
from estimators._cache import cache_dir
from estimators._calibration import _log_sq, fit_group
from estimators._curves import gemm_curve, monotone
from estimators._engines import AllReduceCost, AllToAllCost, load_engine
from estimators._models import builtin_model_names, load_model
from estimators._moe import MoeShape, all_to_all_seconds, dispatch_ranks
from estimators._roofline import (
    _ACT_BYTES,
    GEMM_FORMATS,
    AttentionRows,
    RooflineConstants,
    TokenOp,
    _coeffs,
    _token_op_time,
    attention_seconds,
    expert_coeffs,
    fastest_allreduce,
    load_roofline_constants,
    moe_overhead_terms,
    routed_experts_part,
    weight_only_coeffs,
)
from estimators._types import FP8_BLOCK_WEIGHTS, ModelArchitecture, Precision, weight_bytes
from estimators._weight_precision import gemm_math
from sku_catalog import load_catalog
from sku_catalog._types import GpuSku

__all__ = [
    "A2A_SKUS",
    "FIT_ENGINES",
    "FIT_SKUS",
    "AllToAllRows",
    "FitResult",
    "SkuEngineTables",
    "all_to_all_key",
    "all_to_all_line_seconds",
    "all_to_all_table",
    "allreduce_seconds",
    "allreduce_table",
    "engine_layer",
    "even_log2",
    "family_lines",
    "fit_all",
    "fit_all_to_all",
    "fit_all_to_all_line",
    "fit_allreduce",
    "fit_allreduce_lines",
    "fit_tables",
    "load_tables",
    "mean_all_to_all",
    "mean_allreduce",
    "model_shapes",
    "node_link",
    "score_tables",
    "without_model_shapes",
    "write_engine_layer",
]

FIT_ENGINES: tuple[str, ...] = ("vllm", "sglang", "trtllm")
FIT_SKUS: tuple[str, ...] = ("h100-sxm", "h200", "b200", "a100-80gb", "l40s")
MIN_DIM = 512  # GEMM n and k from which the table's shapes are a model's projections
TP_DEGREES = (1, 2, 4, 8)
HOLD_GEMM_EVERY = 5  # every 5th (n, k) shape is held out
HOLD_ATTN_EVERY = 4  # every 4th per-GPU head shape is held out
FIT_VERSION = "aic-roofline-9"  # part of every cache key: change it when the method changes

MATMUL = ("matmul_eff_max", "matmul_m_half", "matmul_mem_eff", "matmul_overhead_us")
# a low-precision format's matmul constants (`GEMM_FORMATS`: fp8, fp8_block, fp4)
MATMUL_LOW = {
    fmt: tuple(f"matmul_{fmt}_{key}" for key in ("eff_max", "m_half", "mem_eff", "overhead_us"))
    for fmt in GEMM_FORMATS
}
MATMUL_FP8 = MATMUL_LOW["fp8"]
# The tables' context rows have no cached prefix (every pair is causal), so the causal
# factor cannot be told apart from the efficiency there: it is set to 1 (a causal pair does
# the FLOPs of a context pair; FlashAttention skips masked tiles), and the per-context-token
# cost keeps the value fitted to Vidur's chunked-prefill table (roofline.yaml).
CAUSAL_FACTOR = 1.0
ATTENTION = (
    "attention_prefill_eff_max",
    "attention_prefill_query_pairs",
    "attention_decode_mem_eff",
    "attention_decode_seq_kv",
    "attention_overhead_us",
)
# table dtype -> the GEMM format whose constants its rows fit (None: the 16-bit ones); the
# per-tensor FP8 rows come before the other low-precision formats, which start from them
GEMM_DTYPES: dict[str, str | None] = {
    "bfloat16": None, "fp8": "fp8", "fp8_block": "fp8_block", "nvfp4": "fp4",
}  # fmt: skip
# MoE rows of MXFP4 weights in 16-bit math: the weight-only constants (`fit_dequant_rate`)
WEIGHT_ONLY_MOE_DTYPE = "w4a16_mxfp4"
# ... and of INT4 weights (W4A16), where FP4 tensor cores take MXFP4 weights as W4A8 instead
# (Blackwell): the weight-only constants INT4 experts run with there (`_weight_only_moe_rows`)
INT4_WEIGHT_ONLY_DTYPE = "int4_wo"
# the M tiles (rows) a weight-only kernel may dequantize its weights per: 0, once per weight
# (`fit_dequant_rate` keeps the one whose fitted rate prices the rows best)
DEQUANT_TILE_ROWS = (0, 16, 32, 64, 128, 256)
DEQUANT_TILE = "matmul_dequant_tile_rows"
DEQUANT_RATE = "matmul_dequant_tera_per_s"
DEQUANT_OVERHEAD = "matmul_dequant_overhead_us"
# MoE rows of low-precision experts, by the roofline's expert format (`expert_format`): the
# MoE table dtype whose rows fit that format's fixed cost (`fit_moe_overhead`)
LOW_PRECISION_MOE_DTYPES: dict[str, str] = {
    "fp8": "fp8", "fp8_block": "fp8_block", "fp4": "nvfp4", "w4a8": "w4a8_mxfp4_mxfp8",
}  # fmt: skip
# the rows that fit it: decode batches, at most this many expert rows per expert on average
# (tokens x top-k / experts), where the fixed cost and the weight reads make the time
MOE_OVERHEAD_ROWS_PER_EXPERT = 1.0
HOLD_MOE_EVERY = 3  # every 3rd (MoE shape, MoE TP) is held out


# --------------------------------------------------------------------------- tables


@dataclass(slots=True)
class GemmRows:
    """Measured GEMMs of one dtype: m, n, k and seconds, one row each."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    seconds: np.ndarray

    def take(self, keep: np.ndarray) -> GemmRows:
        return GemmRows(self.m[keep], self.n[keep], self.k[keep], self.seconds[keep])


@dataclass(slots=True)
class AttnRows:
    """Measured attention rows (context and generation together) of one kernel."""

    rows: AttentionRows
    seconds: np.ndarray
    is_prefill: np.ndarray

    def take(self, keep: np.ndarray) -> AttnRows:
        r = self.rows
        fields_ = {
            name: getattr(r, name)[keep]
            for name in AttentionRows.__dataclass_fields__
            if name != "kv_bytes"
        }
        return AttnRows(
            AttentionRows(kv_bytes=r.kv_bytes, **fields_), self.seconds[keep], self.is_prefill[keep]
        )


@dataclass(slots=True)
class MoeRows:
    """Measured routed experts of one MoE table dtype (balanced routing), one row per
    (shape, EP, tokens): MXFP4 weights in 16-bit math (``w4a16_mxfp4``), the rows the
    dequantization rate is fitted to (no EP), or a low-precision format's, the rows its
    experts' fixed cost is fitted to (`fit_moe_overhead`)."""

    tokens: np.ndarray
    hidden: np.ndarray
    inter: np.ndarray  # expert intermediate size / MoE TP
    top_k: np.ndarray
    experts: np.ndarray
    seconds: np.ndarray
    ep: np.ndarray = None  # type: ignore[assignment]  # expert parallel degree; None: 1
    # weight-only rows: bytes a weight of their format, its scales included (MXFP4's, or
    # INT4's: `_weight_only_moe_rows`); 0: MXFP4's
    weight_bytes: float = 0.0

    def __post_init__(self) -> None:
        if self.ep is None:
            self.ep = np.ones(len(self.tokens))

    def take(self, keep: np.ndarray) -> MoeRows:
        return MoeRows(*(
            v[keep] if isinstance(v, np.ndarray) else v
            for v in (getattr(self, f) for f in self.__dataclass_fields__)
        ))  # fmt: skip


@dataclass(slots=True)
class SkuEngineTables:
    """The rows one (GPU, engine) fit sees, and the tables they came from."""

    sku: GpuSku
    engine: str
    labels: list[str]
    gemm: dict[str, GemmRows]  # table dtype -> rows
    attention: AttnRows | None
    excluded: list[str] = field(default_factory=list)  # what was left out, in words
    weight_only_moe: MoeRows | None = None
    low_precision_moe: dict[str, MoeRows] = field(default_factory=dict)  # by expert format


def _main_kernel(df) -> str:
    return str(df["kernel_source"].value_counts().index[0]) if len(df) else ""


def _attention_rows(context, generation) -> AttnRows | None:
    parts = []
    for df, phase in ((context, "context"), (generation, "generation")):
        if df is None or df.empty:
            continue
        b = df["batch_size"].to_numpy(dtype=float)
        if phase == "context":
            s = df["isl"].to_numpy(dtype=float)
            npt, npf = b * s, b
            pairs, kvt = b * s * (s + 1.0) / 2.0, b * s
            nd = dkv = np.zeros_like(b)
        else:
            npt = npf = pairs = kvt = np.zeros_like(b)
            nd, dkv = b, b * (df["step"].to_numpy(dtype=float) + 1.0)
        parts.append(
            (
                df["num_heads"].to_numpy(dtype=float),
                df["num_key_value_heads"].to_numpy(dtype=float),
                df["head_dim"].to_numpy(dtype=float),
                npt, npf, pairs, kvt, nd, dkv,
                df["seconds"].to_numpy(dtype=float),
                np.full(len(b), phase == "context"),
            )
        )  # fmt: skip
    if not parts:
        return None
    cols = [np.concatenate(c) for c in zip(*parts, strict=True)]
    rows = AttentionRows(
        cols[0], cols[1], cols[2], 2.0, cols[3], cols[4], cols[5], cols[6], cols[7], cols[8]
    )
    return AttnRows(rows, cols[9], cols[10].astype(bool))


def _table_version(engine: str) -> str | None:
    """The version the engine's default profile asks the tables for."""
    profile = load_engine(engine)
    return None if profile.is_vidur else profile.version


@functools.cache
def _builtin_head_shapes() -> frozenset[tuple[int, int, int]]:
    """(heads, kv heads, head_dim) per GPU of every built-in model at TP 1, 2, 4, 8."""
    out: set[tuple[int, int, int]] = set()
    for name in builtin_model_names():
        out |= model_shapes(load_model(name))[1]
    return frozenset(out)


@functools.cache
def _builtin_gemm_shapes() -> tuple[tuple[int, int], ...]:
    """(n, k) per GPU of every built-in model's projections at TP 1, 2, 4, 8."""
    out: set[tuple[int, int]] = set()
    for name in builtin_model_names():
        out |= model_shapes(load_model(name))[0]
    return tuple(sorted(out))


def _with_model_shapes(
    grid: GemmRows, system: str, engine: str, version: str | None, dtype: str
) -> GemmRows:
    """`grid` plus rows at the built-in models' (n, k) off the grid, interpolated from the
    table as the profiled backend does (bilinear in log n, log k; inside the measured range
    only), at every measured m: the fit then weighs the shapes models run."""
    from estimators._profiled import _gemm_cube

    _, cube = _gemm_cube(system, engine, version, dtype)
    if cube is None:
        return grid
    ms, ns, ks, _ = cube
    on_grid = set(zip(grid.n.tolist(), grid.k.tolist(), strict=True))
    parts = [grid]
    for n, k in _builtin_gemm_shapes():
        if (n, k) in on_grid or not (ns[0] <= n <= ns[-1] and ks[0] <= k <= ks[-1]):
            continue
        if n < MIN_DIM or k < MIN_DIM:
            continue
        curve = gemm_curve(cube, n, k)
        if curve is None:
            continue
        m = ms.astype(float)
        parts.append(
            GemmRows(m, np.full(len(m), float(n)), np.full(len(m), float(k)), curve.many(m))
        )
    return GemmRows(
        *(np.concatenate([getattr(p, f) for p in parts]) for f in ("m", "n", "k", "seconds"))
    )


def load_tables(sku: GpuSku, engine: str) -> SkuEngineTables | None:
    """The GEMM and attention rows of `sku` under `engine` (None: the package has none)."""
    system = aic.system_for_sku(sku.id)
    if system is None:
        return None
    version = _table_version(engine)
    labels: list[str] = []
    gemm: dict[str, GemmRows] = {}
    try:
        ref, df = aic.load_gemm(system, engine, version)
    except aic.AicDataMissing:
        return None
    labels.append(ref.label)
    excluded: list[str] = []
    for dtype in GEMM_DTYPES:
        reason = aic.UNREPRESENTATIVE_GEMM_ROWS.get((engine, dtype))
        if reason is not None:
            excluded.append(reason)
            continue
        sub = df[(df["gemm_dtype"] == dtype) & (df["n"] >= MIN_DIM) & (df["k"] >= MIN_DIM)]
        if sub.empty:
            continue
        best = sub.groupby(["m", "n", "k"], sort=True)["seconds"].min().reset_index()
        # more work is never faster: a shape's time at m is at most its time at any larger m
        # (measurement spikes removed, as the profiled backend reads the table)
        best["seconds"] = best.groupby(["n", "k"], sort=False)["seconds"].transform(
            lambda t: monotone(t.to_numpy())
        )
        grid = GemmRows(*(best[c].to_numpy(dtype=float) for c in ("m", "n", "k", "seconds")))
        gemm[dtype] = _with_model_shapes(grid, system, engine, version, dtype)
    phases = []
    for phase in ("context", "generation"):
        try:
            ref, adf = aic.load_attention(system, engine, phase, version)
        except aic.AicDataMissing:
            phases.append(None)
            continue
        labels.append(ref.label)
        shapes = _builtin_head_shapes()
        adf = adf[
            (adf["window_size"] == 0)
            & (adf["kv_cache_dtype"] == "bfloat16")
            & pd.Series(
                list(
                    zip(adf["num_heads"], adf["num_key_value_heads"], adf["head_dim"], strict=True)
                ),
                index=adf.index,
            ).isin(shapes)
        ]
        adf = adf[adf["kernel_source"] == _main_kernel(adf)]
        keys = ["num_heads", "num_key_value_heads", "head_dim", "batch_size", "isl", "step"]
        phases.append(adf.groupby(keys, sort=True)["seconds"].median().reset_index())
    moe_version = _family_moe_version(sku, engine, version)
    moe = _weight_only_moe_rows(sku, system, engine, moe_version, labels)
    low = _low_precision_moe_rows(sku, system, engine, moe_version, labels)
    attention = _attention_rows(*phases)
    return SkuEngineTables(sku, engine, labels, gemm, attention, excluded, moe, low)


def _family_moe_version(sku: GpuSku, engine: str, wanted: str | None) -> str | None:
    """The MoE table version the MoE fits of `sku` read (weight-only and low-precision
    experts alike): the nearest to `wanted` among the versions every fitted GPU of its
    family has (`FIT_SKUS`), else `wanted`.

    The fitted MoE constants (unpacking rate, M tile, fixed costs) belong to the GPU's
    SMs: H100 and H200 are the same GH100 die at the same clocks and differ only in
    memory, so their fits may differ only through what the bandwidth explains.  Read from
    tables of different collector versions they did not: vLLM's H100 has only the 0.24.0
    MoE table (its rows name their kernels: OpenAI's Triton kernel at gpt-oss's shapes,
    Marlin at another), while the H200's nearest to the profile's 0.13 is 0.19.0's (the
    collector's FusedMoE module with whatever backend vLLM chose, recorded only as
    ``vllm_mxfp4_moe``: 20-48% slower than 0.24.0's Triton rows at 1-16 tokens of the
    same shapes), which priced the H200's experts slower than the H100's."""
    catalog = load_catalog()
    shared: set[str] | None = None
    for sku_id in FIT_SKUS:
        system = aic.system_for_sku(sku_id)
        if system is None or catalog.get(sku_id).family != sku.family:
            continue
        have = set(aic.versions_for(system, "moe", engine, "moe_perf.parquet"))
        if have:  # a GPU without any MoE table of the engine does not constrain the others
            shared = have if shared is None else shared & have
    if not shared:
        return wanted
    return aic.nearest_version(shared, wanted)


def _weight_only_moe_rows(
    sku: GpuSku, system: str, engine: str, version: str | None, labels: list[str]
) -> MoeRows | None:
    """The engine's measured weight-only routed experts on `sku`, as `_moe_rows` reads them:
    its MXFP4 ones where they run weight-only (16-bit math: no FP4 tensor cores), else (FP4
    tensor cores take MXFP4 as W4A8) its INT4 ones, which run weight-only on every GPU, of
    the kernel the engine runs them with (`INT4_WEIGHT_ONLY_DTYPE`, `EngineProfile.
    moe_kernel`) from the nearest table version that times it; None where there are none."""
    if not gemm_math(sku, Precision.MXFP4).low:
        try:
            ref, df = aic.load_moe(system, engine, version)
        except aic.AicDataMissing:
            return None
        rows = _moe_rows(df, WEIGHT_ONLY_MOE_DTYPE)
        if rows is not None:
            labels.append(ref.label)
        return rows
    from estimators._engines import load_engine

    kernel = load_engine(engine).moe_kernel(Precision.INT4, sku.family)
    for v in aic.moe_versions_to_try(system, engine, version):  # nearest, else newest with it
        try:
            ref, df = aic.load_moe(system, engine, v)
        except aic.AicDataMissing:
            continue
        if kernel:
            df = df[df["kernel_source"].str.contains(kernel, regex=False)]
        rows = _moe_rows(df, INT4_WEIGHT_ONLY_DTYPE)
        if rows is not None:
            of_kernel = f", {kernel}" if kernel else ""
            labels.append(f"{ref.label} ({INT4_WEIGHT_ONLY_DTYPE}{of_kernel})")
            rows.weight_bytes = weight_bytes(Precision.INT4)
            return rows
    return None


def _low_precision_moe_rows(
    sku: GpuSku, system: str, engine: str, version: str | None, labels: list[str]
) -> dict[str, MoeRows]:
    """The engine's measured routed experts of each low-precision format `sku` runs in its
    tensor cores (`LOW_PRECISION_MOE_DTYPES`: FP8 everywhere from Hopper on, NVFP4 and
    MXFP4 x MXFP8 where FP4 tensor cores are), as `_moe_rows` reads them; {} where none."""
    if not gemm_math(sku, Precision.FP8).low:
        return {}
    try:
        ref, df = aic.load_moe(system, engine, version)
    except aic.AicDataMissing:
        return {}
    out = {}
    whole = df[df["moe_tp_size"] == 1]
    for fmt, dtype in LOW_PRECISION_MOE_DTYPES.items():
        if fmt in ("fp4", "w4a8") and not gemm_math(sku, Precision.FP4).low:
            continue
        rows = _moe_rows(whole, dtype, with_ep=True)
        if rows is not None:
            out[fmt] = rows
    if out and ref.label not in labels:
        labels.append(ref.label)
    return out


def _moe_rows(df: pd.DataFrame, dtype: str, with_ep: bool = False) -> MoeRows | None:
    """Rows of `dtype` with balanced routing, every kernel's and shape's, the fastest kernel
    at each token count, made non-decreasing in tokens; None where there are none.  Rows
    without expert parallelism, and (`with_ep`) with it where every kernel that timed
    `dtype` shrank the GPU's experts with EP (`_kernels_sharded_by_ep`): where one did
    not, the fastest kernel would change between EP 1 and EP n with the collector, not
    with the engine (TensorRT-LLM's B200 NVFP4 table: its min-latency kernel, the fastest
    at EP 1, is timed alike at every EP)."""
    df = df[
        (df["moe_dtype"] == dtype)
        & (df["distribution"] == "balanced")
        & ~df["kernel_source"].isin(list(aic.UNREPRESENTATIVE_MOE_KERNELS))
    ]
    if not (with_ep and _kernels_sharded_by_ep(df) == set(df["kernel_source"])):
        df = df[df["moe_ep_size"] == 1]
    if df.empty:
        return None
    keys = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
    best = df.groupby([*keys, "num_tokens"], sort=True)["seconds"].min().reset_index()
    best["seconds"] = best.groupby(keys, sort=False)["seconds"].transform(
        lambda t: monotone(t.to_numpy())
    )
    col = {k: best[k].to_numpy(dtype=float) for k in [*keys, "num_tokens", "seconds"]}
    return MoeRows(
        tokens=col["num_tokens"], hidden=col["hidden_size"],
        inter=col["inter_size"] / col["moe_tp_size"], top_k=col["topk"],
        experts=col["num_experts"], seconds=col["seconds"], ep=col["moe_ep_size"],
    )  # fmt: skip


# an EP table row counts where, at the shape's largest token count measured at EP 1 and at
# EP n, EP n takes at most this share of EP 1's time (the median over the kernel's shapes):
# a GPU holding 1/n of the experts reads about 1/n of the weights (0.46-0.68 at EP 2 in the
# tables that shard; 0.92-1.0 in those that do not)
EP_SHARDED_TIME_SHARE = 0.8


def _kernels_sharded_by_ep(df: pd.DataFrame) -> set[str]:
    """The kernels of `df` (one dtype, balanced routing) whose EP rows time a GPU holding
    1/EP of the experts at every EP degree measured.  Some collectors did not shrink the
    GPU's experts: vLLM 0.19.0's H200 table times 8 tokens of gpt-oss-20b's 32 experts in
    0.223 ms at EP 1 and at EP 8 (4 experts a GPU) alike."""
    out = set()
    keys = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size"]
    for kernel, kdf in df.groupby("kernel_source"):
        best = kdf.groupby([*keys, "moe_ep_size", "num_tokens"])["seconds"].min()
        shares: dict[int, list[float]] = {}
        for _, shape in best.groupby(level=list(range(len(keys)))):
            by_ep = shape.droplevel(list(range(len(keys))))
            eps = by_ep.index.get_level_values(0)
            if 1 not in eps:
                continue
            one = by_ep.loc[1]
            for ep in sorted(set(eps) - {1}):
                other = by_ep.loc[ep]
                common = one.index.intersection(other.index)
                if len(common):
                    top = common.max()
                    shares.setdefault(int(ep), []).append(other[top] / one[top])
        if shares and all(np.median(v) <= EP_SHARDED_TIME_SHARE for v in shares.values()):
            out.add(str(kernel))
    return out


def model_shapes(
    model: ModelArchitecture, tps: Sequence[int] = TP_DEGREES
) -> tuple[set[tuple[int, int]], set[tuple[int, int, int]]]:
    """((n, k) GEMM shapes, (heads, kv heads, head_dim) attention shapes) per GPU of
    `model` at each TP degree that divides its heads."""
    gemms: set[tuple[int, int]] = set()
    heads: set[tuple[int, int, int]] = set()
    h, hd = model.hidden_size, model.head_dim
    for tp in tps:
        if model.num_attention_heads % tp:
            continue
        q = model.num_attention_heads // tp
        kv = max(1, model.num_key_value_heads // tp)
        inter = model.intermediate_size // tp
        up = (2 if model.gated_mlp else 1) * inter
        vocab = -(-model.vocab_size // tp)
        gemms |= {((q + 2 * kv) * hd, h), (h, q * hd), (up, h), (h, inter), (vocab, h)}
        heads.add((q, kv, hd))
    return gemms, heads


def without_model_shapes(t: SkuEngineTables, model: ModelArchitecture) -> SkuEngineTables:
    """`t` without the GEMM rows at `model`'s TP-sharded (n, k) shapes and the attention
    rows at its per-GPU head shapes (TP 1, 2, 4, 8)."""
    gemms, heads = model_shapes(model)
    gemm = {}
    for dtype, g in t.gemm.items():
        hit = np.zeros(len(g.m), dtype=bool)
        for n, k in gemms:
            hit |= (g.n == n) & (g.k == k)
        gemm[dtype] = g.take(~hit)
    att = t.attention
    if att is not None:
        r = att.rows
        hit = np.zeros(len(att.seconds), dtype=bool)
        for q, kv, hd in heads:
            hit |= (r.heads == q) & (r.kv_heads == kv) & (r.head_dim == hd)
        att = att.take(~hit)
    what = (
        f"{model.name}: GEMM (n, k) {sorted(gemms)}; attention (heads, kv heads, head_dim) "
        f"{sorted(heads)}"
    )
    def others(rows: MoeRows) -> MoeRows | None:  # without its experts' (hidden, top-k) rows
        mine = (rows.hidden == model.hidden_size) & (rows.top_k == model.num_experts_per_tok)
        return rows.take(~mine) if (~mine).any() else None

    moe, low = t.weight_only_moe, t.low_precision_moe
    if model.num_experts:
        moe = others(moe) if moe is not None else None
        low = {fmt: kept for fmt, rows in low.items() if (kept := others(rows)) is not None}
        what += f"; MoE rows of hidden {model.hidden_size}, top-{model.num_experts_per_tok}"
    return replace(
        t, gemm=gemm, attention=att, excluded=[*t.excluded, what], weight_only_moe=moe,
        low_precision_moe=low,
    )  # fmt: skip


# --------------------------------------------------------------------------- predictions


def gemm_seconds(g: GemmRows, c: RooflineConstants, sku: GpuSku, fmt: str | None) -> np.ndarray:
    """The roofline's seconds for each GEMM row of format `fmt` (None: 16-bit), the
    estimator's own matmul formula: against the format's tensor peak, its weights with their
    scales."""
    precision = {None: Precision.BF16, "fp4": Precision.FP4}.get(fmt, Precision.FP8)
    w = weight_bytes(precision, FP8_BLOCK_WEIGHTS if fmt == "fp8_block" else 0)
    op = TokenOp(
        "gemm",
        "matmul",
        2.0 * g.n * g.k,
        g.n * g.k * w,
        (g.n + g.k) * _ACT_BYTES,  # type: ignore[arg-type]
    )
    peak = sku.peak_flops(fp8=precision is Precision.FP8, fp4=precision is Precision.FP4)
    k = _coeffs(c, peak, sku.memory_bandwidth_bytes, fp8=fmt is not None, gemm_format=fmt or "fp8")
    return _token_op_time(op, g.m, k)


def weight_only_moe_seconds(r: MoeRows, c: RooflineConstants, sku: GpuSku) -> np.ndarray:
    """The roofline's seconds for each measured weight-only MoE row: its experts
    (`routed_experts_part`, 16-bit math, 4-bit weights with their scales, the constants'
    dequantization bound where they have one) under the tables' balanced routing (every
    expert gets rows once there are as many rows as experts)."""
    k = weight_only_coeffs(_coeffs(c, sku.peak_flops(fp8=False), sku.memory_bandwidth_bytes), c)
    return _balanced_moe_seconds(r, k, r.weight_bytes or weight_bytes(Precision.MXFP4))


# by expert format: the precision the experts' weights are stored in and their scale block
_EXPERT_WEIGHTS: dict[str, tuple[Precision, int]] = {
    "fp8": (Precision.FP8, 0), "fp8_block": (Precision.FP8, FP8_BLOCK_WEIGHTS),
    "fp4": (Precision.FP4, 0), "w4a8": (Precision.MXFP4, 0),
}  # fmt: skip


def low_precision_moe_seconds(
    r: MoeRows, c: RooflineConstants, sku: GpuSku, fmt: str
) -> np.ndarray:
    """The roofline's seconds for each measured MoE row of expert format `fmt`, as the
    estimator prices its routed experts (`expert_coeffs`: the FP8 GEMM constants against
    the tensor peak the format computes in, the format's fitted fixed cost where `c` has
    one) under the tables' balanced routing."""
    math = Precision.FP4 if fmt == "fp4" else Precision.FP8
    k = expert_coeffs(c, sku, math, fmt)
    precision, block = _EXPERT_WEIGHTS[fmt]
    return _balanced_moe_seconds(r, k, weight_bytes(precision, block))


def _balanced_moe_seconds(r: MoeRows, k: Any, w: float) -> np.ndarray:
    """Each row's time on one GPU of its EP group, the table's balanced routing giving every
    GPU an equal share of the rows, one expert per row until all its experts are touched."""
    out = np.empty(len(r.seconds))
    for i in range(len(out)):
        experts, top_k, ep = int(r.experts[i]), int(r.top_k[i]), int(r.ep[i])
        local = experts / ep
        moe = MoeShape(experts, top_k, int(r.hidden[i]), local, int(r.inter[i]), True, ep)
        rows = r.tokens[i] * top_k / ep
        out[i] = routed_experts_part(moe, rows, min(local, rows), w, k)[0]
    return out


def _held_out_moe(r: MoeRows) -> np.ndarray:
    """Mask of the rows of every HOLD_MOE_EVERY-th (shape, MoE TP)."""
    keys = list(zip(r.hidden.tolist(), r.inter.tolist(), r.top_k.tolist(),
                    r.experts.tolist(), strict=True))  # fmt: skip
    shapes = sorted(set(keys))
    held = {s for i, s in enumerate(shapes) if i % HOLD_MOE_EVERY == HOLD_MOE_EVERY - 1}
    return np.array([s in held for s in keys])


def fit_dequant_rate(r: MoeRows, c: RooflineConstants, sku: GpuSku) -> RooflineConstants:
    """`c` with the weight-only dequantization rate (`matmul_dequant_tera_per_s`), M tile
    (`matmul_dequant_tile_rows`, one of DEQUANT_TILE_ROWS) and fixed cost
    (`matmul_dequant_overhead_us`) that best price rows `r` (least squares on the log
    error; rate and fixed cost fitted at each tile), its other constants kept."""
    from scipy.optimize import minimize

    names = (DEQUANT_RATE, DEQUANT_OVERHEAD)
    # log bounds: 0.1-1000 tera-elements/s, 0.01-1000 us
    bounds = [(np.log(0.1), np.log(1000.0)), (np.log(0.01), np.log(1000.0))]
    best: tuple[float, RooflineConstants] | None = None
    for tile in DEQUANT_TILE_ROWS:
        at_tile = c.with_values({DEQUANT_TILE: float(tile)})

        def loss(x: np.ndarray, cc: RooflineConstants = at_tile) -> float:
            cc = cc.with_values(dict(zip(names, np.exp(x).tolist(), strict=True)))
            return _log_sq(weight_only_moe_seconds(r, cc, sku), r.seconds)

        res = minimize(loss, np.log([3.0, 10.0]), method="Nelder-Mead", bounds=bounds,
                       options={"xatol": 1e-4, "fatol": 1e-10, "maxiter": 2000})  # fmt: skip
        if best is None or res.fun < best[0]:
            values = dict(zip(names, np.exp(res.x).tolist(), strict=True))
            best = (float(res.fun), at_tile.with_values(values))
    assert best is not None
    return best[1]


def moe_overhead_rows(r: MoeRows) -> np.ndarray:
    """Mask of the decode-batch rows (`MOE_OVERHEAD_ROWS_PER_EXPERT`) of `r` that give each
    GPU of their EP group at least one expert row."""
    rows = r.tokens * r.top_k
    return (rows <= MOE_OVERHEAD_ROWS_PER_EXPERT * r.experts) & (rows >= r.ep)


def fit_moe_overhead(
    r: MoeRows, c: RooflineConstants, sku: GpuSku, fmt: str, names: Sequence[str]
) -> RooflineConstants:
    """`c` with the constants `names` (of `moe_overhead_terms`) that best price the
    decode-batch rows of `r` (least squares on the log error), format `fmt`'s other MoE
    terms 0 and its other constants kept."""
    from scipy.optimize import minimize, minimize_scalar

    rows = r.take(moe_overhead_rows(r))
    rest = dict.fromkeys(moe_overhead_terms(fmt), 0.0)
    # log bounds: 0.1-1000 us the fixed cost, 0.001-10 us each share per expert
    bounds = [(np.log(0.1), np.log(1000.0))] + [(np.log(1e-3), np.log(10.0))] * (len(names) - 1)

    def at(x: np.ndarray) -> RooflineConstants:
        return c.with_values({**rest, **dict(zip(names, np.exp(x).tolist(), strict=True))})

    def loss(x: np.ndarray) -> float:
        return _log_sq(low_precision_moe_seconds(rows, at(x), sku, fmt), rows.seconds)

    if len(names) == 1:
        one = minimize_scalar(lambda x: loss(np.array([x])), bounds=bounds[0], method="bounded",
                              options={"xatol": 1e-4})  # fmt: skip
        return at(np.array([one.x]))
    start = np.log([20.0] + [0.05] * (len(names) - 1))
    res = minimize(loss, start, method="Nelder-Mead", bounds=bounds,
                   options={"xatol": 1e-4, "fatol": 1e-10, "maxiter": 4000})  # fmt: skip
    return at(res.x)


def fit_moe_overheads(
    train: MoeRows, test: MoeRows, c: RooflineConstants, sku: GpuSku, fmt: str
) -> tuple[RooflineConstants, tuple[str, ...]]:
    """`c` with expert format `fmt`'s fitted fixed cost and shares (`fit_moe_overhead` on
    `train`), and their names.  The engine's fused MoE kernels launch, route, permute,
    quantize and finalize in a time of their own, which the dense GEMMs' fitted fixed costs
    (each with its activation quantization) do not measure:
    - the fixed cost (``moe_<fmt>_overhead_us``) always;
    - its share per expert the GPU holds (``per_local_expert_us``) where the decode-batch
      rows time more than one EP degree: the same shapes with their experts spread over
      more or fewer GPUs measure it (across shapes alone it would stand in for whatever
      else differs between them);
    - its share per expert of the model (``per_routed_expert_us``: routing and permutation
      over all of them), told apart only across shapes, kept only where it lowers the MAPE
      of `test`'s decode-batch rows (held-out shapes), as a GEMM format's own constants are.
    """
    fixed, local, routed = moe_overhead_terms(fmt)
    decode = train.ep[moe_overhead_rows(train)]
    names: tuple[str, ...] = (fixed, local) if len(set(decode.tolist())) > 1 else (fixed,)
    fit = fit_moe_overhead(train, c, sku, fmt, names)
    held = test.take(moe_overhead_rows(test))
    if local in names and len(held.seconds):
        more = fit_moe_overhead(train, c, sku, fmt, (*names, routed))

        def mape(cc: RooflineConstants) -> float:
            return _mape(low_precision_moe_seconds(held, cc, sku, fmt), held.seconds)

        if mape(more) < mape(fit):
            return more, (*names, routed)
    return fit, names


def attn_seconds(a: AttnRows, c: RooflineConstants, sku: GpuSku) -> np.ndarray:
    return attention_seconds(a.rows, c, sku.peak_flops(fp8=False), sku.memory_bandwidth_bytes)


# --------------------------------------------------------------------------- fitting


def _held_out_gemm(g: GemmRows) -> np.ndarray:
    """Mask of the rows of every HOLD_GEMM_EVERY-th (n, k) shape."""
    shapes = sorted(set(zip(g.n.tolist(), g.k.tolist(), strict=True)))
    held = {s for i, s in enumerate(shapes) if i % HOLD_GEMM_EVERY == HOLD_GEMM_EVERY - 1}
    return np.array([s in held for s in zip(g.n.tolist(), g.k.tolist(), strict=True)])


def _held_out_attention(a: AttnRows) -> np.ndarray:
    r = a.rows
    keys = list(zip(r.heads.tolist(), r.kv_heads.tolist(), strict=True))
    shapes = sorted(set(keys))
    held = {s for i, s in enumerate(shapes) if i % HOLD_ATTN_EVERY == HOLD_ATTN_EVERY - 1}
    return np.array([s in held for s in keys])


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(np.mean(np.abs(pred / meas - 1.0))) if len(meas) else float("nan")


@dataclass(slots=True)
class FitResult:
    """Fitted constants of one (GPU, engine), the fields fitted, and operator errors:
    ``errors[group] = (train MAPE, held-out MAPE, train rows, held-out rows)``."""

    sku_id: str
    engine: str
    constants: RooflineConstants
    fitted: list[str]
    errors: dict[str, tuple[float, float, int, int]]
    labels: list[str]
    excluded: list[str]

    def values(self) -> dict[str, float]:
        return {n: float(getattr(self.constants, n)) for n in self.fitted}


def _splits(t: SkuEngineTables) -> tuple[dict[str, tuple[GemmRows, GemmRows]], tuple | None]:
    """(GEMM (train, held-out) rows by dtype, attention (train, held-out) rows or None)."""
    gemm = {}
    for dtype, g in t.gemm.items():
        if len(g.m):
            held = _held_out_gemm(g)
            gemm[dtype] = (g.take(~held), g.take(held))
    att = None
    if t.attention is not None and len(t.attention.seconds):
        held = _held_out_attention(t.attention)
        att = (t.attention.take(~held), t.attention.take(held))
    return gemm, att


def score_tables(
    t: SkuEngineTables, c: RooflineConstants
) -> dict[str, tuple[float, float, int, int]]:
    """``{group: (train MAPE, held-out MAPE, train rows, held-out rows)}`` of constants `c`
    on the rows of `t` (GEMM by dtype, context and generation attention)."""
    gemm, att = _splits(t)
    out: dict[str, tuple[float, float, int, int]] = {}
    for dtype, (train, test) in gemm.items():
        fmt = GEMM_DTYPES[dtype]
        out[f"gemm {dtype}"] = (
            _mape(gemm_seconds(train, c, t.sku, fmt), train.seconds),
            _mape(gemm_seconds(test, c, t.sku, fmt), test.seconds),
            len(train.m),
            len(test.m),
        )
    moe = t.weight_only_moe
    if moe is not None:  # without a fitted rate: the roofline without that bound
        held = _held_out_moe(moe)
        pred = weight_only_moe_seconds(moe, c, t.sku)
        dtype = INT4_WEIGHT_ONLY_DTYPE if moe.weight_bytes else WEIGHT_ONLY_MOE_DTYPE
        out[f"moe {dtype}"] = (
            _mape(pred[~held], moe.seconds[~held]),
            _mape(pred[held], moe.seconds[held]),
            int((~held).sum()),
            int(held.sum()),
        )
    for fmt, rows in t.low_precision_moe.items():  # the decode-batch rows the fit sees
        is_decode = moe_overhead_rows(rows)
        held = _held_out_moe(rows)[is_decode]  # the shapes `fit_tables` holds out
        decode = rows.take(is_decode)
        pred = low_precision_moe_seconds(decode, c, t.sku, fmt)
        out[f"moe {LOW_PRECISION_MOE_DTYPES[fmt]}"] = (
            _mape(pred[~held], decode.seconds[~held]),
            _mape(pred[held], decode.seconds[held]),
            int((~held).sum()),
            int(held.sum()),
        )
    if att is not None:
        train, test = att
        p_train, p_test = attn_seconds(train, c, t.sku), attn_seconds(test, c, t.sku)
        for phase, sel in (("context", True), ("generation", False)):
            tr, te = train.is_prefill == sel, test.is_prefill == sel
            out[f"attention {phase}"] = (
                _mape(p_train[tr], train.seconds[tr]),
                _mape(p_test[te], test.seconds[te]),
                int(tr.sum()),
                int(te.sum()),
            )
    return out


# The matmul constants that are fractions of a peak (compute efficiency, the HBM bandwidth
# reached): at most 1.  At small m the compute floor (m_half) and the weight-read time
# (mem_eff) explain a GEMM's time equally well, so an unbounded fit may trade one for the
# other: it reached mem_eff 1.5 (SGLang's H200 table: 2.9 in FP8, a bandwidth above the
# HBM's) with a floor of 140-160 tokens.  The tables' own small-m rows read at 55-90% of
# the HBM bandwidth (vLLM 0.24.0 H200: a 8192 x 8192 weight in 35 us, 80%), and a floor
# fitted that way makes a grouped GEMM, which pays it once per expert, 2x too slow at
# decode batch sizes.
MATMUL_AT_MOST_ONE = ("eff_max", "mem_eff")
# m_half starts of the multi-start fit (tokens): the floor's region is flat in the loss
MATMUL_M_HALF_STARTS = (8.0, 64.0)


def fit_matmul(
    c: RooflineConstants, names: Sequence[str], loss: Callable[[RooflineConstants], float]
) -> RooflineConstants:
    """The matmul constants `names` minimising `loss`, the efficiencies bounded by 1
    (`MATMUL_AT_MOST_ONE`): bounded Nelder-Mead over their logs from `c` and from
    `MATMUL_M_HALF_STARTS`, each run restarted once from where it stopped; the best."""
    from scipy.optimize import minimize

    upper = [0.0 if n.endswith(MATMUL_AT_MOST_ONE) else np.inf for n in names]
    bounds = [(np.log(1e-6), u) for u in upper]

    def constants(x: np.ndarray) -> RooflineConstants:
        return c.with_values(dict(zip(names, np.exp(x), strict=True)))

    def f(x: np.ndarray) -> float:
        return loss(constants(x))

    # from `c`, the bounded constants just inside their bound
    x0 = np.log([max(getattr(c, n), 1e-6) for n in names])
    x0 = np.where(np.isinf(upper), x0, np.minimum(x0, np.log(0.99)))
    starts = [x0]
    half = [i for i, n in enumerate(names) if n.endswith("m_half")]
    for m_half in MATMUL_M_HALF_STARTS:
        s = x0.copy()
        s[half] = np.log(m_half)
        starts.append(s)
    best = None
    for s in starts:
        for _ in range(2):  # a restart from where the simplex collapsed
            res = minimize(f, s, method="Nelder-Mead", bounds=bounds,
                           options={"maxiter": 2000, "xatol": 1e-5, "fatol": 1e-10})  # fmt: skip
            s = res.x
        if best is None or res.fun < best.fun:
            best = res
    return constants(best.x)


def fit_tables(t: SkuEngineTables, start: RooflineConstants) -> FitResult:
    """Fit the matmul (16-bit, FP8) and attention constants of `t` from `start`, on the
    rows not held out."""
    c = start
    fitted: list[str] = []
    sku = t.sku
    gemm, att = _splits(t)
    for dtype, (train, test) in gemm.items():
        fmt = GEMM_DTYPES[dtype]
        names = MATMUL if fmt is None else MATMUL_LOW[fmt]
        if fmt is not None:  # start from the constants the format falls back to
            base = MATMUL if fmt == "fp8" else MATMUL_FP8
            start = zip(names, base, MATMUL, strict=True)
            c = c.with_values({n: getattr(c, b) or getattr(c, m) for n, b, m in start})

        weight = np.sqrt(train.seconds)

        def mm_loss(cc: RooflineConstants, rows=train, fmt=fmt, w=weight) -> float:
            d = np.log(gemm_seconds(rows, cc, sku, fmt)) - np.log(rows.seconds)
            return float(np.sum(w * d * d) / np.sum(w))

        fit = fit_matmul(c, names, mm_loss)
        if fmt is not None:  # its own constants only where they beat its fallback's held out
            off = fit.with_values(dict.fromkeys(names, 0.0))
            if _mape(gemm_seconds(test, off, sku, fmt), test.seconds) <= _mape(
                gemm_seconds(test, fit, sku, fmt), test.seconds
            ):
                c = off
                continue
        c = fit
        fitted += names
    moe = t.weight_only_moe
    if moe is not None and "matmul_m_half" in fitted:  # on the fitted 16-bit constants
        c = fit_dequant_rate(moe.take(~_held_out_moe(moe)), c, sku)
        fitted += [DEQUANT_RATE, DEQUANT_TILE, DEQUANT_OVERHEAD]
    for fmt, rows in t.low_precision_moe.items():  # on the fitted GEMM constants
        held = _held_out_moe(rows)
        train = rows.take(~held)
        if moe_overhead_rows(train).any():
            c, names = fit_moe_overheads(train, rows.take(held), c, sku, fmt)
            fitted += names
    if att is not None:
        train = att[0]
        pf = train.is_prefill

        def at_loss(cc: RooflineConstants) -> float:
            pred = attn_seconds(train, cc, sku)
            return 0.5 * (
                _log_sq(pred[pf], train.seconds[pf]) + _log_sq(pred[~pf], train.seconds[~pf])
            )

        c = c.with_values({"attention_prefill_causal_factor": CAUSAL_FACTOR})
        if c.attention_decode_seq_kv <= 0:  # the log-parametrised search needs a start > 0
            c = c.with_values({"attention_decode_seq_kv": 16.0})  # one paged KV block
        c = fit_group(c, ATTENTION, at_loss, iters=1500)
        fitted += ["attention_prefill_causal_factor", *ATTENTION]
    return FitResult(sku.id, t.engine, c, fitted, score_tables(t, c), t.labels, t.excluded)


# --------------------------------------------------------------------------- cache


def _digest(t: SkuEngineTables, start: RooflineConstants) -> str:
    h = hashlib.sha256(FIT_VERSION.encode())
    h.update(json.dumps([t.sku.id, t.engine, t.labels, start.to_nested()], sort_keys=True).encode())
    for dtype in sorted(t.gemm):
        g = t.gemm[dtype]
        h.update(dtype.encode())
        for arr in (g.m, g.n, g.k, g.seconds):
            h.update(np.ascontiguousarray(arr).tobytes())
    if t.attention is not None:
        h.update(np.ascontiguousarray(t.attention.seconds).tobytes())
        r = t.attention.rows
        for arr in (r.heads, r.kv_heads, r.num_prefill_tokens, r.decode_kv_tokens):
            h.update(np.ascontiguousarray(arr).tobytes())
    moe = {"w4a16": t.weight_only_moe} if t.weight_only_moe is not None else {}
    for fmt, rows in {**moe, **t.low_precision_moe}.items():
        h.update(fmt.encode())
        for f in MoeRows.__dataclass_fields__:
            h.update(np.ascontiguousarray(getattr(rows, f)).tobytes())
    return h.hexdigest()[:24]


def _cached_fit(t: SkuEngineTables, start: RooflineConstants, use_cache: bool) -> FitResult:
    path = cache_dir() / "roofline-fits" / f"{_digest(t, start)}.json"
    if use_cache and path.is_file():
        try:
            raw = json.loads(path.read_text("utf-8"))
            return FitResult(
                raw["sku_id"],
                raw["engine"],
                start.with_values(raw["values"]),
                list(raw["fitted"]),
                {k: tuple(v) for k, v in raw["errors"].items()},  # type: ignore[misc]
                list(raw["labels"]),
                list(raw["excluded"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache entry is refitted
    result = fit_tables(t, start)
    if use_cache:
        raw = {
            "sku_id": result.sku_id,
            "engine": result.engine,
            "values": result.values(),
            "fitted": result.fitted,
            "errors": result.errors,
            "labels": result.labels,
            "excluded": result.excluded,
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(raw), "utf-8")
        tmp.replace(path)
    return result


def fit_all(
    engines: Iterable[str] = FIT_ENGINES,
    skus: Iterable[str] = FIT_SKUS,
    *,
    exclude_sku: str | None = None,
    exclude_model: ModelArchitecture | None = None,
    use_cache: bool = True,
) -> list[FitResult]:
    """One fit per (GPU, engine) with tables, leaving out `exclude_sku`'s tables or the
    rows at `exclude_model`'s shapes.  Each starts from the GPU's constants without an
    engine layer (roofline.yaml's defaults, family and SKU entries)."""
    catalog = load_catalog()
    out = []
    for engine in engines:
        for sku_id in skus:
            if sku_id == exclude_sku:
                continue
            sku = catalog.get(sku_id)
            t = load_tables(sku, engine)
            if t is None:
                continue
            if exclude_model is not None:
                t = without_model_shapes(t, exclude_model)
            out.append(_cached_fit(t, load_roofline_constants(sku), use_cache))
    return out


# --------------------------------------------------------------------------- the data file


def _geomean(values: list[float]) -> float:
    return float(np.exp(np.mean(np.log(values))))


def _family_value(name: str, values: list[float]) -> float:
    """The value a family (or an engine's defaults) takes from its GPUs' fitted `values`:
    their geometric mean, or for a kernel's tile size, a choice among candidates, the
    most common (the smallest of equally common ones)."""
    if name == DEQUANT_TILE:
        return min(values, key=lambda v: (-values.count(v), v))
    return _geomean(values)


def _nested(values: dict[str, float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name in RooflineConstants.field_names():
        if name in values:
            group, key = name.split("_", 1)
            out.setdefault(group, {})[key] = float(f"{values[name]:.4g}")
    return out


def engine_layer(fits: Sequence[FitResult]) -> dict[str, dict]:
    """roofline.yaml's ``engines:`` section: ``{engine: {defaults, families, skus}}``;
    a family's and the defaults' values are geometric means of its GPUs' fits."""
    catalog = load_catalog()
    layer: dict[str, dict] = {}
    for engine in dict.fromkeys(f.engine for f in fits):
        mine = [f for f in fits if f.engine == engine]
        by_family: dict[str, list[FitResult]] = {}
        for f in mine:
            family = catalog.get(f.sku_id).family
            by_family.setdefault(family, []).append(f)

        def mean_of(group: list[FitResult]) -> dict[str, float]:
            names = [
                n for n in RooflineConstants.field_names() if all(n in f.fitted for f in group)
            ]
            values = {n: _family_value(n, [getattr(f.constants, n) for f in group]) for n in names}
            tile = values.get(DEQUANT_TILE)
            if tile is not None:  # the rate of the GPUs fitted at the tile chosen
                rates = [
                    getattr(f.constants, DEQUANT_RATE)
                    for f in group
                    if getattr(f.constants, DEQUANT_TILE) == tile
                ]
                values[DEQUANT_RATE] = _geomean(rates)
            return values

        layer[engine] = {
            "defaults": _nested(mean_of(mine)),
            "families": {fam: _nested(mean_of(group)) for fam, group in sorted(by_family.items())},
            "skus": {f.sku_id: _nested(f.values()) for f in mine},
        }
    return layer


# --------------------------------------------------------------------------- all-reduce


def allreduce_seconds(cost: AllReduceCost, n: np.ndarray, nbytes: np.ndarray, link: float):
    """Seconds of all-reduces of `nbytes` over `n` GPUs under `cost`, as the roofline prices
    them: the ring line, or the faster of its two lines when it has a large-message one."""
    lines = ((cost.bw_eff, cost.latency_us * 1e-6),)
    if cost.large is not None:
        lines += ((cost.large[1], cost.large[0] * 1e-6),)
    return fastest_allreduce(nbytes, n, link, lines)


def fit_allreduce_lines(
    n: np.ndarray, nbytes: np.ndarray, seconds: np.ndarray, link: float, lines: int = 2
) -> AllReduceCost:
    """The all-reduce of `lines` algorithms (2: with a large-message line; 1: one ring line)
    fitted to measured times by least squares on log(predicted / measured), from a few
    starts."""
    from scipy.optimize import minimize

    def cost_of(x: np.ndarray) -> AllReduceCost:
        lat, eff, *large = np.exp(x)
        return AllReduceCost(lat * 1e6, eff, *((large[0] * 1e6, large[1]) if large else ()))

    def loss(x: np.ndarray) -> float:
        pred = allreduce_seconds(cost_of(x), n, nbytes, link)
        return float(np.mean(np.log(pred / seconds) ** 2))

    start = np.log([5e-6, 0.5, 30e-6, 0.9][: 2 * lines])
    best = None
    for scale in ((1, 1, 1, 1), (0.5, 1, 2, 1), (2, 0.7, 0.5, 1.2)):
        res = minimize(
            loss, start + np.log(scale[: 2 * lines]), method="Nelder-Mead",
            options={"maxiter": 4000, "xatol": 1e-6, "fatol": 1e-10},
        )  # fmt: skip
        if best is None or res.fun < best.fun:
            best = res
    return cost_of(best.x)


def _engine_table(sku: GpuSku, engine: str, load: Callable[..., tuple]) -> pd.DataFrame | None:
    """The rows `load` (an `aic` loader) reads for `engine` on `sku` at the table version
    nearest its default profile's, or None without a table."""
    system = aic.system_for_sku(sku.id)
    if system is None:
        return None
    try:
        return load(system, engine, _table_version(engine))[1]
    except aic.AicDataMissing:
        return None


def node_link(sku: GpuSku) -> float:
    """Bytes/s of the GPU link inside `sku`'s default node: the link the communication
    tables were measured over."""
    return sku.default_node.intra_node_bandwidth_gbps * 1e9


def even_log2(sizes: np.ndarray) -> np.ndarray:
    """Mask of the `sizes` of even log2 (rounded): the communication fits' training rows,
    the odd ones held out."""
    return np.round(np.log2(sizes)).astype(int) % 2 == 0


def allreduce_table(sku: GpuSku, engine: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(GPUs, message bytes, seconds) of `engine`'s own all-reduce table on `sku` (the version
    its default profile asks for; CUDA-graph kernels where the table has both; 2-8 GPUs,
    messages of 1 KiB to 128 MiB), or None without a table."""
    df = _engine_table(sku, engine, aic.load_custom_allreduce)
    if df is None:
        return None
    graph = df["variant"].astype(str).str.contains("graph")
    if graph.any():
        df = df[graph]
    nbytes = df["message_size"].to_numpy(dtype=float) * 2.0
    keep = (nbytes >= 1 << 10) & (nbytes <= 128 << 20) & (df["num_gpus"].to_numpy() > 1)
    if not keep.any():
        return None
    n = df["num_gpus"].to_numpy(dtype=float)[keep]
    return n, nbytes[keep], df["seconds"].to_numpy(dtype=float)[keep]


def mean_allreduce(costs: Sequence[AllReduceCost]) -> AllReduceCost:
    """The field-by-field mean of several GPUs' fits (a family's constants); the large line
    only where every fit has one."""
    larges = [c.large for c in costs]
    both = all(x is not None for x in larges)
    return AllReduceCost(
        float(np.mean([c.latency_us for c in costs])),
        float(np.mean([c.bw_eff for c in costs])),
        float(np.mean([x[0] for x in larges])) if both else None,  # type: ignore[index]
        float(np.mean([x[1] for x in larges])) if both else None,  # type: ignore[index]
    )


def fit_allreduce(sku: GpuSku, engine: str) -> AllReduceCost | None:
    """The all-reduce constants of `engine` on `sku` fitted to its own measured all-reduce
    table (`allreduce_table`), or None without a table."""
    table = allreduce_table(sku, engine)
    if table is None:
        return None
    return fit_allreduce_lines(*table, node_link(sku))


# --------------------------------------------------------------------------- all-to-all

# the GPUs whose all-to-all tables engines.yaml's all_to_all lines are the mean of, by family
A2A_SKUS = ("h100-sxm", "h200", "b200", "b300", "gb200")


@dataclass(frozen=True)
class AllToAllRows:
    """Measured MoE all-to-alls of one node: each rank's tokens, the EP degree, top-k, hidden
    size, and seconds of a dispatch plus a combine (`aic.load_all_to_all`)."""

    tokens: np.ndarray
    ep: np.ndarray
    ranks: np.ndarray  # `dispatch_ranks` of each row's experts and top-k
    hidden: np.ndarray
    seconds: np.ndarray

    def take(self, keep: np.ndarray) -> AllToAllRows:
        return AllToAllRows(*(a[keep] for a in (self.tokens, self.ep, self.ranks, self.hidden,
                                                self.seconds)))  # fmt: skip


def all_to_all_table(sku: GpuSku, engine: str) -> AllToAllRows | None:
    """`engine`'s measured all-to-all on `sku` (the table version nearest its default
    profile's), or None without a table."""
    df = _engine_table(sku, engine, aic.load_all_to_all)
    if df is None or df.empty:
        return None
    ranks = [
        dispatch_ranks(int(e), int(k), int(ep))
        for e, k, ep in zip(df["num_experts"], df["topk"], df["ep"], strict=True)
    ]
    return AllToAllRows(
        df["num_tokens"].to_numpy(dtype=float), df["ep"].to_numpy(dtype=float),
        np.array(ranks), df["hidden_size"].to_numpy(dtype=float),
        df["seconds"].to_numpy(dtype=float),
    )  # fmt: skip


def all_to_all_line_seconds(cost: AllToAllCost, rows: AllToAllRows, link: float) -> np.ndarray:
    """Seconds of `rows`' all-to-alls as the roofline prices them under `cost`."""
    lat = cost.latency_us * 1e-6
    return np.array([
        all_to_all_seconds(t * ep, r, int(h), 2, int(ep), link, cost.bw_eff, lat)
        for t, ep, r, h in zip(rows.tokens, rows.ep, rows.ranks, rows.hidden, strict=True)
    ])  # fmt: skip


def fit_all_to_all_line(rows: AllToAllRows, link: float) -> AllToAllCost:
    """The all-to-all line fitted to measured times by least squares on log(predicted /
    measured)."""
    from scipy.optimize import minimize

    def cost_of(x: np.ndarray) -> AllToAllCost:
        lat, eff = np.exp(x)
        return AllToAllCost(float(lat) * 1e6, float(eff))

    def loss(x: np.ndarray) -> float:
        pred = all_to_all_line_seconds(cost_of(x), rows, link)
        return float(np.mean(np.log(pred / rows.seconds) ** 2))

    res = minimize(
        loss, np.log([20e-6, 0.5]), method="Nelder-Mead",
        options={"maxiter": 4000, "xatol": 1e-7, "fatol": 1e-12},
    )  # fmt: skip
    return cost_of(res.x)


def fit_all_to_all(sku: GpuSku, engine: str) -> AllToAllCost | None:
    """`engine`'s all-to-all line fitted to its own measured table on `sku`, or None."""
    rows = all_to_all_table(sku, engine)
    if rows is None:
        return None
    return fit_all_to_all_line(rows, node_link(sku))


def all_to_all_key(sku: GpuSku, engine: str) -> str:
    """The engines.yaml entry `engine`'s all-to-all line on `sku` belongs to: the GPU's own
    (its id) where the engine runs its own kernels there (TensorRT-LLM on rack-scale NVLink:
    `aic.runs_mnnvl_all_to_all`), else its family's."""
    system = aic.system_for_sku(sku.id)
    return sku.id if system and aic.runs_mnnvl_all_to_all(system, engine) else sku.family


def mean_all_to_all(costs: Sequence[AllToAllCost]) -> AllToAllCost:
    """The field-by-field mean of several GPUs' lines (a family's entry in engines.yaml)."""
    return AllToAllCost(
        float(np.mean([c.latency_us for c in costs])), float(np.mean([c.bw_eff for c in costs]))
    )


def family_lines(
    skus: Iterable[str],
    fit: Callable[[GpuSku, str], Any],
    mean: Callable[[Sequence[Any]], Any],
    key: Callable[[GpuSku, str], str] | None = None,
) -> dict[str, dict[str, Any]]:
    """``{engine: {family: line}}`` for every engine of FIT_ENGINES: `fit` (`fit_allreduce`,
    `fit_all_to_all`) of each GPU of `skus` that has a table, and `mean` of those of a
    family (engines.yaml's entry for it); engines and families without a table are left
    out.  `key` names a GPU's entry where it is not its family's (`all_to_all_key`: its
    own where the engine runs other kernels there than on the rest of its family)."""
    catalog = load_catalog()
    out: dict[str, dict[str, Any]] = {}
    for engine in FIT_ENGINES:
        by_family: dict[str, list[Any]] = {}
        for sku_id in skus:
            sku = catalog.get(sku_id)
            line = fit(sku, engine)
            if line is not None:
                name = key(sku, engine) if key is not None else sku.family
                by_family.setdefault(name, []).append(line)
        if by_family:
            out[engine] = {family: mean(lines) for family, lines in by_family.items()}
    return out


def write_engine_layer(path: Path, fits: Sequence[FitResult], command: str) -> None:
    """Replace roofline.yaml's engine layers (from `ENGINE_SECTION_MARKER` on) by `fits`'."""
    import datetime as dt

    import yaml

    from estimators._calibration import ENGINE_SECTION_MARKER

    text = path.read_text("utf-8")
    at = text.find(ENGINE_SECTION_MARKER)
    base = (text[:at] if at >= 0 else text).rstrip("\n") + "\n\n"
    sources = sorted({label for f in fits for label in f.labels})
    header = [
        f"{ENGINE_SECTION_MARKER} (benchmarks/fit_roofline_aic.py; keep this line) ====",
        "#",
        f"# engines.<engine>: fitted {dt.date.today().isoformat()} by: {command}",
        "# Source: aiconfigurator-core 0.12.0 (NVIDIA, Apache-2.0), measured operator tables",
        "# read from the installed package (systems/data/...; the version nearest to each",
        "# engine's default profile):",
        *[f"#   {label}" for label in sources],
        "# Method (estimators/_aic_calibration.py): per GPU and engine, Nelder-Mead over the log",
        "# of the constants (matmul: efficiencies at most 1, several starts), mean squared",
        "# log error of the roofline's own formulas against",
        "# - GEMM rows with n, k >= 512 and rows at the built-in models' TP-sharded (n, k),",
        "#   interpolated from the table (16-bit -> matmul.*, FP8 -> matmul.fp8_*, block-scaled",
        "#   FP8 (fp8_block) -> matmul.fp8_block_*, NVFP4 -> matmul.fp4_*; low precision against",
        "#   the FP8 or FP4 tensor peak, its weights with their scales; fastest kernel per shape,",
        "#   made non-decreasing in m as the profiled backend reads the table), each row's",
        "#   squared log error weighted by the square root of its measured time (an iteration's",
        "#   time is the sum of its GEMMs': long GEMMs count more, short ones still count); a",
        "#   low-precision format's constants are kept only where they beat, on its held-out",
        "#   rows, the ones it falls back to (FP8: the 16-bit; fp8_block, NVFP4: the FP8);",
        "#   vLLM's fp8_block rows are left out (estimators/_aic_tables.py",
        "#   UNREPRESENTATIVE_GEMM_ROWS: flat in m, 4-17x its FP8 rows);",
        "# - on GPUs without FP4 tensor cores, the MoE table's MXFP4 experts in 16-bit math",
        "#   (w4a16_mxfp4, balanced routing, no EP; fastest kernel per shape and token count;",
        "#   from the table version nearest the profile's among those every fitted GPU of the",
        "#   family has, so that same-die GPUs are fitted to the same collector's kernels:",
        "#   _family_moe_version),",
        "#   on the fitted 16-bit constants -> matmul.dequant_tera_per_s (weight elements a",
        "#   weight-only kernel unpacks per second; 1000 = the fit's bound, never binding) and",
        "#   matmul.dequant_tile_rows (the M tile each of whose tiles unpacks the weights",
        "#   again, the best of 0 = once, 16, 32, 64, 128, 256; a family's: the most common,",
        "#   with the mean rate of the GPUs fitted at it)",
        "#   and matmul.dequant_overhead_us (the experts' fixed cost beyond their GEMMs');",
        "# - the MoE table's low-precision experts (FP8 fp8, block-scaled fp8_block, NVFP4 fp4,",
        "#   MXFP4 x MXFP8 w4a8 on GPUs with FP4 tensor cores; whole experts, balanced routing,",
        "#   EP rows where the kernel's collector shrank the GPU's experts with EP, fastest",
        "#   kernel per shape, EP and token count, not the kernels of",
        "#   estimators/_aic_tables.py UNREPRESENTATIVE_MOE_KERNELS), their decode-batch rows",
        "#   (EP <= tokens x top-k <= experts), on the fitted GEMM constants ->",
        "#   moe.<format>_overhead_us (the fused MoE kernels' fixed cost, in place of two GEMMs'",
        "#   and an activation's own), + per_local_expert_us x the GPU's experts where the rows",
        "#   span EP degrees, + per_routed_expert_us x the model's experts where that lowers the",
        "#   held-out shapes' MAPE;",
        "# - one layer's attention, the engine's main kernel, 16-bit KV, at the built-in models'",
        "#   per-GPU head shapes (TP 1-8), full attention: context rows (no cached prefix) and",
        "#   generation rows weighted equally -> attention.prefill_eff_max, prefill_query_pairs,",
        "#   decode_mem_eff, decode_seq_kv, overhead_us.  prefill_causal_factor is set to 1 (the",
        "#   tables cannot tell it from the efficiency: no cached prefix); prefill_ctx_pairs, the",
        "#   elementwise, communication and CPU constants stay as fitted to Vidur's tables above.",
        "# Every 5th GEMM (n, k) shape, every 4th attention head shape and every 3rd MoE shape",
        "# is held out of the fit; benchmarks/fit_roofline_aic.py prints train and held-out",
        "# errors.",
        "# Lookup for a deployment run by <engine> (vllm, sglang, trtllm; never vidur):",
        "# defaults, engines.<engine>.defaults, families.<family>,",
        "# engines.<engine>.families.<family>, skus.<id>, engines.<engine>.skus.<id>.",
        "# A family's and the engine's defaults are geometric means of its GPUs' fits.",
    ]
    body = yaml.safe_dump({"engines": engine_layer(fits)}, sort_keys=False)
    path.write_text(base + "\n".join(header) + "\n" + body, encoding="utf-8")
