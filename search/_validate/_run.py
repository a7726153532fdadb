"""Simulating each measured point the way its benchmark client ran it."""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from estimators import (
    FP8_BLOCK_WEIGHTS,
    EngineProfile,
    EstimatorFallbackWarning,
    ModelArchitecture,
    Precision,
    load_engine,
    load_model,
    mla_eager_table,
    roofline_table,
    with_expert_precision,
)
from search._validate._aic_silicon import DYNAMO_FRONTEND, ValidationPoint
from search._validate._holdout import HoldOutFold
from simulator import (
    DecodeSpec,
    Deployment,
    GlobalSchedulerKind,
    KvLink,
    SchedulerConfig,
    SchedulerKind,
    engine_scheduler,
    prepare,
)
from sku_catalog import GpuSku, load_catalog
from workloads import Workload

# How each point is simulated (`engines`):
# - "auto" (default): with the profile of the point's own engine and version (its policy and
#   limits, memory plan, KV precision with FP8 weights, per-iteration overhead, all-reduce);
# - "vidur": every engine the same way, as before engine profiles: Vidur's 2024 vLLM profile
#   with Sarathi-style chunked prefill under the engines' common 8192-token budget;
# - NAME[@VERSION]: every point with that one profile.
# A point whose engine version is no release (vLLM "nightly-<commit>", SGLang "nightly-dev")
# runs under its engine's default profile, the newest.
# The batch is always capped at the concurrency (the client never has more in flight).
CHUNK_SIZE = 8192
AUTO = "auto"
# the benchmark clients send about ten requests per concurrency slot
REQUESTS_PER_SLOT = 10
# the seed of the lengths drawn for a client that spreads them (`closed_loop_workload`)
LENGTH_SEED = 0
_RELEASE = re.compile(r"v?\d")  # a version that starts with a release number


@dataclass(frozen=True, slots=True)
class PointResult:
    """The simulator's answer for one point, or why it has none."""

    point: ValidationPoint
    predicted_ttft_ms: float = math.nan
    predicted_tpot_ms: float = math.nan
    # the part of the predicted TTFT before the engine first schedules a request's prompt
    # (mean over requests): the frontend's tokenizing and latency, and the wait for a batch
    # to take it; the rest is its prefill, any KV hand-off and the first token's way out
    predicted_ttft_wait_ms: float = math.nan
    # disaggregated: the simulated share of the run the prefill pool's replicas were busy
    # (their mean); the closer to 1, the longer the queue before a prompt's prefill, and
    # the more any error in the pool's capacity comes back in the TTFT.  (A decode replica,
    # or an aggregated one, steps whenever it holds a request, so its share says little.)
    predicted_prefill_busy: float = math.nan
    error: str = ""  # why the point could not be simulated (e.g. it does not fit)
    aic_ttft_ms: float = math.nan  # aiconfigurator's estimate, when asked for
    aic_tpot_ms: float = math.nan
    aic_error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def closed_loop_workload(
    point: ValidationPoint, requests_per_slot: int, seed: int = LENGTH_SEED
) -> Workload:
    """C requests in flight, with the prompt and output lengths the client sends: the listed
    lengths, or drawn uniformly from [int(ratio x L), L] where the client spreads them
    (`point.length_ratio`), from a generator seeded with `seed`."""
    n = max(point.concurrency * requests_per_slot, 1)
    rng = np.random.default_rng(seed)
    return Workload(
        name=f"closed-loop c{point.concurrency} {point.isl}x{point.osl}",
        arrival_times=np.zeros(n),
        prompt_tokens=_client_lengths(rng, point.isl, point.length_ratio, n),
        output_tokens=_client_lengths(rng, point.osl, point.length_ratio, n),
        concurrency=point.concurrency,
        metadata={"arrival": "closed-loop"},
    )


def _client_lengths(rng: np.random.Generator, length: int, ratio: float, n: int) -> np.ndarray:
    if ratio >= 1.0:
        return np.full(n, length, dtype=np.int64)
    low = max(int(length * ratio), 1)
    return rng.integers(low, length + 1, size=n, dtype=np.int64)


