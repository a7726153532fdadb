"""Two measurements of the same GPU side by side: an op-table directory against
aiconfigurator-core's tables for that GPU.

For every GEMM shape ``(n, k)`` and token count m measured in the directory (``llmcap
profile run`` on a GPU, or ``llmcap profile import-vidur``), the aiconfigurator tables'
interpolated time at the same ``(m, n, k)`` (as the profiled backend reads them: bilinear
in log n and log k between measured shapes, log-log in m); for every attention row of the
directory (prefill without a cached prefix, decode) the aiconfigurator grid's time at the
same batch and length, for the same heads per GPU; for every MoE shape (hidden size, expert
width, top-k, experts, MoE TP, EP) of the directory's ``moe.csv``, the aiconfigurator MoE
table's fastest kernel at the same tokens (balanced routing, as the backend reads it).
Ratios are directory / aiconfigurator;
nothing is fitted.  The spread says how far two honest measurements of one GPU (other
kernels, other engine versions, other harnesses) lie apart, the noise floor any estimator
built on either inherits.

    python benchmarks/compare_op_tables.py --tables DIR [--engine vllm] [--min-ms 0.05]

Needs the llmcap[aic] extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from estimators import Precision
from estimators._aic_moe_mla import moe_curve
from estimators._curves import gemm_curve
from estimators._op_tables import _ASKED_DTYPES, OpTableMissing, load_op_tables
from estimators._profiled import AicOpTables, profiled_coverage
from sku_catalog import load_catalog


def _stats(ratios: np.ndarray) -> str:
    if len(ratios) == 0:
        return "no shared points"
    err = np.abs(ratios - 1.0)
    q = np.quantile(ratios, [0.1, 0.5, 0.9])
    return (
        f"{len(ratios):5d} points  ratio p10 {q[0]:.2f}  median {q[1]:.2f}  p90 {q[2]:.2f}  "
        f"mean |1 - ratio| {err.mean():.1%}"
    )


# an op table's dtype -> the aiconfigurator dtype the profiled backend answers it for
_AIC_DTYPE = {ours: asked for asked, dtypes in _ASKED_DTYPES.items() for ours in dtypes}


def compare_gemms(tables, aic: AicOpTables, min_s: float) -> dict[str, np.ndarray]:
    """Ratios per dtype and model label (the ``op`` column's first word), each dtype against
    aiconfigurator's GEMMs of that dtype, GEMMs of >= min_s only."""
    gemm = pd.read_csv(tables.directory / "gemm.csv")
    out: dict[str, list[float]] = {}
    for (dtype, n, k), rows in gemm.groupby(["dtype", "n", "k"]):
        _, cube = aic.gemm_cube(_AIC_DTYPE[str(dtype)])
        curve = gemm_curve(cube, int(n), int(k)) if cube is not None else None
        if curve is None:
            continue
        med = rows.groupby("m")["latency_ms"].median() * 1e-3
        med = med[med >= min_s]
        ratio = med.to_numpy() / curve.many(med.index.to_numpy(dtype=float))
        label = str(rows["op"].iloc[0]).split(" ")[0] if "op" in rows else ""
        label = f"{dtype} {label}".strip()
        out.setdefault(label, []).extend(ratio)
    return {k: np.array(v) for k, v in out.items()}


def compare_attention(tables, aic: AicOpTables, phase: str, min_s: float) -> np.ndarray:
    kind = f"{phase}_attention"
    path = tables.directory / f"{kind}.csv"
    if not path.is_file():
        return np.array([])
    df = pd.read_csv(path)
    if phase == "context":
        df = df[df["cached_len"] == 0]
    length = "prompt_len" if phase == "context" else "kv_len"
    ratios: list[float] = []
    for (h, kv, hd), rows in df.groupby(["num_heads", "num_kv_heads", "head_dim"]):
        try:
            grid = aic.attention(phase, int(h), int(kv), int(hd), "bfloat16").grid
        except OpTableMissing:
            continue
        if grid is None:
            continue
        med = rows.groupby(["batch_size", length])["latency_ms"].median() * 1e-3
        for (b, x), t in med.items():
            if t >= min_s:
                ratios.append(t / grid(float(b), float(x)))
    return np.array(ratios)


# a MoE table's dtype -> the aiconfigurator ``moe_dtype`` names it is compared with
_AIC_MOE_DTYPES = {"bf16": ("bfloat16",), "fp16": ("bfloat16",), "fp8": ("fp8_block", "fp8")}
_MOE_SHAPE = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp", "moe_ep"]


def compare_moe(tables, aic: AicOpTables, min_s: float) -> dict[str, dict[str, np.ndarray]]:
    """Ratios per MoE shape and dtype, split at 512 tokens (the backend reads the engines'
    MoE tables above the decode batches their CUDA graphs capture), points of >= min_s."""
    path = tables.directory / "moe.csv"
    if not path.is_file():
        return {}
    df = pd.read_csv(path)
    out: dict[str, dict[str, np.ndarray]] = {}
    for (dtype, *shape), rows in df.groupby(["dtype", *_MOE_SHAPE]):
        shape = tuple(int(v) for v in shape)
        dtypes = _AIC_MOE_DTYPES.get(str(dtype), ())
        _, curve, _ = moe_curve(aic.system, aic.engine, aic.resolved_version, shape, dtypes)
        if curve is None:
            continue
        med = rows.groupby("num_tokens")["latency_ms"].median() * 1e-3
        med = med[med >= min_s]
        tokens = med.index.to_numpy(dtype=float)
        ratio = med.to_numpy() / curve.many(tokens)
        h, w, k, e, tp, ep = shape
        label = f"{dtype} hidden {h} width {w} top-{k}/{e} TP {tp} EP {ep}"
        out[label] = {"<= 512": ratio[tokens <= 512], "> 512": ratio[tokens > 512]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tables", required=True, type=Path, help="an op-table directory")
    ap.add_argument("--engine", default="vllm", help="aiconfigurator tables of this engine")
    ap.add_argument("--min-ms", type=float, default=0.05, help="only points this long or more")
    args = ap.parse_args()
    tables = load_op_tables(args.tables)
    if not tables.meta.sku:
        sys.exit(f"{args.tables}: the tables name no catalog SKU to compare against")
    sku = load_catalog().get(tables.meta.sku)
    system, eng, version = profiled_coverage(sku, Precision.BF16, args.engine)
    aic = AicOpTables(system, eng, None, version)
    min_s = args.min_ms * 1e-3
    print(f"{tables.label}\n  against {aic.label}; ratio = directory / aiconfigurator")
    print(f"  (points of {args.min_ms:g} ms or more)\n")
    print("GEMMs, by model:")
    gemm = compare_gemms(tables, aic, min_s)
    for label, r in sorted(gemm.items()):
        print(f"  {label:40s} {_stats(r)}")
    every = np.concatenate(list(gemm.values())) if gemm else np.array([])
    print(f"  {'all':40s} {_stats(every)}")
    for phase in ("context", "generation"):
        ratios = compare_attention(tables, aic, phase, min_s)
        print(f"{phase} attention:\n  {'':40s} {_stats(ratios)}")
    moe = compare_moe(tables, aic, min_s)
    if moe:
        print("MoE routed experts, by shape and tokens entering the layer:")
        for label, bands in sorted(moe.items()):
            for band, r in bands.items():
                print(f"  {label:52s} {band:>6s} {_stats(r)}")
        for band in ("<= 512", "> 512"):
            every = np.concatenate([b[band] for b in moe.values()])
            print(f"  {'all':52s} {band:>6s} {_stats(every)}")


if __name__ == "__main__":
    main()
