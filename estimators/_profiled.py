"""Profiled cost model: measured operator times from tables (`estimators._op_tables`).

The tables come from an `OpTableSource`: by default aiconfigurator-core's perf database
for the deployment's GPU and engine (`AicOpTables`), or with ``op_tables`` a directory in
llmcap's own format, written by `llmcap profile run` or `llmcap profile import-vidur`.

Per layer and iteration, the token-level GEMMs (QKV, O, gate-up, down; and the LM head)
come from the measured GEMM table at this deployment's TP-sharded ``(n, k)`` with
``m`` = tokens in the batch; prefill attention from the context-attention table by the
number of prompt chunks and their equivalent prompt length; decode attention from the
generation-attention table by batch size and mean KV length; the TP all-reduces from
the engine's custom all-reduce and NCCL tables (the faster of the two at each message
size).  Elementwise operators (norms, RoPE, activation, residual adds, embedding,
sampling) and the pipeline send/recv come from the roofline model, as does any operator
whose table has no data for this shape or precision; those fallbacks are listed in
``fallbacks`` and in ``describe()``.  The per-iteration host overhead is the engine
profile's (the roofline's fitted one for ``vidur``), applied by the roofline's
``batch_cost``, which this backend reuses: it overrides only the per-operator attention
hooks (``_prefill_attn``, ``_decode_attn``) and the token-level part.

A GEMM shape whose bracketing (n, k) corners were not all measured at every m comes from
a regressor fitted to the whole table (`estimators._gemm_regressor`, cached on disk;
listed in ``regressed``).
Interpolation (`estimators._curves`) is log-log inside the measured range (exact at
measured points), and outside it: constant below the smallest size, linear in work above
the largest (``t(x) = t(x_max) * x / x_max``; for prefill attention, work grows with the
square of the prompt length).  Each measured curve is made monotone before use: a size never
takes longer than a larger measured size (``t(x) = min over x' >= x``), so measurement
noise cannot make more work cheaper.

Speed: every curve is built once per deployment (the tables once per process); the
token-level part of an iteration is cached on ``(tokens, sequences)`` as in the
roofline, and an attention lookup is two binary searches and a few float operations.
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

from estimators import _aic_tables as aic
from estimators._aic_moe_mla import moe_curve, moe_dtypes
from estimators._contract import BatchShape
from estimators._curves import (
    ChunkGrid,
    Curve,
    GemmCube,
    Grid2D,
    cube_from_rows,
    gemm_curve,
    grid_from_rows,
    monotone,
)
from estimators._engines import EngineProfile
from estimators._gemm_regressor import regressed_gemm_curve
from estimators._op_tables import (
    AttentionTable,
    OpTableMissing,
    OpTableSource,
    layer_gemm_shapes,
    load_op_tables,
)
from estimators._roofline import (
    _ACT_BYTES,
    OPERATOR_NAMES,
    RooflineEstimator,
    TokenOp,
    _token_op_time,
)
from estimators._types import ModelArchitecture, Precision
from sku_catalog._types import GpuSku, NodeShape

__all__ = [
    "DEFAULT_ENGINE",
    "AicOpTables",
    "Curve",
    "Grid2D",
    "ProfiledDataMissing",
    "ProfiledEstimator",
    "gemm_curve",
    "monotone",
    "profiled_coverage",
]

DEFAULT_ENGINE = "vllm"
_GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


class ProfiledDataMissing(ValueError):
    """No measured data for this SKU, engine or precision; the message says what exists."""


# --------------------------------------------------------------------------- tables -> grids


@functools.cache
def _gemm_cube(
    system: str, engine: str, version: str | None, dtype: str
) -> tuple[aic.TableRef, GemmCube | None]:
    """(ref, GEMM cube or None) of one dtype; the fastest kernel where several were measured."""
    ref, df = aic.load_gemm(system, engine, version)
    sub = df[df["gemm_dtype"] == dtype]
    if sub.empty:
        return ref, None
    best = sub.groupby(["m", "n", "k"], sort=True)["seconds"].min().reset_index()
    cols = [best[c].to_numpy() for c in ("m", "n", "k", "seconds")]
    return ref, cube_from_rows(*cols)


@functools.cache
def _attention_grid(
    system: str,
    engine: str,
    version: str | None,
    phase: str,
    heads: int,
    kv_heads: int,
    head_dim: int,
    kv_dtype: str,
) -> tuple[str, Grid2D | None, str]:
    """(table label, grid over (batch, length) or None, kernel) for one attention shape."""
    ref, df = aic.load_attention(system, engine, phase, version)
    sub = df[
        (df["num_heads"] == heads)
        & (df["num_key_value_heads"] == kv_heads)
        & (df["head_dim"] == head_dim)
        & (df["kv_cache_dtype"] == kv_dtype)
        & (df["window_size"] == 0)
    ]
    if sub.empty:
        return ref.label, None, ""
    kernel = str(sub["kernel_source"].value_counts().index[0])  # the engine's main kernel
    sub = sub[sub["kernel_source"] == kernel]
    length = "isl" if phase == "context" else "step"
    xs = sub[length].to_numpy(dtype=float)
    if phase == "generation":
        xs = xs + 1.0  # step = cached tokens; the decode token reads step + 1
    work_exp = 2.0 if phase == "context" else 1.0
    grid = grid_from_rows(sub["batch_size"].to_numpy(), xs, sub["seconds"].to_numpy(), work_exp)
    return ref.label, grid, kernel


@functools.cache
def _allreduce_curve(
    system: str, engine: str, version: str | None, tp: int
) -> tuple[list[str], Curve | None]:
    """(table labels, seconds of an all-reduce of x bf16 elements) over `tp` GPUs: the
    faster of the engine's custom all-reduce and NCCL at each measured size."""
    import pandas as pd

    parts, labels = [], []
    try:
        ref, car = aic.load_custom_allreduce(system, engine, version)
        parts.append(car[car["num_gpus"] == tp][["message_size", "seconds"]])
        labels.append(ref.label)
    except aic.AicDataMissing:
        pass
    try:
        ref, nccl = aic.load_nccl(system)
        sel = (
            (nccl["op_name"] == "all_reduce")
            & (nccl["nccl_dtype"] == "half")
            & (nccl["num_gpus"] == tp)
        )
        parts.append(nccl[sel][["message_size", "seconds"]])
        labels.append(ref.label)
    except aic.AicDataMissing:
        pass
    if not parts:
        return labels, None
    both = pd.concat(parts)
    if both.empty:
        return labels, None
    best = both.groupby("message_size", sort=True)["seconds"].min()
    if len(best) < 2:
        return labels, None
    return labels, Curve(best.index.to_numpy(dtype=float), monotone(best.to_numpy()), 1.0)


