"""Reader for the measured operator tables shipped in ``aiconfigurator-core`` (optional extra).

The package (PyPI ``aiconfigurator-core``, Apache-2.0; ``pip install 'llmcap[aic]'``) ships
parquet tables under ``aiconfigurator_core/systems/data/<system>/<family>/<engine>/<version>/``,
each with a ``collection_meta.yaml`` beside it.  They are read from the installed package at
run time, never copied into this project.  Schemas (as of 0.12.0) and units:

``gemm/<engine>/<ver>/gemm_perf.parquet``
    ``gemm_dtype`` (bfloat16, fp8, fp8_block, nvfp4, ...), ``kernel_source``, ``m`` (tokens),
    ``n`` (output features), ``k`` (input features), ``latency`` in **milliseconds** of one
    ``[m, k] x [k, n]`` GEMM.  m on 74 points 1..32768, n and k on a grid 32..65536.
``attention/<engine>/<ver>/context_attention_perf.parquet``
    ``batch_size`` sequences each of ``isl`` prompt tokens (causal, no cached prefix),
    ``num_heads`` / ``num_key_value_heads`` (per GPU, after TP), ``head_dim``,
    ``attn_dtype``, ``kv_cache_dtype``, ``window_size`` (0: full attention; absent in some
    tables), ``kernel_source``; ``latency`` in milliseconds of one layer's attention.
``attention/<engine>/<ver>/generation_attention_perf.parquet``
    as above with ``isl`` = 1 and ``step`` = KV-cache length each of the ``batch_size``
    decoding sequences reads; ``latency`` in milliseconds of one layer.
``comm/nccl/<ver>/nccl_perf.parquet``
    ``op_name`` (all_reduce, all_gather, reduce_scatter, alltoall), ``nccl_dtype`` (half,
    int8), ``num_gpus``, ``message_size`` in **elements** of that dtype, ``latency`` ms.
``comm/<engine>/<ver>/custom_allreduce_perf.parquet``
    the engine's own all-reduce kernel: ``allreduce_dtype``, ``num_gpus``, ``message_size``
    (elements), ``latency`` ms; a ``backend`` / ``implementation`` column names graph or
    eager variants.
``moe/<engine>/<ver>/moe_perf.parquet``
    one MoE layer's routed experts on one GPU (the fused or grouped expert GEMMs with their
    activation; not the router GEMM, not the all-to-all): ``num_tokens`` (tokens entering
    the layer, every attention-DP rank's), ``hidden_size``, ``inter_size`` (one expert's
    intermediate size, before MoE TP), ``topk``, ``num_experts`` (all of them, before EP),
    ``moe_tp_size``, ``moe_ep_size``, ``moe_dtype`` (bfloat16, fp8, fp8_block, nvfp4, ...),
    ``distribution`` (``balanced`` or ``power_law_<alpha>``: how the tokens' expert choices
    were drawn), ``kernel_source``; ``latency`` ms.
``mla/<engine>/<ver>/{context,generation}_mla_perf.parquet``
    MLA attention alone (no projections: aiconfigurator prices ``kv_b_proj`` and the
    others as GEMMs): ``num_heads`` (per GPU, after TP), ``batch_size``, ``isl`` (prompt
    tokens, context) or ``step`` (cached tokens each decode reads, generation),
    ``kv_cache_dtype``, ``mla_dtype``, ``kernel_source``; ``latency`` ms of one layer.
    (``mla_*_module_perf`` and ``wideep_*`` tables time the whole module with its
    projections, eagerly; they are not read here.)
``comm/<engine>/<ver>/moe_a2a_perf.parquet`` (TensorRT-LLM, vLLM)
    the MoE all-to-all of expert parallelism on one node: ``comm_backend`` (``*deepep_ht``,
    DeepEP's high-throughput kernels; ``*deepep_ll``, its low-latency ones; others),
    ``phase`` (dispatch, combine), ``comm_dtype``, ``ep_size``, ``node_num``, ``num_tokens``
    (each rank's tokens), ``hidden_size``, ``topk``, ``num_experts``, ``sms``; ``latency``
    in **microseconds** of the phase.
``comm/sglang/<ver>/wideep_deepep_{normal,ll}_perf.parquet``
    the same for SGLang's DeepEP kernels (normal: ``dispatch_`` / ``combine_`` ``transmit_us``
    and ``notify_us`` per SM count; ll: ``dispatch_avg_t_us``, ``combine_avg_t_us``) with
    ``num_token`` (each rank's), ``num_topk``, ``node_num``; no ``ep_size`` column: the
    collector runs one node, all of its GPUs (`ONE_NODE_EP`).
``mla_bmm/<engine>/<ver>/mla_bmm_perf.parquet``
    the absorbed decode BMMs: ``op_name`` ``mla_gen_pre`` (q_nope x W_UK) or
    ``mla_gen_post`` (latent x W_UV), ``num_tokens``, ``num_heads`` (per GPU),
    ``bmm_dtype``, ``kernel_source``; ``latency`` ms.

The loaders below return the rows in **seconds** (column ``seconds``) and cache them per
file.  A table that lacks a required field, or holds a non-positive latency, raises
`AicTableError` naming the file and the field.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from typing import Any

import numpy as np

__all__ = [
    "AIC_ENGINES",
    "SKU_SYSTEMS",
    "AicDataMissing",
    "AicTableError",
    "TableRef",
    "aic_available",
    "engines_for",
    "load_all_to_all",
    "load_attention",
    "load_custom_allreduce",
    "load_gemm",
    "load_mla",
    "load_mla_bmm",
    "load_moe",
    "load_nccl",
    "nearest_version",
    "resolve_table",
    "runs_mnnvl_all_to_all",
    "system_for_sku",
    "systems_available",
    "versions_for",
]

# catalog SKU id -> aiconfigurator system name
SKU_SYSTEMS: dict[str, str] = {
    "h100-sxm": "h100_sxm",
    "h100-pcie": "h100_pcie",
    "h200": "h200_sxm",
    "b200": "b200_sxm",
    "b300": "b300_sxm",
    "gb200": "gb200",
    "a100-80gb": "a100_sxm",
    "l40s": "l40s",
    "l4": "l4",
}
# engine names as llmcap spells them -> directory name in the database
AIC_ENGINES: dict[str, str] = {
    "vllm": "vllm",
    "sglang": "sglang",
    "trtllm": "trtllm",
    "tensorrt-llm": "trtllm",
    "trt-llm": "trtllm",
}
# (engine directory, gemm_dtype) rows that time no kernel the engine serves that format
# with: the roofline's fit (estimators/_aic_calibration.py) leaves them out (that format
# then takes the engine's per-tensor FP8 constants), for the reason given.  vLLM's
# fp8_block GEMM rows (0.24.0 tables of H100, H200 and B200): flat in m from 1 to 2,048
# tokens (a 7168 x 2048 weight: 57-87 us on H200, 170-260 us on B200, where reading its
# 14.7 MB takes 3 us and 2 us), 4-17x vLLM's own per-tensor FP8 rows and 5-30x
# TensorRT-LLM's and SGLang's fp8_block rows at the same shapes on the same GPU: a kernel
# bound by neither its compute nor its weight read.
UNREPRESENTATIVE_GEMM_ROWS: dict[tuple[str, str], str] = {
    ("vllm", "fp8_block"): "vLLM's fp8_block GEMM rows (flat in m, 4-17x its FP8 rows)",
}
# MoE kernels whose rows no fit reads (kernel_source -> why): vLLM 0.24.0's ModelOpt FP8
# experts through FlashInfer's CUTLASS kernel, its only FP8 rows on H100 and H200, take
# 4-7x the Triton fused_moe rows of vLLM 0.19.0 at the same shapes and token counts (H200,
# Qwen3-235B's experts at MoE TP 2, 16 tokens: 2.08 ms against 0.32 ms); and
# TensorRT-LLM's DeepGEMM MoE backend, the only kernel of its B200 fp8_block rows, is
# opt-in (moe_config.backend DEEPGEMM; the LLM API's default is CUTLASS, and InferenceMAX's
# DeepSeek-R1 FP8 B200 script runs TRTLLM below concurrency 256): its masked grouped GEMM
# walks every local expert (at 1 token, 106 us at MoE TP 8 against 46 us at EP 8), a cost
# the default backends' decode steps do not pay
UNREPRESENTATIVE_MOE_KERNELS: dict[str, str] = {
    "vllm_modeloptfp8moe_flashinfer_cutlass_flashinferexperts": (
        "vLLM 0.24.0's FlashInfer CUTLASS FP8 MoE rows (4-7x 0.19.0's Triton rows)"
    ),
    "deepgemm": "TensorRT-LLM's opt-in DeepGEMM MoE backend rows",
}


class AicDataMissing(ValueError):
    """The database has no table for what was asked; the message names what is available."""


class AicTableError(ValueError):
    """A table file is malformed; the message names the file and the field."""


def aic_available() -> bool:
    try:
        _data_root()
    except AicDataMissing:
        return False
    return True


@functools.cache
def _data_root() -> Traversable:
    try:
        root = resources.files("aiconfigurator_core").joinpath("systems", "data")
    except ModuleNotFoundError:
        raise AicDataMissing(
            "the measured operator tables need the optional extra: pip install 'llmcap[aic]' "
            "(aiconfigurator-core)"
        ) from None
    if not root.is_dir():
        raise AicDataMissing(f"aiconfigurator-core is installed but has no {root}")
    return root


def _subdirs(node: Traversable) -> list[str]:
    if not node.is_dir():
        return []
    return sorted(p.name for p in node.iterdir() if p.is_dir() and not p.name.startswith("."))


def systems_available() -> list[str]:
    return _subdirs(_data_root())


def system_for_sku(sku_id: str) -> str | None:
    """The database's system name for a catalog SKU id, or None when it has none."""
    system = SKU_SYSTEMS.get(sku_id)
    if system is None:
        return None
    return system if system in systems_available() else None


