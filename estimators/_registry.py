"""Cost-model backends by name: "roofline", "profiled" (measured tables) and "auto".

`auto` picks the profiled backend where the measured tables cover the SKU, precision and
engine, and the roofline otherwise, with a warning naming what is missing; the chosen
estimator's ``backend_name`` and ``selection_note`` say which it used and why.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from estimators._contract import ExecutionTimeEstimator
from estimators._profiled import ProfiledDataMissing, ProfiledEstimator
from estimators._roofline import RooflineEstimator
from estimators._types import ModelArchitecture, Precision
from sku_catalog import GpuSku

EstimatorFactory = Callable[..., ExecutionTimeEstimator]
_BACKENDS: dict[str, EstimatorFactory] = {}


class EstimatorFallbackWarning(UserWarning):
    """`auto` fell back to the roofline: the measured tables do not cover the deployment."""


def register_backend(name: str, factory: EstimatorFactory) -> None:
    """Register a cost-model backend under `name`.

    `factory(model, sku, tp, pp, precision, kv_precision, engine=..., engine_version=...)`
    returns an estimator; factories that ignore the engine accept and drop the keywords.
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
    engine: Any = None,
    engine_version: str | None = None,
) -> ExecutionTimeEstimator:
    """Build the estimator of `backend` for one deployment.

    `engine` is an engine name ("vllm", "sglang", "trtllm") or an object with a ``name``;
    only the profiled backend reads it (which engine's measured tables to use).
    Raises ProfiledDataMissing (a ValueError) when "profiled" is demanded without data.
    """
    factory = _BACKENDS.get(backend)
    if factory is None:
        raise ValueError(
            f"unknown estimator backend {backend!r}; known backends: "
            f"{', '.join(available_backends())}"
        )
    return factory(
        model, sku, tp, pp, precision, kv_precision, engine=engine, engine_version=engine_version
    )


def _roofline(model, sku, tp, pp, precision, kv_precision, **_: Any) -> RooflineEstimator:
    return RooflineEstimator(
        model, sku, tp=tp, pp=pp, precision=precision, kv_precision=kv_precision
    )


def _profiled(
    model, sku, tp, pp, precision, kv_precision, engine=None, engine_version=None, **_: Any
) -> ProfiledEstimator:
    return ProfiledEstimator(
        model,
        sku,
        tp=tp,
        pp=pp,
        precision=precision,
        kv_precision=kv_precision,
        engine=engine,
        engine_version=engine_version,
    )


def _auto(
    model, sku, tp, pp, precision, kv_precision, engine=None, engine_version=None, **_: Any
) -> ExecutionTimeEstimator:
    try:
        est = _profiled(model, sku, tp, pp, precision, kv_precision, engine, engine_version)
        est.selection_note = "auto: measured tables cover this GPU, precision and engine"
        return est
    except ProfiledDataMissing as exc:
        reason = str(exc).removeprefix("profiled estimator: ")
        warnings.warn(
            f"estimator auto: using the roofline; {reason}", EstimatorFallbackWarning, stacklevel=2
        )
        roof = _roofline(model, sku, tp, pp, precision, kv_precision)
        roof.selection_note = f"auto: roofline, {reason}"
        return roof


register_backend("roofline", _roofline)
register_backend("profiled", _profiled)
register_backend("auto", _auto)
