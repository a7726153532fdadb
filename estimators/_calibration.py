"""Fit and check the roofline constants against measured operator tables.

The tables are in the public format of Vidur's profiling CSVs (microsoft/vidur):
times in milliseconds; ``num_tokens`` is tokens in the iteration; ``size`` in the
network tables counts fp16 elements.  Nothing here is needed at run time: the
estimator only reads the fitted constants from ``estimators/data/roofline.yaml``;
``benchmarks/validate_roofline.py`` drives this module.

Fitting minimises the squared log error (relative error, symmetric) with a small
Nelder-Mead search over the logarithms of the constants of one group at a time
(matmul, elementwise, attention, all-reduce, send/recv, cpu).

Every measured row has a `RowKey` (its table, GPU, model and identity), so a fit can be
run on any subset of the rows (`FamilyData.select`): `llmcap validate --dataset vidur-ops`
fits on some rows and scores the others.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from estimators._contract import BatchShape
from estimators._roofline import (
    RooflineConstants,
    RooflineEstimator,
    _coeffs,
    _ring_allreduce,
    _token_op_time,
    pp_link,
    tp_link,
)
from estimators._types import ModelArchitecture
from sku_catalog._types import GpuSku, LinkKind, NodeShape

__all__ = [
    "LAYER_OPS",
    "VIDUR_GPU_TO_SKU",
    "AttnTable",
    "FamilyData",
    "FittedConstants",
    "OpTable",
    "RowKey",
    "fit_constants",
    "load_family_data",
    "nelder_mead",
]

# Vidur's GPU folder -> catalog SKU id
VIDUR_GPU_TO_SKU: dict[str, str] = {"a100": "a100-80gb", "h100": "h100-sxm", "a40": "a40"}

# Vidur's model folders -> built-in model names of load_model (same shapes)
MODEL_ALIASES: dict[str, str] = {
    "meta-llama/Meta-Llama-3-8B": "meta-llama/Llama-3.1-8B",
    "meta-llama/Meta-Llama-3-70B": "meta-llama/Llama-3.1-70B",
}

LAYER_OPS: tuple[str, ...] = (
    "input_layernorm",
    "attn_pre_proj",
    "attn_rope",
    "attn_post_proj",
    "post_attention_layernorm",
    "mlp_up_proj",
    "mlp_act",
    "mlp_down_proj",
    "add",
)
MATMUL_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
OP_KIND = {
    "input_layernorm": "norm",
    "post_attention_layernorm": "norm",
    "attn_rope": "rope",
    "mlp_act": "act",
    "add": "add",
    "emb": "emb",
}

# Vidur's network folders: (gpu, node shape override or None for the SKU's default)
NETWORK_NODES: dict[str, tuple[str, NodeShape | None]] = {
    "a100_dgx": ("a100", None),
    "h100_dgx": ("h100", None),
    # PCIe cards with NVLink bridges between pairs (A100/H100 bridges: 600 GB/s bidirectional)
    "a100_pairwise_nvlink": ("a100", NodeShape(4, LinkKind.NVLINK_PAIRWISE, 300.0, 25.0)),
    "h100_pairwise_nvlink": ("h100", NodeShape(4, LinkKind.NVLINK_PAIRWISE, 300.0, 50.0)),
    "a40_pairwise_nvlink": ("a40", None),
}


# --------------------------------------------------------------------------- loading


@dataclass(frozen=True, slots=True)
class RowKey:
    """The identity of one measured row: its table kind, GPU, model ('' where the row has
    none) and what else tells it apart (TP degree, tokens, batch shape, message size)."""

    table: str  # ops | attention | all_reduce | send_recv | cpu
    gpu: str  # Vidur's GPU folder
    model: str  # Vidur's model folder
    ident: str

    def __str__(self) -> str:
        return f"{self.table}|{self.gpu}|{self.model}|{self.ident}"


@dataclass(slots=True)
class OpTable:
    """Measured seconds of the token-level operators of one (gpu, model, TP)."""

    gpu: str
    sku: GpuSku
    model_dir: str
    model: ModelArchitecture
    model_source: str  # "load_model(<name>)" or "table columns"
    tp: int
    num_tokens: np.ndarray
    measured: dict[str, np.ndarray]  # op -> seconds (median column)

    def row_keys(self) -> list[RowKey]:
        return [
            RowKey("ops", self.gpu, self.model_dir, f"tp{self.tp}|tokens{int(n)}")
            for n in self.num_tokens
        ]

    def take(self, index: np.ndarray) -> OpTable:
        measured = {op: values[index] for op, values in self.measured.items()}
        return replace(self, num_tokens=self.num_tokens[index], measured=measured)


@dataclass(slots=True)
class NetTable:
    """Measured seconds of one collective on one node configuration."""

    gpu: str
    node_name: str
    sku: GpuSku
    node: NodeShape
    collective: str  # all_reduce | send_recv
    num_workers: int
    intra_node: bool
    size: np.ndarray  # fp16 elements
    measured: np.ndarray  # seconds

    def row_keys(self) -> list[RowKey]:
        where = "intra" if self.intra_node else "inter"
        prefix = f"{self.node_name}|n{self.num_workers}|{where}"
        return [RowKey(self.collective, self.gpu, "", f"{prefix}|{int(s)}") for s in self.size]

    def take(self, index: np.ndarray) -> NetTable:
        return replace(self, size=self.size[index], measured=self.measured[index])


@dataclass(slots=True)
class AttnTable:
    """Measured seconds of prefill / decode attention of one (gpu, head shape, TP)."""

    gpu: str
    sku: GpuSku
    model: ModelArchitecture  # the head shape (other fields do not matter)
    tp: int
    batches: list[BatchShape]
    measured: np.ndarray
    is_prefill: np.ndarray

    def row_keys(self) -> list[RowKey]:
        head = f"{self.model.name}|tp{self.tp}"
        return [
            RowKey(
                "attention",
                self.gpu,
                "",
                f"{head}|prefill|{b.num_prefills}|{b.num_prefill_tokens}|{b.prefill_kv_tokens}"
                if pf
                else f"{head}|decode|{b.num_decodes}|{b.decode_kv_tokens}",
            )
            for b, pf in zip(self.batches, self.is_prefill, strict=True)
        ]

    def take(self, index: np.ndarray) -> AttnTable:
        return replace(
            self,
            batches=[self.batches[i] for i in index],
            measured=self.measured[index],
            is_prefill=self.is_prefill[index],
        )


@dataclass(slots=True)
class FamilyData:
    """Everything measured for the SKUs of one architecture family."""

    family: str
    ops: list[OpTable] = field(default_factory=list)
    nets: list[NetTable] = field(default_factory=list)
    attention: list[AttnTable] = field(default_factory=list)
    cpu: pd.DataFrame | None = None  # cpu_overheads.csv rows, plus the column `vidur_gpu`

    def select(self, keep: Callable[[RowKey], bool]) -> FamilyData:
        """The same data with only the rows whose key `keep` accepts (empty tables dropped)."""

        def taken(tables: list) -> list:
            out = []
            for t in tables:
                index = np.flatnonzero([keep(k) for k in t.row_keys()])
                if index.size:
                    out.append(t.take(index))
            return out

        cpu = None
        if self.cpu is not None:
            mask = np.array([keep(k) for k in cpu_row_keys(self.cpu)], dtype=bool)
            cpu = self.cpu[mask] if mask.any() else None
        return FamilyData(
            self.family, taken(self.ops), taken(self.nets), taken(self.attention), cpu
        )


def cpu_row_keys(df: pd.DataFrame) -> list[RowKey]:
    """Keys of the rows of a cpu_overheads table read by `load_family_data`."""
    return [
        RowKey("cpu", str(gpu), str(model), f"tp{int(tp)}|bs{int(bs)}")
        for gpu, model, tp, bs in zip(
            df["vidur_gpu"],
            df["model_name"],
            df["tensor_parallel_degree"],
            df["batch_size"],
            strict=True,
        )
    ]


def _model_from_row(model_dir: str, row: pd.Series) -> ModelArchitecture:
    gated = str(row["use_gated_mlp"]).lower() == "true"
    return ModelArchitecture(
        name=model_dir,
        num_layers=32,  # per-layer comparisons do not depend on it
        hidden_size=int(row["n_embd"]),
        num_attention_heads=int(row["n_head"]),
        num_key_value_heads=int(row["n_kv_head"]),
        intermediate_size=int(row["n_expanded_embd"]),
        vocab_size=int(row["vocab_size"]),
        gated_mlp=gated,
        parallel_attn_mlp="phi" in model_dir.lower(),
    )


def resolve_model(model_dir: str, row: pd.Series) -> tuple[ModelArchitecture, str]:
    """The built-in model of `model_dir` when its shape matches the table, else the table's."""
    table_model = _model_from_row(model_dir, row)
    name = MODEL_ALIASES.get(model_dir, model_dir)
    try:
        from estimators import load_model  # written by another module; optional here

        model = load_model(name)
    except Exception:  # unknown model or loader not there: use the table's shape
        return table_model, "table columns"
    same = (
        model.hidden_size == table_model.hidden_size
        and model.num_attention_heads == table_model.num_attention_heads
        and model.num_key_value_heads == table_model.num_key_value_heads
        and model.intermediate_size == table_model.intermediate_size
        and model.gated_mlp == table_model.gated_mlp
    )
    if not same:
        return table_model, f"table columns (load_model({name}) has another shape)"
    return model, f"load_model({name})"


