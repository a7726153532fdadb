"""Cost-model backends by name: "roofline", "profiled" (measured tables) and "auto".

`auto` picks the profiled backend where the measured tables cover the SKU, precision and
engine, and the roofline otherwise, with a warning naming what is missing; the chosen
estimator's ``backend_name`` and ``selection_note`` say which it used and why.  Every
backend receives the deployment's `EngineProfile` (None: Vidur's 2024 vLLM), whose
per-iteration overhead and all-reduce it applies; the profiled backend also reads that
engine's measured tables.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from estimators._contract import ExecutionTimeEstimator
from estimators._engines import EngineProfile
from estimators._mla import MlaRooflineEstimator
from estimators._profiled import ProfiledDataMissing, ProfiledEstimator, attach_eager_experts
from estimators._profiled_mla import MlaProfiledEstimator
from estimators._roofline import RooflineEstimator
from estimators._types import ModelArchitecture, Precision
from sku_catalog import GpuSku

EstimatorFactory = Callable[..., ExecutionTimeEstimator]
_BACKENDS: dict[str, EstimatorFactory] = {}


class EstimatorFallbackWarning(UserWarning):
    """`auto` fell back to the roofline: the measured tables do not cover the deployment."""


def register_backend(name: str, factory: EstimatorFactory) -> None:
    """Register a cost-model backend under `name`.

    `factory(model, sku, tp, pp, precision, kv_precision, engine=profile,
    engine_version=...)` returns an estimator; `engine` is the deployment's `EngineProfile`
    (None: Vidur's 2024 vLLM) and `engine_version` the version asked for (None: the
    profile's).  A factory without those keywords is wrapped to ignore them.
    """
    try:
        params = inspect.signature(factory).parameters
        takes_keywords = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        takes_engine = takes_keywords or "engine" in params
        takes_version = takes_keywords or "engine_version" in params
    except (TypeError, ValueError):
        takes_engine = takes_version = True
    if not (takes_engine and takes_version):
        inner = factory

        def factory(*args: Any, engine: Any = None, engine_version: Any = None, **kwargs: Any):
            extra = {"engine": engine} if takes_engine else {}
            if takes_version:
                extra["engine_version"] = engine_version
            return inner(*args, **kwargs, **extra)

    _BACKENDS[name] = factory


def available_backends() -> tuple[str, ...]:
    return tuple(sorted(_BACKENDS))


def make_estimator(
    backend: str,
    model: ModelArchitecture,
    sku: GpuSku,
    tp: int = 1,
    pp: int = 1,
    precision: Precision = Precision.BF16,
    kv_precision: Precision | None = None,
    engine: EngineProfile | str | None = None,
    engine_version: str | None = None,
    op_tables: str | Path | None = None,
    ep: int = 1,
    dp: int = 1,
) -> ExecutionTimeEstimator:
    """Build the estimator of `backend` for one deployment run by `engine` (None: Vidur's
    2024 vLLM; a profile's KV precision applies when `kv_precision` is None).  A bare engine
    name only picks the profiled backend's tables.  `op_tables`: a directory in llmcap's
    own op-table format that the profiled backend (and `auto`) reads instead of
    aiconfigurator-core's tables.

    Raises ProfiledDataMissing (a ValueError) when "profiled" is demanded without data,
    OpTablesError when `op_tables` cannot be read, ValueError when a backend that reads no
    tables is given `op_tables`. `ep`: expert-parallel degree of a mixture-of-experts model
    (dividing `tp` x `dp`; estimators/_moe.py); `dp`: its attention data parallelism
    (estimators/_attention_dp.py).
    """
    factory = _BACKENDS.get(backend)
    if factory is None:
        raise ValueError(
            f"unknown estimator backend {backend!r}; known backends: "
            f"{', '.join(available_backends())}"
        )
    if kv_precision is None and isinstance(engine, EngineProfile):
        kv_precision = engine.kv_precision(precision, model)
    extra: dict[str, Any] = {}
    if op_tables is not None:  # only the backends that read tables take them
        if backend not in _TABLE_BACKENDS:
            raise ValueError(
                f"op tables are read by the {' and '.join(sorted(_TABLE_BACKENDS))} estimators, "
                f"not {backend!r}"
            )
        extra["op_tables"] = op_tables
    if ep != 1 or model.is_moe:
        extra["ep"] = ep
    if dp != 1:
        extra["dp"] = dp
    return factory(
        model,
        sku,
        tp,
        pp,
        precision,
        kv_precision,
        engine=engine,
        engine_version=engine_version,
        **extra,
    )


def _roofline(
    model, sku, tp, pp, precision, kv_precision, engine=None, ep=1, dp=1, **_: Any
) -> RooflineEstimator:
    profile = engine if isinstance(engine, EngineProfile) else None
    roofline = MlaRooflineEstimator if model.is_mla else RooflineEstimator
    return roofline(
        model, sku, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision, engine=profile,
        ep=ep, dp=dp,
    )  # fmt: skip


def _profiled(
    model,
    sku,
    tp,
    pp,
    precision,
    kv_precision,
    engine=None,
    engine_version=None,
    op_tables=None,
    ep=1,
    dp=1,
    **_: Any,
) -> ProfiledEstimator:
    if Precision(precision) is Precision.FP4:
        # aiconfigurator's nvfp4 GEMM rows time a linear layer with its input's quantization,
        # which an engine may fuse into the kernel before it (TensorRT-LLM's Llama layer:
        # `fp8_quant_fused_model_types`); the roofline's matmul.fp4_* constants, fitted to
        # those rows, keep that fixed cost apart where it is fused
        raise ProfiledDataMissing(
            "profiled estimator: FP4 GEMMs are priced by the roofline (its NVFP4 constants "
            "are fitted to the measured nvfp4 GEMM tables)"
        )
    profiled = MlaProfiledEstimator if model.is_mla else ProfiledEstimator
    return profiled(
        model,
        sku,
        tp=tp,
        pp=pp,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine,
        engine_version=engine_version,
        op_tables=op_tables,
        ep=ep,
        dp=dp,
    )


def _auto(
    model, sku, tp, pp, precision, kv_precision, engine=None, **tables: Any
) -> ExecutionTimeEstimator:
    """The profiled backend where the tables (`tables`: engine_version, op_tables) cover
    the deployment, else the roofline with a warning.  Mixture-of-experts and latent-attention
    models stay on the roofline: aiconfigurator's MoE tables time the kernels their
    collectors chose, replayed as CUDA graphs where they can be captured (its
    collector/trtllm/collect_moe.py: `benchmark_with_power(allow_graph_fail=True)`), not
    necessarily the kernel an engine's decode batches run, and priced from the tables
    throughout, the MoE validation points' TPOT error rises (29.5% -> 43.5% MAPE when the MLA
    tables were used too; 17.9% -> 22.0% for the routed experts alone, 2026-11-25);
    `--estimator profiled` still prices them from the tables.  The iterations an engine runs
    eagerly (more tokens than its CUDA graphs capture), compute-bound, take the routed experts
    from the engine's MoE table (`attach_eager_experts`)."""
    if model.is_moe or model.is_mla:
        reason = "its MoE and MLA tables may time other kernels than its decode batches run"
    else:
        try:
            est = _profiled(model, sku, tp, pp, precision, kv_precision, engine, **tables)
            est.selection_note = "auto: measured tables cover this GPU, precision and engine"
            return est
        except ProfiledDataMissing as exc:
            reason = str(exc).removeprefix("profiled estimator: ")
    roof = _roofline(
        model, sku, tp, pp, precision, kv_precision, engine, ep=tables.get("ep", 1),
        dp=tables.get("dp", 1),
    )  # fmt: skip
    if model.is_moe and tables.get("op_tables") is None:
        reason += "; " + attach_eager_experts(roof, tables.get("engine_version"))
    warnings.warn(
        f"estimator auto: using the roofline; {reason}", EstimatorFallbackWarning, stacklevel=2
    )
    roof.selection_note = f"auto: roofline, {reason}"
    return roof


_TABLE_BACKENDS = frozenset({"profiled", "auto"})
register_backend("roofline", _roofline)
register_backend("profiled", _profiled)
register_backend("auto", _auto)
