"""Which configurations a job evaluates, and in what order: grid, TPE or NSGA-II via Optuna.

Every strategy is an Optuna ask/tell loop.  A grid enqueues every feasible point
(`enqueue_trial`; Optuna 5's GridSampler fails in ask/tell loops); TPE and
NSGA-II sample the same define-by-run space with a trial budget.  Objectives:
QPS per dollar up, TTFT P90 down, TBT P99 down; the SLO filters enter as
constraints (`trial.set_constraint`: <= 0 passes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import optuna

from estimators import EngineProfile, load_engine
from search._evaluate import REJECTED_SHARE
from search._pool_space import DISAGGREGATED, PoolAxes
from search._space import (
    ConfigPoint,
    DecodePoint,
    default_decode_batch,
    engine_schedulers,
    scheduler_values,
)
from search._spec import SearchSpec
from simulator import SchedulerKind

DIRECTIONS = ("maximize", "minimize", "minimize")  # qps_per_dollar, ttft_p90, tbt_p99
WORST = (0.0, 1e9, 1e9)  # what an infeasible or failed configuration scores
INFEASIBLE = 1e9  # constraint value of a configuration that cannot run


def make_study(spec: SearchSpec) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    kind, seed = spec.strategy.kind, spec.strategy.seed
    if kind == "nsga2":
        sampler: optuna.samplers.BaseSampler = optuna.samplers.NSGAIISampler(
            seed=seed, population_size=max(4, min(50, (spec.strategy.trials or 50) // 4))
        )
    elif kind == "tpe":
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=max(4, (spec.strategy.trials or 40) // 5)
        )
    else:  # grid: the enqueued points decide; the sampler never has to
        sampler = optuna.samplers.RandomSampler(seed=seed)
    return optuna.create_study(directions=list(DIRECTIONS), sampler=sampler)


def suggest(trial: optuna.Trial, spec: SearchSpec) -> ConfigPoint:
    """The configuration of a trial (define-by-run: scheduler knobs depend on the scheduler,
    the pools' axes on the mode)."""
    space = spec.space
    modes = space.mode
    mode = trial.suggest_categorical("mode", modes) if len(modes) > 1 else modes[0]
    pools = space.pools(spec.skus) if mode == DISAGGREGATED else None
    if pools is None:
        skus, tps, pps, replica_counts = spec.skus, space.tp, space.pp, space.replicas
        prefix = ""
    else:  # the prefill pool's own axes, named apart (their choices differ)
        skus, tps, pps, replica_counts = pools[0].skus, pools[0].tp, pools[0].pp, pools[0].replicas
        prefix = "prefill."
    catalog = spec.sku_catalog
    sku = trial.suggest_categorical(f"{prefix}sku", [catalog.get(s).id for s in skus])
    tp = trial.suggest_categorical(f"{prefix}tp", list(tps))
    pp = trial.suggest_categorical(f"{prefix}pp", list(pps))
    eps, dps = (space.ep, space.dp) if pools is None else (pools[0].ep, pools[0].dp)
    ep = _choose(trial, f"{prefix}ep", eps)
    dp = _choose(trial, f"{prefix}dp", dps)
    replicas = trial.suggest_categorical(f"{prefix}replicas", list(replica_counts))
    precision = trial.suggest_categorical("precision", [p.value for p in space.precision])
    keys = spec.engine_keys
    engine = load_engine(trial.suggest_categorical("engine", keys) if len(keys) > 1 else keys[0])
    schedulers = engine_schedulers(spec, engine)
    kinds = [k.value for k in schedulers]
    # an engine's own policy (no `schedulers` in the space) is not a choice of the trial
    scheduler = trial.suggest_categorical("scheduler", kinds) if space.schedulers else kinds[0]
    kind = SchedulerKind(scheduler)
    batches, chunks, limits = scheduler_values(
        kind, schedulers[kind], engine, catalog.get(sku), tp, dp
    )
    knobs = schedulers[kind]

    def pick(name: str, given: list | None, values: list):
        # an axis the space leaves to the engine is fixed (its value depends on SKU and TP)
        return trial.suggest_categorical(f"{scheduler}.{name}", values) if given else values[0]

    batch = pick("batch_size", knobs.batch_size, batches)
    chunk = tokens = None
    if kind.chunked:
        chunk = pick("chunk_size", knobs.chunk_size, chunks)
    elif limits != [None]:
        tokens = pick("max_tokens", knobs.max_tokens, limits)
    decode = None if pools is None else _suggest_decode(trial, spec, pools[1], engine)
    return ConfigPoint(
        sku, tp, pp, replicas, precision, scheduler, batch, chunk, tokens, engine.key, ep, dp,
        decode,
    )


def _suggest_decode(
    trial: optuna.Trial, spec: SearchSpec, axes: PoolAxes, engine: EngineProfile
) -> DecodePoint:
    """The decode pool of a disaggregated trial."""
    catalog = spec.sku_catalog
    sku = trial.suggest_categorical("decode.sku", [catalog.get(s).id for s in axes.skus])
    tp = trial.suggest_categorical("decode.tp", list(axes.tp))
    ep = _choose(trial, "decode.ep", axes.ep)
    dp = _choose(trial, "decode.dp", axes.dp)
    replicas = trial.suggest_categorical("decode.replicas", list(axes.replicas))
    if axes.batch_size:
        batch = trial.suggest_categorical("decode.batch_size", list(axes.batch_size))
    else:
        batch = default_decode_batch(engine, catalog.get(sku), tp, dp)
    link = spec.space.pool_space.kv_link.value
    return DecodePoint(sku, tp, replicas, batch, link, ep, dp)


def _choose(trial: optuna.Trial, name: str, values: Sequence[int]) -> int:
    """An axis of one value is fixed, not a choice of the trial."""
    return trial.suggest_categorical(name, list(values)) if len(values) > 1 else values[0]


def params_of(point: ConfigPoint) -> dict:
    """The trial parameters that make `suggest` return `point` (for `enqueue_trial`)."""
    prefix = "" if point.decode is None else "prefill."
    params = {
        "mode": point.mode,
        f"{prefix}sku": point.sku,
        f"{prefix}tp": point.tp,
        f"{prefix}pp": point.pp,
        f"{prefix}replicas": point.replicas,
        "precision": point.precision,
        "scheduler": point.scheduler,
        "engine": point.engine,
        f"{point.scheduler}.batch_size": point.batch_size,
    }
    # always: a trial enqueued without "ep" (or "dp") would have the sampler pick one, and the
    # grid would ask for an EP > 1 configuration in place of this EP 1 one (left pending)
    params[f"{prefix}ep"] = point.ep
    params[f"{prefix}dp"] = point.dp
    if point.chunk_size is not None:
        params[f"{point.scheduler}.chunk_size"] = point.chunk_size
    if point.max_tokens is not None:
        params[f"{point.scheduler}.max_tokens"] = point.max_tokens
    if point.decode is not None:
        d = point.decode
        params |= {
            "decode.sku": d.sku, "decode.tp": d.tp, "decode.replicas": d.replicas,
            "decode.batch_size": d.batch_size, "decode.ep": d.ep, "decode.dp": d.dp,
        }  # fmt: skip
    return params


def enqueue_grid(study: optuna.Study, points: Iterable[ConfigPoint]) -> int:
    count = 0
    for point in points:
        study.enqueue_trial(params_of(point), skip_if_exists=False)
        count += 1
    return count


def objective_values(metrics: dict | None) -> tuple[float, float, float]:
    """Optuna's values for a finished evaluation (the worst score when it has no result)."""
    if not metrics or not metrics.get("capacity_qps"):
        return WORST
    values = (
        metrics.get("qps_per_dollar"),
        metrics.get("ttft_p90"),
        metrics.get("tbt_p99"),
    )
    if any(v is None or not math.isfinite(v) for v in values):
        return WORST
    return values  # type: ignore[return-value]


def constraint_value(metrics: dict | None, spec: SearchSpec) -> float:
    """<= 0 when every SLO filter passes: the largest relative excess over a bound."""
    if not metrics or not metrics.get("capacity_qps"):
        return INFEASIBLE
    detail = metrics.get("slo_detail") or {}
    if (detail.get(REJECTED_SHARE) or {}).get("passed") is False:
        return INFEASIBLE  # refuses more of the workload than allowed
    worst = -1.0
    for slo in spec.slo.filters:
        value = (detail.get(slo.column) or {}).get("value")
        if value is None or not math.isfinite(value):
            return INFEASIBLE
        worst = max(worst, value / slo.max_s - 1.0)
    return worst
