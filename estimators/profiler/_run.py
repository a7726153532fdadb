"""`llmcap profile run`: time a model's operators on this machine and write op tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from estimators._op_tables import OpTablesMeta, utc_now, write_op_tables
from estimators._types import ModelArchitecture
from estimators.profiler._device import (
    DeviceInfo,
    ProfilerError,
    describe_device,
    import_torch,
    sku_for_gpu_name,
)
from estimators.profiler._kernels import (
    MOE_KERNELS,
    ROTATION_BYTES,
    decode_op,
    gemm_op,
    moe_bytes,
    moe_op,
    prefill_op,
    rotation_copies,
    time_op,
)
from estimators.profiler._plan import FULL_GRID, QUICK_GRID, ProfileGrid, ProfilePlan, plan_profile

__all__ = ["ProfileResult", "ProfileSettings", "run_profile"]

ATTENTION_DTYPE = "bf16"  # attention and its KV cache are measured in bf16
_CPU_BYTES_PER_POINT = 1 << 30  # the most input bytes one CPU measurement allocates
_GPU_MEMORY_SHARE = 0.25  # ... and one GPU measurement, as a share of its memory
_ROTATION_NOTE = (
    f" (each call over its own copy of the inputs, copies spanning {ROTATION_BYTES >> 20} MiB: "
    "operands come from HBM, not L2)"
)


@dataclass(slots=True)
class ProfileSettings:
    """What to profile and how."""

    model: ModelArchitecture
    model_ref: str  # the name or config path given, recorded in the meta
    tps: list[int]
    dtypes: tuple[str, ...] = ("bf16",)  # of the layer GEMMs: bf16, fp8 (LM head: bf16)
    device: str | None = None  # "cuda", "cpu"; None: CUDA when present
    quick: bool = False
    sku: str | None = None  # the catalog SKU the tables stand for; None: from the GPU name
    warmup: int | None = None  # None: the grid's
    repeats: int | None = None
    cpu_threads: int | None = None  # torch threads of a CPU run; None: torch's default


@dataclass(slots=True)
class ProfileResult:
    """What one run measured and wrote."""

    out: Path
    device: DeviceInfo
    sku: str | None
    files: list[Path] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class _Point:
    """One measurement: which table it goes to, its row, and how to build the operator."""

    table: str
    row: dict[str, Any]
    build: Callable[[], Callable[[], Any]]
    input_bytes: int


def _points(torch: Any, plan: ProfilePlan, grid: ProfileGrid, dev: str) -> list[_Point]:
    pts: list[_Point] = []
    for g in plan.gemms:
        elem = 1 if g.dtype == "fp8" else 2
        for m in grid.tokens:
            row = {"dtype": g.dtype, "m": m, "n": g.n, "k": g.k, "op": "; ".join(g.ops)}
            pts.append(
                _Point(
                    "gemm",
                    row,
                    lambda m=m, g=g: gemm_op(torch, dev, g.dtype, m, g.n, g.k),
                    elem * (m * g.k + g.n * g.k + m * g.n),
                )
            )
    a = ATTENTION_DTYPE
    for h in plan.heads:
        head = {"num_heads": h.heads, "num_kv_heads": h.kv_heads, "head_dim": h.head_dim,
                "kv_dtype": a, "kernel": "torch-sdpa"}  # fmt: skip
        prefills = [(b, s_, 0) for b in grid.prefill_batches for s_ in grid.prompt_lens
                    if b * s_ <= grid.prefill_token_cap]  # fmt: skip
        prefills += [(1, chunk, cached) for chunk, cached in grid.cached_prefills]
        for b, q, c in prefills:
            row = {**head, "batch_size": b, "prompt_len": q, "cached_len": c}
            pts.append(
                _Point(
                    "context_attention",
                    row,
                    lambda b=b, q=q, c=c, h=h: prefill_op(
                        torch, dev, a, b, q, c, h.heads, h.kv_heads, h.head_dim
                    ),
                    2 * b * h.head_dim * (2 * q * h.heads + 2 * (c + q) * h.kv_heads),
                )
            )
        for b in grid.decode_batches:
            for kv in grid.kv_lens:
                if b * kv > grid.kv_token_cap:
                    continue
                row = {**head, "batch_size": b, "kv_len": kv}
                pts.append(
                    _Point(
                        "generation_attention",
                        row,
                        lambda b=b, kv=kv, h=h: decode_op(
                            torch, dev, a, b, kv, h.heads, h.kv_heads, h.head_dim
                        ),
                        2 * b * h.head_dim * (h.heads + 2 * kv * h.kv_heads),
                    )
                )
    for e in plan.moes:
        for t in grid.moe_tokens:
            row = {"dtype": e.dtype, "hidden_size": e.hidden, "inter_size": e.inter,
                   "topk": e.topk, "num_experts": e.experts, "moe_tp": e.moe_tp,
                   "moe_ep": e.moe_ep, "num_tokens": t, "kernel": MOE_KERNELS[e.dtype]}  # fmt: skip
            pts.append(
                _Point(
                    "moe",
                    row,
                    lambda t=t, e=e: moe_op(
                        torch, dev, e.dtype, t, e.hidden, e.width, e.topk, e.experts, e.moe_ep
                    ),
                    moe_bytes(t, e.hidden, e.width, e.topk, e.experts, e.moe_ep, e.dtype),
                )
            )
    return pts


def _moe_unsupported(torch: Any, plan: ProfilePlan, dev: str) -> dict[str, str]:
    """The MoE precisions this torch cannot run on this device, each with torch's reason:
    one tiny layer of each is run first, so a missing grouped kernel skips its points with
    a note instead of failing the run."""
    out: dict[str, str] = {}
    for dtype in dict.fromkeys(e.dtype for e in plan.moes):
        try:
            moe_op(torch, dev, dtype, 4, 64, 64, 2, 4, 1)()
        except (RuntimeError, NotImplementedError, AttributeError, TypeError) as exc:
            out[dtype] = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else repr(exc)
    return out


def _check_dtype(s: ProfileSettings, info: DeviceInfo) -> None:
    bad = [d for d in s.dtypes if d not in ("bf16", "fp8")]
    if bad or not s.dtypes:
        raise ProfilerError(f"--dtype {','.join(bad) or '(none)'}: profile bf16, fp8 or both")
    if "fp8" in s.dtypes and not info.fp8_gemm:
        raise ProfilerError(
            "--dtype fp8: fp8 GEMMs need an NVIDIA GPU of compute capability 8.9 or newer "
            f"(Ada, Hopper, Blackwell) and torch._scaled_mm; this device: {info.name} "
            f"({info.device}); profile bf16 here"
        )


def _meta_notes(
    s: ProfileSettings,
    plan: ProfilePlan,
    warmup: int,
    repeats: int,
    methods: set[str],
    device: str,
) -> list[str]:
    """How the tables were measured, for meta.yaml's notes."""
    notes = [
        f"{'quick' if s.quick else 'full'} grid",
        f"median of {repeats} runs after {warmup} warm-up",
        f"timed by {', '.join(sorted(methods)) or 'nothing'}"
        + (_ROTATION_NOTE if device == "cuda" else ""),
        "random normal inputs",
    ]
    if plan.heads:
        notes.append("attention: torch SDPA, dense KV")
    if plan.moes:
        notes.append("MoE: one GPU's experts under balanced routing, torch grouped GEMMs")
    if "fp8" in s.dtypes:
        notes.append("fp8 GEMMs: per-tensor scales, activations already fp8")
        if plan.moes:
            notes.append("fp8 experts: row-wise scales, rows and activation quantized")
    return notes