class AicOpTables(OpTableSource):
    """aiconfigurator-core's perf database for one system and engine (nearest version)."""

    def __init__(self, system: str, engine: str, version: str | None, resolved: str) -> None:
        self.system, self.engine, self.version, self.resolved_version = (
            system, engine, version, resolved
        )  # fmt: skip

    @property
    def label(self) -> str:
        return f"aiconfigurator-core {self.system}, engine {self.engine} {self.resolved_version}"

    @property
    def sku(self) -> str | None:
        return next((s for s, system in aic.SKU_SYSTEMS.items() if system == self.system), None)

    @property
    def device_name(self) -> str:
        return self.system

    def gemm_cube(self, dtype: str) -> tuple[str, GemmCube | None]:
        ref, cube = _gemm_cube(self.system, self.engine, self.version, dtype)
        return ref.label, cube

    def gemm_dtypes(self) -> list[str]:
        _, df = aic.load_gemm(self.system, self.engine, self.version)
        return sorted(set(df["gemm_dtype"]))

    def attention(
        self, phase: str, heads: int, kv_heads: int, head_dim: int, kv_dtype: str
    ) -> AttentionTable:
        try:
            label, grid, kernel = _attention_grid(
                self.system, self.engine, self.version, phase, heads, kv_heads, head_dim, kv_dtype
            )
        except aic.AicDataMissing as exc:
            raise OpTableMissing(str(exc)) from None
        return AttentionTable(label, grid, kernel)

    def allreduce_curve(self, num_gpus: int) -> tuple[list[str], Curve | None]:
        return _allreduce_curve(self.system, self.engine, self.version, num_gpus)


# --------------------------------------------------------------------------- coverage


