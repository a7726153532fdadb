"""Expanding a spec's space into configurations and dropping the infeasible ones."""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

from estimators import (
    DoesNotFitError,
    EngineProfile,
    ParallelismError,
    Precision,
    PrecisionError,
    load_engine,
)
from search._spec import SchedulerSpace, SearchSpec, sha256_json
from simulator import (
    DEFAULT_CHUNK_SIZE,
    Deployment,
    PreparedDeployment,
    SchedulerKind,
    engine_scheduler,
    prepare,
)

VIDUR = "vidur@2024"


@dataclass(frozen=True, slots=True)
class ConfigPoint:
    """One point of the space: a deployment shape, before it is checked."""

    sku: str
    tp: int
    pp: int
    replicas: int
    precision: str
    scheduler: str
    batch_size: int
    chunk_size: int | None = None
    max_tokens: int | None = None
    engine: str = VIDUR  # the engine profile's key (name@version)
    ep: int = 1  # expert parallelism of a mixture-of-experts model
    dp: int = 1  # attention data parallelism of a mixture-of-experts model

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_replica * self.replicas

    def label(self) -> str:
        parts = [self.sku, f"TP{self.tp}", f"PP{self.pp}"]
        if self.dp > 1:
            parts.insert(1, f"DP{self.dp}")
        if self.ep > 1:
            parts.append(f"EP{self.ep}")
        if self.replicas > 1:
            parts.append(f"x{self.replicas}")
        parts += [self.scheduler, f"b{self.batch_size}"]
        if self.chunk_size is not None:
            parts.append(f"c{self.chunk_size}")
        if self.max_tokens is not None:
            parts.append(f"t{self.max_tokens}")
        if self.precision != Precision.BF16.value:
            parts.append(self.precision)
        if self.engine != VIDUR:
            parts.append(self.engine)
        return " ".join(parts)

    def as_dict(self) -> dict:
        """The point's fields; `engine` left out under vidur, `ep` and `dp` at 1, so
        configurations stored before engine profiles (all simulated as vidur), expert and
        attention data parallelism keep their fingerprints."""
        data = asdict(self)
        if self.engine == VIDUR:
            del data["engine"]
        for name in ("ep", "dp"):
            if data[name] == 1:
                del data[name]
        return data

    def deployment(self, spec: SearchSpec) -> Deployment:
        engine = load_engine(self.engine)
        return Deployment(
            model=spec.model_architecture,
            sku=spec.sku_catalog.get(self.sku),
            tp=self.tp,
            pp=self.pp,
            num_replicas=self.replicas,
            scheduler=engine_scheduler(
                engine,
                spec.sku_catalog.get(self.sku),
                self.tp,
                kind=self.scheduler,
                batch_size=self.batch_size,
                chunk_size=self.chunk_size or DEFAULT_CHUNK_SIZE,
                max_tokens=self.max_tokens,
                dp=self.dp,
            ),
            precision=Precision(self.precision),
            block_size=spec.block_size,
            gpu_memory_utilization=spec.gpu_memory_utilization,
            estimator=spec.estimator,
            op_tables=str(spec.op_tables) if spec.op_tables is not None else None,
            engine=engine,
            prefix_cache=spec.prefix_cache,
            prefix_cache_tokens=(
                math.inf if spec.prefix_cache_tokens == "unbounded" else spec.prefix_cache_tokens
            ),
            speculative=spec.speculative.config() if spec.speculative is not None else None,
            ep=self.ep,
            dp=self.dp,
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """A configuration with its fingerprint, price and verdict."""

    point: ConfigPoint
    fingerprint: str
    cost_per_hour: float
    infeasible_reason: str | None  # None: feasible

    @property
    def feasible(self) -> bool:
        return self.infeasible_reason is None


def engine_schedulers(
    spec: SearchSpec, engine: EngineProfile
) -> dict[SchedulerKind, SchedulerSpace]:
    """The scheduler axes of `engine`: the space's, or the engine's own policy."""
    return dict(spec.space.schedulers or {SchedulerKind(engine.scheduler): SchedulerSpace()})


def scheduler_values(
    kind: SchedulerKind, sched: SchedulerSpace, engine: EngineProfile, sku, tp: int, dp: int = 1
) -> tuple[list[int], list[int | None], list[int | None]]:
    """(batch sizes, chunk sizes, token limits) of one scheduler's axes; what the space leaves
    out takes the engine's limits (under vidur: batch 128, chunk 512, vLLM's 4096 tokens),
    `dp` times them under attention data parallelism (each rank the engine's own)."""
    limits = engine.limits(sku, tp)
    vidur = engine.is_vidur
    batches = list(sched.batch_size or [limits.batch_cap * dp])
    if kind.chunked:
        chunks: list[int | None] = list(
            sched.chunk_size or [DEFAULT_CHUNK_SIZE if vidur else limits.token_budget * dp]
        )
        return batches, chunks, [None]
    default_tokens = (
        None if vidur or kind is SchedulerKind.STATIC else limits.token_budget * dp
    )
    return batches, [None], list(sched.max_tokens or [default_tokens])


def expand_space(spec: SearchSpec) -> list[ConfigPoint]:
    """Every combination of the spec's axes, in a stable order."""
    points: list[ConfigPoint] = []
    space = spec.space
    for sku, tp, pp, ep, dp, replicas, precision, engine_key in itertools.product(
        spec.skus, space.tp, space.pp, space.ep, space.dp, space.replicas, space.precision,
        spec.engine_keys,
    ):  # fmt: skip
        sku_rec = spec.sku_catalog.get(sku)
        engine = load_engine(engine_key)
        for kind, sched in engine_schedulers(spec, engine).items():
            batches, chunks, max_tokens = scheduler_values(kind, sched, engine, sku_rec, tp, dp)
            for batch, chunk, tokens in itertools.product(batches, chunks, max_tokens):
                points.append(
                    ConfigPoint(
                        sku_rec.id, tp, pp, replicas, precision.value, kind.value, batch, chunk,
                        tokens, engine.key, ep, dp,
                    )
                )
    return list(dict.fromkeys(points))  # drop duplicates (e.g. a SKU named twice)


def fingerprint(spec_fingerprint: str, point: ConfigPoint, spec: SearchSpec) -> str:
    """sha256 of the configuration, the SKU record it runs on, and the spec's fingerprint."""
    sku = asdict(spec.sku_catalog.get(point.sku))
    if point.precision != Precision.FP4.value:  # only FP4 reads it: the others keep theirs
        del sku["fp4_tflops"]
    return sha256_json({"spec": spec_fingerprint, "point": point.as_dict(), "sku": sku})


def check(point: ConfigPoint, spec: SearchSpec) -> tuple[str | None, PreparedDeployment | None]:
    """Why `point` cannot run (budget, node shape, divisibility, memory), or its prepared form."""
    budget = spec.budget
    if point.num_gpus > budget.max_gpus:
        return (
            f"budget: {point.num_gpus} GPUs ("
            + (f"DP{point.dp} x " if point.dp > 1 else "")
            + f"TP{point.tp} x PP{point.pp} x {point.replicas} replicas) > max_gpus "
            f"{budget.max_gpus}",
            None,
        )
    per_replica = budget.max_gpus_per_replica
    if per_replica is not None and point.gpus_per_replica > per_replica:
        return (
            f"budget: {point.gpus_per_replica} GPUs per replica > max_gpus_per_replica "
            f"{per_replica}",
            None,
        )
    try:
        return None, prepare(point.deployment(spec))
    except PrecisionError as exc:
        return f"precision: {exc}", None
    except ParallelismError as exc:
        return f"parallelism: {exc}", None
    except DoesNotFitError as exc:
        first_line = str(exc).splitlines()[0]
        short = next((ln.strip() for ln in str(exc).splitlines() if "short by" in ln), "")
        return f"memory: {first_line}; {short}".rstrip("; "), None


def candidates(spec: SearchSpec) -> list[Candidate]:
    """The whole space with fingerprints and feasibility, before any simulation."""
    spec_fp = spec.fingerprint()
    out = []
    for point in expand_space(spec):
        reason, _ = check(point, spec)
        price = spec.sku_catalog.get(point.sku).price_per_gpu_hour
        out.append(
            Candidate(point, fingerprint(spec_fp, point, spec), point.num_gpus * price, reason)
        )
    return out