def run_profile(
    settings: ProfileSettings,
    out: str | Path,
    on_step: Callable[[int, int, str], None] | None = None,
) -> ProfileResult:
    """Measure the operators of ``settings.model`` at each TP degree and write the op
    tables to `out`.  ``on_step(done, total, label)`` is called before each measurement."""
    torch = import_torch()
    info = describe_device(torch, settings.device)
    _check_dtype(settings, info)
    plan = plan_profile(settings.model, settings.tps, settings.dtypes)
    if not plan.tps:
        raise ProfilerError(
            f"--tp {','.join(map(str, settings.tps))}: no degree divides the "
            f"{settings.model.num_attention_heads} attention heads of {settings.model.name}"
        )
    grid = QUICK_GRID if settings.quick else FULL_GRID
    warmup = grid.warmup if settings.warmup is None else settings.warmup
    repeats = grid.repeats if settings.repeats is None else settings.repeats
    if repeats < 1 or warmup < 0:
        raise ProfilerError(f"--repeats {repeats} / --warmup {warmup}: need repeats >= 1")
    sku = settings.sku
    if sku is None and info.device == "cuda":
        sku = sku_for_gpu_name(info.name)
    result = ProfileResult(Path(out), info, sku, notes=list(plan.skipped))
    if info.device == "cuda":
        budget = int(torch.cuda.get_device_properties(0).total_memory * _GPU_MEMORY_SHARE)
    else:
        budget = _CPU_BYTES_PER_POINT
    if info.device == "cpu" and settings.cpu_threads is not None:
        torch.set_num_threads(settings.cpu_threads)
    torch.manual_seed(0)
    points = _points(torch, plan, grid, info.device)
    moe_skipped = _moe_unsupported(torch, plan, info.device)
    for dtype, why in moe_skipped.items():
        result.notes.append(f"{dtype} experts: skipped, torch cannot run them here ({why})")
    points = [p for p in points if p.table != "moe" or p.row["dtype"] not in moe_skipped]
    rows: dict[str, list[dict[str, Any]]] = {}
    too_big = 0
    methods: set[str] = set()
    for i, p in enumerate(points):
        if on_step is not None:
            on_step(i, len(points), p.table)
        if p.input_bytes > budget:
            too_big += 1
            continue
        copies = rotation_copies(p.input_bytes, budget) if info.device == "cuda" else 1
        seconds, method = time_op(
            torch, info.device, [p.build() for _ in range(copies)], warmup, repeats
        )
        methods.add(method)
        rows.setdefault(p.table, []).append({**p.row, "latency_ms": seconds * 1e3})
        if info.device == "cuda":
            torch.cuda.empty_cache()  # the copies' inputs and the graph's pool
    if too_big:
        result.notes.append(f"{too_big} point(s) skipped: inputs over {budget / 2**30:.1f} GiB")
    ar_tps = [tp for tp in plan.tps if tp > 1]
    if ar_tps and info.num_gpus >= 2:
        from estimators.profiler._allreduce import measure_allreduce

        for tp in ar_tps:
            if tp > info.num_gpus:
                result.notes.append(f"all-reduce over {tp} GPUs: skipped, {info.num_gpus} visible")
                continue
            if on_step is not None:
                on_step(len(points), len(points), f"all-reduce over {tp} GPUs")
            rows.setdefault("allreduce", []).extend(
                measure_allreduce(torch, tp, list(grid.allreduce_bytes), warmup, repeats)
            )
    elif ar_tps:
        result.notes.append(
            f"all-reduce: skipped, it needs several GPUs and this run has "
            f"{info.num_gpus or 'none'} ({info.device}); the backend uses the roofline for it"
        )
    if on_step is not None:
        on_step(len(points), len(points), "done")
    meta = OpTablesMeta(
        source="llmcap-profiler",
        device=info.device,  # type: ignore[arg-type]
        dtype=settings.dtypes[0] if len(settings.dtypes) == 1 else list(settings.dtypes),  # type: ignore[arg-type]
        date=utc_now(),
        gpu_name=info.name,
        sku=sku,
        driver=info.driver,
        cuda=info.cuda,
        torch=info.torch,
        model=settings.model_ref,
        tp=plan.tps,
        notes="; ".join(_meta_notes(settings, plan, warmup, repeats, methods, info.device)),
    )
    tables = {kind: pd.DataFrame(r) for kind, r in rows.items()}
    result.files = write_op_tables(result.out, meta, tables)
    result.rows = {kind: len(df) for kind, df in tables.items()}
    return result
