"""aiconfigurator's own estimate of the same points, for a side-by-side comparison.

Uses the public pieces of `aiconfigurator_core.sdk` the way aiconfigurator's
`cli estimate --mode agg` does: the perf database of the system, backend and version
(the measured version where the package ships its data, else its current slot), the
model with the row's TP/PP and GEMM quantisation, and the backend's aggregated
(in-flight batching) estimate at batch size = concurrency with a context budget of ISL
tokens.  Runs in this process: the package logs to stdout and stderr, which is silenced.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from search._validate._aic_silicon import PACKAGE, ValidationPoint

# measured HF ids whose architecture the package ships under another name
_MODEL_ALIASES = {
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B": "meta-llama/Meta-Llama-3.1-405B",
}


@dataclass(frozen=True, slots=True)
class AicEstimate:
    ttft_ms: float = math.nan
    tpot_ms: float = math.nan
    version: str = ""  # the perf-database version it used
    error: str = ""


def aic_available() -> bool:
    try:
        resources.files(PACKAGE).joinpath("sdk")
    except ModuleNotFoundError:
        return False
    return True


def estimate_point(point: ValidationPoint) -> AicEstimate:
    """aiconfigurator's TTFT and TPOT for one aggregated point (never raises)."""
    sink = io.StringIO()
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            return _estimate(point)
    except Exception as exc:  # the package's own failure, reported per point
        return AicEstimate(error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}")
    finally:
        logging.disable(previous)


def _estimate(point: ValidationPoint) -> AicEstimate:
    if point.decode is not None:  # its disaggregated session lives in the aiconfigurator CLI
        return AicEstimate(error="aiconfigurator-core has no disaggregated estimate")
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.config import ModelConfig, RuntimeConfig
    from aiconfigurator_core.sdk.models import get_model

    database = _database(point.system, point.engine, point.engine_version)
    if database is None:
        return AicEstimate(error=f"no perf database for {point.system}/{point.engine}")
    gemm = point.gemm_quant_mode
    model_config = ModelConfig(
        tp_size=point.tp,
        pp_size=point.pp,
        gemm_quant_mode=common.GEMMQuantMode[gemm] if gemm else None,
        **(
            {
                "moe_tp_size": point.tp * point.dp // point.ep,
                "moe_ep_size": point.ep,
                "attention_dp_size": point.dp,
            }
            if point.moe
            else {}
        ),
    )
    model = get_model(_model_path(point.model_path), model_config, point.engine)
    backend = get_backend(point.engine)
    runtime = RuntimeConfig(batch_size=point.concurrency, isl=point.isl, osl=point.osl)
    summary = backend.run_agg(model, database, runtime, ctx_tokens=point.isl)
    result: dict[str, Any] | None = summary.get_result_dict()
    if result is None:
        return AicEstimate(error="no result (the configuration may not fit)")
    return AicEstimate(float(result["ttft"]), float(result["tpot"]), str(database.version))


@cache
def _database(system: str, engine: str, version: str) -> Any:
    from aiconfigurator_core.sdk.perf_database import get_database

    database = None
    if version:
        with contextlib.suppress(Exception):
            database = get_database(system, engine, version, allow_unlisted_version=True)
    if database is None:
        database = get_database(system, engine, "current")
    return database


def _model_path(model_path: str) -> str:
    """The model id under which the package ships the architecture's config."""
    configs = resources.files(PACKAGE).joinpath("model_configs")
    if configs.joinpath(model_path.replace("/", "--") + "_config.json").is_file():
        return model_path
    short = model_path.rsplit("/", 1)[-1]
    for suffix in ("-Instruct-FP8", "-Instruct"):
        short = short.removesuffix(suffix)
    for org in ("meta-llama", "Qwen", "nvidia"):
        candidate = f"{org}/{short}"
        candidate = _MODEL_ALIASES.get(candidate, candidate)
        if configs.joinpath(candidate.replace("/", "--") + "_config.json").is_file():
            return candidate
    return model_path
