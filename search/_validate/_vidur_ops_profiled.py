"""`vidur-ops` for the profiled backend: held-out Vidur rows read from tables of the others.

The roofline's part of `vidur-ops` refits its constants without the held-out rows.  The
profiled backend has no constants: it interpolates measured tables.  Here the rows that are
not held out become op tables in llmcap's own format (one directory per Vidur GPU, as
`llmcap profile import-vidur` writes them), and a `ProfiledEstimator` on those tables prices
every held-out row through the lookups a simulation uses:

* a layer GEMM by Vidur operator name at the row's token count (`gemm_time`: log-log
  between the nearest measured token counts of that (n, k));
* prefill and decode attention at the row's batch shape (`prefill_attention_time`,
  `decode_attention_time`: the (batch, length) grid of the head shape, and the estimator's
  own rule for a cached prefix, which the table's grid does not hold).

So a held-out row is predicted from its neighbours in the same table: the error measures the
interpolation (and the grid's spacing), not a fit.  Rows outside the measured range are
extrapolated as the backend does.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from estimators import (
    OpTablesMeta,
    Precision,
    ProfiledEstimator,
    layer_gemm_shapes,
    utc_now,
    write_op_tables,
)
from estimators import _calibration as cal

SCORED_GROUPS = ("matmul", "attention prefill", "attention decode")


def op_tables_of(data: dict[str, cal.FamilyData], gpu: str) -> dict[str, pd.DataFrame]:
    """The GEMM and attention rows of Vidur GPU `gpu` in `data`, in llmcap's table format."""
    gemm, ctx, gen = [], [], []
    for family in data.values():
        for t in family.ops:
            if t.gpu != gpu:
                continue
            for op, (n, k) in layer_gemm_shapes(t.model, t.tp).items():
                if op in t.measured:
                    gemm.append(pd.DataFrame({
                        "dtype": "fp16", "m": t.num_tokens.astype(int), "n": n, "k": k,
                        "latency_ms": t.measured[op] * 1e3,
                        "op": f"{t.model_dir} tp{t.tp} {op}",
                    }))  # fmt: skip
        for t in family.attention:
            if t.gpu == gpu:
                c, g = _attention_rows(t)
                ctx.append(c)
                gen.append(g)
    tables: dict[str, pd.DataFrame] = {}
    if gemm:
        frame = pd.concat(gemm, ignore_index=True)
        tables["gemm"] = frame[frame["latency_ms"] > 0]
    if ctx:
        tables["context_attention"] = pd.concat(ctx, ignore_index=True)
        tables["generation_attention"] = pd.concat(gen, ignore_index=True)
    return tables


def _attention_rows(t: cal.AttnTable) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(context rows, generation rows) of one head shape: each batch shape back as the
    table's batch size, prompt (chunk) length, cached prefix or KV length."""
    m = t.model
    head = {
        "num_heads": m.num_attention_heads // t.tp,
        "num_kv_heads": max(m.num_key_value_heads // t.tp, 1),
        "head_dim": m.hidden_size // m.num_attention_heads,
        "kv_dtype": "fp16",
        "kernel": "",
    }
    ctx, gen = [], []
    for batch, seconds, prefill in zip(t.batches, t.measured, t.is_prefill, strict=True):
        if prefill:
            n = batch.num_prefills
            chunk = batch.num_prefill_tokens // n
            ctx.append({**head, "batch_size": n, "prompt_len": chunk,
                        "cached_len": batch.prefill_kv_tokens // n - chunk,
                        "latency_ms": seconds * 1e3})  # fmt: skip
        else:
            n = batch.num_decodes
            gen.append({**head, "batch_size": n, "kv_len": batch.decode_kv_tokens // n,
                        "latency_ms": seconds * 1e3})  # fmt: skip
    return pd.DataFrame(ctx), pd.DataFrame(gen)


def score_profiled(
    train: dict[str, cal.FamilyData], held: dict[str, cal.FamilyData]
) -> pd.DataFrame:
    """One row per held-out operator time (`score`'s columns): the profiled backend on
    tables of the `train` rows of the same GPU.  GPUs whose training rows hold no table of
    a group are left out of that group."""
    parts: list[pd.DataFrame] = []
    gpus = sorted({t.gpu for d in held.values() for t in (*d.ops, *d.attention)})
    with tempfile.TemporaryDirectory(prefix="llmcap-vidur-ops-") as tmp:
        for gpu in gpus:
            tables = op_tables_of(train, gpu)
            if "gemm" not in tables:
                continue
            directory = Path(tmp) / gpu
            sku = cal.VIDUR_GPU_TO_SKU[gpu]
            meta = OpTablesMeta(source="vidur", device="cuda", dtype="fp16", date=utc_now(),
                                gpu_name=gpu, sku=sku)  # fmt: skip
            write_op_tables(directory, meta, tables)
            parts += _score_gpu(held, gpu, directory, has_attention="context_attention" in tables)
    columns = ["group", "gpu", "model", "predicted", "measured"]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=columns)


def _score_gpu(
    held: dict[str, cal.FamilyData], gpu: str, directory: Path, has_attention: bool
) -> list[pd.DataFrame]:
    parts = []
    for family in held.values():
        for t in family.ops:
            if t.gpu != gpu:
                continue
            est = ProfiledEstimator(t.model, t.sku, tp=t.tp, precision=Precision.FP16,
                                    op_tables=directory)  # fmt: skip
            for op, measured in t.measured.items():
                if op in cal.MATMUL_OPS:
                    predicted = [est.gemm_time(op, float(m)) for m in t.num_tokens]
                    parts.append(_frame("matmul", t.sku.id, t.model_dir, predicted, measured))
        if not has_attention:
            continue
        for t in family.attention:
            if t.gpu != gpu:
                continue
            est = ProfiledEstimator(t.model, t.sku, tp=t.tp, precision=Precision.FP16,
                                    op_tables=directory)  # fmt: skip
            predicted = [
                est.prefill_attention_time(b) if pf else est.decode_attention_time(b)
                for b, pf in zip(t.batches, t.is_prefill, strict=True)
            ]
            group = np.where(t.is_prefill, "attention prefill", "attention decode")
            parts.append(_frame(group, t.sku.id, "", predicted, t.measured))
    return parts


def _frame(group, sku: str, model: str, predicted, measured) -> pd.DataFrame:
    return pd.DataFrame({
        "group": group, "gpu": sku, "model": model.rsplit("/", 1)[-1],
        "predicted": np.asarray(predicted, dtype=float), "measured": measured,
    })  # fmt: skip
