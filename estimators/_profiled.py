"""Profiled cost model: measured operator times from aiconfigurator-core's tables.

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
Interpolation is log-log inside the measured range (exact at measured points), and
outside it: constant below the smallest size, linear in work above the largest
(``t(x) = t(x_max) * x / x_max``; for prefill attention, work grows with the square of
the prompt length).  Each measured curve is made monotone before use: a size never
takes longer than a larger measured size (``t(x) = min over x' >= x``), so measurement
noise cannot make more work cheaper.

Speed: every curve is built once per deployment (the tables once per process); the
token-level part of an iteration is cached on ``(tokens, sequences)`` as in the
roofline, and an attention lookup is two binary searches and a few float operations.
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from estimators import _aic_tables as aic
from estimators._contract import BatchShape
from estimators._engines import EngineProfile
from estimators._roofline import _ACT_BYTES, OPERATOR_NAMES, RooflineEstimator, _token_op_time
from estimators._types import ModelArchitecture, Precision
from sku_catalog._types import GpuSku, NodeShape

__all__ = [
    "DEFAULT_ENGINE",
    "Curve",
    "Grid2D",
    "ProfiledDataMissing",
    "ProfiledEstimator",
    "gemm_curve",
    "monotone",
    "profiled_coverage",
    "regressed_gemm_curve",
]

DEFAULT_ENGINE = "vllm"
_GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


class ProfiledDataMissing(ValueError):
    """No measured data for this SKU, engine or precision; the message says what exists."""


# --------------------------------------------------------------------------- curves


def monotone(ys: np.ndarray) -> np.ndarray:
    """Non-decreasing in x: each value is the minimum of itself and all larger sizes'."""
    return np.minimum.accumulate(np.asarray(ys, dtype=float)[::-1])[::-1]


class Curve:
    """Seconds as a function of one size ``x``: log-log interpolation between measured
    points, constant below the first, ``t_max * (x / x_max) ** work_exp`` above the last."""

    __slots__ = ("_lx", "_ly", "_x0", "_xn", "_y0", "_yn", "work_exp", "xs", "ys")

    def __init__(self, xs: Sequence[float], ys: Sequence[float], work_exp: float = 1.0):
        xs = np.asarray(xs, dtype=float)
        ys = np.asarray(ys, dtype=float)
        order = np.argsort(xs)
        xs, ys = xs[order], ys[order]
        if len(xs) == 0 or np.any(xs <= 0) or np.any(ys <= 0) or np.any(np.diff(xs) == 0):
            raise ValueError("a curve needs distinct positive sizes and positive times")
        self.xs, self.ys = xs, ys
        self._lx, self._ly = np.log(xs), np.log(ys)
        self._x0, self._xn = float(xs[0]), float(xs[-1])
        self._y0, self._yn = float(ys[0]), float(ys[-1])
        self.work_exp = work_exp

    def __call__(self, x: float) -> float:
        if x <= self._x0:
            return self._y0
        if x >= self._xn:
            return self._yn * (x / self._xn) ** self.work_exp
        return math.exp(float(np.interp(math.log(x), self._lx, self._ly)))

    def many(self, x: np.ndarray) -> np.ndarray:
        x = np.maximum(np.asarray(x, dtype=float), self._x0)
        inside = np.exp(np.interp(np.log(x), self._lx, self._ly))
        above = self._yn * (x / self._xn) ** self.work_exp
        return np.where(x > self._xn, above, inside)


class Grid2D:
    """Seconds over (batch size b, length s): one `Curve` in s per measured b, log-linear
    between the bracketing b, linear in b above the largest."""

    __slots__ = ("_bs", "_curves", "_lbs")

    def __init__(self, bs: Sequence[int], curves: Sequence[Curve]):
        self._bs = [float(b) for b in bs]
        self._lbs = [math.log(b) for b in self._bs]
        self._curves = list(curves)

    def __call__(self, b: float, s: float) -> float:
        bs = self._bs
        if b <= bs[0]:
            return self._curves[0](s)
        if b >= bs[-1]:
            return self._curves[-1](s) * b / bs[-1]
        i = bisect.bisect_left(bs, b)
        if bs[i] == b:
            return self._curves[i](s)
        lo, hi = self._curves[i - 1](s), self._curves[i](s)
        w = (math.log(b) - self._lbs[i - 1]) / (self._lbs[i] - self._lbs[i - 1])
        return math.exp((1.0 - w) * math.log(lo) + w * math.log(hi))


# --------------------------------------------------------------------------- tables -> grids


