"""Where the profiled backend's measured operator times come from, and llmcap's own format.

`OpTableSource` is the narrow interface the profiled backend reads: the GEMM cube of one
dtype, the context- and generation-attention grids of one head shape and KV dtype, and the
all-reduce curve over a number of GPUs, each with a label for ``describe()``.  Two sources
implement it: aiconfigurator-core's shipped perf database (`estimators._profiled.AicOpTables`)
and a directory in llmcap's own table format (`LlmcapOpTables`, read by `load_op_tables`),
which `llmcap profile run` (torch, any GPU) and `llmcap profile import-vidur` (Vidur's public
profiling CSVs) write.

The format: a directory holding

``meta.yaml``
    ``format: llmcap-op-tables``, ``version: 1``, ``source`` (``llmcap-profiler``, ``vidur``,
    ...), ``device`` (``cuda`` or ``cpu``), ``dtype`` (``bf16``, ``fp16`` or ``fp8``, or a
    list of them: the GEMM precisions measured), ``date`` (ISO 8601); optional ``gpu_name``
    (as the driver reports it), ``sku`` (the catalog SKU id the tables stand for; empty when
    the device is not in the catalog, and then the tables are used for whichever SKU is
    simulated), ``driver``, ``cuda``, ``torch`` (versions), ``model`` and ``tp`` (what was
    profiled), ``notes``.
``gemm.csv`` (required)
    one ``[m, k] x [k, n]`` GEMM (``y = x W^T`` with ``x`` of m tokens and k input features,
    n output features) per row: ``dtype`` (bf16, fp16, fp8), ``m``, ``n``, ``k`` (positive
    integers), ``latency_ms`` (milliseconds, > 0); optional ``op`` (qkv, o, gate_up, down,
    lm_head: informational).
``context_attention.csv`` (optional)
    one layer's prefill attention per row: ``num_heads``, ``num_kv_heads`` (per GPU, after
    TP), ``head_dim``, ``kv_dtype``, ``batch_size`` sequences of ``prompt_len`` query tokens
    each, after ``cached_len`` tokens already in the KV cache (0: a whole prompt; causal),
    ``latency_ms``; optional ``kernel``.  The rows with ``cached_len`` 0 price whole
    prompts; a chunk after a cached prefix is looked up among the rows of its chunk length
    at its KV length (prefix + chunk) where the table measured cached prefixes for that
    head shape, else at the prompt length with as many causal query-key pairs.
``generation_attention.csv`` (optional)
    one layer's decode attention per row: the head columns as above, ``batch_size``
    sequences each decoding one token that reads ``kv_len`` KV tokens, ``latency_ms``;
    optional ``kernel``.
``allreduce.csv`` (optional)
    ``num_gpus``, ``message_bytes`` (the all-reduced buffer), ``latency_ms``; optional
    ``implementation`` (nccl, custom, ...): the fastest is used at each size.
``moe.csv`` (optional)
    one MoE layer's routed experts on one GPU per row, as aiconfigurator's MoE tables time
    them: ``dtype`` (the experts' GEMMs: bf16, fp16, fp8), ``hidden_size``, ``inter_size``
    (one expert's width before MoE TP), ``topk``, ``num_experts`` (all of the model's),
    ``moe_tp``, ``moe_ep``, ``num_tokens`` (entering the layer: every attention-DP rank's),
    ``latency_ms`` (the rank's share under balanced routing: gathering its rows, the
    grouped gate-up GEMM, the activation, the grouped down GEMM and the weighted combine;
    not the router, not the all-to-all); optional ``kernel``.

Duplicate rows (repeated measurements) are reduced to their median.  A missing optional
table makes those operators fall back to the roofline (listed in ``describe()``).  A file
that cannot be read, lacks a field or holds a bad value raises `OpTablesError` naming the
file and the field (``llmcap`` exits 2 with that line).
"""

from __future__ import annotations