def _engine_name(engine: Any) -> str:
    name = getattr(engine, "name", engine) if engine is not None else DEFAULT_ENGINE
    return str(name).lower()


def _gemm_dtype(precision: Precision) -> str:
    return "fp8" if precision is Precision.FP8 else "bfloat16"


def profiled_coverage(
    sku: GpuSku,
    precision: Precision = Precision.BF16,
    engine: Any = None,
    engine_version: str | None = None,
) -> tuple[str, str, str]:
    """(system, engine directory, GEMM table version) covering this SKU, precision and
    engine; raises ProfiledDataMissing naming what is missing and what is available."""
    try:
        systems = aic.systems_available()
    except aic.AicDataMissing as exc:
        raise ProfiledDataMissing(f"profiled estimator: {exc}") from None
    system = aic.system_for_sku(sku.id)
    if system is None:
        have = sorted(s for s, sysname in aic.SKU_SYSTEMS.items() if sysname in systems)
        raise ProfiledDataMissing(
            f"profiled estimator: no measured tables for GPU {sku.id!r}; GPUs with tables: "
            f"{', '.join(have)}"
        )
    name = _engine_name(engine)
    eng = aic.AIC_ENGINES.get(name)
    engines = aic.engines_for(system, "gemm")
    if eng is None or eng not in engines:
        raise ProfiledDataMissing(
            f"profiled estimator: no measured tables for engine {name!r} on {sku.id}; "
            f"engines with tables: {', '.join(engines) or 'none'}"
        )
    try:
        ref, cube = _gemm_cube(system, eng, engine_version, _gemm_dtype(Precision(precision)))
        aic.resolve_table(
            system, "attention", eng, engine_version, "context_attention_perf.parquet"
        )
    except aic.AicDataMissing as exc:
        raise ProfiledDataMissing(f"profiled estimator: {exc}") from None
    if cube is None:
        dtypes = AicOpTables(system, eng, engine_version, ref.version).gemm_dtypes()
        raise _precision_missing(precision, ref.label, dtypes)
    return system, eng, ref.version


def moe_table_shape(est: RooflineEstimator) -> tuple[int, int, int, int, int, int]:
    """The MoE tables' key of `est`'s routed experts: (hidden size, expert width, top-k,
    experts, MoE TP, EP)."""
    moe, m = est._moe, est.model
    moe_tp = (est.tp * est.dp) // est.ep
    return m.hidden_size, m.moe_intermediate_size, moe.top_k, moe.num_experts, moe_tp, est.ep


def routed_experts_curve(
    est: RooflineEstimator, system: str, engine: str, version: str | None
) -> tuple[str, Curve | None, str]:
    """(table label, seconds of `est`'s routed experts over the tokens entering the MoE
    layer, or None and why) from the MoE table of `system`, `engine` and `version`, at the
    deployment's hidden size, expert width, top-k, experts, MoE TP and EP."""
    shape = moe_table_shape(est)
    dtypes = moe_dtypes(est.model, est.precision)
    kernel = est.moe_kernel
    try:
        found = moe_curve(system, engine, version, shape, dtypes, kernel=kernel)
        if found[1] is not None or not kernel:
            return found
        # the engine's default kernel may be measured only in another version's table: the
        # newest that has it
        for other in aic.moe_versions_to_try(system, engine, version)[1:]:
            again = moe_curve(system, engine, other, shape, dtypes, kernel=kernel)
            if again[1] is not None:
                return again
        return found
    except aic.AicDataMissing as exc:
        return "", None, str(exc)


def attach_eager_experts(est: RooflineEstimator, engine_version: str | None = None) -> str:
    """Give a roofline estimator of a mixture of experts its engine's measured MoE table
    for the iterations the engine runs eagerly (more tokens per attention-DP rank than its
    CUDA graphs capture, `EngineProfile.graph_max_batch`); the smaller, graphed decode
    batches keep the roofline's experts.  The table times its collector's kernel, which need
    not be the one the engine's decode batches run: priced from the table at every size,
    the MoE validation points' TPOT MAPE rises from 17.9% to 22.0% (`estimators._registry.
    _auto`).  Returns what it did, for the estimator's note."""
    profile = est.engine
    if est._moe is None or profile is None or profile.is_vidur:
        return "no measured MoE table applies"
    version = engine_version or profile.version
    try:
        system, engine, _ = profiled_coverage(est.sku, est.precision, profile.name, version)
    except ProfiledDataMissing as exc:
        return str(exc).removeprefix("profiled estimator: ")
    label, curve, why = routed_experts_curve(est, system, engine, version)  # nearest to it
    if curve is None:
        return why
    above = profile.graph_max_batch * est.dp
    est.use_measured_experts(curve, above, label)
    return f"routed experts above {above} tokens (eager iterations) from {label}"