def _ms(series: pd.Series) -> np.ndarray:
    return series.to_numpy(dtype=float) * 1e-3


def load_op_tables(vidur_dir: Path, gpu: str, sku: GpuSku) -> list[OpTable]:
    out: list[OpTable] = []
    root = vidur_dir / "profiling" / "compute" / gpu
    for csv in sorted(root.glob("*/*/mlp.csv")):
        model_dir = f"{csv.parent.parent.name}/{csv.parent.name}"
        df = pd.read_csv(csv)
        model, source = resolve_model(model_dir, df.iloc[0])
        for tp, g in df.groupby("num_tensor_parallel_workers"):
            g = g.groupby("num_tokens", as_index=False).median(numeric_only=True)
            measured = {}
            for op in (*LAYER_OPS, "emb"):
                col = f"time_stats.{op}.median"
                if col in g.columns and g[col].notna().all():
                    measured[op] = _ms(g[col])
            out.append(
                OpTable(
                    gpu,
                    sku,
                    model_dir,
                    model,
                    source,
                    int(tp),
                    g["num_tokens"].to_numpy(dtype=float),
                    measured,
                )
            )
    return out


def load_net_tables(vidur_dir: Path, gpu: str, sku: GpuSku) -> list[NetTable]:
    out: list[NetTable] = []
    for node_name, (g, node) in NETWORK_NODES.items():
        if g != gpu:
            continue
        for collective in ("all_reduce", "send_recv"):
            csv = vidur_dir / "profiling" / "network" / node_name / f"{collective}.csv"
            if not csv.exists():
                continue
            df = pd.read_csv(csv)
            for (n, dpn), grp in df.groupby(["num_workers", "devices_per_node"]):
                intra = n == dpn
                if collective == "all_reduce" and not intra:
                    continue  # TP stays inside a node
                grp = grp.groupby("size", as_index=False).median(numeric_only=True)
                out.append(
                    NetTable(
                        gpu,
                        node_name,
                        sku,
                        node or sku.default_node,
                        collective,
                        int(n),
                        bool(intra),
                        grp["size"].to_numpy(dtype=float),
                        _ms(grp[f"time_stats.{collective}.median"]),
                    )
                )
    return out


