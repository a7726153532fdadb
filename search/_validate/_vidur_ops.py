"""The `vidur-ops` dataset: the roofline's operator times against held-out Vidur table rows.

The roofline's constants are fitted to Vidur's public profiling tables
(`benchmarks/validate_roofline.py --fit`), so scoring it on those same rows would only show
how well it fits.  Here every measured row has a key (table, GPU, model, TP degree, tokens
or batch shape or message size); a stable hash of the key puts about one row in five in a
held-out set (`is_held_out`); the constants are refitted with the same fitting code on the
other rows and the held-out rows are scored.  Two harder splits follow: leave one GPU out
(fit on the other GPUs' tables, score all of that GPU's rows, which then use their family's
or the default constants as an unmeasured GPU does) and leave one model out (fit without
that model's rows, score them).

The directory is the user's copy of Vidur's `data/` folder (microsoft/vidur, MIT), passed
with `--vidur-dir`; nothing here is needed by the estimator at run time.
"""

from __future__ import annotations

import csv
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from estimators import _calibration as cal
from search._validate._aic_silicon import DatasetError
from sku_catalog import load_catalog

HELD_OUT_SHARE = 0.2  # rows whose key hashes below this fraction are held out
GROUPS = (
    "matmul",
    "elementwise",
    "attention prefill",
    "attention decode",
    "all-reduce",
    "send/recv",
    "cpu",
)
TARGETS = {"matmul": 0.05, "attention": 0.10}  # MAPE targets of the held-out rows

_MLP_COLUMNS = (
    "num_tensor_parallel_workers", "num_tokens", "n_embd", "n_head", "n_kv_head",
    "n_expanded_embd", "vocab_size", "use_gated_mlp",
    *(f"time_stats.{op}.median" for op in cal.MATMUL_OPS),
)  # fmt: skip
_ATTENTION_COLUMNS = (
    "n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "is_prefill",
    "batch_size", "kv_cache_size", "prefill_chunk_size",
    "time_stats.attn_prefill.median", "time_stats.attn_decode.median",
)  # fmt: skip
_CPU_COLUMNS = (
    "model_name", "batch_size", "tensor_parallel_degree", "schedule_median",
    "sampler_e2e_median", "prepare_inputs_e2e_median", "process_model_outputs_median",
)  # fmt: skip


# columns read as text or booleans; every other required column must be numeric
_TEXT_COLUMNS = ("use_gated_mlp", "is_prefill", "model_name")


def _net_columns(collective: str) -> tuple[str, ...]:
    return ("num_workers", "devices_per_node", "size", f"time_stats.{collective}.median")


def is_held_out(key: cal.RowKey) -> bool:
    """Whether a row is in the held-out set: its key's BLAKE2b hash in the lowest 20%."""
    digest = hashlib.blake2b(str(key).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") < HELD_OUT_SHARE * 2**64


# --------------------------------------------------------------------------- loading


def _check_columns(path: Path, columns: Iterable[str]) -> None:
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"cannot read {path}: {exc}") from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise DatasetError(f"{path}: missing column(s) {', '.join(missing)}")
    numeric = [c for c in columns if c not in _TEXT_COLUMNS]
    try:
        frame = pd.read_csv(path, usecols=numeric)
    except (ValueError, pd.errors.ParserError) as exc:
        raise DatasetError(f"{path}: not a readable CSV table ({exc})") from None
    for column in numeric:
        values = pd.to_numeric(frame[column], errors="coerce")
        bad = values.isna() & frame[column].notna()
        if bad.any():
            line = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            raise DatasetError(
                f"{path} line {line}: column {column} must be a number, "
                f"got {frame[column][bad].iloc[0]!r}"
            )