def _precision_missing(precision: Precision, label: str, dtypes: list[str]) -> ProfiledDataMissing:
    return ProfiledDataMissing(
        f"profiled estimator: no {Precision(precision).value} GEMM rows in {label}; "
        f"precisions measured there: {', '.join(dtypes)}"
    )


def tables_coverage(tables: OpTableSource, sku: GpuSku, precision: Precision) -> None:
    """Raise ProfiledDataMissing when `tables` were measured on another catalog SKU than
    `sku` or hold no GEMM of `precision` (tables of a device outside the catalog stand for
    any SKU)."""
    if tables.sku and tables.sku != sku.id:
        raise ProfiledDataMissing(
            f"profiled estimator: {tables.label} were measured on "
            f"{tables.sku!r}, not {sku.id!r}; simulate --sku {tables.sku}, or profile a "
            f"{sku.id} with `llmcap profile run`"
        )
    label, cube = tables.gemm_cube(_gemm_dtype(precision))
    if cube is None:
        raise _precision_missing(precision, label, tables.gemm_dtypes())


# --------------------------------------------------------------------------- estimator


def _quantized(x: float) -> int:
    """`x` as an integer kept to its 9 leading bits (at most 0.2% off): the attention
    caches' key, so that nearby shapes share one table lookup."""
    q = int(x)
    shift = q.bit_length() - 9
    return (q >> shift) << shift if shift > 0 else q