def engine_for(
    point: ValidationPoint, engines: str = AUTO, fold: HoldOutFold | None = None
) -> EngineProfile:
    """The profile a point is simulated with (see `engines` above); a hold-out `fold`
    replaces its all-reduce and all-to-all fits of the held-out GPU's family; the point's
    launch recipe may choose the MoE exchange and its script the CUDA-graph capture size and
    the MoE kernel; behind Dynamo's frontend the engine's own HTTP server is not on the
    path (`dynamo_fronted`); the script or recipe may also choose the block-FP8 GEMM kernel."""
    if engines != AUTO:
        profile = load_engine(engines)
    else:
        version = point.engine_version.strip()
        if not _RELEASE.match(version):  # a nightly or dev build (see above)
            version = ""
        profile = load_engine(f"{point.engine}@{version}" if version else point.engine)
    if point.frontend == DYNAMO_FRONTEND:
        profile = dynamo_fronted(profile)
    if point.moe_all_to_all:  # the launch recipe's choice
        profile = replace(profile, moe_all_to_all=point.moe_all_to_all)
    if point.graph_max_tokens:  # the launch script's CUDA-graph capture size
        profile = replace(
            profile, piecewise_max_tokens=point.graph_max_tokens, piecewise_tokens_per_seq=0
        )
    if point.fp8_block_gemm:  # the block-FP8 GEMM kernel the launch script or recipe forces
        profile = replace(profile, fp8_block_gemm=point.fp8_block_gemm)
    if point.moe_kernel:  # the MoE kernel the launch script forces
        expert = (point_model(point).expert_precision or point.precision).value
        family = load_catalog().get(point.sku).family
        kernels = {**profile.moe_kernels.get(expert, {}), family: point.moe_kernel}
        profile = replace(profile, moe_kernels={**profile.moe_kernels, expert: kernels})
    if fold is None:
        return profile
    refits = {}
    for name, fits in (("allreduce", fold.allreduce), ("all_to_all", fold.all_to_all)):
        changes = fits.get(profile.name)
        if changes:
            lines = dict(getattr(profile, name))
            for family, value in changes.items():
                lines.pop(family, None)
                if value is not None:
                    lines[family] = value
            refits[name] = lines
    return replace(profile, **refits) if refits else profile


def deployment_for(
    point: ValidationPoint, engines: str = AUTO, fold: HoldOutFold | None = None
) -> Deployment:
    engine = engine_for(point, engines, fold)
    sku = load_catalog().get(point.sku)
    if point.decode is not None:
        return disaggregated_deployment(point, engine, sku)
    if engine.is_vidur:  # as before profiles: one policy and KV rule for every engine
        return Deployment(
            model=point_model(point),
            sku=sku,
            tp=point.tp,
            pp=point.pp,
            scheduler=SchedulerConfig(
                SchedulerKind.SARATHI, batch_size=point.concurrency, chunk_size=CHUNK_SIZE
            ),
            precision=point.precision,
            kv_precision=point.kv_precision,
            engine=engine,
            ep=point.ep,
            dp=point.dp,
        )
    model = point_model(point)
    d = engine_deployment(engine, sku, model, point.tp, point.pp, point.precision,
                          max_batch=point.concurrency, dp=point.dp)  # fmt: skip
    scheduler = replace(  # the server's own options
        script_limits(d.scheduler, point),
        batch_wait_iters=point.batch_wait_iters,
        batch_wait_token_ratio=point.batch_wait_token_ratio,
        adp_balance_timeout_iters=point.adp_balance_timeout_iters,
        adp_balance_batching_wait_iters=point.adp_balance_batching_wait_iters,
        recv_interval=point.recv_interval,
    )
    d = replace(d, scheduler=scheduler, kv_precision=point.kv_cache_dtype,
                gpu_memory_utilization=point.memory_fraction or None)  # fmt: skip
    return replace(d, ep=point.ep) if point.ep != 1 else d


def dynamo_fronted(profile: EngineProfile) -> EngineProfile:
    """The engine behind NVIDIA Dynamo's frontend (`_aic_disagg.py` module docstring): Dynamo
    tokenizes each prompt once and hands the workers token ids, so the engine's own HTTP
    server and its measured latency (engines.yaml frontend.request_ms) are off the path and
    no decode worker tokenizes again; Dynamo's own latency was not measured (none), its
    tokenizing is the engine's rate (the same Hugging Face tokenizer)."""
    frontend = profile.frontend
    if frontend is not None:
        frontend = replace(frontend, request_ms=0.0)
    return replace(profile, frontend=frontend, disagg_decode_tokenizes=False)