def engines_for(system: str, family: str) -> list[str]:
    return [e for e in _subdirs(_data_root() / system / family) if e != "nccl"]


def _version_key(version: str) -> tuple[int, ...]:
    """Sortable key of '0.5.6.post2', '1.3.0rc20', '2.29.2': numbers, pre-releases first."""
    v = version.lower()
    nums = [int(x) for x in re.findall(r"\d+", v.split("rc")[0].split("post")[0])][:4]
    nums += [0] * (4 - len(nums))
    rc = re.search(r"rc(\d+)", v)
    post = re.search(r"post(\d+)", v)
    return (*nums, 0 if rc else 1, int(rc.group(1)) if rc else 0, int(post.group(1)) if post else 0)


def versions_for(system: str, family: str, engine: str, filename: str) -> list[str]:
    """Versions of `engine` under `system/family` that hold `filename`, oldest first."""
    base = _data_root() / system / family / engine
    out = [v for v in _subdirs(base) if (base / v / filename).is_file()]
    return sorted(out, key=_version_key)


def moe_versions_to_try(system: str, engine: str, wanted: str | None) -> list[str | None]:
    """The MoE table versions to read for a kernel that not every table times: `wanted` (the
    nearest, as `load_moe` resolves it), then every version of `engine` on `system`, newest
    first."""
    return [wanted, *reversed(versions_for(system, "moe", engine, "moe_perf.parquet"))]


