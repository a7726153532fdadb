"""Cost-model backends by name: "roofline" now; "profiled" plugs in with `register_backend`."""

from __future__ import annotations

from collections.abc import Callable

from estimators._contract import ExecutionTimeEstimator
from estimators._roofline import RooflineEstimator
from estimators._types import ModelArchitecture, Precision
from sku_catalog import GpuSku

EstimatorFactory = Callable[..., ExecutionTimeEstimator]
_BACKENDS: dict[str, EstimatorFactory] = {}


def register_backend(name: str, factory: EstimatorFactory) -> None:
    """Register a cost-model backend under `name` (e.g. "profiled").

    `factory(model, sku, tp, pp, precision, kv_precision)` returns an estimator.
    """
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
) -> ExecutionTimeEstimator:
    """Build the estimator of `backend` for one deployment."""
    factory = _BACKENDS.get(backend)
    if factory is None:
        raise ValueError(
            f"unknown estimator backend {backend!r}; known backends: "
            f"{', '.join(available_backends())}"
        )
    return factory(model, sku, tp, pp, precision, kv_precision)


register_backend(
    "roofline",
    lambda model, sku, tp, pp, precision, kv_precision: RooflineEstimator(
        model, sku, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision
    ),
)