def script_limits(scheduler: SchedulerConfig, point: ValidationPoint) -> SchedulerConfig:
    """`scheduler` (the engine's own policy and limits) with the token budget and batch cap
    the point's launch script or config generator set for each attention DP rank
    (`_launch_scripts.py`, `_aic_generator.py`): the budget where the engine keeps its own
    (the chunk size of a chunking policy, else the token limit), under the policy the
    server's options amount to where they change it (`ValidationPoint.scheduler`); the batch
    still capped at the concurrency."""
    changes: dict[str, Any] = {}
    if point.token_budget:
        budget = point.token_budget * point.dp
        if point.scheduler:
            kind = SchedulerKind(point.scheduler)
            changes["kind"] = kind
            changes["chunk_size" if kind.chunked else "max_tokens"] = budget
        else:
            if scheduler.kind.chunked:
                changes["chunk_size"] = budget
            if scheduler.max_tokens is not None:
                changes["max_tokens"] = budget
    if point.batch_cap:
        changes["batch_size"] = min(point.batch_cap * point.dp, point.concurrency)
    return replace(scheduler, **changes) if changes else scheduler


def point_model(point: ValidationPoint) -> ModelArchitecture:
    """The point's model with its weights as the measured checkpoint stores them (its
    experts' precision where the row sets it apart: `checkpoint_precisions`; block-scaled
    FP8 where the row's GEMMs are ``fp8_block`` and the built-in config is not)."""
    model = with_expert_precision(load_model(point.model), point.expert_precision)
    if point.gemm_quant_mode == "fp8_block" and not model.weight_scale_block:
        model = replace(model, weight_scale_block=FP8_BLOCK_WEIGHTS)
    return model


def disaggregated_deployment(
    point: ValidationPoint, engine: EngineProfile, sku: GpuSku
) -> Deployment:
    """A disaggregated point's prefill pool (the deployment's own fields) and decode pool,
    each with the engine's own policy and limits per attention DP rank, the batch capped at
    the point's per-rank batch size where it has one (the row's, or its launch recipe's:
    `_aic_disagg.py`) and at the concurrency, the prefill
    pool's under the token budget and policy its generated config set (`script_limits`),
    and the launch recipe's request polling, KV dtype and each pool's memory fraction
    (`_aic_disagg.py`); the KV cache
    crosses the link `KvLink.AUTO` picks (NVLink when both pools fit one node)."""
    shape = point.decode
    assert shape is not None
    prefill_cap = point.batch_size * point.dp if point.batch_size else point.concurrency
    d = engine_deployment(engine, sku, point_model(point), point.tp, point.pp,
                          point.precision, max_batch=min(prefill_cap, point.concurrency),
                          dp=point.dp)  # fmt: skip
    prefill = replace(script_limits(d.scheduler, point), recv_interval=point.recv_interval)
    d = replace(d, scheduler=prefill, kv_precision=point.kv_cache_dtype,
                gpu_memory_utilization=point.memory_fraction or None)  # fmt: skip
    scheduler = engine_scheduler(engine, sku, shape.tp, dp=shape.dp)
    decode_cap = shape.batch_size * shape.dp if shape.batch_size else point.concurrency
    scheduler = replace(
        scheduler, batch_size=min(scheduler.batch_size, decode_cap, point.concurrency),
        recv_interval=shape.recv_interval,
    )
    decode = DecodeSpec(sku, shape.tp, shape.replicas, scheduler, KvLink.AUTO,
                        dp=shape.dp, ep=shape.ep,
                        router=GlobalSchedulerKind(point.decode_router),
                        gpu_memory_utilization=shape.memory_fraction or None)  # fmt: skip
    return replace(d, num_replicas=point.replicas, ep=point.ep, decode=decode)


def engine_deployment(
    engine: EngineProfile,
    sku: GpuSku,
    model: ModelArchitecture,
    tp: int,
    pp: int,
    precision: Precision,
    max_batch: int | None,
    dp: int = 1,
) -> Deployment:
    """The engine's own policy and limits (each attention DP rank's), the batch capped at
    `max_batch` (a benchmark client never has more requests in flight)."""
    scheduler = engine_scheduler(engine, sku, tp, dp=dp)
    if max_batch is not None:
        scheduler = replace(scheduler, batch_size=min(scheduler.batch_size, max_batch))
    return Deployment(
        model=model,
        sku=sku,
        tp=tp,
        pp=pp,
        scheduler=scheduler,
        precision=precision,
        engine=engine,  # its KV precision, memory fraction and reserves
        dp=dp,
    )


def simulate_point(
    point: ValidationPoint,
    requests_per_slot: int = REQUESTS_PER_SLOT,
    engines: str = AUTO,
    estimator: str = "roofline",
    fold: HoldOutFold | None = None,
    op_tables: str | None = None,
) -> PointResult:
    """Mean TTFT and mean TPOT over the run's requests, as the client reports them.

    TPOT per request is (end-to-end - TTFT) / (output tokens - 1); both are averaged over
    every request (the first wave included, as the client counts it; its warm-up requests
    are not part of the measurement and the simulator has no cold start to warm up).
    `estimator` other than the roofline reads the tables of the point's engine and version,
    or the `op_tables` directory (`llmcap profile`'s format) when one is given.
    A hold-out `fold` builds the estimator with the constants refitted without its data.
    """
    table, eager = (fold.table, fold.mla_eager) if fold is not None else (None, None)
    with roofline_table(table), mla_eager_table(eager):
        return _simulate_point(point, requests_per_slot, engines, estimator, fold, op_tables)


