"""Expanding a spec's space into configurations and dropping the infeasible ones."""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass

from estimators import DoesNotFitError, ParallelismError, Precision
from search._spec import SearchSpec, sha256_json
from simulator import SchedulerConfig, SchedulerKind
from simulator._config import DEFAULT_CHUNK_SIZE
from simulator._deployment import Deployment, PreparedDeployment, prepare


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

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.replicas

    def label(self) -> str:
        parts = [self.sku, f"TP{self.tp}", f"PP{self.pp}"]
        if self.replicas > 1:
            parts.append(f"x{self.replicas}")
        parts += [self.scheduler, f"b{self.batch_size}"]
        if self.chunk_size is not None:
            parts.append(f"c{self.chunk_size}")
        if self.max_tokens is not None:
            parts.append(f"t{self.max_tokens}")
        if self.precision != Precision.BF16.value:
            parts.append(self.precision)
        return " ".join(parts)

    def as_dict(self) -> dict:
        return asdict(self)

    def deployment(self, spec: SearchSpec) -> Deployment:
        return Deployment(
            model=spec.model_architecture,
            sku=spec.sku_catalog.get(self.sku),
            tp=self.tp,
            pp=self.pp,
            num_replicas=self.replicas,
            scheduler=SchedulerConfig(
                SchedulerKind(self.scheduler),
                batch_size=self.batch_size,
                chunk_size=self.chunk_size or DEFAULT_CHUNK_SIZE,
                max_tokens=self.max_tokens,
            ),
            precision=Precision(self.precision),
            block_size=spec.block_size,
            gpu_memory_utilization=spec.gpu_memory_utilization,
            estimator=spec.estimator,
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


def expand_space(spec: SearchSpec) -> list[ConfigPoint]:
    """Every combination of the spec's axes, in a stable order."""
    points: list[ConfigPoint] = []
    space = spec.space
    for sku, tp, pp, replicas, precision in itertools.product(
        spec.skus, space.tp, space.pp, space.replicas, space.precision
    ):
        sku_id = spec.sku_catalog.get(sku).id
        for kind, sched in space.schedulers.items():
            chunks: list[int | None] = (
                list(sched.chunk_size or [DEFAULT_CHUNK_SIZE])
                if kind is SchedulerKind.SARATHI
                else [None]
            )
            max_tokens: list[int | None] = list(sched.max_tokens or [None])
            if kind is SchedulerKind.SARATHI:
                max_tokens = [None]
            for batch, chunk, tokens in itertools.product(sched.batch_size, chunks, max_tokens):
                points.append(
                    ConfigPoint(
                        sku_id, tp, pp, replicas, precision.value, kind.value, batch, chunk, tokens
                    )
                )
    return list(dict.fromkeys(points))  # drop duplicates (e.g. a SKU named twice)


def fingerprint(spec_fingerprint: str, point: ConfigPoint, spec: SearchSpec) -> str:
    """sha256 of the configuration, the SKU record it runs on, and the spec's fingerprint."""
    sku = spec.sku_catalog.get(point.sku)
    return sha256_json({"spec": spec_fingerprint, "point": point.as_dict(), "sku": asdict(sku)})


def check(point: ConfigPoint, spec: SearchSpec) -> tuple[str | None, PreparedDeployment | None]:
    """Why `point` cannot run (budget, node shape, divisibility, memory), or its prepared form."""
    budget = spec.budget
    if point.num_gpus > budget.max_gpus:
        return (
            f"budget: {point.num_gpus} GPUs (TP{point.tp} x PP{point.pp} x {point.replicas} "
            f"replicas) > max_gpus {budget.max_gpus}",
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