def nearest_version(available: Iterable[str], wanted: str | None) -> str:
    """Of the versions `available` (any order), `wanted` if present; else the newest not
    newer than it; else the oldest newer; None: the newest."""
    available = sorted(available, key=_version_key)
    if wanted is None or not available:
        return available[-1]
    if wanted in available:
        return wanted
    key = _version_key(wanted)
    older = [v for v in available if _version_key(v) <= key]
    return older[-1] if older else available[0]


@dataclass(frozen=True, slots=True)
class TableRef:
    """One resolved table: where it is and which engine version it was measured under."""

    system: str
    family: str
    engine: str
    version: str
    filename: str

    @property
    def path(self) -> Traversable:
        return _data_root() / self.system / self.family / self.engine / self.version / self.filename

    @property
    def label(self) -> str:
        return f"{self.system}/{self.family}/{self.engine}/{self.version}/{self.filename}"


def resolve_table(
    system: str, family: str, engine: str, version: str | None, filename: str
) -> TableRef:
    """The table of `engine` nearest to `version`; AicDataMissing names what is available."""
    versions = versions_for(system, family, engine, filename)
    if not versions:
        engines = [
            e for e in engines_for(system, family) if versions_for(system, family, e, filename)
        ]
        raise AicDataMissing(
            f"no {filename} for engine {engine!r} on {system}; available engines: "
            f"{', '.join(engines) or 'none'}"
        )
    return TableRef(system, family, engine, nearest_version(versions, version), filename)


