"""From a deployment's names to a ready simulation: model, SKU, parallelism, memory, cost model."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from estimators import (
    DECODE_RESERVE_AT_HANDOFF,
    FIRST_TOKEN_PREFILL,
    DrafterMemory,
    EngineProfile,
    ExecutionTimeEstimator,
    Frontend,
    MemoryPlan,
    ModelArchitecture,
    Precision,
    SpeculativeConfig,
    SpeculativeEstimator,
    check_fits,
    drafter_memory,
    load_model,
    make_estimator,
    resolve_kv_precision,
    validate_parallelism,
)
from simulator._config import (
    DEFAULT_CHUNK_SIZE,
    ClusterConfig,
    GlobalSchedulerKind,
    RunOptions,
    SchedulerConfig,
    SchedulerKind,
)
from simulator._engine import DecodePool, Hardware, Simulation
from simulator._result import SimulationResult
from sku_catalog import GpuSku, LinkKind
from workloads import Workload

# activation reserve of schedulers without a token limit (Orca, static): sized like
# vLLM's profiling run at this many tokens
UNBOUNDED_BATCH_TOKENS = 8192


class DecodePoolError(ValueError):
    """A decode pool that cannot run as given (its scheduler, or the link it asks for)."""


class KvLink(StrEnum):
    """The link a prompt's KV cache crosses from the prefill pool to the decode pool."""

    AUTO = "auto"  # NVLink where both pools are one SKU and fit one NVLink node, else network
    NVLINK = "nvlink"  # inside one node: both pools the same SKU, NVLink/NVSwitch, one node
    NETWORK = "network"  # between nodes: the slower of the two nodes' network per GPU


# the routers a decode pool takes (`DecodeSpec.router`), as the CLI and spec spell them:
# cache-aware routing chooses by the prompt's cached prefix, which only a prefill pool keeps
DECODE_ROUTERS = tuple(
    k.value
    for k in (
        GlobalSchedulerKind.LEAST_OUTSTANDING,
        GlobalSchedulerKind.ROUND_ROBIN,
        GlobalSchedulerKind.RANDOM,
    )
)


@dataclass(frozen=True, slots=True)
class DecodeSpec:
    """The decode pool of a disaggregated deployment: `num_replicas` replicas of `dp` x `tp`
    GPUs of `sku` running `scheduler`, its KV cache arriving over `link`; the deployment's own
    fields are then its prefill pool.  `dp` and `ep` are the decode replicas' attention data
    parallelism and expert parallelism (a mixture of experts; as `Deployment.dp` / `.ep`).
    `router` picks the decode replica of each request: `lor` the one with the fewest
    outstanding requests, `round_robin` each in turn whatever its load (NVIDIA Dynamo's
    frontend, `--router-mode` round-robin by default), `random` one at random.
    `gpu_memory_utilization` is the decode pool's own memory fraction, as its servers are
    launched with one of their own (None: the deployment's)."""

    sku: GpuSku
    tp: int = 1
    num_replicas: int = 1
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    link: KvLink = KvLink.AUTO
    dp: int = 1
    ep: int = 1
    router: GlobalSchedulerKind = GlobalSchedulerKind.LEAST_OUTSTANDING
    gpu_memory_utilization: float | None = None

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.dp

    @property
    def num_gpus(self) -> int:
        return self.gpus_per_replica * self.num_replicas


