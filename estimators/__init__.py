"""Cost models: model architectures -> operator costs, and the memory planner.

The simulator asks one question per iteration (see `BatchShape` / `BatchCost`);
backends such as the roofline model answer it.
"""

from __future__ import annotations

from estimators._contract import (
    BatchCost,
    BatchShape,
    DecodeStepCost,
    ExecutionTimeEstimator,
    decode_steps,
    priced_decode_steps,
)
from estimators._digest import cost_model_digest
from estimators._engines import (
    DEFAULT_ENGINE,
    AllReduceCost,
    EngineLimits,
    EngineProfile,
    IterationOverhead,
    UnknownEngineError,
    available_engines,
    load_engine,
)
from estimators._memory import (
    DoesNotFitError,
    MemoryPlan,
    ParallelismError,
    PrecisionError,
    check_fits,
    plan_memory,
    validate_parallelism,
)
from estimators._models import (
    ModelConfigError,
    UnknownModelError,
    builtin_model_names,
    format_model_table,
    load_model,
    variant_note,
)
from estimators._profiled import ProfiledDataMissing, ProfiledEstimator, profiled_coverage
from estimators._registry import (
    EstimatorFallbackWarning,
    available_backends,
    make_estimator,
    register_backend,
)
from estimators._roofline import RooflineConstants, RooflineEstimator
from estimators._speculative import (
    SpeculativeConfig,
    SpeculativeEstimator,
    expected_tokens_per_step,
)
from estimators._types import ModelArchitecture, Precision, resolve_kv_precision

__all__ = [
    "DEFAULT_ENGINE",
    "AllReduceCost",
    "BatchCost",
    "BatchShape",
    "DecodeStepCost",
    "DoesNotFitError",
    "EngineLimits",
    "EngineProfile",
    "EstimatorFallbackWarning",
    "ExecutionTimeEstimator",
    "IterationOverhead",
    "MemoryPlan",
    "ModelArchitecture",
    "ModelConfigError",
    "ParallelismError",
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
    "available_backends",
    "available_engines",
    "builtin_model_names",
    "check_fits",
    "cost_model_digest",
    "decode_steps",
    "expected_tokens_per_step",
    "format_model_table",
    "load_engine",
    "load_model",
    "make_estimator",
    "plan_memory",
    "priced_decode_steps",
    "profiled_coverage",
    "register_backend",
    "resolve_kv_precision",
    "validate_parallelism",
    "variant_note",
]
