"""Expanding a spec's space into configurations and dropping the infeasible ones."""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

from estimators import (
    DoesNotFitError,
    EngineProfile,
    MemoryFractionError,
    ParallelismError,
    Precision,
    PrecisionError,
    load_engine,
)
from search._pool_space import (
    AGGREGATED,
    DISAGGREGATED,
    DecodePoint,
    PoolAxes,
    dp_tp_text,
    gpu_cost_per_hour,
)
from search._spec import SchedulerSpace, SearchSpec, sha256_json
from simulator import (
    DEFAULT_CHUNK_SIZE,
    DecodePoolError,
    DecodeSpec,
    Deployment,
    KvLink,
    PreparedDeployment,
    SchedulerKind,
    engine_scheduler,
    prepare,
)
from sku_catalog import Catalog

VIDUR = "vidur@2024"


@dataclass(frozen=True, slots=True)
class ConfigPoint:
    """One point of the space: a deployment shape, before it is checked.

    Aggregated, every replica prefills and decodes; with `decode`, the point's own SKU,
    parallelism, replicas and scheduler are its prefill pool's (disaggregated serving).
    """

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
    decode: DecodePoint | None = None  # disaggregated: the decode pool

    @property
    def mode(self) -> str:
        return AGGREGATED if self.decode is None else DISAGGREGATED

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment, both pools when disaggregated."""
        decode = self.decode.num_gpus if self.decode is not None else 0
        return self.gpus_per_replica * self.replicas + decode

    def cost_per_hour(self, catalog: Catalog) -> float:
        """Dollars per hour of every GPU of the deployment, each pool at its SKU's price."""
        return gpu_cost_per_hour(self.as_dict(), self.num_gpus, catalog)

    def label(self) -> str:
        parts = ["prefill"] if self.decode is not None else []
        parts += [self.sku, dp_tp_text(self.dp, self.tp, " "), f"PP{self.pp}"]
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
        if self.decode is not None:
            parts += ["+ decode", self.decode.label()]
        return " ".join(parts)

    def as_dict(self) -> dict:
        """The point's fields; `engine` left out under vidur, each pool's `ep` and `dp` at 1
        and `decode` when aggregated, so configurations stored before engine profiles (all
        simulated as vidur), expert and attention data parallelism and disaggregated pools
        keep their fingerprints."""
        data = asdict(self)
        if self.engine == VIDUR:
            del data["engine"]
        pools = [data] if self.decode is None else [data, data["decode"]]
        for pool in pools:
            for name in ("ep", "dp"):
                if pool[name] == 1:
                    del pool[name]
        if self.decode is None:
            del data["decode"]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ConfigPoint:
        """The point `as_dict` (and a stored configuration's params) describes."""
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if fields.get("decode") is not None:
            fields["decode"] = DecodePoint(**fields["decode"])
        return cls(**fields)

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
            decode=self._decode_spec(spec, engine),
            ep=self.ep,
            dp=self.dp,
        )

    def _decode_spec(self, spec: SearchSpec, engine: EngineProfile) -> DecodeSpec | None:
        """The decode pool: the prefill pool's policy at the decode replicas' batch cap."""
        pool = self.decode
        if pool is None:
            return None
        sku = spec.sku_catalog.get(pool.sku)
        scheduler = engine_scheduler(
            engine, sku, pool.tp, kind=self.scheduler, batch_size=pool.batch_size, dp=pool.dp
        )
        fraction = spec.space.pool_space.decode.gpu_memory_utilization
        return DecodeSpec(sku, pool.tp, pool.replicas, scheduler, KvLink(pool.link),
                          dp=pool.dp, ep=pool.ep, gpu_memory_utilization=fraction)  # fmt: skip


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
    out takes the engine's limits as a replica of `dp` attention DP ranks runs them
    (`simulator.engine_scheduler`; under vidur: batch 128, chunk 512, vLLM's 4096 tokens)."""
    own = engine_scheduler(engine, sku, tp, kind=kind, dp=dp)
    batches = list(sched.batch_size or [own.batch_size])
    if kind.chunked:
        default_chunk = DEFAULT_CHUNK_SIZE if engine.is_vidur else own.chunk_size
        chunks: list[int | None] = list(sched.chunk_size or [default_chunk])
        return batches, chunks, [None]
    return batches, [None], list(sched.max_tokens or [own.max_tokens])


def expand_space(spec: SearchSpec) -> list[ConfigPoint]:
    """Every combination of the spec's axes, in a stable order: the aggregated points, then
    the disaggregated ones."""
    space = spec.space
    points: list[ConfigPoint] = []
    if AGGREGATED in space.mode:
        for sku, tp, pp, ep, dp, replicas, precision, engine_key in itertools.product(
            spec.skus, space.tp, space.pp, space.ep, space.dp, space.replicas,
            space.precision, spec.engine_keys,
        ):  # fmt: skip
            points += _scheduler_points(
                spec, sku, tp, pp, replicas, precision, engine_key, ep, dp
            )
    pools = space.pools(spec.skus)
    if pools is not None:
        prefill, decode = pools
        link = space.pool_space.kv_link.value
        for sku, tp, pp, ep, dp, replicas, precision, engine_key in itertools.product(
            prefill.skus, prefill.tp, prefill.pp, prefill.ep, prefill.dp, prefill.replicas,
            space.precision, spec.engine_keys,
        ):  # fmt: skip
            for pool in _decode_points(spec, decode, load_engine(engine_key), link):
                points += _scheduler_points(
                    spec, sku, tp, pp, replicas, precision, engine_key, ep, dp, pool
                )
    return list(dict.fromkeys(points))  # drop duplicates (e.g. a SKU named twice)


def _scheduler_points(
    spec: SearchSpec, sku: str, tp: int, pp: int, replicas: int, precision: Precision,
    engine_key: str, ep: int, dp: int, decode: DecodePoint | None = None,
) -> list[ConfigPoint]:  # fmt: skip
    """The points of one deployment shape, one per scheduler setting of its engine."""
    sku_rec = spec.sku_catalog.get(sku)
    engine = load_engine(engine_key)
    points = []
    for kind, sched in engine_schedulers(spec, engine).items():
        batches, chunks, max_tokens = scheduler_values(kind, sched, engine, sku_rec, tp, dp)
        for batch, chunk, tokens in itertools.product(batches, chunks, max_tokens):
            point = ConfigPoint(
                sku_rec.id, tp, pp, replicas, precision.value, kind.value, batch, chunk, tokens,
                engine.key, ep, dp, decode,
            )  # fmt: skip
            points.append(point)
    return points


def _decode_points(
    spec: SearchSpec, axes: PoolAxes, engine: EngineProfile, link: str
) -> list[DecodePoint]:
    """Every decode pool of the axes; a batch cap left out is the engine's on that SKU/TP
    (`default_decode_batch`)."""
    pools = []
    for sku, tp, ep, dp, replicas in itertools.product(
        axes.skus, axes.tp, axes.ep, axes.dp, axes.replicas
    ):
        sku_rec = spec.sku_catalog.get(sku)
        for batch in axes.batch_size or (default_decode_batch(engine, sku_rec, tp, dp),):
            pools.append(DecodePoint(sku_rec.id, tp, replicas, batch, link, ep, dp))
    return pools


def default_decode_batch(engine: EngineProfile, sku, tp: int, dp: int) -> int:
    """A decode replica's batch cap where the space leaves it out: the engine's, as a
    replica of `dp` attention DP ranks runs it (`simulator.engine_scheduler`)."""
    return engine_scheduler(engine, sku, tp, dp=dp).batch_size


def fingerprint(spec_fingerprint: str, point: ConfigPoint, spec: SearchSpec) -> str:
    """sha256 of the configuration, the SKU records it runs on (the decode pool's too) and
    the spec's fingerprint."""
    decisive = {
        "spec": spec_fingerprint,
        "point": point.as_dict(),
        "sku": _sku_record(point.sku, point, spec),
    }
    if point.decode is not None:
        decisive["decode_sku"] = _sku_record(point.decode.sku, point, spec)
    return sha256_json(decisive)


def _sku_record(sku_id: str, point: ConfigPoint, spec: SearchSpec) -> dict:
    """A SKU's catalog record as fingerprints hold it: its FP4 peak only under FP4 weights,
    dense or expert (the only ones that read it: NVFP4 and MXFP4 experts run W4A8 where the
    GPU has FP4 tensor cores), so that other configurations keep their fingerprints."""
    sku = asdict(spec.sku_catalog.get(sku_id))
    experts = spec.model_architecture.expert_precision
    fp4_cores = (Precision.FP4, Precision.MXFP4)  # INT4 experts run weight-only anywhere
    if point.precision != Precision.FP4.value and experts not in fp4_cores:
        del sku["fp4_tflops"]
    return sku


def check(point: ConfigPoint, spec: SearchSpec) -> tuple[str | None, PreparedDeployment | None]:
    """Why `point` cannot run (budget, node shape, divisibility, memory, the pools' link),
    or its prepared form."""
    budget = spec.budget
    if point.num_gpus > budget.max_gpus:
        return (
            f"budget: {point.num_gpus} GPUs ({_gpu_split(point)}) > max_gpus {budget.max_gpus}",
            None,
        )
    per_replica = budget.max_gpus_per_replica
    decode = point.decode
    largest = max(point.gpus_per_replica, decode.gpus_per_replica if decode is not None else 0)
    if per_replica is not None and largest > per_replica:
        return (
            f"budget: {largest} GPUs per replica > max_gpus_per_replica {per_replica}",
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
    except MemoryFractionError as exc:  # the engine's own fraction at this token budget
        return f"memory: {exc}", None
    except DecodePoolError as exc:  # the decode pool's scheduler or link
        return f"pools: {exc}", None


def _gpu_split(point: ConfigPoint) -> str:
    own = f"{dp_tp_text(point.dp, point.tp)} x PP{point.pp} x {point.replicas} replicas"
    if point.decode is None:
        return own
    d = point.decode
    return f"prefill {own} + decode {dp_tp_text(d.dp, d.tp)} x {d.replicas} replicas"


def candidates(spec: SearchSpec) -> list[Candidate]:
    """The whole space with fingerprints and feasibility, before any simulation."""
    spec_fp = spec.fingerprint()
    out = []
    for point in expand_space(spec):
        reason, _ = check(point, spec)
        cost = point.cost_per_hour(spec.sku_catalog)
        out.append(Candidate(point, fingerprint(spec_fp, point, spec), cost, reason))
    return out