def _simulate_point(
    point: ValidationPoint,
    requests_per_slot: int,
    engines: str,
    estimator: str,
    fold: HoldOutFold | None,
    op_tables: str | None,
) -> PointResult:
    try:
        deployment = deployment_for(point, engines, fold)
        if estimator != "roofline":  # each pool's tables of the point's engine release
            deployment = replace(
                deployment,
                estimator=estimator,
                op_tables=op_tables,
                engine_version=point.engine_version or None,
            )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EstimatorFallbackWarning)
            prepared = prepare(deployment)
    except ValueError as exc:  # DoesNotFitError, ParallelismError
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return PointResult(point, error=f"{type(exc).__name__}: {reason}")
    result = prepared.simulate(closed_loop_workload(point, requests_per_slot))
    requests = result.requests
    done = requests[requests["completed"].notna()]
    if done.empty:
        return PointResult(point, error="no request completed")
    ttft = float(done["ttft"].mean()) * 1e3
    wait = float((done["scheduled"] - done["arrival"]).mean()) * 1e3
    tpot_values = done["tpot"].dropna()
    tpot = float(tpot_values.mean()) * 1e3 if len(tpot_values) else math.nan
    prefill = [r["busy_fraction"] for r in result.summary["replicas"] if r["role"] == "prefill"]
    return PointResult(
        point, predicted_ttft_ms=ttft, predicted_tpot_ms=tpot, predicted_ttft_wait_ms=wait,
        predicted_prefill_busy=sum(prefill) / len(prefill) if prefill else math.nan,
    )  # fmt: skip


def evaluate_point(
    point: ValidationPoint,
    requests_per_slot: int,
    with_aic: bool,
    engines: str = AUTO,
    estimator: str = "roofline",
    fold: HoldOutFold | None = None,
    op_tables: str | None = None,
) -> PointResult:
    """The simulator's answer and, with `with_aic`, aiconfigurator's estimate of one point."""
    result = simulate_point(point, requests_per_slot, engines, estimator, fold, op_tables)
    if not with_aic:
        return result
    from search._validate._aic_estimate import estimate_point

    aic = estimate_point(point)
    return replace(result, aic_ttft_ms=aic.ttft_ms, aic_tpot_ms=aic.tpot_ms, aic_error=aic.error)


_Item = tuple[ValidationPoint, int, bool, str, str, "HoldOutFold | None", "str | None"]


def _evaluate_star(args: _Item) -> PointResult:
    return evaluate_point(*args)


def simulate_points(
    points: Iterable[ValidationPoint],
    *,
    requests_per_slot: int = REQUESTS_PER_SLOT,
    with_aic: bool = False,
    workers: int | None = None,
    on_done: Callable[[PointResult], None] | None = None,
    engines: str = AUTO,
    estimator: str = "roofline",
    fold: HoldOutFold | None = None,
    op_tables: str | None = None,
) -> list[PointResult]:
    """Every point's result in input order; `workers` > 1 runs them in a process pool.

    `on_done` is called as each result arrives (for a progress bar); `engines` says which
    engine profile simulates each point (see the module's AUTO); `fold` simulates them
    with constants refitted without the fold's data.
    """
    items = [
        (p, requests_per_slot, with_aic, engines, estimator, fold, op_tables) for p in points
    ]
    workers = default_workers() if workers is None else workers
    results: dict[int, PointResult] = {}
    for index, result in _evaluate_all(items, workers):
        results[index] = result
        if on_done is not None:
            on_done(result)
    return [results[i] for i in range(len(items))]


def default_workers() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def _evaluate_all(items: list[_Item], workers: int) -> Iterator[tuple[int, PointResult]]:
    """(index, result) pairs as they finish."""
    if workers <= 1 or len(items) <= 1:
        for index, item in enumerate(items):
            yield index, _evaluate_star(item)
        return
    # the longest runs first keeps the pool busy to the end
    order = sorted(range(len(items)), key=lambda i: -_cost(items[i][0]))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_evaluate_star, items[i]): i for i in order}
        for future in as_completed(futures):
            yield futures[future], future.result()


def _cost(point: ValidationPoint) -> float:
    return point.concurrency * (point.osl + point.isl / 512)