import datetime as dt
import functools
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from estimators._curves import (
    ChunkGrid,
    Curve,
    GemmCube,
    Grid2D,
    chunk_grid_from_rows,
    cube_from_rows,
    grid_from_rows,
    monotone,
    rows_where,
)
from estimators._types import ModelArchitecture

if TYPE_CHECKING:  # pandas loads with the first table read, not with the estimators
    import pandas as pd

__all__ = [
    "FORMAT_NAME",
    "TABLE_COLUMNS",
    "AttentionTable",
    "LlmcapOpTables",
    "OpTableMissing",
    "OpTableSource",
    "OpTablesError",
    "OpTablesMeta",
    "layer_gemm_shapes",
    "load_op_tables",
    "resolve_op_tables",
    "shipped_op_tables",
    "utc_now",
    "write_op_tables",
]

FORMAT_NAME = "llmcap-op-tables"
META_FILE = "meta.yaml"
HEAD_COLUMNS = ("num_heads", "num_kv_heads", "head_dim", "kv_dtype", "batch_size")
# required columns of each table, in the order they are written
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("dtype", "m", "n", "k", "latency_ms"),
    "context_attention": (*HEAD_COLUMNS, "prompt_len", "cached_len", "latency_ms"),
    "generation_attention": (*HEAD_COLUMNS, "kv_len", "latency_ms"),
    "allreduce": ("num_gpus", "message_bytes", "latency_ms"),
    "moe": ("dtype", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp", "moe_ep",
            "num_tokens", "latency_ms"),
}  # fmt: skip
OPTIONAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "gemm": ("op",),
    "context_attention": ("kernel",),
    "generation_attention": ("kernel",),
    "allreduce": ("implementation",),
    "moe": ("kernel",),
}
DTYPES = ("bf16", "fp16", "fp8")
# the MoE tables' precisions that answer for aiconfigurator's ``moe_dtype`` names (the
# profiler's fp8 experts are row-wise scaled: they stand for block-scaled ones too)
_MOE_ASKED_DTYPES = {"bfloat16": ("bf16", "fp16"), "fp8": ("fp8",), "fp8_block": ("fp8",)}
GemmDtype = Literal["bf16", "fp16", "fp8"]
# the backend asks in aiconfigurator's spelling: 16-bit tables answer for "bfloat16"
_ASKED_DTYPES = {"bfloat16": ("bf16", "fp16"), "fp8": ("fp8",)}
_ELEM_BYTES = 2.0  # the backend asks for all-reduces in 16-bit elements


class OpTablesError(ValueError):
    """A table directory or file that cannot be used; the message names the file and field."""


class OpTableMissing(LookupError):
    """The source has no table of this kind (the operator falls back to the roofline)."""


@dataclass(frozen=True, slots=True)
class AttentionTable:
    """One head shape's attention: the table's label, its grid over (batch, length) or None
    when the table has no rows for that shape, and the kernel measured; for context
    attention measured after cached prefixes too, `chunks` over (batch, chunk, KV length)."""

    label: str
    grid: Grid2D | None
    kernel: str = ""
    chunks: ChunkGrid | None = None