def load_family_data(vidur_dir: Path, family: str, skus: dict[str, GpuSku]) -> FamilyData:
    """Measured tables of the Vidur GPUs whose SKU is in `family` (by `sku.architecture`)."""
    data = FamilyData(family)
    for gpu, sku_id in VIDUR_GPU_TO_SKU.items():
        sku = skus[sku_id]
        if (sku.architecture or "default") != family:
            continue
        data.ops += load_op_tables(vidur_dir, gpu, sku)
        data.nets += load_net_tables(vidur_dir, gpu, sku)
        data.attention += load_attention_tables(vidur_dir, gpu, sku)
        cpu = vidur_dir / "profiling_2024" / gpu / "cpu_overheads.csv"
        if cpu.exists() and gpu == "a100":
            data.cpu = pd.read_csv(cpu).assign(vidur_gpu=gpu)
    return data


# --------------------------------------------------------------------------- predictions


# estimators by (model, sku, tp): their operator shapes do not depend on the constants
_EST_CACHE: dict[tuple[ModelArchitecture, GpuSku, int], RooflineEstimator] = {}


def predict_ops(t: OpTable, consts: RooflineConstants | None = None) -> dict[str, np.ndarray]:
    """Predicted seconds of each token-level operator (one kernel) of table `t`.

    `consts` None: the constants the estimator loads for the SKU (data/roofline.yaml)."""
    if consts is None:
        est = RooflineEstimator(t.model, t.sku, tp=t.tp)
        return est.token_op_times(t.num_tokens)
    key = (t.model, t.sku, t.tp)
    est = _EST_CACHE.get(key)
    if est is None:
        est = RooflineEstimator(t.model, t.sku, tp=t.tp, constants=consts)
        _EST_CACHE[key] = est
    k = _coeffs(consts, est.peak, est.hbm_bw)
    out = {op.name: _token_op_time(replace(op, count=1), t.num_tokens, k) for op in est.layer_ops}
    out["emb"] = _token_op_time(est.emb_op, t.num_tokens, k)
    return out


