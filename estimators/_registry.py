"""Cost-model backends by name: "roofline" now; "profiled" plugs in with `register_backend`."""

from __future__ import annotations

import inspect
from collections.abc import Callable

from estimators._contract import ExecutionTimeEstimator
from estimators._engines import EngineProfile
from estimators._roofline import RooflineEstimator
from estimators._types import ModelArchitecture, Precision
from sku_catalog import GpuSku

EstimatorFactory = Callable[..., ExecutionTimeEstimator]
_BACKENDS: dict[str, EstimatorFactory] = {}


def register_backend(name: str, factory: EstimatorFactory) -> None:
    """Register a cost-model backend under `name` (e.g. "profiled").

    `factory(model, sku, tp, pp, precision, kv_precision, engine=profile)` returns an
    estimator; `engine` is the deployment's `EngineProfile` (None: Vidur's 2024 vLLM), whose
    per-iteration overhead and all-reduce the backend applies.  A factory without an `engine`
    parameter is wrapped to ignore it.
    """
    try:
        params = inspect.signature(factory).parameters
        takes_engine = "engine" in params or any(
            p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()
        )
    except (TypeError, ValueError):
        takes_engine = True
    if not takes_engine:
        inner = factory

        def factory(*args, engine=None, **kwargs):
            return inner(*args, **kwargs)

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
    engine: EngineProfile | None = None,
) -> ExecutionTimeEstimator:
    """Build the estimator of `backend` for one deployment run by `engine` (None: Vidur's
    2024 vLLM; a profile's KV precision applies when `kv_precision` is None)."""
    factory = _BACKENDS.get(backend)
    if factory is None:
        raise ValueError(
            f"unknown estimator backend {backend!r}; known backends: "
            f"{', '.join(available_backends())}"
        )
    if kv_precision is None and engine is not None:
        kv_precision = engine.kv_precision(precision)
    return factory(model, sku, tp, pp, precision, kv_precision, engine=engine)


register_backend(
    "roofline",
    lambda model, sku, tp, pp, precision, kv_precision, engine=None: RooflineEstimator(
        model, sku, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision, engine=engine
    ),
)
