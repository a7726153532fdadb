"""Cost models: model architectures -> operator costs, and the memory planner.

The simulator asks one question per iteration (see `BatchShape` / `BatchCost`);
backends such as the roofline model answer it.
"""

from __future__ import annotations

from estimators._aic_tables import aic_available
from estimators._contract import (
    BatchCost,
    BatchShape,
    DecodeStepCost,
    ExecutionTimeEstimator,
    PipelineStepCost,
    decode_steps,
    pipeline_decode_steps,
    priced_decode_steps,
)
from estimators._digest import cost_model_digest
from estimators._engines import (
    DECODE_RESERVE_AT_HANDOFF,
    DECODE_RESERVE_AT_ROUTE,
    DECODE_RESERVE_MOMENTS,
    DEFAULT_ENGINE,
    FIRST_TOKEN_DECODE_ADMIT,
    FIRST_TOKEN_DECODE_STEP,
    FIRST_TOKEN_PREFILL,
    FP8_BLOCK_GEMM_FLASHINFER,
    FP8_BLOCK_GEMM_KERNELS,
    MOE_ALL_TO_ALL_ABOVE_TOP_K,
    MOE_ALL_TO_ALL_ALWAYS,
    MOE_ALL_TO_ALL_NEVER,
    MOE_ALL_TO_ALL_RULES,
    AllReduceCost,
    AllToAllCost,
    EngineLimits,
    EngineProfile,
    Frontend,
    IterationOverhead,
    UnknownEngineError,
    available_engines,
    load_engine,
    version_tuple,
)
from estimators._memory import (
    DoesNotFitError,
    DrafterMemory,
    MemoryFractionError,
    MemoryPlan,
    ParallelismError,
    PrecisionError,
    check_fits,
    plan_memory,
    validate_parallelism,
    with_expert_precision,
)
from estimators._mla import mla_eager_fold, mla_eager_table
from estimators._models import (
    ModelConfigError,
    UnknownModelError,
    builtin_model_names,
    format_model_table,
    load_model,
    variant_note,
)
from estimators._op_tables import (
    OpTablesMeta,
    layer_gemm_shapes,
    load_op_tables,
    resolve_op_tables,
    shipped_op_tables,
    utc_now,
    write_op_tables,
)
from estimators._profiled import ProfiledDataMissing, ProfiledEstimator, profiled_coverage
from estimators._registry import (
    EstimatorFallbackWarning,
    available_backends,
    make_estimator,
    register_backend,
)
from estimators._roofline import (
    RooflineConstants,
    RooflineEstimator,
    packaged_roofline_table,
    roofline_table,
)
from estimators._speculative import (
    TBT_GAP_POLICIES,
    AcceptedTokens,
    SpeculativeConfig,
    SpeculativeEstimator,
    drafter_memory,
    expected_tokens_per_step,
)
from estimators._types import (
    EXPERT_ONLY_PRECISIONS,
    FP8_BLOCK_WEIGHTS,
    ModelArchitecture,
    Precision,
    resolve_kv_precision,
)
from estimators._weight_precision import WeightPrecisions

# fitting the roofline's engine constants to aiconfigurator's tables reads them with pandas,
# which a simulation never needs: exported on first use (PEP 562)
_CALIBRATION = (
    "A2A_SKUS", "FIT_ENGINES", "FIT_SKUS", "all_to_all_key", "engine_layer", "family_lines",
    "fit_all", "fit_all_to_all", "fit_allreduce", "mean_all_to_all", "mean_allreduce",
    "model_shapes",
)  # fmt: skip


def __getattr__(name: str) -> object:
    if name in _CALIBRATION:
        from estimators import _aic_calibration

        return getattr(_aic_calibration, name)
    raise AttributeError(f"module 'estimators' has no attribute {name!r}")


__all__ = [
    "A2A_SKUS",
    "DECODE_RESERVE_AT_HANDOFF",
    "DECODE_RESERVE_AT_ROUTE",
    "DECODE_RESERVE_MOMENTS",
    "DEFAULT_ENGINE",
    "EXPERT_ONLY_PRECISIONS",
    "FIRST_TOKEN_DECODE_ADMIT",
    "FIRST_TOKEN_DECODE_STEP",
    "FIRST_TOKEN_PREFILL",
    "FIT_ENGINES",
    "FIT_SKUS",
    "FP8_BLOCK_GEMM_FLASHINFER",
    "FP8_BLOCK_GEMM_KERNELS",
    "FP8_BLOCK_WEIGHTS",
    "MOE_ALL_TO_ALL_ABOVE_TOP_K",
    "MOE_ALL_TO_ALL_ALWAYS",
    "MOE_ALL_TO_ALL_NEVER",
    "MOE_ALL_TO_ALL_RULES",
    "TBT_GAP_POLICIES",
    "AcceptedTokens",
    "AllReduceCost",
    "AllToAllCost",
    "BatchCost",
    "BatchShape",
    "DecodeStepCost",
    "DoesNotFitError",
    "DrafterMemory",
    "EngineLimits",
    "EngineProfile",
    "EstimatorFallbackWarning",
    "ExecutionTimeEstimator",
    "Frontend",
    "IterationOverhead",
    "MemoryFractionError",
    "MemoryPlan",
    "ModelArchitecture",
    "ModelConfigError",
    "OpTablesMeta",
    "ParallelismError",
    "PipelineStepCost",
    "Precision",
    "PrecisionError",
    "ProfiledDataMissing",
    "ProfiledEstimator",
    "RooflineConstants",
    "RooflineEstimator",
    "SpeculativeConfig",
    "SpeculativeEstimator",
    "UnknownEngineError",
    "UnknownModelError",
    "WeightPrecisions",
    "aic_available",
    "all_to_all_key",
    "available_backends",
    "available_engines",
    "builtin_model_names",
    "check_fits",
    "cost_model_digest",
    "decode_steps",
    "drafter_memory",
    "engine_layer",
    "expected_tokens_per_step",
    "family_lines",
    "fit_all",
    "fit_all_to_all",
    "fit_allreduce",
    "format_model_table",
    "layer_gemm_shapes",
    "load_engine",
    "load_model",
    "load_op_tables",
    "make_estimator",
    "mean_all_to_all",
    "mean_allreduce",
    "mla_eager_fold",
    "mla_eager_table",
    "model_shapes",
    "packaged_roofline_table",
    "pipeline_decode_steps",
    "plan_memory",
    "priced_decode_steps",
    "profiled_coverage",
    "register_backend",
    "resolve_kv_precision",
    "resolve_op_tables",
    "roofline_table",
    "shipped_op_tables",
    "utc_now",
    "validate_parallelism",
    "variant_note",
    "version_tuple",
    "with_expert_precision",
    "write_op_tables",
]