def layer_sum(t: OpTable, consts: RooflineConstants | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(predicted, measured) seconds of one layer's token-level operators (both residual
    adds where the model has two; no communication), per row of `t`."""
    pred = predict_ops(t, consts)
    adds = 1 if t.model.parallel_attn_mlp else 2
    p = np.zeros_like(t.num_tokens)
    m = np.zeros_like(t.num_tokens)
    for op in LAYER_OPS:
        if op not in t.measured or op not in pred:
            continue
        n = adds if op == "add" else 1
        p = p + n * pred[op]
        m = m + n * t.measured[op]
    return p, m


def _attention_rows(df: pd.DataFrame) -> tuple[list[BatchShape], np.ndarray, np.ndarray]:
    """(batches, measured seconds, is_prefill) of rows of Vidur's attention table."""
    is_pf = df["is_prefill"].astype(str).str.lower().eq("true").to_numpy()
    bs = df["batch_size"].to_numpy(dtype=int)
    ctx = df["kv_cache_size"].to_numpy(dtype=int)
    q = df["prefill_chunk_size"].to_numpy(dtype=int)
    t_pf = df["time_stats.attn_prefill.median"].to_numpy(dtype=float)
    t_dec = df["time_stats.attn_decode.median"].to_numpy(dtype=float)
    batches: list[BatchShape] = []
    for i in range(len(df)):
        n, c = int(bs[i]), int(ctx[i])
        if is_pf[i]:
            qi = int(q[i])
            batches.append(
                BatchShape(
                    num_prefill_tokens=qi * n,
                    num_prefills=n,
                    prefill_attn_pairs=n * qi * (c + (qi + 1) / 2),
                    prefill_kv_tokens=n * (c + qi),
                )
            )
        else:
            batches.append(BatchShape(num_decodes=n, decode_kv_tokens=n * c))
    measured = np.where(is_pf, t_pf, t_dec) * 1e-3
    return batches, measured, is_pf