@dataclass(frozen=True, slots=True)
class Deployment:
    """One serving configuration: what a search evaluates and `llmcap simulate` runs."""

    model: ModelArchitecture
    sku: GpuSku
    tp: int = 1
    pp: int = 1
    num_replicas: int = 1
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    precision: Precision = Precision.BF16
    kv_precision: Precision | None = None
    block_size: int = 16
    gpu_memory_utilization: float | None = None  # None: the engine's (0.9 without one)
    global_scheduler: GlobalSchedulerKind = GlobalSchedulerKind.ROUND_ROBIN
    estimator: str = "roofline"
    op_tables: str | None = None  # a directory of llmcap op tables for the profiled backend
    # the engine release whose measured operator tables the profiled backend (and `auto`)
    # reads, the nearest measured one; None: the engine profile's own version
    engine_version: str | None = None
    # the serving engine's profile (overhead, all-reduce, memory plan, KV precision);
    # None: Vidur's 2024 vLLM, llmcap's behaviour before engine profiles
    engine: EngineProfile | None = None
    # prefix caching of workloads that carry prefix hashes (simulator/_prefix_cache.py): on,
    # as the engines run by default; the cache size in tokens (None: the KV cache's; inf:
    # unbounded)
    prefix_cache: bool = True
    prefix_cache_tokens: float | None = None
    # speculative decoding (estimators/_speculative.py): None is off
    speculative: SpeculativeConfig | None = None
    # disaggregated serving: the decode pool (the fields above are then the prefill pool's)
    decode: DecodeSpec | None = None
    # expert parallelism of a mixture-of-experts model: experts sharded over `ep` of the
    # replica's `dp` x `tp` GPUs (estimators/_moe.py); 1 for dense models
    ep: int = 1
    # attention data parallelism of a mixture-of-experts model: `dp` attention groups of `tp`
    # GPUs per replica, each with its own requests and KV cache, sharing the experts; the
    # iteration lasts as long as the busiest rank (estimators/_attention_dp.py). The
    # scheduler's batch cap and token budget are the replica's, split evenly over the ranks
    # (`engine_scheduler` gives each rank the engine's own limits)
    dp: int = 1

    @property
    def engine_key(self) -> str:
        return self.engine.key if self.engine is not None else "vidur@2024"

    def resolved_kv_precision(self) -> Precision | None:
        """The KV precision: as given, else the engine's default for these weights."""
        if self.kv_precision is None and self.engine is not None:
            return self.engine.kv_precision(self.precision, self.model)
        return self.kv_precision

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment (both pools when disaggregated)."""
        decode = self.decode.num_gpus if self.decode is not None else 0
        return self.gpus_per_replica * self.num_replicas + decode

    @property
    def cost_per_hour(self) -> float:
        own = self.gpus_per_replica * self.num_replicas * self.sku.price_per_gpu_hour
        if self.decode is not None:
            own += self.decode.num_gpus * self.decode.sku.price_per_gpu_hour
        return own

    def sized_engine(self) -> EngineProfile | None:
        """The engine profile as this deployment's replicas run it (`sized_engine`)."""
        return sized_engine(self.engine, self.sku, self.tp, self.scheduler, self.dp)

    def max_batched_tokens(self) -> int:
        """Most tokens one iteration of one (DP rank's) forward pass can hold: sizes the
        activation reserve."""
        return rank_batched_tokens(self.scheduler, self.dp)


def rank_batched_tokens(scheduler: SchedulerConfig, dp: int) -> int:
    """Most tokens one iteration of one of `dp` attention DP ranks can hold: its share of
    the most one iteration holds (`SchedulerConfig.max_iteration_tokens`), else
    `UNBOUNDED_BATCH_TOKENS`."""
    tokens = _rank_share(scheduler.max_iteration_tokens(), dp)
    return tokens if tokens is not None else UNBOUNDED_BATCH_TOKENS


def rank_token_budget(scheduler: SchedulerConfig, dp: int) -> int | None:
    """Tokens one iteration of one of `dp` attention DP ranks may hold (the policy's token
    budget split evenly over them), or None where the policy sets no limit."""
    return _rank_share(scheduler.token_budget(), dp)