def check_vidur_dir(vidur_dir: Path) -> list[Path]:
    """The tables this dataset reads, after checking they are there with their columns."""
    if not vidur_dir.is_dir():
        raise DatasetError(
            f"--vidur-dir {vidur_dir}: not a directory (expected a copy of Vidur's data/ "
            "folder with profiling/compute/<gpu>/<org>/<model>/mlp.csv)"
        )
    compute = vidur_dir / "profiling" / "compute"
    mlp = sorted(p for gpu in cal.VIDUR_GPU_TO_SKU for p in compute.glob(f"{gpu}/*/*/mlp.csv"))
    if not mlp:
        known = ", ".join(cal.VIDUR_GPU_TO_SKU)
        raise DatasetError(
            f"--vidur-dir {vidur_dir}: no operator table {compute}/<gpu>/<org>/<model>/mlp.csv "
            f"(gpu one of {known})"
        )
    attention = vidur_dir / "profiling_2024" / "a100" / "attention.csv"
    if not attention.is_file():
        raise DatasetError(f"--vidur-dir {vidur_dir}: missing {attention} (attention table)")
    tables = [*mlp, attention]
    for path in mlp:
        _check_columns(path, _MLP_COLUMNS)
    _check_columns(attention, _ATTENTION_COLUMNS)
    for node in cal.NETWORK_NODES:
        for collective in ("all_reduce", "send_recv"):
            path = vidur_dir / "profiling" / "network" / node / f"{collective}.csv"
            if path.is_file():
                _check_columns(path, _net_columns(collective))
                tables.append(path)
    cpu = vidur_dir / "profiling_2024" / "a100" / "cpu_overheads.csv"
    if cpu.is_file():
        _check_columns(cpu, _CPU_COLUMNS)
        tables.append(cpu)
    return tables


def load_vidur_ops(vidur_dir: Path) -> dict[str, cal.FamilyData]:
    """Every measured table of the Vidur GPUs, by architecture family."""
    check_vidur_dir(vidur_dir)
    catalog = load_catalog()
    skus = {sku_id: catalog.get(sku_id) for sku_id in cal.VIDUR_GPU_TO_SKU.values()}
    families = dict.fromkeys(sku.architecture or "default" for sku in skus.values())
    try:
        return {f: cal.load_family_data(vidur_dir, f, skus) for f in families}
    except (ValueError, TypeError, KeyError, pd.errors.ParserError) as exc:
        raise DatasetError(
            f"--vidur-dir {vidur_dir}: a table has a malformed value or row: {exc}"
        ) from None


def select(data: dict[str, cal.FamilyData], keep: Callable[[cal.RowKey], bool]) -> dict:
    return {family: d.select(keep) for family, d in data.items()}


def row_count(data: dict[str, cal.FamilyData]) -> int:
    n = 0
    for d in data.values():
        n += sum(len(t.num_tokens) for t in d.ops) + sum(len(t.size) for t in d.nets)
        n += sum(len(t.batches) for t in d.attention) + (0 if d.cpu is None else len(d.cpu))
    return n


# --------------------------------------------------------------------------- scoring


def _short(model: str) -> str:
    return model.rsplit("/", 1)[-1]


def score(data: dict[str, cal.FamilyData], fitted: cal.FittedConstants) -> pd.DataFrame:
    """One row per measured operator time: group, gpu (SKU id), model, predicted, measured
    (seconds), predicted with the constants `fitted` gives each row's SKU."""
    parts: list[pd.DataFrame] = []

    def add(group: str | np.ndarray, sku: str, model: str, pred, meas) -> None:
        parts.append(
            pd.DataFrame(
                {"group": group, "gpu": sku, "model": model, "predicted": pred, "measured": meas}
            )
        )

    for d in data.values():
        for t in d.ops:
            pred = cal.predict_ops(t, fitted.for_sku(t.sku))
            for op, meas in t.measured.items():
                if op in pred:
                    group = "matmul" if op in cal.MATMUL_OPS else "elementwise"
                    add(group, t.sku.id, _short(t.model_dir), pred[op], meas)
        for t in d.attention:
            pred = cal.predict_attention(t, fitted.for_sku(t.sku))
            group = np.where(t.is_prefill, "attention prefill", "attention decode")
            add(group, t.sku.id, "", pred, t.measured)
        for t in d.nets:
            group = "all-reduce" if t.collective == "all_reduce" else "send/recv"
            add(group, t.sku.id, "", cal.predict_net(t, fitted.for_sku(t.sku)), t.measured)
        if d.cpu is not None:
            for gpu, rows in d.cpu.groupby("vidur_gpu"):
                sku = load_catalog().get(cal.VIDUR_GPU_TO_SKU[str(gpu)])
                c = fitted.for_sku(sku)
                bs, meas = cal.cpu_measured(rows)
                pred = (c.cpu_base_ms + c.cpu_per_seq_ms * bs) * 1e-3
                models = [_short(str(m)) for m in rows["model_name"]]
                add("cpu", sku.id, models, pred, meas)  # type: ignore[arg-type]
    if not parts:
        return pd.DataFrame(columns=["group", "gpu", "model", "predicted", "measured"])
    return pd.concat(parts, ignore_index=True)