def load_attention_tables(vidur_dir: Path, gpu: str, sku: GpuSku) -> list[AttnTable]:
    """Vidur's profiling_2024/<gpu>/attention.csv, one table per head shape and TP degree."""
    path = vidur_dir / "profiling_2024" / gpu / "attention.csv"
    if not path.exists():
        return []
    out: list[AttnTable] = []
    df = pd.read_csv(path)
    keys = ["n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers"]
    for (hidden, heads, kv, tp), g in df.groupby(keys):
        model = ModelArchitecture(
            name=f"attention({heads}q/{kv}kv/{hidden})",
            num_layers=1,
            hidden_size=int(hidden),
            num_attention_heads=int(heads),
            num_key_value_heads=int(kv),
            intermediate_size=4 * int(hidden),
            vocab_size=32000,
        )
        batches, measured, is_pf = _attention_rows(g)
        out.append(AttnTable(gpu, sku, model, int(tp), batches, measured, is_pf))
    return out


def predict_attention(
    t: AttnTable, consts: RooflineConstants | None = None, index: np.ndarray | None = None
) -> np.ndarray:
    """Predicted seconds of the rows of `t` (or of its rows `index`)."""
    est = RooflineEstimator(t.model, t.sku, tp=t.tp, constants=consts)
    rows = range(len(t.batches)) if index is None else index
    out = np.empty(len(rows))
    for j, i in enumerate(rows):
        ops = est.operator_times(t.batches[i])
        out[j] = ops["attn_prefill"] + ops["attn_decode"]
    return out


def predict_net(t: NetTable, consts: RooflineConstants) -> np.ndarray:
    """Predicted seconds of the collective of table `t` (sizes in fp16 elements)."""
    nbytes = 2.0 * t.size
    if t.collective == "all_reduce":
        bw, eff = tp_link(t.node, t.num_workers, consts)
        return _ring_allreduce(nbytes, t.num_workers, bw, eff, consts.allreduce_latency_us * 1e-6)
    # send/recv between two GPUs: in one node (a PP hop of TP=1, PP=2), or across two nodes
    gpus = t.node.gpus_per_node if t.intra_node else 1
    bw, eff, lat = pp_link(replace(t.node, gpus_per_node=gpus), 1, 2, consts)
    return nbytes / (bw * eff) + lat