# --------------------------------------------------------------------------- loading


def _frame(ref: TableRef, required: tuple[str, ...]) -> Any:
    """The table's rows as they are; AicTableError names the file and a missing field."""
    import pandas as pd

    try:
        with ref.path.open("rb") as fh:
            df = pd.read_parquet(fh)
    except Exception as exc:  # any reader error means a malformed table
        raise AicTableError(f"{ref.label}: cannot read the table ({exc})") from None
    for col in required:
        if col not in df.columns:
            raise AicTableError(
                f"{ref.label}: missing field {col!r}; fields present: {', '.join(df.columns)}"
            )
    return df


def _read(ref: TableRef, required: tuple[str, ...]) -> Any:
    """`_frame` with its ``latency`` in milliseconds checked and given in ``seconds``."""
    import pandas as pd

    df = _frame(ref, required)
    lat = pd.to_numeric(df["latency"], errors="coerce").to_numpy(dtype=float)
    bad = ~np.isfinite(lat) | (lat <= 0)
    if bad.any():
        raise AicTableError(
            f"{ref.label}: field 'latency' has {int(bad.sum())} non-positive or non-numeric "
            f"value(s), e.g. row {int(np.argmax(bad))}"
        )
    df = df.copy()
    df["seconds"] = lat * 1e-3  # the tables are in milliseconds
    return df


@functools.cache
def load_gemm(system: str, engine: str, version: str | None = None) -> tuple[TableRef, Any]:
    """(table ref, rows with gemm_dtype, kernel_source, m, n, k, seconds)."""
    ref = resolve_table(system, "gemm", engine, version, "gemm_perf.parquet")
    df = _read(ref, ("gemm_dtype", "m", "n", "k", "latency"))
    if "kernel_source" not in df.columns:
        df["kernel_source"] = ""
    return ref, df[["gemm_dtype", "kernel_source", "m", "n", "k", "seconds"]]


@functools.cache
def load_attention(
    system: str, engine: str, phase: str, version: str | None = None
) -> tuple[TableRef, Any]:
    """(table ref, rows) of `phase` ('context' or 'generation') attention.

    Columns: kernel_source, batch_size, isl, step, num_heads, num_key_value_heads, head_dim,
    kv_cache_dtype, window_size, seconds.
    """
    if phase not in ("context", "generation"):
        raise ValueError(f"phase must be 'context' or 'generation', not {phase!r}")
    ref = resolve_table(system, "attention", engine, version, f"{phase}_attention_perf.parquet")
    req = ("batch_size", "isl", "num_heads", "num_key_value_heads", "head_dim", "latency")
    if phase == "generation":
        req += ("step",)
    df = _read(ref, req)
    for col, default in (
        ("window_size", 0),
        ("step", 0),
        ("kv_cache_dtype", "bfloat16"),
        ("kernel_source", ""),
    ):
        if col not in df.columns:
            df[col] = default
    cols = [
        "kernel_source",
        "batch_size",
        "isl",
        "step",
        "num_heads",
        "num_key_value_heads",
        "head_dim",
        "kv_cache_dtype",
        "window_size",
        "seconds",
    ]
    return ref, df[cols]


