"""aiconfigurator's own estimate of the same points, for a side-by-side comparison.

Aggregated points use the public pieces of `aiconfigurator_core.sdk` the way
aiconfigurator's `cli estimate --mode agg` does: the perf database of the system, backend
and version (the measured version where the package ships its data, else its current slot),
the model with the row's TP/PP and GEMM quantisation, and the backend's aggregated
(in-flight batching) estimate at batch size = concurrency (per attention-DP rank, as the
dataset's batch_size column records it) with a context budget of ISL tokens.

Disaggregated points call aiconfigurator's own estimate of a prefill/decode deployment,
`aiconfigurator.cli.api.cli_estimate(mode="disagg")` of the `aiconfigurator` package (the
CLI and its disaggregated session, beside `aiconfigurator-core`): each pool's TP, attention
DP, MoE TP and EP and worker count as the point runs them, one prompt a prefill batch and
the client's even share C / (decode workers x attention DP) a decode rank, the dataset's
`prefill_batch_size` and `decode_batch_size`.  aiconfigurator's own default latency
corrections apply, as its CLI applies them; the perf databases and expert quantisations are
tried in the aggregated points' order.

Runs in this process: the packages log to stdout and stderr, which is silenced.
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

from search._validate._aic_silicon import GEMM_TO_PRECISION, OWN_INT4, PACKAGE, ValidationPoint
from sku_catalog import load_catalog

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
    from aiconfigurator_core.sdk.errors import PerfDataNotAvailableError

    databases = _databases(point.system, point.engine, point.engine_version)
    if not databases:
        return AicEstimate(error=f"no perf database for {point.system}/{point.engine}")
    gemm, row_moe = aic_quant_modes(point)
    estimate = _estimate_with if point.decode is None else _estimate_disagg
    # the row's expert quantisation first, then the one aiconfigurator infers from the
    # checkpoint (rows label DeepSeek's block-scaled FP8 experts "fp8", which some databases
    # hold only as "fp8_block")
    moe_modes = [row_moe] + ([""] if row_moe else [])
    attempts = [(database, moe) for database in databases for moe in moe_modes]
    for database, moe in attempts[:-1]:
        with contextlib.suppress(PerfDataNotAvailableError):
            return estimate(point, database, gemm, moe)
    database, moe = attempts[-1]  # the last one's error is the point's
    return estimate(point, database, gemm, moe)


def aic_quant_modes(point: ValidationPoint) -> tuple[str, str]:
    """(GEMM, MoE) quant modes to hand aiconfigurator: the row's, except where the row's
    label is not its checkpoint's format (gpt-oss's MXFP4 checkpoint labelled "nvfp4":
    `checkpoint_precisions`): there the GEMMs are left to the checkpoint (16-bit) and the
    experts are MXFP4 as the engines run them on the GPU (estimators/_weight_precision.py):
    ``w4a8_mxfp4_mxfp8`` on GPUs with FP4 tensor cores, else the checkpoint's own
    (``w4a16_mxfp4``), which is also what `_estimate` falls back to.  Kimi-K2.5's own INT4
    checkpoint (``int4_wo``, `OWN_INT4`) gets 16-bit GEMMs and its INT4 experts."""
    if point.gemm_quant_mode == OWN_INT4:  # Kimi-K2.5's checkpoint: 16-bit GEMMs (there is
        return "bfloat16", point.moe_quant_mode  # no int4_wo GEMM table), INT4 experts
    if GEMM_TO_PRECISION.get(point.gemm_quant_mode) is not point.precision:
        w4a8 = load_catalog().get(point.sku).fp4_tflops is not None
        return "", "w4a8_mxfp4_mxfp8" if w4a8 else ""
    return point.gemm_quant_mode, point.moe_quant_mode


def _estimate_with(point: ValidationPoint, database: Any, gemm: str, moe: str) -> AicEstimate:
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.config import ModelConfig, RuntimeConfig
    from aiconfigurator_core.sdk.models import get_model, resolve_context_fmha_by_data

    model_config = ModelConfig(
        tp_size=point.tp,
        pp_size=point.pp,
        gemm_quant_mode=common.GEMMQuantMode[gemm] if gemm else None,
        **(
            {
                "moe_tp_size": point.tp * point.dp // point.ep,
                "moe_ep_size": point.ep,
                "attention_dp_size": point.dp,
                "moe_quant_mode": common.MoEQuantMode[moe] if moe else None,
            }
            if point.moe
            else {}
        ),
    )
    model_path = _model_path(point.model_path)
    # what aiconfigurator's estimate path does before building the model: a context FMHA
    # inferred as FP8 falls back to 16 bits where the database measured no FP8 slice
    resolve_context_fmha_by_data(
        model_config, model_path, database, point.engine, is_context_role=True
    )
    model = get_model(model_path, model_config, point.engine)
    backend = get_backend(point.engine)
    # aiconfigurator's batch is one attention-DP rank's (the dataset's batch_size column)
    batch = -(-point.concurrency // point.dp)
    runtime = RuntimeConfig(batch_size=batch, isl=point.isl, osl=point.osl)
    summary = backend.run_agg(model, database, runtime, ctx_tokens=point.isl)
    result: dict[str, Any] | None = summary.get_result_dict()
    if result is None:
        return AicEstimate(error="no result (the configuration may not fit)")
    return AicEstimate(float(result["ttft"]), float(result["tpot"]), str(database.version))


def _estimate_disagg(point: ValidationPoint, database: Any, gemm: str, moe: str) -> AicEstimate:
    """aiconfigurator's estimate of a disaggregated point (module docstring), with the
    perf data of `database`'s version."""
    try:
        from aiconfigurator.cli.api import cli_estimate
    except ImportError:
        return AicEstimate(
            error="aiconfigurator's disaggregated estimate needs the aiconfigurator package "
            "(pip install 'llmcap[aic]')"
        )
    decode = point.decode
    assert decode is not None
    pools: dict[str, Any] = {}
    for prefix, tp, dp, ep in (("prefill", point.tp, point.dp, point.ep),
                               ("decode", decode.tp, decode.dp, decode.ep)):  # fmt: skip
        pools |= {f"{prefix}_tp_size": tp, f"{prefix}_pp_size": 1}
        if point.moe:
            pools |= {f"{prefix}_attention_dp_size": dp, f"{prefix}_moe_ep_size": ep,
                      f"{prefix}_moe_tp_size": tp * dp // ep}  # fmt: skip
    version = str(database.version)
    result = cli_estimate(
        _model_path(point.model_path), point.system, mode="disagg",
        backend_name=point.engine, backend_version=version, isl=point.isl, osl=point.osl,
        prefill_batch_size=1, prefill_num_workers=point.replicas,
        decode_batch_size=-(-point.concurrency // (decode.replicas * decode.dp)),
        decode_num_workers=decode.replicas,
        gemm_quant_mode=gemm or None, moe_quant_mode=(moe or None) if point.moe else None,
        **pools,
    )  # fmt: skip
    return AicEstimate(float(result.ttft), float(result.tpot), version)


@cache
def _databases(system: str, engine: str, version: str) -> tuple[Any, ...]:
    """The perf databases to try, in order: the measured version's (where the package lists
    or holds it), then the backend's current one.  A version folder may hold only some
    operator families (SGLang 0.5.9 ships only its collective timings), so an estimate that
    finds no data there is retried on the current database."""
    from aiconfigurator_core.sdk.perf_database import get_database

    found: list[Any] = []
    if version:
        with contextlib.suppress(Exception):
            found.append(get_database(system, engine, version, allow_unlisted_version=True))
    with contextlib.suppress(Exception):
        current = get_database(system, engine, "current")
        if all(current is not other for other in found):
            found.append(current)
    return tuple(d for d in found if d is not None)


def _model_path(model_path: str) -> str:
    """The model id under which the package ships the architecture's config."""
    configs = resources.files(PACKAGE).joinpath("model_configs")
    if configs.joinpath(model_path.replace("/", "--") + "_config.json").is_file():
        return model_path
    short = model_path.rsplit("/", 1)[-1]
    for suffix in ("-Instruct-FP8", "-Instruct", "-NVFP4"):
        short = short.removesuffix(suffix)
    for org in ("meta-llama", "Qwen", "nvidia", "deepseek-ai"):
        candidate = f"{org}/{short}"
        candidate = _MODEL_ALIASES.get(candidate, candidate)
        if configs.joinpath(candidate.replace("/", "--") + "_config.json").is_file():
            return candidate
    return model_path