@functools.cache
def _gemm_cube(system: str, engine: str, version: str | None, dtype: str) -> Any:
    """(ref, ms, ns, ks, log seconds [m, n, k] with NaN where unmeasured) of one dtype;
    the fastest kernel where several were measured."""
    ref, df = aic.load_gemm(system, engine, version)
    sub = df[df["gemm_dtype"] == dtype]
    if sub.empty:
        return ref, None
    best = sub.groupby(["m", "n", "k"], sort=True)["seconds"].min().reset_index()
    ms = np.unique(best["m"].to_numpy())
    ns = np.unique(best["n"].to_numpy())
    ks = np.unique(best["k"].to_numpy())
    cube = np.full((len(ms), len(ns), len(ks)), np.nan)
    cube[
        np.searchsorted(ms, best["m"].to_numpy()),
        np.searchsorted(ns, best["n"].to_numpy()),
        np.searchsorted(ks, best["k"].to_numpy()),
    ] = np.log(best["seconds"].to_numpy())
    return ref, (ms, ns, ks, cube)


def regressed_gemm_curve(cube: Any, n: int, k: int) -> Curve:
    """Seconds of an ``[m, k] x [k, n]`` GEMM as a function of m from the table's
    regressor (`estimators._gemm_regressor`): monotone in m, n and k."""
    from estimators._gemm_regressor import gemm_regressor

    ms = cube[0].astype(float)
    return Curve(ms, monotone(gemm_regressor(cube).seconds(ms, n, k)), work_exp=1.0)


def _bracket(vals: np.ndarray, x: float) -> tuple[int, int, float, float]:
    """(i_lo, i_hi, weight of hi, work scale beyond the range) in log space."""
    if x <= vals[0]:
        return 0, 0, 0.0, 1.0
    if x >= vals[-1]:
        return len(vals) - 1, len(vals) - 1, 0.0, x / float(vals[-1])
    i = int(np.searchsorted(vals, x))
    if vals[i] == x:
        return i, i, 0.0, 1.0
    w = (math.log(x) - math.log(vals[i - 1])) / (math.log(vals[i]) - math.log(vals[i - 1]))
    return i - 1, i, w, 1.0


def gemm_curve(cube: Any, n: int, k: int) -> Curve | None:
    """Seconds of an ``[m, k] x [k, n]`` GEMM as a function of m, or None when the
    table lacks a bracketing (n, k) corner.  Bilinear in (log n, log k), exact at
    measured shapes; linear in n or k beyond the largest measured."""
    ms, ns, ks, lc = cube
    i0, i1, wi, sn = _bracket(ns, n)
    j0, j1, wj, sk = _bracket(ks, k)
    corners = [
        ((1 - wi) * (1 - wj), lc[:, i0, j0]),
        ((1 - wi) * wj, lc[:, i0, j1]),
        (wi * (1 - wj), lc[:, i1, j0]),
        (wi * wj, lc[:, i1, j1]),
    ]
    logt = np.zeros(len(ms))
    for w, col in corners:
        if w == 0.0:
            continue
        if np.isnan(col).any():
            return None
        logt += w * col
    t = np.exp(logt) * sn * sk
    return Curve(ms, monotone(t), work_exp=1.0)


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
    med = sub.groupby(["batch_size", length])["seconds"].median().reset_index()
    bs, curves = [], []
    for b, rows in med.groupby("batch_size", sort=True):
        rows = rows.sort_values(length)
        if len(rows) < 2:
            continue
        xs = rows[length].to_numpy(dtype=float)
        if phase == "generation":
            xs = xs + 1.0  # step = cached tokens; the decode token reads step + 1
        bs.append(int(b))
        curves.append(
            Curve(xs, monotone(rows["seconds"].to_numpy()), 2.0 if phase == "context" else 1.0)
        )
    if not bs:
        return ref.label, None, kernel
    return ref.label, Grid2D(bs, curves), kernel


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
        _, df = aic.load_gemm(system, eng, engine_version)
        dtypes = sorted(set(df["gemm_dtype"]))
        raise ProfiledDataMissing(
            f"profiled estimator: no {Precision(precision).value} GEMM rows in {ref.label}; "
            f"precisions measured there: {', '.join(dtypes)}"
        )
    return system, eng, ref.version