class OpTableSource(ABC):
    """Measured operator times, as the profiled backend asks for them.

    Every answer is in seconds.  Lengths are tokens per sequence: the prompt length of
    context attention (causal, no cached prefix), the KV tokens a decode reads for
    generation attention.  All-reduce sizes are 16-bit elements.
    """

    @property
    @abstractmethod
    def label(self) -> str:
        """One line naming the tables, for ``describe()``."""

    @property
    @abstractmethod
    def sku(self) -> str | None:
        """The catalog SKU id the tables were measured on; None when the device is not in
        the catalog (the tables then stand for whichever SKU is simulated)."""

    @property
    @abstractmethod
    def device_name(self) -> str:
        """The device as measured (the GPU's name), for messages."""

    @abstractmethod
    def gemm_cube(self, dtype: str) -> tuple[str, GemmCube | None]:
        """(table label, cube of the GEMMs of `dtype` or None when none were measured);
        `dtype` is "bfloat16" (any 16-bit table) or "fp8"."""

    @abstractmethod
    def gemm_dtypes(self) -> list[str]:
        """The GEMM precisions measured, as the table spells them."""

    @abstractmethod
    def attention(
        self, phase: str, heads: int, kv_heads: int, head_dim: int, kv_dtype: str
    ) -> AttentionTable:
        """`phase` ("context" or "generation") attention of one head shape per GPU;
        raises OpTableMissing when the source has no such table at all."""

    @abstractmethod
    def allreduce_curve(self, num_gpus: int) -> tuple[list[str], Curve | None]:
        """(table labels, seconds against 16-bit elements all-reduced over `num_gpus`)."""

    def moe_curve(
        self, shape: tuple[int, int, int, int, int, int], dtypes: tuple[str, ...]
    ) -> tuple[str, Curve | None, str]:
        """(table label, seconds of one GPU's routed experts over the tokens entering the
        MoE layer or None, why None) for ``shape`` = (hidden, expert width, top-k, experts,
        MoE TP, EP), the first of `dtypes` (aiconfigurator's ``moe_dtype`` names) measured."""
        return self.label, None, f"{self.label} hold no MoE table"


