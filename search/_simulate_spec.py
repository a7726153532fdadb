"""The `llmcap simulate` input: CLI options and/or a YAML file, validated at the edge."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from estimators import (
    DEFAULT_ENGINE,
    EngineProfile,
    Precision,
    load_engine,
    load_model,
    with_expert_precision,
)
from search._errors import SpecError
from search._limits import NumRequests, Replicas
from search._op_tables_input import check_op_tables
from search._speculative_input import SpeculativeSpec
from simulator import (
    DECODE_ROUTERS,
    DecodeSpec,
    Deployment,
    GlobalSchedulerKind,
    KvLink,
    SchedulerConfig,
    SchedulerKind,
    engine_scheduler,
)
from sku_catalog import YamlInputError, load_catalog, read_yaml_file
from sku_catalog._yaml import shorten
from workloads import WorkloadSpec


class DecodePoolSpec(BaseModel):
    """The decode pool of disaggregated serving (the simulate spec's own sku, tp and replicas
    are then the prefill pool)."""

    model_config = ConfigDict(extra="forbid")

    sku: str | None = None  # None: the prefill pool's
    tp: PositiveInt = 1
    replicas: Replicas = 1
    batch_size: PositiveInt | None = None  # None: the engine's cap
    link: KvLink = KvLink.AUTO  # the link KV crosses from the prefill pool (simulator.KvLink)
    dp: PositiveInt = 1  # attention data parallelism of a decode replica (mixture of experts)
    ep: PositiveInt = 1  # expert parallelism of a decode replica (divides dp x tp)
    # which decode replica takes each request (simulator.DecodeSpec.router)
    router: Literal[DECODE_ROUTERS] = "lor"
    # the decode pool's own memory fraction (None: the spec's gpu_memory_utilization)
    gpu_memory_utilization: float | None = Field(None, gt=0.0, le=1.0)


class SimulateSpec(BaseModel):
    """One simulation: a deployment, a workload and what to write."""

    model_config = ConfigDict(extra="forbid")

    model: str = "meta-llama/Llama-2-7b-hf"
    sku: str = "a100-80gb"
    catalog: list[str] = Field(default_factory=list)
    tp: PositiveInt = 1
    pp: PositiveInt = 1
    ep: PositiveInt = 1  # expert parallelism of a mixture-of-experts model (divides dp x tp)
    dp: PositiveInt = 1  # attention data parallelism of a mixture-of-experts model
    replicas: Replicas = 1
    # the serving engine (NAME[@VERSION]); its profile sets the defaults of the scheduler,
    # its limits, the memory fraction and the KV precision, which explicit options override
    engine: str = DEFAULT_ENGINE
    scheduler: SchedulerKind | None = None
    batch_size: PositiveInt | None = None
    chunk_size: PositiveInt | None = None
    max_tokens: PositiveInt | None = None
    # batch waiting (TensorRT-LLM batch_wait_timeout_iters / batch_wait_max_tokens_ratio)
    batch_wait_iters: NonNegativeInt = 0
    batch_wait_token_ratio: float = Field(0.0, ge=0.0, le=1.0)
    # TensorRT-LLM's attention-DP balance (attention_dp_config: enable_balance,
    # timeout_iters, batching_wait_iters; both 0: off); needs dp > 1
    adp_balance_timeout_iters: NonNegativeInt = 0
    adp_balance_batching_wait_iters: NonNegativeInt = 0
    # decode iterations between the scheduler's polls for new requests (SGLang
    # scheduler_recv_interval; 1: every iteration)
    recv_interval: PositiveInt = 1
    global_scheduler: GlobalSchedulerKind = GlobalSchedulerKind.ROUND_ROBIN
    # weight precision (None: the checkpoint's own, `ModelArchitecture.default_precision`)
    precision: Precision | None = None
    # the routed experts' weight precision (None: the checkpoint's own, else `precision`)
    expert_precision: Precision | None = None
    kv_precision: Precision | None = None
    block_size: PositiveInt = 16
    gpu_memory_utilization: float | None = Field(None, gt=0.0, le=1.0)
    # prefix caching of workloads that carry prefix hashes; its size in tokens per replica
    # (None: the KV cache's; "unbounded")
    prefix_cache: bool = True
    prefix_cache_tokens: PositiveInt | Literal["unbounded"] | None = None
    speculative: SpeculativeSpec | None = None  # speculative decoding; None: off
    decode: DecodePoolSpec | None = None  # disaggregated prefill / decode; None: aggregated
    estimator: Literal["roofline", "profiled", "auto"] = "roofline"
    # a directory of llmcap op tables (`llmcap profile`) for the profiled/auto estimator
    op_tables: Path | None = None
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    qps: PositiveFloat | None = None
    concurrency: PositiveInt | None = None
    num_requests: NumRequests = 1000
    seed: int = 0
    json_output: bool = Field(False, alias="json")
    requests_out: Path | None = None
    trace_out: Path | None = None

    @model_validator(mode="before")
    @classmethod
    def _workload_shorthand(cls, data: object) -> object:
        # `workload: chat` is short for `workload: {source: chat}`
        if isinstance(data, dict) and isinstance(data.get("workload"), str):
            data = {**data, "workload": {"source": data["workload"]}}
        return data

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        load_engine(value)  # raises naming the engines and versions available
        return value

    @property
    def engine_profile(self) -> EngineProfile:
        return load_engine(self.engine)

    @property
    def engine_version(self) -> str | None:
        """The release `engine` names (NAME@VERSION), whose measured operator tables the
        profiled and auto estimators read (the nearest measured); None: the profile's."""
        return self.engine.partition("@")[2] or None

    @model_validator(mode="after")
    def _one_rate(self) -> SimulateSpec:
        if self.qps is not None and self.concurrency is not None:
            raise ValueError("give either qps (open loop) or concurrency (closed loop), not both")
        return self

    @model_validator(mode="after")
    def _decode_pool_takes_requests_mid_batch(self) -> SimulateSpec:
        if self.decode is not None and self.scheduler is SchedulerKind.STATIC:
            raise ValueError(
                "decode pool: scheduler 'static' cannot take requests mid-batch; use "
                "sarathi, vllm, orca or sglang"
            )
        return self

    @model_validator(mode="after")
    def _adp_balance_under_attention_dp(self) -> SimulateSpec:
        balance = self.adp_balance_timeout_iters or self.adp_balance_batching_wait_iters
        if balance and self.dp == 1:
            raise ValueError(
                "adp_balance_timeout_iters / adp_balance_batching_wait_iters balance the "
                "ranks of attention data parallelism: they need dp > 1, got dp 1"
            )
        return self

    @model_validator(mode="after")
    def _tables_for_a_table_estimator(self) -> SimulateSpec:
        check_op_tables(self.estimator, self.op_tables, [])  # the SKU is checked on use
        return self

    def deployment(self) -> Deployment:
        catalog = load_catalog(self.catalog)
        sku = catalog.get(self.sku)
        model = with_expert_precision(load_model(self.model), self.expert_precision)
        return Deployment(
            model=model,
            sku=sku,
            tp=self.tp,
            pp=self.pp,
            num_replicas=self.replicas,
            scheduler=self.scheduler_config(sku),
            precision=self.precision or model.default_precision,
            kv_precision=self.kv_precision,
            block_size=self.block_size,
            gpu_memory_utilization=self.gpu_memory_utilization,
            global_scheduler=self.global_scheduler,
            estimator=self.estimator,
            op_tables=str(self.op_tables) if self.op_tables is not None else None,
            engine=self.engine_profile,
            engine_version=self.engine_version,
            prefix_cache=self.prefix_cache,
            prefix_cache_tokens=(
                math.inf if self.prefix_cache_tokens == "unbounded" else self.prefix_cache_tokens
            ),
            speculative=self.speculative.config() if self.speculative is not None else None,
            decode=self._decode_spec(catalog),
            ep=self.ep,
            dp=self.dp,
        )

    def _decode_spec(self, catalog) -> DecodeSpec | None:
        if self.decode is None:
            return None
        sku = catalog.get(self.decode.sku or self.sku)
        scheduler = engine_scheduler(
            self.engine_profile, sku, self.decode.tp, kind=self.scheduler,
            batch_size=self.decode.batch_size, dp=self.decode.dp,
        )  # fmt: skip
        pool = self.decode
        return DecodeSpec(sku, pool.tp, pool.replicas, scheduler, pool.link, pool.dp, pool.ep,
                          GlobalSchedulerKind(pool.router),
                          gpu_memory_utilization=pool.gpu_memory_utilization)  # fmt: skip

    def scheduler_config(self, sku) -> SchedulerConfig:
        """The engine's policy and limits on `sku`, with the options given here on top."""
        scheduler = engine_scheduler(
            self.engine_profile,
            sku,
            self.tp,
            kind=self.scheduler,
            batch_size=self.batch_size,
            chunk_size=self.chunk_size,
            max_tokens=self.max_tokens,
            dp=self.dp,
        )
        return replace(
            scheduler,
            batch_wait_iters=self.batch_wait_iters,
            batch_wait_token_ratio=self.batch_wait_token_ratio,
            adp_balance_timeout_iters=self.adp_balance_timeout_iters,
            adp_balance_batching_wait_iters=self.adp_balance_batching_wait_iters,
            recv_interval=self.recv_interval,
        )


def read_config_file(path: Path) -> dict:
    """A YAML mapping of SimulateSpec fields (dashes or underscores)."""
    try:
        data = read_yaml_file(path, "config file")
    except YamlInputError as exc:
        raise SpecError(str(exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise SpecError(f"config file {shorten(path)} must hold a mapping of options, not a {kind}")
    return {str(key).replace("-", "_"): value for key, value in data.items()}