# --------------------------------------------------------------------------- estimator


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
    ) -> None:
        profile = engine if isinstance(engine, EngineProfile) else None
        super().__init__(
            model, sku, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision, node=node,
            engine=profile,
        )  # fmt: skip
        if profile is not None:  # the tables measured under the profile's engine and version
            engine = DEFAULT_ENGINE if profile.is_vidur else profile.name
            engine_version = engine_version or (None if profile.is_vidur else profile.version)
        system, eng, version = profiled_coverage(sku, self.precision, engine, engine_version)
        self.system, self.tables_engine, self.tables_version = system, eng, version
        self.requested_engine_version = engine_version
        self.fallbacks: dict[str, str] = {}
        self.tables: list[str] = []

        # ---- GEMMs: one curve in m per operator
        ref, cube = _gemm_cube(system, eng, engine_version, _gemm_dtype(self.precision))
        self.tables.append(ref.label)
        shapes = self._gemm_shapes()
        self._gemm_curves: dict[str, Curve] = {}
        self.regressed: dict[str, str] = {}  # GEMMs the table does not bracket
        for name, (n, k) in shapes.items():
            curve = gemm_curve(cube, n, k)
            if curve is None:  # a corner unmeasured at some m: the table's regressor
                curve = regressed_gemm_curve(cube, n, k)
                self.regressed[name] = f"n={n}, k={k}: regressor on {ref.label}"
            self._gemm_curves[name] = curve
        _, cube16 = _gemm_cube(system, eng, engine_version, "bfloat16")
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

        # ---- attention
        kv_dtype = "fp8" if self.kv_precision is Precision.FP8 else "bfloat16"
        hd = model.head_dim
        self._ctx: Grid2D | None = None
        self._gen: Grid2D | None = None
        self.attention_kernels: dict[str, str] = {}
        for phase, op in (("context", "attn_prefill"), ("generation", "attn_decode")):
            try:
                label, grid, kernel = _attention_grid(
                    system,
                    eng,
                    engine_version,
                    phase,
                    self.heads_per_gpu,
                    self.kv_heads_per_gpu,
                    hd,
                    kv_dtype,
                )
            except aic.AicDataMissing as exc:
                self.fallbacks[op] = str(exc)
                continue
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
                else:
                    self._gen = grid

        # ---- all-reduce
        self._ar: Curve | None = None
        if tp > 1:
            labels, ar = _allreduce_curve(system, eng, engine_version, tp)
            self.tables.extend(labels)
            if ar is None:
                self.fallbacks["all_reduce"] = f"no measured all-reduce over {tp} GPUs"
            self._ar = ar
        self._ar_elem_bytes = float(_ACT_BYTES)
        self._attn_cache: dict[int, float] = {}

    def _gemm_shapes(self) -> dict[str, tuple[int, int]]:
        m = self.model
        tp = self.tp
        h, hd = m.hidden_size, m.head_dim
        heads = m.num_attention_heads // tp
        kv_heads = max(1, m.num_key_value_heads // tp)
        inter = m.intermediate_size // tp
        up = (2 if m.gated_mlp else 1) * inter
        return {
            "attn_pre_proj": ((heads + 2 * kv_heads) * hd, h),
            "attn_post_proj": (h, heads * hd),
            "mlp_up_proj": (up, h),
            "mlp_down_proj": (h, inter),
        }

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

    def _layer_token_part(self, nt: int) -> tuple[float, float, float]:
        hit = self._layer_cache.get(nt)
        if hit is not None:
            return hit
        t, fl, by = super()._layer_token_part(nt)  # flops and bytes as the roofline counts
        m = float(nt)
        t = 0.0
        for op in self._roof_layer_ops:
            t += _token_op_time(op, m, self._k)
        for curve in self._gemm_curves.values():
            t += curve(m)
        if self.tp > 1:
            t += 2 * self.all_reduce_time(self._act_row_bytes * m)
        hit = (t, fl, by)
        self._layer_cache[nt] = hit
        return hit

    def _head_part(self, ns: int) -> tuple[float, float, float]:
        hit = self._seq_cache.get(ns)
        if hit is not None:
            return hit
        t, fl, by = super()._head_part(ns)
        if self._head_curve is not None and ns > 0:
            m = float(ns)
            t += self._head_curve(m) - _token_op_time(self.lm_head_op, m, self._k)
        hit = (t, fl, by)
        self._seq_cache[ns] = hit
        return hit

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
        # cached on (chunks, pairs to 9 significant bits): at most 0.2% off the exact answer
        q = int(pairs)
        shift = q.bit_length() - 9
        if shift > 0:
            q = (q >> shift) << shift
        key = (npf << 40) | q
        hit = self._attn_cache.get(key)
        if hit is None:
            per = q / npf
            hit = self._ctx(npf, 0.5 * (math.sqrt(1.0 + 8.0 * per) - 1.0))
            self._attn_cache[key] = hit
        return hit

    def _decode_attn(self, nd: int, dkv: int) -> float:
        if self._gen is None:
            return super()._decode_attn(nd, dkv)
        # cached on (decodes, KV tokens to 9 significant bits), negative keys apart from prefill
        q = int(dkv)
        shift = q.bit_length() - 9
        if shift > 0:
            q = (q >> shift) << shift
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
        if self.tp > 1:
            out["all_reduce"] = 2 * self.all_reduce_time(self._act_row_bytes * m)
        return out

    def describe(self) -> str:
        version = self.tables_version
        asked = self.requested_engine_version
        note = f" (asked for {asked}; nearest measured)" if asked and asked != version else ""
        lines = [
            f"profiled estimator: {self.model.name} on {self.sku.name} ({self.sku.id}), "
            f"TP={self.tp} PP={self.pp}, weights {self.precision.value}, "
            f"KV {self.kv_precision.value}",
            f"  measured tables: aiconfigurator-core {self.system}, engine {self.tables_engine} "
            f"{version}{note}",
        ]
        lines += [f"    {t}" for t in self.tables]
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