def _rank_share(tokens: int | None, dp: int) -> int | None:
    """One of `dp` attention DP ranks' even share of `tokens`, rounded up (None: no limit)."""
    return -(-tokens // dp) if tokens is not None else None


def sized_engine(
    engine: EngineProfile | None,
    sku: GpuSku,
    tp: int,
    scheduler: SchedulerConfig,
    dp: int = 1,
) -> EngineProfile | None:
    """`engine` as replicas of `dp` x `tp` GPUs of `sku` running `scheduler` use it
    (`EngineProfile.sized`): the CUDA graphs it captures there, with each attention DP
    rank's batch cap and token budget."""
    if engine is None:
        return None
    budget = rank_token_budget(scheduler, dp)
    return engine.sized(sku, tp, -(-scheduler.batch_size // dp), budget)


def engine_scheduler(
    engine: EngineProfile,
    sku: GpuSku,
    tp: int = 1,
    *,
    kind: SchedulerKind | str | None = None,
    batch_size: int | None = None,
    chunk_size: int | None = None,
    max_tokens: int | None = None,
    dp: int = 1,
) -> SchedulerConfig:
    """The engine's default batching policy and limits on `sku`, with explicit overrides.

    The engine's token budget (vLLM's max_num_batched_tokens, SGLang's chunked_prefill_size,
    TensorRT-LLM's max_num_tokens) becomes the policy's chunk size (Sarathi) or token limit
    (vLLM, Orca); its batch cap (max_num_seqs, max_running_requests, max_batch_size) the
    batch size, and its KV admission rule whether a request reserves its whole length up front.
    A `kind` other than the engine's keeps the engine's limits and admission rule.  Under vidur the
    defaults are llmcap's historical ones (Sarathi chunk 512, batch 128, vLLM 4096 tokens).
    Under attention data parallelism (`dp` > 1) the defaults are `dp` times the engine's,
    each DP rank running the engine's own limits, except a token budget the engine splits
    over its DP ranks (`EngineProfile.dp_splits_token_budget`), which stays the replica's;
    explicit values are the replica's.
    """
    limits = engine.limits(sku, tp)
    kind = SchedulerKind(kind or engine.scheduler)
    budget = limits.token_budget * (1 if engine.dp_splits_token_budget else dp)
    return SchedulerConfig(
        kind,
        batch_size=batch_size or limits.batch_cap * dp,
        chunk_size=chunk_size or (budget if kind.chunked else DEFAULT_CHUNK_SIZE),
        max_tokens=max_tokens
        or (
            budget
            if kind in (SchedulerKind.VLLM, SchedulerKind.ORCA) and not engine.is_vidur
            else None  # vidur: the policy's own default (vLLM 4096, Orca no limit)
        ),
        reserve_full_length=engine.reserves_kv_full_length,
        schedule_ahead=engine.overlap and not engine.is_vidur,
    )


@dataclass(slots=True)
class PreparedDeployment:
    """A deployment checked for parallelism and memory, with its cost model and the
    scheduler as its replicas run it (`replica_scheduler`)."""

    deployment: Deployment
    memory: MemoryPlan
    estimator: ExecutionTimeEstimator
    cluster: ClusterConfig
    hardware: Hardware
    scheduler: SchedulerConfig
    decode_pool: DecodePool | None = None  # disaggregated: the decode side, ready to run
    decode_memory: MemoryPlan | None = None

    def simulation(self, workload: Workload, options: RunOptions | None = None) -> Simulation:
        return Simulation(
            workload,
            self.estimator,
            self.scheduler,
            self.cluster,
            options,
            self.hardware,
            self.decode_pool,
        )

    def simulate(self, workload: Workload, options: RunOptions | None = None) -> SimulationResult:
        return SimulationResult(self.simulation(workload, options).run())


def replica_scheduler(
    scheduler: SchedulerConfig, speculative: SpeculativeConfig | None, dp: int = 1
) -> SchedulerConfig:
    """The scheduler as a replica of `dp` attention DP ranks runs it
    (`SchedulerConfig.attention_dp`): under speculative decoding each running decode
    counts its verify step's k + 1 tokens against the token budget
    (`SchedulerConfig.decode_tokens`)."""
    if dp != scheduler.attention_dp:
        scheduler = replace(scheduler, attention_dp=dp)
    if speculative is None:
        return scheduler
    return replace(scheduler, decode_tokens=speculative.verify_tokens)


def prepare(deployment: Deployment) -> PreparedDeployment:
    """Validate parallelism and memory, then build the cost model.

    Raises ParallelismError, DoesNotFitError or DecodePoolError (all ValueError) with a message
    naming the values and what is allowed.
    """
    d = deployment
    validate_parallelism(d.model, d.tp, d.pp, d.sku, ep=d.ep, dp=d.dp)
    memory = check_fits(
        d.model,
        d.sku,
        d.tp,
        d.pp,
        precision=d.precision,
        kv_precision=d.resolved_kv_precision(),
        block_size=d.block_size,
        gpu_memory_utilization=d.gpu_memory_utilization,
        max_num_batched_tokens=d.max_batched_tokens(),
        engine=d.engine,
        ep=d.ep,
        dp=d.dp,
        drafter=_drafter(d, d.tp),
    )
    estimator = make_estimator(
        d.estimator,
        d.model,
        d.sku,
        d.tp,
        d.pp,
        d.precision,
        kv_precision=d.resolved_kv_precision(),
        engine=d.sized_engine(),
        engine_version=d.engine_version,
        op_tables=d.op_tables,
        ep=d.ep,
        dp=d.dp,
    )
    if d.speculative is not None:
        estimator = _speculative(d, estimator)
    frontend = _frontend(d)
    cluster = ClusterConfig(
        num_replicas=d.num_replicas,
        pp=d.pp,
        num_kv_blocks=memory.num_kv_blocks * d.dp,  # each DP rank its own KV cache
        block_size=d.block_size,
        window_kv_blocks=memory.window_kv_blocks,
        global_scheduler=d.global_scheduler,
        prefix_cache=d.prefix_cache,
        prefix_cache_tokens=d.prefix_cache_tokens,
        tokenize_seconds_per_token=frontend.seconds_per_token,
        frontend_latency=frontend.request_seconds,
    )
    hardware = Hardware(
        gpus_per_replica=d.gpus_per_replica,
        peak_flops=d.sku.peak_flops(
            fp8=d.precision is Precision.FP8, fp4=d.precision is Precision.FP4
        ),
        memory_bandwidth=d.sku.memory_bandwidth_bytes,
    )
    scheduler = replica_scheduler(d.scheduler, d.speculative, d.dp)
    prepared = PreparedDeployment(d, memory, estimator, cluster, hardware, scheduler)
    if d.decode is not None:
        prepared.decode_pool, prepared.decode_memory = _decode_pool(d, memory)
    return prepared


# an HTTP frontend that takes no time
_NO_FRONTEND = Frontend(tokenize_us_per_token=0.0)


def _frontend(d: Deployment) -> Frontend:
    """The engine's HTTP frontend; one that takes no time where none is modelled (Vidur's
    profile: its simulator starts at the scheduler)."""
    frontend = d.engine.frontend if d.engine is not None else None
    return frontend if frontend is not None else _NO_FRONTEND


def _decode_pool(d: Deployment, prefill_memory: MemoryPlan) -> tuple[DecodePool, MemoryPlan]:
    """The decode pool ready to run, and its memory plan.  A prompt's KV cache moves at the
    per-GPU rate of the pool's link (`kv_link_gbps`), its busiest GPU link carrying
    `kv_transfer_bytes_per_token`, after the prefill or, where the engine streams it layer
    by layer (`EngineProfile.kv_transfer_layerwise`), overlapped with it; the engine's
    `disagg_first_token` says where the client sees the first token, its
    `disagg_decode_reserve` when a decode replica reserves a request's KV blocks."""
    pool = d.decode
    assert pool is not None
    if pool.scheduler.kind is SchedulerKind.STATIC:
        raise DecodePoolError("decode pool: scheduler 'static' cannot take requests mid-batch; "
                         "use sarathi, vllm, orca or sglang")  # fmt: skip
    validate_parallelism(d.model, pool.tp, 1, pool.sku, ep=pool.ep, dp=pool.dp)
    memory = check_fits(
        d.model, pool.sku, pool.tp, 1, precision=d.precision,
        kv_precision=d.resolved_kv_precision(), block_size=d.block_size,
        gpu_memory_utilization=pool.gpu_memory_utilization or d.gpu_memory_utilization,
        max_num_batched_tokens=rank_batched_tokens(pool.scheduler, pool.dp),
        engine=d.engine, ep=pool.ep, dp=pool.dp, drafter=_drafter(d, pool.tp),
    )  # fmt: skip
    estimator = make_estimator(
        d.estimator, d.model, pool.sku, pool.tp, 1, d.precision,
        kv_precision=d.resolved_kv_precision(),
        engine=sized_engine(d.engine, pool.sku, pool.tp, pool.scheduler, pool.dp),
        engine_version=d.engine_version, op_tables=d.op_tables,
        ep=pool.ep, dp=pool.dp,
    )  # fmt: skip
    if d.speculative is not None:
        decode_side = replace(d, sku=pool.sku, tp=pool.tp, pp=1, ep=pool.ep, dp=pool.dp)
        estimator = _speculative(decode_side, estimator)
    link = kv_link_gbps(d.sku, d.gpus_per_replica * d.num_replicas, pool)
    # the decode request goes through the decode server's HTTP frontend, prompt text and all
    through_frontend = d.engine is not None and d.engine.disagg_decode_tokenizes
    frontend = _frontend(d) if through_frontend else _NO_FRONTEND
    cluster = ClusterConfig(
        num_replicas=pool.num_replicas, num_kv_blocks=memory.num_kv_blocks * pool.dp,
        block_size=d.block_size, window_kv_blocks=memory.window_kv_blocks, prefix_cache=False,
        tokenize_seconds_per_token=frontend.seconds_per_token,
        frontend_latency=frontend.request_seconds,
    )  # fmt: skip
    hardware = Hardware(
        gpus_per_replica=pool.gpus_per_replica,
        peak_flops=pool.sku.peak_flops(
            fp8=d.precision is Precision.FP8, fp4=d.precision is Precision.FP4
        ),
        memory_bandwidth=pool.sku.memory_bandwidth_bytes,
    )
    busiest = kv_transfer_bytes_per_token(memory.kv_bytes_per_token, d.tp * d.pp, pool.tp)
    seconds_per_token = busiest / (link * 1e9)
    layerwise = d.engine is not None and d.engine.kv_transfer_layerwise
    layers = d.model.num_layers // d.pp if layerwise else 0  # a prefill stage's layers
    first_token = d.engine.disagg_first_token if d.engine is not None else FIRST_TOKEN_PREFILL
    reserve = DECODE_RESERVE_AT_HANDOFF if d.engine is None else d.engine.disagg_decode_reserve
    scheduler = replica_scheduler(pool.scheduler, d.speculative, pool.dp)
    decode = DecodePool(
        estimator, scheduler, cluster, hardware, seconds_per_token, layers, first_token, reserve,
        pool.router,
    )  # fmt: skip
    return decode, memory


def kv_transfer_bytes_per_token(
    decode_gpu_bytes: float, prefill_gpus: int, decode_tp: int
) -> float:
    """Bytes of one prompt token's KV cache that the busiest GPU link of the hand-off carries.

    Each of the request's `decode_tp` decode GPUs (its attention group) receives its own KV,
    `decode_gpu_bytes` per token: the rank's heads, or of MLA the whole latent, which every
    rank holds.  They get it from the request's `prefill_gpus` prefill GPUs (its attention
    group's TP x PP, each stage holding its layers): with more decode ranks than prefill
    GPUs each prefill GPU feeds decode_tp / prefill_gpus of them (SGLang's
    disaggregation/common/conn.py: required_dst_info_num = decode attn_tp / prefill attn_tp,
    each decode rank reading from one target prefill rank), so a prefill GPU sends that many
    decode ranks' KV: of MLA that many copies of the latent.  With fewer, each decode GPU
    takes its share from several prefill GPUs and its own link is the busiest."""
    return decode_gpu_bytes * max(1.0, decode_tp / prefill_gpus)


def nvlink_missing(prefill: GpuSku, prefill_gpus: int, decode: DecodeSpec) -> str | None:
    """Why the two pools cannot move KV over NVLink inside one node (None: they can)."""
    node = prefill.default_node
    if node.intra_node_link is LinkKind.PCIE:
        return f"a {prefill.id} node has no NVLink (its GPUs talk over PCIe)"
    if decode.sku.id != prefill.id:
        return f"{prefill.id} and {decode.sku.id} GPUs do not share a node"
    gpus = prefill_gpus + decode.num_gpus
    room = node.gpus_per_node if node.intra_node_link is LinkKind.NVSWITCH else 2
    if gpus > room:
        return (f"the two pools' {gpus} GPUs do not fit the {room} GPUs of a {prefill.id} "
                "node that NVLink joins")  # fmt: skip
    return None


def kv_link_gbps(prefill: GpuSku, prefill_gpus: int, decode: DecodeSpec) -> float:
    """GB/s per GPU of the link the decode pool's KV arrives over (`DecodeSpec.link`).

    auto: the node's own link when both pools are one SKU and fit one node, else the
    network; nvlink raises DecodePoolError where `nvlink_missing` says why it cannot be."""
    node, decode_node = prefill.default_node, decode.sku.default_node
    network = min(node.inter_node_bandwidth_gbps, decode_node.inter_node_bandwidth_gbps)
    if decode.link is KvLink.NETWORK:
        return network
    if decode.link is KvLink.NVLINK:
        reason = nvlink_missing(prefill, prefill_gpus, decode)
        if reason is not None:
            raise DecodePoolError(f"decode pool: link nvlink: {reason}; use link network or auto")
        return node.intra_node_bandwidth_gbps
    one_node = decode.sku.id == prefill.id and prefill_gpus + decode.num_gpus <= node.gpus_per_node
    return node.intra_node_bandwidth_gbps if one_node else network


def _drafter(d: Deployment, tp: int) -> DrafterMemory | None:
    """The speculative drafter's memory on each GPU of a replica at `tp` (None: off)."""
    spec = d.speculative
    if spec is None:
        return None
    draft = load_model(spec.draft_model) if spec.draft_model is not None else None
    kv_precision = resolve_kv_precision(d.precision, d.resolved_kv_precision())
    return drafter_memory(spec, d.model, draft, tp, d.precision, kv_precision)


def _speculative(d: Deployment, target: ExecutionTimeEstimator) -> SpeculativeEstimator:
    """The target's estimator priced per verify step under speculative decoding; a draft
    model runs on the same GPUs at the same TP, one pipeline stage (its weights and KV
    are in the memory plan: `_drafter`)."""
    spec = d.speculative
    assert spec is not None
    draft = None
    if spec.draft_model is not None:
        draft = make_estimator(
            d.estimator, load_model(spec.draft_model), d.sku, d.tp, 1, d.precision,
            kv_precision=d.resolved_kv_precision(), engine=d.sized_engine(),
            op_tables=d.op_tables,
        )  # fmt: skip
    return SpeculativeEstimator(target, spec, draft)