@functools.cache
def load_nccl(system: str, version: str | None = None) -> tuple[TableRef, Any]:
    """(table ref, rows with op_name, nccl_dtype, num_gpus, message_size, seconds)."""
    ref = resolve_table(system, "comm", "nccl", version, "nccl_perf.parquet")
    df = _read(ref, ("op_name", "nccl_dtype", "num_gpus", "message_size", "latency"))
    return ref, df[["op_name", "nccl_dtype", "num_gpus", "message_size", "seconds"]]


@functools.cache
def load_custom_allreduce(
    system: str, engine: str, version: str | None = None
) -> tuple[TableRef, Any]:
    """(table ref, rows with variant, num_gpus, message_size, seconds) of the engine's
    custom all-reduce; `variant` is the backend/implementation column (graph, eager...)."""
    ref = resolve_table(system, "comm", engine, version, "custom_allreduce_perf.parquet")
    df = _read(ref, ("num_gpus", "message_size", "latency"))
    variant = next((c for c in ("backend", "implementation", "kernel_source") if c in df), None)
    df["variant"] = df[variant] if variant else ""
    return ref, df[["variant", "num_gpus", "message_size", "seconds"]]


_MOE_FIELDS = (
    "num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size",
    "moe_ep_size", "moe_dtype", "distribution", "latency",
)  # fmt: skip


@functools.cache
def load_moe(system: str, engine: str, version: str | None = None) -> tuple[TableRef, Any]:
    """(table ref, rows) of the routed experts of one MoE layer (``moe_perf``).

    Columns: kernel_source, moe_dtype, distribution, num_tokens, hidden_size, inter_size,
    topk, num_experts, moe_tp_size, moe_ep_size, seconds.
    """
    ref = resolve_table(system, "moe", engine, version, "moe_perf.parquet")
    df = _read(ref, _MOE_FIELDS)
    if "kernel_source" not in df.columns:
        df["kernel_source"] = ""
    cols = ["kernel_source", *_MOE_FIELDS[:-1], "seconds"]
    return ref, df[cols]


