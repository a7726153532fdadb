"""`llmcap profile import-vidur`: Vidur's public profiling CSVs -> llmcap's op-table format.

Vidur (microsoft/vidur, MIT) publishes per-GPU operator timings; a copy laid out as in its
repository (``profiling/compute/<gpu>/<org>/<model>/mlp.csv``, ``profiling/network/<node>/
all_reduce.csv``, ``profiling_2024/<gpu>/attention.csv``) converts into one op-table
directory for that GPU:

* GEMMs: each model's ``attn_pre_proj`` (QKV), ``attn_post_proj`` (O), ``mlp_up_proj``
  (gate-up) and ``mlp_down_proj`` (down) times (median column) against ``num_tokens``, at
  that model's TP-sharded ``(n, k)`` for each tensor-parallel degree; shapes shared by
  several models keep every row (the reader takes the median).  Vidur does not time the LM
  head: the profiled backend takes it from the roofline and says so.
* attention (``profiling_2024/<gpu>/attention.csv``, A100 only in the public release):
  prefill rows as batch x chunk x cached prefix (``kv_cache_size``), decode rows as batch x
  KV length (``kv_cache_size`` read as the KV tokens of each decode, as
  `estimators._calibration` does); heads per GPU are the table's heads over its TP degree.
* all-reduce: the intra-node rows (``num_workers == devices_per_node``) of the GPU's DGX
  network table (``profiling_2024/a40/all_reduce.csv`` for the A40); ``size`` counts fp16
  elements, so ``message_bytes = 2 * size``.

Vidur's CSVs do not record the dtype, driver or library versions: the tables are marked
16-bit (``fp16``) and the versions are left empty.  The product never needs a Vidur copy at
run time: the user passes the directory once and the converted tables are what is read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from estimators._calibration import VIDUR_GPU_TO_SKU, _model_from_row
from estimators._op_tables import OpTablesMeta, layer_gemm_shapes, utc_now, write_op_tables

__all__ = ["VIDUR_GPUS", "VIDUR_NETWORK_TABLES", "VidurImport", "VidurImportError", "import_vidur"]

VIDUR_GPUS = tuple(VIDUR_GPU_TO_SKU)
# the all-reduce table of each GPU, relative to the Vidur directory
VIDUR_NETWORK_TABLES: dict[str, str] = {
    "a100": "profiling/network/a100_dgx/all_reduce.csv",
    "h100": "profiling/network/h100_dgx/all_reduce.csv",
    "a40": "profiling_2024/a40/all_reduce.csv",
}
_GPU_NAMES = {"a100": "NVIDIA A100 80GB", "h100": "NVIDIA H100 80GB", "a40": "NVIDIA A40"}
_MODEL_COLUMNS = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "vocab_size")
_ATTN_COLUMNS = (
    "n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size",
    "prefill_chunk_size", "kv_cache_size", "is_prefill",
    "time_stats.attn_prefill.median", "time_stats.attn_decode.median",
)  # fmt: skip
_NET_COLUMNS = ("num_workers", "devices_per_node", "size", "time_stats.all_reduce.median")


class VidurImportError(ValueError):
    """A Vidur directory or CSV that cannot be converted; the message names it."""


@dataclass(slots=True)
class VidurImport:
    """What one import wrote."""

    out: Path
    files: list[Path] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def _read_csv(path: Path, required: tuple[str, ...]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise VidurImportError(f"{path}: cannot read the table ({exc})") from None
    for col in required:
        if col not in df.columns:
            raise VidurImportError(f"{path}: missing field {col!r}")
    return df


def _gemm_rows(vidur_dir: Path, gpu: str, result: VidurImport) -> pd.DataFrame:
    root = vidur_dir / "profiling" / "compute" / gpu
    files = sorted(root.glob("*/*/mlp.csv"))
    if not files:
        raise VidurImportError(
            f"{root}: no <org>/<model>/mlp.csv tables; pass the directory that holds Vidur's "
            "profiling/ folder"
        )
    parts = []
    for csv in files:
        model_dir = f"{csv.parent.parent.name}/{csv.parent.name}"
        df = _read_csv(csv, (*_MODEL_COLUMNS, "use_gated_mlp", "num_tokens",
                             "num_tensor_parallel_workers"))  # fmt: skip
        model = _model_from_row(model_dir, df.iloc[0])
        result.models.append(model_dir)
        for tp, g in df.groupby("num_tensor_parallel_workers"):
            shapes = layer_gemm_shapes(model, int(tp))
            for op, (n, k) in shapes.items():
                col = f"time_stats.{op}.median"
                if col not in g.columns:
                    raise VidurImportError(f"{csv}: missing field {col!r}")
                rows = g[["num_tokens", col]].dropna()
                rows = rows[rows[col] > 0]
                parts.append(
                    pd.DataFrame({
                        "dtype": "fp16", "m": rows["num_tokens"].astype(int), "n": n, "k": k,
                        "latency_ms": rows[col], "op": f"{model_dir} tp{int(tp)} {op}",
                    })
                )  # fmt: skip
    return pd.concat(parts, ignore_index=True)


def _attention_rows(vidur_dir: Path, gpu: str) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    path = vidur_dir / "profiling_2024" / gpu / "attention.csv"
    if not path.is_file():
        return None, None
    df = _read_csv(path, _ATTN_COLUMNS)
    tp = df["num_tensor_parallel_workers"].astype(int)
    heads = df["n_q_head"].astype(int)
    base = pd.DataFrame({
        "num_heads": heads // tp,
        "num_kv_heads": (df["n_kv_head"].astype(int) // tp).clip(lower=1),
        "head_dim": df["n_embd"].astype(int) // heads,
        "kv_dtype": "fp16",
        "batch_size": df["batch_size"].astype(int),
    })  # fmt: skip
    kernel = (
        df["attention_backend"].astype(str).str.removeprefix("AttentionBackend.")
        if "attention_backend" in df.columns
        else ""
    )
    base["kernel"] = kernel
    prefill = df["is_prefill"].astype(str).str.lower().eq("true")
    ctx = base[prefill].assign(
        prompt_len=df.loc[prefill, "prefill_chunk_size"].astype(int),
        cached_len=df.loc[prefill, "kv_cache_size"].astype(int),
        latency_ms=df.loc[prefill, "time_stats.attn_prefill.median"],
    )
    gen = base[~prefill].assign(
        kv_len=df.loc[~prefill, "kv_cache_size"].astype(int),
        latency_ms=df.loc[~prefill, "time_stats.attn_decode.median"],
    )
    return ctx[ctx["latency_ms"] > 0], gen[gen["latency_ms"] > 0]


def _allreduce_rows(vidur_dir: Path, gpu: str) -> pd.DataFrame | None:
    path = vidur_dir / VIDUR_NETWORK_TABLES[gpu]
    if not path.is_file():
        return None
    df = _read_csv(path, _NET_COLUMNS)
    if "collective" in df.columns:
        df = df[df["collective"] == "all_reduce"]
    df = df[df["num_workers"] == df["devices_per_node"]]  # TP stays inside a node
    df = df[df["time_stats.all_reduce.median"] > 0]
    return pd.DataFrame({
        "num_gpus": df["num_workers"].astype(int),
        "message_bytes": 2 * df["size"].astype(int),
        "latency_ms": df["time_stats.all_reduce.median"],
        "implementation": "nccl",
    })  # fmt: skip


def import_vidur(vidur_dir: str | Path, gpu: str, out: str | Path) -> VidurImport:
    """Convert Vidur's profiling CSVs of `gpu` (a100, h100, a40) under `vidur_dir` into the
    op-table directory `out`; raises VidurImportError naming a missing or bad file."""
    src = Path(vidur_dir).expanduser()
    if gpu not in VIDUR_GPU_TO_SKU:
        raise VidurImportError(f"--gpu {gpu!r}: Vidur profiled {', '.join(VIDUR_GPUS)}")
    if not src.is_dir():
        raise VidurImportError(f"Vidur directory {vidur_dir}: does not exist")
    result = VidurImport(Path(out))
    tables = {"gemm": _gemm_rows(src, gpu, result)}
    ctx, gen = _attention_rows(src, gpu)
    if ctx is None:
        result.skipped.append(f"attention: no profiling_2024/{gpu}/attention.csv")
    else:
        tables["context_attention"], tables["generation_attention"] = ctx, gen
    allreduce = _allreduce_rows(src, gpu)
    if allreduce is None:
        result.skipped.append(f"all-reduce: no {VIDUR_NETWORK_TABLES[gpu]}")
    else:
        tables["allreduce"] = allreduce
    meta = OpTablesMeta(
        source="vidur",
        device="cuda",
        dtype="fp16",
        date=utc_now(),
        gpu_name=_GPU_NAMES[gpu],
        sku=VIDUR_GPU_TO_SKU[gpu],
        notes=(
            f"imported from Vidur's profiling CSVs (microsoft/vidur, MIT) at {src.resolve()}; "
            "Vidur records no dtype, driver or library versions (16-bit assumed)"
        ),
    )
    result.files = write_op_tables(result.out, meta, tables)
    result.rows = {kind: len(df) for kind, df in tables.items()}
    return result