class ProfiledEstimator(RooflineEstimator):
    """`ExecutionTimeEstimator` from measured operator tables, the roofline for the rest.

    ``engine`` / ``engine_version`` pick the tables measured under that engine (the
    nearest version available; ``tables`` says which were used).
    """

    backend_name = "profiled"

    def __init__(
        self,
        model: ModelArchitecture,
        sku: GpuSku,
        tp: int = 1,
        pp: int = 1,
        precision: Precision = Precision.BF16,
        kv_precision: Precision | None = None,
        node: NodeShape | None = None,
        engine: Any = None,
        engine_version: str | None = None,
        op_tables: OpTableSource | str | Path | None = None,
        ep: int = 1,
        dp: int = 1,
    ) -> None:
        profile = engine if isinstance(engine, EngineProfile) else None
        super().__init__(
            model, sku, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision, node=node,
            engine=profile, ep=ep, dp=dp,
        )  # fmt: skip
        if profile is not None:  # the tables measured under the profile's engine and version
            engine = DEFAULT_ENGINE if profile.is_vidur else profile.name
            engine_version = engine_version or (None if profile.is_vidur else profile.version)
        if op_tables is None:  # aiconfigurator-core's tables of this GPU and engine
            system, eng, version = profiled_coverage(sku, self.precision, engine, engine_version)
            source: OpTableSource = AicOpTables(system, eng, engine_version, version)
        else:  # a directory in llmcap's own format (`llmcap profile`)
            if not isinstance(op_tables, OpTableSource):
                op_tables = load_op_tables(op_tables)
            tables_coverage(op_tables, sku, self.precision)
            source, system, eng, version = op_tables, "op-tables", None, None
        self.op_tables = source
        self.system, self.tables_engine, self.tables_version = system, eng, version
        self.requested_engine_version = engine_version
        self.fallbacks: dict[str, str] = {}
        self.tables: list[str] = []

        # ---- GEMMs: one curve in m per operator
        ref_label, cube = source.gemm_cube(_gemm_dtype(self.precision))
        self.tables.append(ref_label)
        if self.fp8_block_gemm:  # the tables time the engine's default block-FP8 kernel
            shapes: dict[str, tuple[int, int]] = {}
            self.fallbacks["gemm"] = (
                f"{ref_label} does not time the {self.fp8_block_gemm} block-FP8 kernel the "
                "engine runs: the roofline's constants for it"
            )
        else:
            shapes = self._gemm_shapes()
        self._gemm_curves: dict[str, Curve] = {}
        self.regressed: dict[str, str] = {}  # GEMMs the table does not bracket
        for name, (n, k) in shapes.items():
            curve = gemm_curve(cube, n, k)
            if curve is None:  # a corner unmeasured at some m: the table's regressor
                curve = regressed_gemm_curve(cube, n, k)
                self.regressed[name] = f"n={n}, k={k}: regressor on {ref_label}"
            self._gemm_curves[name] = curve
        _, cube16 = source.gemm_cube("bfloat16")
        vocab = -(-model.vocab_size // tp)
        head = gemm_curve(cube16, vocab, model.hidden_size) if cube16 is not None else None
        if head is None and cube16 is not None:
            head = regressed_gemm_curve(cube16, vocab, model.hidden_size)
            self.regressed["lm_head"] = f"n={vocab}, k={model.hidden_size}: regressor"
        if head is None:
            self.fallbacks["lm_head"] = "no measured 16-bit GEMM for the LM head"
        self._head_curve = head
        self._roof_layer_ops = tuple(
            op for op in self.layer_ops if op.name not in self._gemm_curves
        )
        # a MoE model's dense-layer MLP (priced apart, by its share of the layers)
        self._dense_mlp_curves: list[Curve] = []
        if self._moe is not None and not self.fp8_block_gemm:
            dense = layer_gemm_shapes(model, tp)
            curves = [gemm_curve(cube, *dense[name]) for name in ("mlp_up_proj", "mlp_down_proj")]
            if all(c is not None for c in curves):
                self._dense_mlp_curves = curves  # type: ignore[assignment]
        if self._moe is not None:
            self._attach_moe_table()

        # ---- attention
        kv_dtype = "fp8" if self.kv_precision is Precision.FP8 else "bfloat16"
        hd = model.head_dim
        self._ctx: Grid2D | None = None
        self._chunks: ChunkGrid | None = None  # chunks after a cached prefix, where measured
        self._gen: Grid2D | None = None
        self.attention_kernels: dict[str, str] = {}
        phases = (("context", "attn_prefill"), ("generation", "attn_decode"))
        for phase, op in () if model.is_mla else phases:  # MLA: estimators/_profiled_mla.py
            try:
                att = source.attention(
                    phase, self.heads_per_gpu, self.kv_heads_per_gpu, hd, kv_dtype
                )
            except OpTableMissing as exc:
                self.fallbacks[op] = str(exc)
                continue
            label, grid, kernel = att.label, att.grid, att.kernel
            self.tables.append(label)
            if grid is None:
                self.fallbacks[op] = (
                    f"no {phase} attention rows for {self.heads_per_gpu} heads, "
                    f"{self.kv_heads_per_gpu} KV heads, head_dim {hd}, KV {kv_dtype}"
                )
            else:
                self.attention_kernels[op] = kernel
                if phase == "context":
                    self._ctx = grid
                    self._chunks = att.chunks
                else:
                    self._gen = grid

        # ---- all-reduce
        self._ar: Curve | None = None
        if tp > 1:
            labels, ar = source.allreduce_curve(tp)
            self.tables.extend(labels)
            if ar is None:
                self.fallbacks["all_reduce"] = f"no measured all-reduce over {tp} GPUs"
            self._ar = ar
        self._ar_elem_bytes = float(_ACT_BYTES)
        self._attn_cache: dict[int, float] = {}
        self._chunk_cache: dict[tuple[int, int, int], float] = {}

    def _gemm_shapes(self) -> dict[str, tuple[int, int]]:
        """(n, k) of this deployment's layer GEMMs priced from the GEMM table, by the
        roofline's operator name: a MoE layer's shared expert in place of the dense MLP
        (the routed experts are `_routed_experts`'), MLA's projections in place of
        standard attention's."""
        m, tp = self.model, self.tp
        shapes = layer_gemm_shapes(m, tp)
        h = m.hidden_size
        if m.is_moe and m.shared_expert_intermediate_size:
            inter = m.shared_expert_intermediate_size // tp
            up = (2 if m.gated_mlp else 1) * inter
            shapes["shared_expert_up_proj"] = (up, h)
            shapes["shared_expert_down_proj"] = (h, inter)
        mla = getattr(self, "mla", None)
        if mla is not None:
            down = (mla.q_lora or mla.heads * mla.qk) + mla.latent
            shapes["attn_pre_proj"] = (down, h)
            shapes["attn_post_proj"] = (h, mla.heads * mla.v)
            if mla.q_lora:
                shapes["attn_q_up_proj"] = (mla.heads * mla.qk, mla.q_lora)
        names = {op.name for op in self.layer_ops}
        return {name: nk for name, nk in shapes.items() if name in names}

    def table_gemm_curve(self, n: int, k: int) -> Curve | None:
        """Seconds of an (n, k) GEMM over m tokens from the GEMM table at this precision
        (its regressor off the measured grid); None without such a table, or where the
        engine runs another block-FP8 kernel than the table's (`fp8_block_gemm`)."""
        _, cube = self.op_tables.gemm_cube(_gemm_dtype(self.precision))
        if cube is None or self.fp8_block_gemm:
            return None
        return gemm_curve(cube, n, k) or regressed_gemm_curve(cube, n, k)

    def _attach_moe_table(self) -> None:
        """The routed experts of every iteration from the MoE table of these tables
        (aiconfigurator's of their system, engine and version: estimators/_aic_moe_mla.py;
        llmcap's moe.csv); FLOPs and bytes stay the roofline's count; a fallback note where
        there is none."""
        source = self.op_tables
        if isinstance(source, AicOpTables):
            label, curve, why = routed_experts_curve(
                self, source.system, source.engine, source.version
            )
        else:
            dtypes = moe_dtypes(self.model, self.precision)
            label, curve, why = source.moe_curve(moe_table_shape(self), dtypes)
        if curve is None:
            self.fallbacks["moe_experts"] = why
            return
        self.tables.append(label)
        self.use_measured_experts(curve, 0.0, label)

    # ---------------------------------------------------------------- operators

    def all_reduce_time(self, nbytes: Any) -> Any:
        if self._ar is None:
            return super().all_reduce_time(nbytes)
        elems = nbytes / self._ar_elem_bytes
        if isinstance(elems, np.ndarray):
            return self._ar.many(elems)
        return self._ar(float(elems))

    def gemm_time(self, name: str, m: float) -> float:
        """Seconds of one layer GEMM (by Vidur operator name) for m tokens."""
        curve = self._gemm_curves.get(name)
        if curve is not None:
            return curve(m)
        op = next(o for o in self.layer_ops if o.name == name)
        return _token_op_time(op, float(m), self._k)

    # the roofline's token-level hooks (FLOPs and bytes stay counted as the roofline counts)

    def _layer_seconds(self, m: float) -> float:
        t = 0.0
        for op in self._roof_layer_ops:
            t += _token_op_time(op, m, self._k)
        for curve in self._gemm_curves.values():
            t += curve(m)
        return t + self._tp_all_reduces(m)

    def _op_seconds(self, op: TokenOp, m: float) -> float:
        curve = self._gemm_curves.get(op.name)
        return curve(m) if curve is not None else _token_op_time(op, m, self._k)

    def _dense_mlp_seconds(self, m: float) -> float:
        if not self._dense_mlp_curves:
            return super()._dense_mlp_seconds(m)
        act = next(op for op in self._dense_mlp_ops if op.kind == "act")
        return sum(c(m) for c in self._dense_mlp_curves) + _token_op_time(act, m, self._k)

    def _head_seconds(self, m: float) -> float:
        t = super()._head_seconds(m)
        if self._head_curve is not None and m > 0:
            t += self._head_curve(m) - _token_op_time(self.lm_head_op, m, self._k)
        return t

    def prefill_attention_time(self, batch: BatchShape) -> float:
        """Seconds of one layer's prefill attention: the context table at the chunks'
        equal-length equivalent (a prompt of s tokens has s (s + 1) / 2 causal pairs)."""
        return self._prefill_attn(
            batch.num_prefill_tokens,
            batch.num_prefills or 1,
            batch.prefill_attn_pairs,
            batch.prefill_kv_tokens,
        )

    def decode_attention_time(self, batch: BatchShape) -> float:
        """Seconds of one layer's decode attention: the generation table at the batch size
        and mean KV length."""
        return self._decode_attn(batch.num_decodes, batch.decode_kv_tokens)

    # the roofline's `batch_cost` hooks, answered from the measured tables

    def _prefill_attn(self, npt: int, npf: int, pairs: float, kv_tokens: int) -> float:
        if self._ctx is None:
            return super()._prefill_attn(npt, npf, pairs, kv_tokens)
        if self._chunks is not None and kv_tokens > npt:  # chunks after a cached prefix
            return self._chunk_attn(npt, npf, kv_tokens)
        # cached on (chunks, pairs to 9 significant bits): at most 0.2% off the exact answer
        q = _quantized(pairs)
        key = (npf << 40) | q
        hit = self._attn_cache.get(key)
        if hit is None:
            per = q / npf
            hit = self._ctx(npf, 0.5 * (math.sqrt(1.0 + 8.0 * per) - 1.0))
            self._attn_cache[key] = hit
        return hit

    def _chunk_attn(self, npt: int, npf: int, kv_tokens: int) -> float:
        """The chunk table at the chunks' mean length and mean KV length, cached on
        (chunks, both totals to 9 significant bits)."""
        q, kv = _quantized(npt), _quantized(kv_tokens)
        key = (npf, q, kv)
        hit = self._chunk_cache.get(key)
        if hit is None:
            assert self._chunks is not None
            hit = self._chunks(npf, q / npf, kv / npf)
            if len(self._chunk_cache) >= 1 << 18:
                self._chunk_cache.clear()
            self._chunk_cache[key] = hit
        return hit

    def _decode_attn(self, nd: int, dkv: int) -> float:
        if self._gen is None:
            return super()._decode_attn(nd, dkv)
        # cached on (decodes, KV tokens to 9 significant bits), negative keys apart from prefill
        q = _quantized(dkv)
        key = -((nd << 40) | q) - 1
        hit = self._attn_cache.get(key)
        if hit is None:
            hit = self._gen(nd, q / nd)
            if len(self._attn_cache) >= 1 << 18:
                self._attn_cache.clear()
            self._attn_cache[key] = hit
        return hit

    # ---------------------------------------------------------------- inspection

    def operator_times(self, batch: BatchShape) -> dict[str, float]:
        out = super().operator_times(batch)
        m = float(batch.num_tokens)
        if m <= 0:
            return dict.fromkeys(OPERATOR_NAMES, 0.0)
        for name in self._gemm_curves:
            out[name] = self.gemm_time(name, m)
        return out

    def describe(self) -> str:
        version = self.tables_version
        asked = self.requested_engine_version
        note = f" (asked for {asked}; nearest measured)" if asked and asked != version else ""
        lines = [
            f"profiled estimator: {self.model.name} on {self.sku.name} ({self.sku.id}), "
            f"TP={self.tp} PP={self.pp}, weights {self.precision.value}, "
            f"KV {self.kv_precision.value}",
            f"  measured tables: {self.op_tables.label}"
            + (note if isinstance(self.op_tables, AicOpTables) else ""),
        ]
        lines += [f"    {t}" for t in self.tables]
        if not self.op_tables.sku:
            lines.append(
                f"  the tables name no catalog GPU (measured on {self.op_tables.device_name}): "
                f"used as measured for {self.sku.id}"
            )
        if self.attention_kernels:
            kernels = ", ".join(f"{k}: {v}" for k, v in self.attention_kernels.items())
            lines.append(f"  attention kernels: {kernels}")
        lines.append("  from the roofline: elementwise ops, embedding, sampling, send/recv")
        if self._engine_cpu is not None:
            lines.append(
                f"  host overhead: engine profile {self.engine.key}"
                + (" (overlapped with the GPU step)" if self._overlap else "")
            )
        else:
            lines.append("  host overhead: the roofline's fitted CPU overhead")
        for op, why in self.regressed.items():
            lines.append(f"  GEMM off the measured grid: {op} ({why})")
        for op, why in self.fallbacks.items():
            lines.append(f"  fallback to roofline: {op} ({why})")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"ProfiledEstimator({self.model.name!r}, {self.sku.id!r}, tp={self.tp}, pp={self.pp}, "
            f"precision={self.precision.value!r}, "
            f"engine={self.tables_engine!r} {self.tables_version})"
        )