@functools.cache
def load_mla(
    system: str, engine: str, phase: str, version: str | None = None
) -> tuple[TableRef, Any]:
    """(table ref, rows) of `phase` ('context' or 'generation') MLA attention.

    Columns: kernel_source, kv_cache_dtype, num_heads, batch_size, isl, step, seconds.
    """
    if phase not in ("context", "generation"):
        raise ValueError(f"phase must be 'context' or 'generation', not {phase!r}")
    ref = resolve_table(system, "mla", engine, version, f"{phase}_mla_perf.parquet")
    req = ("num_heads", "batch_size", "isl", "kv_cache_dtype", "latency")
    if phase == "generation":
        req += ("step",)
    df = _read(ref, req)
    for col, default in (("step", 0), ("kernel_source", "")):
        if col not in df.columns:
            df[col] = default
    cols = ["kernel_source", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step"]
    return ref, df[[*cols, "seconds"]]


@functools.cache
def load_mla_bmm(system: str, engine: str, version: str | None = None) -> tuple[TableRef, Any]:
    """(table ref, rows with op_name, bmm_dtype, kernel_source, num_tokens, num_heads,
    seconds) of the absorbed MLA decode BMMs."""
    ref = resolve_table(system, "mla_bmm", engine, version, "mla_bmm_perf.parquet")
    df = _read(ref, ("op_name", "bmm_dtype", "num_tokens", "num_heads", "latency"))
    if "kernel_source" not in df.columns:
        df["kernel_source"] = ""
    cols = ["op_name", "bmm_dtype", "kernel_source", "num_tokens", "num_heads", "seconds"]
    return ref, df[cols]


# GPUs of the node SGLang's DeepEP collector ran on (its tables record node_num, not the EP
# degree; TensorRT-LLM's and vLLM's tables of the same systems record ep_size 4 on GB200/GB300
# and 8 on the HGX boards)
ONE_NODE_EP = {"gb200": 4, "gb300": 4}
_A2A_SHAPE = ["hidden_size", "topk", "num_experts", "num_tokens"]  # a size the tables time
_A2A_KEYS = ["ep", *_A2A_SHAPE]
_A2A_KERNELS = ("deepep_ht", "deepep_ll")  # TensorRT-LLM's and vLLM's DeepEP backends


# rack-scale NVLink systems (one NVLink domain over many boards, MNNVL): there TensorRT-LLM
# runs its own NVLink all-to-all kernels, not DeepEP (select_alltoall_method_type returns
# AlltoallMethodType.MNNVL where MnnvlMemory.supports_mnnvl()), measured in its
# trtllm_alltoall_perf table
MNNVL_SYSTEMS = frozenset({"gb200", "gb300"})
_TRTLLM_MNNVL_TABLE = "trtllm_alltoall_perf.parquet"


def runs_mnnvl_all_to_all(system: str, engine: str) -> bool:
    """Whether `engine` exchanges MoE tokens with its own NVLink kernels on `system`."""
    return engine == "trtllm" and system in MNNVL_SYSTEMS


@functools.cache
def load_all_to_all(system: str, engine: str, version: str | None = None) -> tuple[str, Any]:
    """(source label, rows) of the engine's measured MoE all-to-all on one node: columns
    ep, hidden_size, topk, num_experts, num_tokens (each rank's) and seconds of one dispatch
    plus one combine, each phase on its fastest SM count, and at each size the faster of
    DeepEP's high-throughput and low-latency kernels where both were measured (the engines
    run the low-latency ones on decode batches, the others on prefills).  16-bit data only
    where the table sets a dtype apart.  TensorRT-LLM on a rack-scale NVLink system: its own
    kernels (`runs_mnnvl_all_to_all`).  AicDataMissing without a table."""
    if engine == "sglang":
        return _load_sglang_deepep(system, version)
    if runs_mnnvl_all_to_all(system, engine):
        return _load_trtllm_mnnvl(system, version)
    ref = resolve_table(system, "comm", engine, version, "moe_a2a_perf.parquet")
    fields = ("comm_backend", "phase", "comm_dtype", "ep_size", "node_num", "latency")
    df = _frame(ref, (*fields, *_A2A_SHAPE))
    df = df[df["node_num"] == 1]
    df = df[df["comm_backend"].astype(str).str.endswith(_A2A_KERNELS)]
    dtypes = df["comm_dtype"].astype(str)
    if dtypes.isin(["bfloat16", "default"]).any():
        df = df[dtypes.isin(["bfloat16", "default"])]
    df = df.rename(columns={"ep_size": "ep"}).assign(us=df["latency"].astype(float))
    phases = df.groupby([*_A2A_KEYS, "comm_backend", "phase"])["us"].min().reset_index()
    both = phases.groupby([*_A2A_KEYS, "comm_backend"])["us"].agg(["sum", "count"])
    both = both[both["count"] == 2]["sum"].reset_index()  # a dispatch and a combine
    low = both["comm_backend"].astype(str).str.endswith("_ll")
    rows = _fastest_kernel(both.rename(columns={"sum": "us"}), low)
    return ref.label, rows.assign(seconds=rows["us"] * 1e-6).drop(columns="us")


def _load_trtllm_mnnvl(system: str, version: str | None) -> tuple[str, Any]:
    """TensorRT-LLM's NVLink all-to-all (its MNNVL method): a layer's prepare (the experts'
    token counts exchanged), dispatch and combine, 16-bit (NVLinkTwoSided: the kernel its
    table times in 16 bits; its one-sided successor was measured with NVFP4 data only)."""
    ref = resolve_table(system, "comm", "trtllm", version, _TRTLLM_MNNVL_TABLE)
    fields = ("op_name", "moe_dtype", "moe_ep_size", "latency")
    df = _frame(ref, (*fields, *_A2A_SHAPE))
    df = df[df["moe_dtype"].astype(str) == "bfloat16"]
    df = df[df["op_name"].isin(("alltoall_prepare", "alltoall_dispatch", "alltoall_combine"))]
    df = df.rename(columns={"moe_ep_size": "ep"})
    ops = df.groupby([*_A2A_KEYS, "op_name"])["latency"].min().reset_index()
    layer = ops.groupby(_A2A_KEYS)["latency"].agg(["sum", "count"])
    layer = layer[layer["count"] == 3]["sum"].reset_index()  # every op measured
    return ref.label, layer.assign(seconds=layer["sum"].astype(float) * 1e-3).drop(
        columns="sum"
    )


def _fastest_kernel(rows: Any, low_latency: Any) -> Any:
    """At each size the faster of the kernels, leaving out the sizes inside the low-latency
    kernels' measured range that only the high-throughput ones were measured at (the
    engines run the low-latency kernels there; such a size would mix the two)."""
    if low_latency.any():
        top = rows.loc[low_latency, "num_tokens"].max()
        measured = set(rows.loc[low_latency, "num_tokens"])
        keep = (rows["num_tokens"] > top) | rows["num_tokens"].isin(measured)
        rows = rows[keep]
    return rows.groupby(_A2A_KEYS)["us"].min().reset_index()


# SGLang's DeepEP tables: the columns (microseconds) of a dispatch and of a combine
_SGLANG_DEEPEP_TIMES = {
    "normal": (
        ("dispatch_transmit_us", "dispatch_notify_us"),
        ("combine_transmit_us", "combine_notify_us"),
    ),
    "ll": (("dispatch_avg_t_us",), ("combine_avg_t_us",)),
}


def _load_sglang_deepep(system: str, version: str | None) -> tuple[str, Any]:
    import pandas as pd

    ep = ONE_NODE_EP.get(system, 8)
    frames = []
    labels = []
    for kind in ("normal", "ll"):
        try:
            ref = resolve_table(
                system, "comm", "sglang", version, f"wideep_deepep_{kind}_perf.parquet"
            )
        except AicDataMissing:
            continue
        times = _SGLANG_DEEPEP_TIMES[kind]
        shape = ("node_num", "hidden_size", "num_token", "num_topk", "num_experts")
        df = _frame(ref, (*shape, *times[0], *times[1]))
        df = df[df["node_num"] == 1].rename(columns={"num_token": "num_tokens", "num_topk": "topk"})
        # a dispatch plus a combine, each on its fastest SM count (the normal kernels'
        # tables time several)
        phases = [df.assign(t=sum(df[c] for c in cols)).groupby(_A2A_SHAPE)["t"].min()
                  for cols in times]  # fmt: skip
        us = (phases[0] + phases[1]).reset_index(name="us")
        frames.append(us.assign(low=kind == "ll"))
        labels.append(ref.label)
    if not frames:
        raise AicDataMissing(f"no SGLang DeepEP all-to-all table on {system}")
    both = pd.concat(frames, ignore_index=True).assign(ep=ep)
    rows = _fastest_kernel(both, both["low"])
    return " + ".join(labels), rows.assign(seconds=rows["us"] * 1e-6).drop(columns="us")