def cpu_measured(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(batch sizes, seconds) of schedule + sampler + prepare inputs + process outputs."""
    cols = [
        "schedule_median",
        "sampler_e2e_median",
        "prepare_inputs_e2e_median",
        "process_model_outputs_median",
    ]
    return df["batch_size"].to_numpy(dtype=float), df[cols].sum(axis=1).to_numpy() * 1e-3


# --------------------------------------------------------------------------- fitting


def nelder_mead(
    f: Callable[[np.ndarray], float],
    x0: Sequence[float],
    step: float = 0.3,
    iters: int = 600,
    tol: float = 1e-9,
) -> np.ndarray:
    """Minimise `f` from `x0` (plain Nelder-Mead; a few parameters)."""
    n = len(x0)
    pts = [np.asarray(x0, dtype=float)]
    for i in range(n):
        p = pts[0].copy()
        p[i] += step
        pts.append(p)
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts = [pts[i] for i in order]
        vals = [vals[i] for i in order]
        if abs(vals[-1] - vals[0]) < tol:
            break
        centroid = np.mean(pts[:-1], axis=0)
        xr = centroid + (centroid - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = centroid + 2.0 * (centroid - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (pts[-1] - centroid)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                best = pts[0]
                pts = [best + 0.5 * (p - best) for p in pts]
                vals = [f(p) for p in pts]
    return pts[int(np.argmin(vals))]


def _log_sq(pred: np.ndarray, meas: np.ndarray) -> float:
    ok = (meas > 0) & np.isfinite(meas)
    d = np.log(np.maximum(pred[ok], 1e-12)) - np.log(meas[ok])
    return float(np.mean(d * d))


def fit_group(
    consts: RooflineConstants,
    names: Sequence[str],
    loss: Callable[[RooflineConstants], float],
    iters: int = 600,
) -> RooflineConstants:
    """Fit the constants `names` (log-parametrised) minimising `loss`; the rest stay."""
    x0 = np.log([max(getattr(consts, n), 1e-6) for n in names])

    def f(x: np.ndarray) -> float:
        c = consts.with_values(dict(zip(names, np.exp(x), strict=True)))
        return loss(c)

    x = nelder_mead(f, x0, iters=iters)
    return consts.with_values(dict(zip(names, np.exp(x), strict=True)))


# fitted values of one group: (group, its start values, digest of its rows) -> values
FitCache = dict[tuple[str, tuple[float, ...], str], dict[str, float]]


def _rows_digest(tables: Iterable) -> str:
    """A digest of the identities of the rows of `tables` (what a group is fitted to)."""
    h = hashlib.blake2b(digest_size=16)
    for t in tables:
        keys = cpu_row_keys(t) if isinstance(t, pd.DataFrame) else t.row_keys()
        for k in keys:
            h.update(str(k).encode())
            h.update(b"\n")
    return h.hexdigest()


def fit_family(
    data: FamilyData, start: RooflineConstants, cache: FitCache | None = None
) -> tuple[RooflineConstants, list[str]]:
    """Fit every group the family has data for; returns (constants, names of fitted fields).

    Each group's loss depends on its own constants only, so a group fitted before to the
    same rows from the same start values is taken from `cache` (leave-one-out folds)."""
    c = start
    fitted: list[str] = []

    def group(
        names: list[str],
        tables: Sequence,
        loss: Callable[[RooflineConstants], float],
        iters: int = 600,
    ) -> None:
        nonlocal c
        key = (",".join(names), tuple(getattr(c, n) for n in names), _rows_digest(tables))
        if cache is not None and key in cache:
            c = c.with_values(cache[key])
        else:
            c = fit_group(c, names, loss, iters)
            if cache is not None:
                cache[key] = {n: getattr(c, n) for n in names}
        fitted.extend(names)

    ops = data.ops

    if ops:

        def mm_loss(cc: RooflineConstants) -> float:
            errs = []
            for t in ops:
                pred = predict_ops(t, cc)
                for op in MATMUL_OPS:
                    if op in t.measured:
                        errs.append(_log_sq(pred[op], t.measured[op]))
            return float(np.mean(errs))

        names = ["matmul_eff_max", "matmul_m_half", "matmul_mem_eff", "matmul_overhead_us"]
        group(names, ops, mm_loss)

        def ew_loss(cc: RooflineConstants) -> float:
            errs = []
            for t in ops:
                pred = predict_ops(t, cc)
                for op, kind in OP_KIND.items():
                    if op in t.measured and kind != "emb":
                        errs.append(_log_sq(pred[op], t.measured[op]))
                if "emb" in t.measured:
                    errs.append(_log_sq(pred["emb"], t.measured["emb"]))
            return float(np.mean(errs))

        names = [
            "elementwise_norm_mem_eff",
            "elementwise_rope_mem_eff",
            "elementwise_act_mem_eff",
            "elementwise_add_mem_eff",
            "elementwise_emb_mem_eff",
            "elementwise_overhead_us",
        ]
        group(names, ops, ew_loss, iters=1200)

    if data.attention:
        subsets = [(t, np.arange(0, len(t.batches), 4)) for t in data.attention]  # for speed

        def at_loss(cc: RooflineConstants) -> float:
            errs = [_log_sq(predict_attention(t, cc, idx), t.measured[idx]) for t, idx in subsets]
            return float(np.mean(errs))

        names = [
            "attention_prefill_eff_max",
            "attention_prefill_causal_factor",
            "attention_prefill_query_pairs",
            "attention_prefill_ctx_pairs",
            "attention_decode_mem_eff",
            "attention_overhead_us",
        ]
        group(names, data.attention, at_loss, iters=1500)

    def net_loss(tables: list[NetTable]) -> Callable[[RooflineConstants], float]:
        return lambda cc: float(np.mean([_log_sq(predict_net(t, cc), t.measured) for t in tables]))

    ar = [t for t in data.nets if t.collective == "all_reduce"]
    ar_fast = [
        t
        for t in ar
        if not (t.node.intra_node_link is LinkKind.NVLINK_PAIRWISE and t.num_workers > 2)
    ]
    ar_pcie = [t for t in ar if t not in ar_fast]
    if ar_fast:
        group(["allreduce_bw_eff", "allreduce_latency_us"], ar_fast, net_loss(ar_fast))
    if ar_pcie:
        group(["link_pcie_gbps"], ar_pcie, net_loss(ar_pcie))

    sr_nvswitch = [
        t
        for t in data.nets
        if t.collective == "send_recv" and t.node.intra_node_link is LinkKind.NVSWITCH
    ]
    sr_intra = [t for t in sr_nvswitch if t.intra_node]
    sr_inter = [t for t in sr_nvswitch if not t.intra_node]
    if sr_intra:
        group(["p2p_bw_eff", "p2p_latency_us"], sr_intra, net_loss(sr_intra))
    if sr_inter:
        group(["p2p_inter_bw_eff", "p2p_inter_latency_us"], sr_inter, net_loss(sr_inter))

    if data.cpu is not None:
        bs, sec = cpu_measured(data.cpu)
        slope, intercept = np.polyfit(bs, sec, 1)
        c = c.with_values({"cpu_base_ms": intercept * 1e3, "cpu_per_seq_ms": slope * 1e3})
        fitted += ["cpu_base_ms", "cpu_per_seq_ms"]
    return c, fitted


@dataclass(slots=True)
class FittedConstants:
    """The constants fitted to some tables, in the layers of data/roofline.yaml."""

    defaults: RooflineConstants
    families: dict[str, tuple[RooflineConstants, list[str]]]  # family -> (constants, fitted)
    # SKU id -> (constants, fitted field names, its family's constants)
    skus: dict[str, tuple[RooflineConstants, list[str], RooflineConstants]]

    def for_sku(self, sku: GpuSku) -> RooflineConstants:
        """What the estimator would load for `sku`: defaults, its family, its own fit."""
        c = self.defaults
        family = self.families.get(sku.architecture or "default")
        if family is not None:
            c = c.with_values({n: getattr(family[0], n) for n in family[1]})
        own = self.skus.get(sku.id)
        if own is not None:
            c = c.with_values({n: getattr(own[0], n) for n in own[1]})
        return c


def fit_constants(
    data: Mapping[str, FamilyData],
    start: RooflineConstants | None = None,
    progress: Callable[[str], None] | None = None,
    cache: FitCache | None = None,
) -> FittedConstants:
    """Fit each family's constants to its tables; where a family has token-level tables of
    several GPUs, refit those groups per SKU; defaults are the geometric mean over the
    families that fitted a field (else the start value)."""
    start = start or RooflineConstants()
    say = progress or (lambda _message: None)
    families: dict[str, tuple[RooflineConstants, list[str]]] = {}
    skus: dict[str, tuple[RooflineConstants, list[str], RooflineConstants]] = {}
    for family, fam_data in data.items():
        gpus = list(dict.fromkeys(t.gpu for t in fam_data.ops))
        say(f"fitting family {family} ({', '.join(gpus) or 'no operator tables'}) ...")
        c, names = fit_family(fam_data, start, cache)
        families[family] = (c, names)
        if len(gpus) > 1:
            for gpu in gpus:
                ops = [t for t in fam_data.ops if t.gpu == gpu]
                say(f"  fitting token-level constants of {ops[0].sku.id} ...")
                sc, snames = fit_family(FamilyData(family, ops=ops), c, cache)
                skus[ops[0].sku.id] = (sc, snames, c)
    values: dict[str, float] = {}
    for name in RooflineConstants.field_names():
        vals = [getattr(c, name) for c, names in families.values() if name in names]
        if vals:
            values[name] = float(np.exp(np.mean(np.log(vals))))
    return FittedConstants(start.with_values(values), families, skus)


# --------------------------------------------------------------------------- YAML

# roofline.yaml's engine layers (benchmarks/fit_roofline_aic.py) start at this line; a
# refit of the Vidur families keeps them
ENGINE_SECTION_MARKER = "# ==== engine layers"


def engine_section(path: Path) -> str:
    """The engine-layer part of an existing roofline.yaml (from the marker on), or ''."""
    if not path.is_file():
        return ""
    text = path.read_text("utf-8")
    at = text.find(ENGINE_SECTION_MARKER)
    return text[at:] if at >= 0 else ""


def _rounded(values: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    return {g: {k: float(f"{v:.4g}") for k, v in body.items()} for g, body in values.items()}


def _diff(c: RooflineConstants, base: RooflineConstants, names: Iterable[str]) -> dict:
    keep = {n for n in names if f"{getattr(c, n):.4g}" != f"{getattr(base, n):.4g}"}
    nested: dict[str, dict[str, float]] = {}
    for n in RooflineConstants.field_names():
        if n in keep:
            g, k = n.split("_", 1)
            nested.setdefault(g, {})[k] = getattr(c, n)
    return _rounded(nested)


def write_constants_yaml(
    path: Path,
    defaults: RooflineConstants,
    families: dict[str, tuple[RooflineConstants, list[str]]],
    skus: dict[str, tuple[RooflineConstants, list[str], RooflineConstants]],
    command: str,
    notes: Sequence[str] = (),
) -> None:
    """Write data/roofline.yaml: full defaults, then per-family and per-SKU fitted values.

    `families`: family -> (constants, fitted field names); `skus`: id -> (constants,
    fitted field names, its family's constants)."""
    today = dt.date.today().isoformat()
    header = [
        "# Fitted constants of the roofline estimator (estimators/_roofline.py).",
        "#",
        f"# Fitted {today} by: {command}",
        "# against Vidur's public profiling tables (microsoft/vidur, MIT): per-operator",
        "# median times of the token-level operators (profiling/compute/<gpu>/<model>/mlp.csv,",
        "# all models and TP degrees), NCCL all-reduce and send/recv (profiling/network/*),",
        "# A100 FlashAttention prefill/decode (profiling_2024/a100/attention.csv) and A100",
        "# per-iteration CPU overheads (profiling_2024/a100/cpu_overheads.csv).",
        "# Method: least squares on log(predicted / measured), Nelder-Mead over the log of",
        "# each group's constants (matmul, elementwise, attention, all-reduce, send/recv);",
        "# CPU overhead: linear fit of schedule + sampler + prepare inputs + process outputs",
        "# against batch size. Efficiencies are fractions of the catalog's nominal peaks",
        "# (values above 1 mean the measured times beat the nominal link rate).",
        "#",
        "# Lookup: defaults, then families.<sku.architecture>, then skus.<sku.id>.",
        "# Families with no measured data (ada, blackwell) use the defaults: the geometric",
        "# mean of the fitted families for fields fitted on several, else the one fitted value.",
        *[f"# {n}" for n in notes],
        "",
    ]
    body = {
        "defaults": _rounded(defaults.to_nested()),
        "families": {f: _diff(c, defaults, names) for f, (c, names) in families.items()},
        "skus": {s: _diff(c, fam, names) for s, (c, names, fam) in skus.items()},
    }
    text = "\n".join(header) + yaml.safe_dump(body, sort_keys=False, default_flow_style=False)
    path.write_text(text + engine_section(path), encoding="utf-8")