@dataclass(slots=True)
class Fold:
    """One fit and the rows it is scored on."""

    kind: str  # held-out rows | gpu | model
    name: str  # what was left out
    scored: pd.DataFrame  # from `score`: one row per operator time
    fit_rows: int  # table rows fitted on
    held_rows: int  # table rows scored (a row of an operator table holds several times)


@dataclass(slots=True)
class VidurOpsResult:
    total_rows: int
    held_out: Fold
    leave_gpu_out: list[Fold]
    leave_model_out: list[Fold]
    # the profiled backend on the held-out rows, reading tables of the other rows
    # (`_vidur_ops_profiled`; GEMM and attention groups)
    held_out_profiled: pd.DataFrame | None = None


def validate_vidur_ops(
    data: dict[str, cal.FamilyData],
    *,
    leave_out: bool = True,
    progress: Callable[[str], None] | None = None,
) -> VidurOpsResult:
    """Fit on ~80% of the rows and score the rest; then each leave-one-out fold."""
    say = progress or (lambda _m: None)
    cache: cal.FitCache = {}
    plans: list[tuple[str, str, Callable[[cal.RowKey], bool]]] = [
        ("held-out rows", f"{HELD_OUT_SHARE:.0%} by row-key hash", is_held_out)
    ]
    if leave_out:
        gpus = sorted({t.gpu for d in data.values() for t in (*d.ops, *d.attention, *d.nets)})
        models = sorted(
            {t.model_dir for d in data.values() for t in d.ops}
            | {str(m) for d in data.values() if d.cpu is not None for m in d.cpu["model_name"]}
        )
        plans += [("gpu", g, _gpu_is(g)) for g in gpus]
        plans += [("model", m, _model_is(m)) for m in models]
    from search._validate._vidur_ops_profiled import score_profiled

    folds: list[Fold] = []
    profiled = None
    for i, (kind, name, held) in enumerate(plans, start=1):
        say(f"fit {i}/{len(plans)}: {kind} {name} left out ...")
        fit_data = select(data, lambda k, held=held: not held(k))
        fitted = cal.fit_constants(fit_data, cache=cache)
        held_data = select(data, held)
        scored = score(held_data, fitted)
        folds.append(Fold(kind, name, scored, row_count(fit_data), row_count(held_data)))
        if i == 1:
            say("profiled backend: the held-out rows from tables of the others ...")
            profiled = score_profiled(fit_data, held_data)
    return VidurOpsResult(
        total_rows=row_count(data),
        held_out=folds[0],
        leave_gpu_out=[f for f in folds if f.kind == "gpu"],
        leave_model_out=[f for f in folds if f.kind == "model"],
        held_out_profiled=profiled,
    )


def _gpu_is(gpu: str) -> Callable[[cal.RowKey], bool]:
    return lambda key: key.gpu == gpu


def _model_is(model: str) -> Callable[[cal.RowKey], bool]:
    return lambda key: key.model == model