def layer_gemm_shapes(model: ModelArchitecture, tp: int) -> dict[str, tuple[int, int]]:
    """The ``(n, k)`` of each GEMM of one layer on one of `tp` GPUs, by Vidur operator name."""
    h, hd = model.hidden_size, model.head_dim
    heads = model.num_attention_heads // tp
    kv_heads = max(1, model.num_key_value_heads // tp)
    inter = model.intermediate_size // tp
    up = (2 if model.gated_mlp else 1) * inter
    return {
        "attn_pre_proj": ((heads + 2 * kv_heads) * hd, h),
        "attn_post_proj": (h, heads * hd),
        "mlp_up_proj": (up, h),
        "mlp_down_proj": (h, inter),
    }


# --------------------------------------------------------------------------- meta


class OpTablesMeta(BaseModel):
    """``meta.yaml``: what was measured, where and with what."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["llmcap-op-tables"] = FORMAT_NAME
    version: Literal[1] = 1
    source: str
    device: Literal["cuda", "cpu"]
    dtype: GemmDtype | list[GemmDtype]
    date: str
    gpu_name: str | None = None
    sku: str | None = None
    driver: str | None = None
    cuda: str | None = None
    torch: str | None = None
    model: str | None = None
    tp: list[int] | None = None
    notes: str | None = None

    @field_validator("date", mode="before")
    @classmethod
    def _date_as_text(cls, value: object) -> object:
        # YAML reads an unquoted 2026-01-02T03:04:05 as a datetime
        return value.isoformat() if isinstance(value, dt.date) else value


def _read_meta(path: Path) -> OpTablesMeta:
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise OpTablesError(
            f"{path}: no such file; an op-table directory holds {META_FILE} and gemm.csv "
            "(written by `llmcap profile`)"
        ) from None
    except (OSError, yaml.YAMLError) as exc:
        raise OpTablesError(f"{path}: cannot read ({exc})") from None
    if not isinstance(data, dict):
        raise OpTablesError(f"{path}: must hold a mapping of fields, not {type(data).__name__}")
    try:
        return OpTablesMeta.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "?"
        value = data.get(err["loc"][0]) if err["loc"] else None
        got = f" (got {value!r})" if value is not None else ""
        raise OpTablesError(f"{path}: field {field!r}: {err['msg']}{got}") from None


# --------------------------------------------------------------------------- tables


def _read_table(path: Path, kind: str) -> pd.DataFrame:
    """The rows of one table, checked: every required field present, numbers positive
    (``cached_len`` may be 0), dtypes known; ``latency_ms`` becomes ``seconds``."""
    import pandas as pd

    try:
        df = pd.read_csv(path)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise OpTablesError(f"{path}: cannot read the table ({exc})") from None
    required = TABLE_COLUMNS[kind]
    for col in required:
        if col not in df.columns:
            raise OpTablesError(
                f"{path}: missing field {col!r}; fields present: {', '.join(map(str, df.columns))}"
            )
    if df.empty:
        raise OpTablesError(f"{path}: no rows")
    for col in required:
        if col in ("dtype", "kv_dtype"):
            bad = ~df[col].astype(str).isin(DTYPES)
            if bad.any():
                i = int(np.argmax(bad.to_numpy()))
                raise OpTablesError(
                    f"{path}: field {col!r} row {i + 1}: {df[col].iloc[i]!r} is not one of "
                    f"{', '.join(DTYPES)}"
                )
            df[col] = df[col].astype(str)
            continue
        values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
        floor_ok = values >= 0 if col == "cached_len" else values > 0
        bad = ~np.isfinite(values) | ~floor_ok
        if col != "latency_ms":
            bad |= values != np.round(values)
        if bad.any():
            i = int(np.argmax(bad))
            what = "a positive number" if col == "latency_ms" else "a positive integer"
            if col == "cached_len":
                what = "a non-negative integer"
            value = df[col].iloc[i]
            value = value.item() if isinstance(value, np.generic) else value  # 0, not np.int64(0)
            raise OpTablesError(f"{path}: field {col!r} row {i + 1}: {value!r} is not {what}")
        df[col] = values if col == "latency_ms" else values.astype(np.int64)
    df["seconds"] = df["latency_ms"] * 1e-3
    for col in OPTIONAL_COLUMNS[kind]:
        df[col] = df[col].astype("string").fillna("").astype(str) if col in df.columns else ""
    return df


def _filled_cube(gemm: pd.DataFrame) -> GemmCube:
    """The cube of measured (n, k) shapes on the union of their m grids.  A shape measured
    at other m than another is filled in along m by its own `Curve` (log-log between its
    points, constant below, linear above), so a shape is never lost for lack of an m."""
    import pandas as pd

    med = gemm.groupby(["m", "n", "k"], sort=True)["seconds"].median().reset_index()
    all_m = np.unique(med["m"].to_numpy())
    parts = []
    for (n, k), rows in med.groupby(["n", "k"], sort=True):
        curve = Curve(rows["m"].to_numpy(dtype=float), rows["seconds"].to_numpy())
        parts.append(
            pd.DataFrame({"m": all_m, "n": n, "k": k, "seconds": curve.many(all_m.astype(float))})
        )
    full = pd.concat(parts, ignore_index=True)
    return cube_from_rows(*(full[c].to_numpy() for c in ("m", "n", "k", "seconds")))


class LlmcapOpTables(OpTableSource):
    """A directory in llmcap's own op-table format (see the module docstring)."""

    def __init__(self, directory: Path, meta: OpTablesMeta, tables: dict[str, pd.DataFrame]):
        self.directory = directory
        self.meta = meta
        self._tables = tables
        self._cubes: dict[str, GemmCube | None] = {}
        self._attention: dict[tuple, AttentionTable] = {}
        self._allreduce: dict[int, Curve | None] = {}
        self._moe: dict[tuple, tuple[str, Curve | None, str]] = {}

    def _file(self, kind: str) -> str:
        return str(self.directory / f"{kind}.csv")

    @property
    def label(self) -> str:
        m = self.meta
        where = self.device_name
        versions = ", ".join(
            f"{name} {v}" for name, v in (("torch", m.torch), ("CUDA", m.cuda)) if v
        )
        versions = f", {versions}" if versions else ""
        return f"llmcap op tables {self.directory} ({m.source} on {where}{versions}, {m.date})"

    @property
    def sku(self) -> str | None:
        return self.meta.sku or None

    @property
    def device_name(self) -> str:
        return self.meta.gpu_name or self.meta.device

    def gemm_dtypes(self) -> list[str]:
        return sorted(set(self._tables["gemm"]["dtype"]))

    @property
    def kinds(self) -> list[str]:
        """The tables the directory holds (gemm, context_attention, ...), in format order."""
        return [kind for kind in TABLE_COLUMNS if kind in self._tables]

    def gemm_cube(self, dtype: str) -> tuple[str, GemmCube | None]:
        if dtype not in self._cubes:
            gemm = self._tables["gemm"]
            rows = gemm[gemm["dtype"].isin(_ASKED_DTYPES.get(dtype, (dtype,)))]
            self._cubes[dtype] = _filled_cube(rows) if not rows.empty else None
        return self._file("gemm"), self._cubes[dtype]

    def attention(
        self, phase: str, heads: int, kv_heads: int, head_dim: int, kv_dtype: str
    ) -> AttentionTable:
        kind = f"{phase}_attention"
        table = self._tables.get(kind)
        if table is None:
            raise OpTableMissing(f"no {kind}.csv in {self.directory}")
        key = (phase, heads, kv_heads, head_dim, kv_dtype)
        hit = self._attention.get(key)
        if hit is not None:
            return hit
        sel = (
            (table["num_heads"] == heads)
            & (table["num_kv_heads"] == kv_heads)
            & (table["head_dim"] == head_dim)
            & table["kv_dtype"].isin(_ASKED_DTYPES.get(kv_dtype, (kv_dtype,)))
        )
        shape = table[sel]
        kernel = str(shape["kernel"].value_counts().index[0]) if not shape.empty else ""
        shape = shape[shape["kernel"] == kernel]
        chunks = None
        if phase == "context":
            sub = shape[shape["cached_len"] == 0]
            if (shape["cached_len"] > 0).any():
                chunks = chunk_grid_from_rows(
                    *(shape[c].to_numpy() for c in ("batch_size", "prompt_len", "cached_len")),
                    shape["seconds"].to_numpy(),
                )
        else:
            sub = shape
        length = "prompt_len" if phase == "context" else "kv_len"
        grid = grid_from_rows(
            sub["batch_size"].to_numpy(),
            sub[length].to_numpy(dtype=float),
            sub["seconds"].to_numpy(),
            2.0 if phase == "context" else 1.0,
        )
        hit = AttentionTable(self._file(kind), grid, kernel, chunks)
        self._attention[key] = hit
        return hit

    def allreduce_curve(self, num_gpus: int) -> tuple[list[str], Curve | None]:
        table = self._tables.get("allreduce")
        if table is None:
            return [], None
        if num_gpus not in self._allreduce:
            sub = table[table["num_gpus"] == num_gpus]
            med = sub.groupby(["implementation", "message_bytes"])["seconds"].median()
            best = med.groupby(level="message_bytes").min().sort_index()
            self._allreduce[num_gpus] = (
                Curve(best.index.to_numpy(dtype=float) / _ELEM_BYTES, monotone(best.to_numpy()))
                if len(best) >= 2
                else None
            )
        return [self._file("allreduce")], self._allreduce[num_gpus]

    def moe_curve(
        self, shape: tuple[int, int, int, int, int, int], dtypes: tuple[str, ...]
    ) -> tuple[str, Curve | None, str]:
        key = (shape, dtypes)
        if key not in self._moe:
            self._moe[key] = self._moe_curve(shape, dtypes)
        return self._moe[key]

    def _moe_curve(
        self, shape: tuple[int, int, int, int, int, int], dtypes: tuple[str, ...]
    ) -> tuple[str, Curve | None, str]:
        label = self._file("moe")
        table = self._tables.get("moe")
        if table is None:
            return label, None, f"no moe.csv in {self.directory}"
        hidden, inter, topk, experts, moe_tp, moe_ep = shape
        sub = rows_where(table, hidden_size=hidden, inter_size=inter, topk=topk,
                         num_experts=experts, moe_tp=moe_tp, moe_ep=moe_ep)  # fmt: skip
        for asked in dtypes:
            rows = sub[sub["dtype"].isin(_MOE_ASKED_DTYPES.get(asked, ()))]
            med = rows.groupby(["kernel", "num_tokens"])["seconds"].median()
            best = med.groupby(level="num_tokens").min().sort_index()  # the fastest kernel
            if len(best) >= 2:
                xs = best.index.to_numpy(dtype=float)
                return label, Curve(xs, monotone(best.to_numpy()), 1.0), ""
        return (
            label,
            None,
            f"no {'/'.join(dtypes)} rows for hidden {hidden}, expert width {inter}, top-{topk} "
            f"of {experts}, MoE TP {moe_tp}, EP {moe_ep} in {label}",
        )


def _signature(directory: Path) -> tuple:
    """What decides a directory's contents: each file's name, size and modification time."""
    out = []
    for name in (META_FILE, *(f"{kind}.csv" for kind in TABLE_COLUMNS)):
        try:
            st = (directory / name).stat()
        except OSError:
            continue
        out.append((name, st.st_size, st.st_mtime_ns))
    return tuple(out)


SHIPPED_DIR = Path(__file__).parent / "data" / "op_tables"


def shipped_op_tables() -> list[str]:
    """Names of the op tables that ship with llmcap (``<sku>/<model>``, measured by
    `llmcap profile run` on that GPU; see data/op_tables/README.md)."""
    if not SHIPPED_DIR.is_dir():
        return []
    metas = SHIPPED_DIR.glob(f"*/*/{META_FILE}")
    return sorted(f"{meta.parent.parent.name}/{meta.parent.name}" for meta in metas)


def resolve_op_tables(directory: str | Path) -> Path:
    """The directory `directory` names: a path, or else the name of shipped tables
    (``h100-sxm/llama-3.1-8b``); raises OpTablesError naming what exists."""
    path = Path(directory).expanduser()
    if path.is_dir():
        return path.resolve()
    shipped = shipped_op_tables()
    if str(directory) in shipped:
        return SHIPPED_DIR / str(directory)
    what = "is not a directory" if path.exists() else "does not exist"
    raise OpTablesError(
        f"op tables {directory}: {what} (write one with `llmcap profile`, or name shipped "
        f"tables: {', '.join(shipped) or 'none'})"
    )


def load_op_tables(directory: str | Path) -> LlmcapOpTables:
    """The op tables of `directory` (a path or a shipped name, see `resolve_op_tables`;
    cached per process while its files are unchanged); raises OpTablesError naming the
    directory, file or field that is wrong."""
    path = resolve_op_tables(directory)
    return _load_cached(path, _signature(path))


@functools.lru_cache(maxsize=16)
def _load_cached(path: Path, signature: tuple) -> LlmcapOpTables:
    meta = _read_meta(path / META_FILE)
    tables: dict[str, pd.DataFrame] = {}
    for kind in TABLE_COLUMNS:
        file = path / f"{kind}.csv"
        if file.is_file():
            tables[kind] = _read_table(file, kind)
    if "gemm" not in tables:
        raise OpTablesError(f"{path / 'gemm.csv'}: no such file; the GEMM table is required")
    return LlmcapOpTables(path, meta, tables)


def write_op_tables(
    directory: str | Path, meta: OpTablesMeta, tables: dict[str, pd.DataFrame]
) -> list[Path]:
    """Write `meta` and each table of `tables` (by kind: gemm, context_attention, ...)
    with its documented columns first; returns the files written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = [out / META_FILE]
    written[0].write_text(yaml.safe_dump(meta.model_dump(exclude_none=True), sort_keys=False))
    for kind, df in tables.items():
        if df is None or df.empty:
            continue
        cols = [c for c in (*TABLE_COLUMNS[kind], *OPTIONAL_COLUMNS[kind]) if c in df.columns]
        path = out / f"{kind}.csv"
        df[cols].to_csv(path, index=False, float_format="%.6g")
        written.append(path)
    return written


def utc_now() -> str:
    """The current time as ISO 8601 in UTC, seconds precision (meta's ``date``)."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()
