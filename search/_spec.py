"""The search spec: what a search job explores, validated at the edge (YAML -> pydantic).

A spec names the model, the workload, the GPU SKUs and budget, the space of
parallelism / scheduler / precision choices, the SLOs, the objective and the
strategy.  `SearchSpec.fingerprint()` identifies everything that decides a
configuration's result, so a re-run of the same spec reuses finished results.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from estimators import (
    DEFAULT_ENGINE,
    EXPERT_ONLY_PRECISIONS,
    ModelArchitecture,
    ModelConfigError,
    Precision,
    UnknownModelError,
    cost_model_digest,
    load_engine,
    load_model,
    with_expert_precision,
)
from search._errors import SpecError
from search._limits import DEFAULT_MAX_CONFIGURATIONS, NumRequests, Replicas
from search._op_tables_input import check_op_tables, op_tables_digest
from search._pool_space import (
    AGGREGATED,
    DISAGGREGATED,
    DisaggregatedSpace,
    Mode,
    PoolAxes,
    dp_tp_text,
    pool_axes,
)
from search._speculative_input import SpeculativeSpec
from simulator import KvLink, SchedulerKind
from sku_catalog import Catalog, LinkKind, YamlInputError, load_catalog, read_yaml_file
from sku_catalog._yaml import shorten
from workloads import Workload, WorkloadSpec, build_workload

LatencyMetric = Literal["scheduling_delay", "ttft", "tbt", "tpot", "e2e", "normalized_latency"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SearchWorkload(WorkloadSpec):
    """The workload section: a WorkloadSpec plus how many requests each probe simulates."""

    num_requests: NumRequests = Field(
        2000, description="Requests each capacity probe simulates (lengthened when a probe "
        "cannot load the deployment: capacity.max_requests)."
    )
    seed: int = Field(0, description="Seed of the workload's random draws.")


class SchedulerSpace(_Strict):
    """Values to try for one scheduler; each list is one axis of the grid."""

    batch_size: list[PositiveInt] | None = Field(
        default=None, min_length=1,
        description="Batch caps to try; null: the engine's (vLLM max_num_seqs, SGLang "
        "max_running_requests, TensorRT-LLM max_batch_size; 128 under vidur).",
    )  # fmt: skip
    chunk_size: list[PositiveInt] | None = Field(
        default=None, min_length=1,
        description="Token budgets per iteration to try (sarathi, sglang only); null: the "
        "engine's token budget.",
    )  # fmt: skip
    max_tokens: list[PositiveInt] | None = Field(
        default=None, min_length=1,
        description="Token limits per iteration to try (vllm, orca only); null: the engine's.",
    )  # fmt: skip


class SpaceSpec(_Strict):
    tp: list[PositiveInt] = Field(
        default_factory=lambda: [1], min_length=1, description="Tensor-parallel degrees."
    )
    pp: list[PositiveInt] = Field(
        default_factory=lambda: [1], min_length=1, description="Pipeline-parallel degrees."
    )
    ep: list[PositiveInt] = Field(
        default_factory=lambda: [1], min_length=1,
        description="Expert-parallel degrees of a mixture-of-experts model (EP divides the "
        "experts and DP x TP: each of the DP x TP GPUs holds experts/EP experts); 1 for dense "
        "models.",
    )  # fmt: skip
    dp: list[PositiveInt] = Field(
        default_factory=lambda: [1], min_length=1,
        description="Attention data-parallel degrees of a mixture-of-experts model: DP "
        "attention groups of TP GPUs per replica, each with its own requests and KV cache, "
        "sharing the experts (DP x TP x PP GPUs a replica); 1 for dense models.",
    )  # fmt: skip
    replicas: list[Replicas] = Field(
        default_factory=lambda: [1], min_length=1,
        description="Replicas per deployment unit (each TP x PP GPUs).",
    )  # fmt: skip
    precision: list[Precision] = Field(
        default_factory=lambda: [Precision.BF16], min_length=1,
        description="Weight precisions to try (bf16, fp16, fp8; fp4: NVFP4 on GPUs with FP4 "
        "tensor cores; mxfp4 and int4 are expert precisions only: `expert_precision`) [the "
        "checkpoint's own, as the engines load it: fp8 where the model's config.json quantises "
        "its weights (DeepSeek-V3, MiniMax-M2.5), else bf16].",
    )  # fmt: skip
    engines: list[str] | None = Field(
        default=None, min_length=1,
        description="Serving engines to compare (NAME[@VERSION]: vllm, sglang, trtllm, "
        "vidur); null: the spec's `engine` alone.",
    )  # fmt: skip
    schedulers: dict[SchedulerKind, SchedulerSpace] | None = Field(
        default=None, min_length=1,
        description="Batching policies to try, each with its axes, e.g. {sarathi: "
        "{batch_size: [64, 128], chunk_size: [512]}, vllm: {}}; null: each engine's own "
        "policy and limits.",
    )  # fmt: skip
    mode: list[Mode] = Field(
        default_factory=lambda: [AGGREGATED], min_length=1,
        description="Deployment layouts to try: aggregated (every replica prefills and "
        "decodes), disaggregated (a prefill pool hands KV to a decode pool).",
    )  # fmt: skip
    disaggregated: DisaggregatedSpace | None = Field(
        None,
        description="The prefill and decode pools' axes when mode has disaggregated: "
        "{prefill: {skus, tp, pp, ep, dp, replicas}, decode: {skus, tp, ep, dp, replicas, "
        "batch_size, gpu_memory_utilization}, kv_link}; an axis left out is the aggregated "
        "one.",
    )

    @field_validator("mode")
    @classmethod
    def _distinct_modes(cls, values: list[str]) -> list[str]:
        return list(dict.fromkeys(values))

    @model_validator(mode="after")
    def _disaggregated_needs_its_mode(self) -> SpaceSpec:
        if self.disaggregated is not None and DISAGGREGATED not in self.mode:
            raise ValueError(
                f"disaggregated is given but mode {self.mode} has no 'disaggregated'; "
                "allowed with it: mode [aggregated, disaggregated] or [disaggregated]"
            )
        return self

    @property
    def pool_space(self) -> DisaggregatedSpace:
        """The disaggregated pools' space as given, its defaults where the spec gives none."""
        return self.disaggregated or DisaggregatedSpace()

    def pools(self, skus: list[str]) -> tuple[PoolAxes, PoolAxes] | None:
        """(prefill, decode) axes when the space has disaggregated deployments, else None."""
        if DISAGGREGATED not in self.mode:
            return None
        return pool_axes(
            self.pool_space, skus, self.tp, self.pp, self.replicas, self.ep, self.dp
        )

    @field_validator("precision")
    @classmethod
    def _dense_precisions(cls, values: list[Precision]) -> list[Precision]:
        for p, whose in EXPERT_ONLY_PRECISIONS.items():
            if p in values:
                raise ValueError(
                    f"{p.value} is an expert-weight format ({whose} experts): set the spec's "
                    f"expert_precision: {p.value} and try bf16, fp16, fp8 or fp4 here"
                )
        return values

    @field_validator("engines")
    @classmethod
    def _known_engines(cls, values: list[str] | None) -> list[str] | None:
        if values is None:
            return None
        return list(dict.fromkeys(load_engine(v).key for v in values))

    def size(self, num_skus: int) -> tuple[int, str]:
        """How many configurations the space holds with `num_skus` SKUs (counted, not
        expanded), and the product that gives it, for messages."""
        schedulers = (
            sum(_scheduler_points(kind, s) for kind, s in self.schedulers.items())
            if self.schedulers
            else 1
        )
        common = {
            "precision": len(self.precision), "engines": len(self.engines or [None]),
            "scheduler settings": schedulers,
        }  # fmt: skip
        parts: list[tuple[int, str]] = []
        if AGGREGATED in self.mode:
            parts.append(_product({
                "skus": num_skus, "tp": len(self.tp), "pp": len(self.pp), "ep": len(self.ep),
                "dp": len(self.dp), "replicas": len(self.replicas), **common,
            }))  # fmt: skip
        pools = self.pools([""] * num_skus)  # counted: the SKUs' names do not matter
        if pools is not None:
            prefill, decode = pools
            parts.append(_product({
                "prefill pools": prefill.size, "decode pools": decode.size, **common,
            }))  # fmt: skip
        count = sum(n for n, _ in parts)
        return count, " + ".join(f"({text})" if len(parts) > 1 else text for _, text in parts)

    @model_validator(mode="after")
    def _chunk_size_is_sarathi_only(self) -> SpaceSpec:
        for kind, space in (self.schedulers or {}).items():
            if space.chunk_size is not None and not kind.chunked:
                raise ValueError(
                    f"schedulers.{kind.value}.chunk_size: only sarathi and sglang take a chunk "
                    "size (vllm and orca take max_tokens)"
                )
        return self


def _pool_gpus(axes: PoolAxes, pp: bool) -> str:
    """A pool's smallest GPU count as its factors, e.g. ``DP2 x TP4 x PP1 x 1``."""
    stages = f" x PP{min(axes.pp)}" if pp else ""
    return f"{dp_tp_text(min(axes.dp), min(axes.tp))}{stages} x {min(axes.replicas)}"


def _product(axes: dict[str, int]) -> tuple[int, str]:
    count = 1
    for length in axes.values():
        count *= length
    return count, " x ".join(f"{n:,} {name}" for name, n in axes.items())


def _scheduler_points(kind: SchedulerKind, space: SchedulerSpace) -> int:
    """Points of one scheduler's grid: batch sizes x chunk sizes (Sarathi) or token limits."""
    other = space.chunk_size if kind.chunked else space.max_tokens
    return len(space.batch_size or [None]) * len(other or [None])


class BudgetSpec(_Strict):
    max_gpus: PositiveInt = Field(
        8, description="GPUs of one deployment unit, all its replicas together."
    )
    max_gpus_per_replica: PositiveInt | None = Field(
        None, description="Most GPUs (TP x PP) of one replica; null: max_gpus."
    )


class SLOSpec(_Strict):
    """One latency bound: `metric` at `percentile` stays under `max_s` seconds."""

    metric: LatencyMetric = Field(
        description="scheduling_delay, ttft, tbt, tpot, e2e or normalized_latency."
    )
    percentile: Literal[50, 90, 95, 99] = Field(description="50, 90, 95 or 99.")
    max_s: PositiveFloat = Field(description="The bound, in seconds.")

    @property
    def column(self) -> str:
        return f"{self.metric}_p{self.percentile}"

    def describe(self) -> str:
        return f"{self.column} < {self.max_s:g} s"


class SLOs(_Strict):
    """The capacity criterion, and filters checked at the capacity found.

    With `capacity_meets_filters`, the capacity is instead the largest rate that meets
    the criterion and every filter: the rate a deployment can serve within all SLOs.
    `max_rejected_share` is the most of the workload a deployment may refuse (requests
    longer than its KV memory or its scheduler's token limit): a configuration that
    refuses more fails, with capacity 0, rather than being ranked on an easier load.
    """

    capacity: SLOSpec = Field(
        SLOSpec(metric="scheduling_delay", percentile=99, max_s=5.0),
        description="The capacity criterion: the largest arrival rate keeping it is the "
        "capacity (Vidur-Search: P99 scheduling delay under 5 s).",
    )
    filters: list[SLOSpec] = Field(
        default_factory=list,
        description="Latency SLOs a recommended configuration must meet, e.g. "
        "[{metric: ttft, percentile: 90, max_s: 2}].",
    )
    capacity_meets_filters: bool = Field(
        False,
        description="true: the capacity is the largest rate meeting the criterion and every "
        "filter; false: filters are checked at the criterion's capacity.",
    )
    max_rejected_share: float = Field(
        0.0, ge=0.0, le=1.0,
        description="The most of the workload a deployment may refuse (requests too long "
        "for its KV memory or token limit) and still qualify.",
    )  # fmt: skip


class StrategySpec(_Strict):
    kind: Literal["grid", "tpe", "nsga2"] = Field(
        "grid", description="grid: every feasible configuration; tpe or nsga2: Optuna samplers."
    )
    trials: PositiveInt | None = Field(
        None, description="Configurations tpe / nsga2 may evaluate (required for them)."
    )
    seed: int = Field(0, description="Seed of the sampler.")
    prune: bool = Field(
        False,
        description="true: only the best configuration is wanted: one that cannot beat the "
        "best found so far (it misses its SLOs where it would tie it) is not searched further; "
        "the job summary lists how many were pruned, and its frontiers cover the rest only.",
    )

    @model_validator(mode="after")
    def _trials_for_samplers(self) -> StrategySpec:
        if self.kind != "grid" and self.trials is None:
            raise ValueError(f"strategy {self.kind!r} needs a trial budget: set strategy.trials")
        return self


MAX_REQUESTS_FACTOR = 8  # default capacity.max_requests: this many times workload.num_requests
MAX_REQUESTS_CAP = 200_000  # most requests a capacity search may lengthen its workload to


class CapacitySpec(_Strict):
    """How finely each configuration's capacity is searched.

    Every configuration is searched to `tolerance`; then those whose bracket could still
    change which configuration is recommended (`search._pareto.refinement_contenders`)
    are refined to `refine_tolerance`, so the recommendation is the one a search of
    every configuration at `refine_tolerance` makes.  null (or a value not below
    `tolerance`) turns refinement off.

    A search that passes at its analytic ceiling (the workload is too short to load the
    deployment) runs again on twice the requests of the same workload, up to
    `max_requests` (default `MAX_REQUESTS_FACTOR` x workload.num_requests, at most
    `MAX_REQUESTS_CAP`; a trace has no more requests than it holds).  What still passes
    there is flagged: its capacity kind is "ceiling", not "measured".  Setting
    `max_requests` to workload.num_requests turns lengthening off.
    """

    tolerance: float = Field(
        0.05, gt=0.0, lt=1.0,
        description="Relative width of each configuration's final capacity bracket.",
    )  # fmt: skip
    refine_tolerance: float | None = Field(
        0.01, gt=0.0, lt=1.0,
        description="Width the contenders for the recommendation are refined to; null: off.",
    )  # fmt: skip
    max_simulations: PositiveInt = Field(
        20, description="Most simulations one configuration's capacity search may run."
    )
    max_requests: PositiveInt | None = Field(
        None, le=MAX_REQUESTS_CAP,
        description="Most requests a probe is lengthened to when the workload cannot load a "
        "deployment; null: 8 x workload.num_requests.",
    )  # fmt: skip

    @property
    def refines(self) -> bool:
        return self.refine_tolerance is not None and self.refine_tolerance < self.tolerance


class SearchSpec(_Strict):
    """A whole search job."""

    name: str = Field("search", description="The job's name in `jobs list`.")
    model: str = Field(
        description="A built-in model (`llmcap catalog models`; -Instruct/-FP8 variants "
        "resolve to it) or the path to a HuggingFace config.json."
    )
    expert_precision: Precision | None = Field(
        None,
        description="Routed-expert weight precision of a mixture of experts, apart from the "
        "space's precisions (mxfp4: gpt-oss's 4-bit experts, weight-only on GPUs without FP4; "
        "int4: Kimi-K2.5's 4-bit integer experts, weight-only everywhere; fp4: NVFP4, "
        "Blackwell only) [the checkpoint's own: mxfp4 for gpt-oss, int4 for Kimi-K2.5, else "
        "the configuration's precision].",
    )
    catalog: list[str] = Field(
        default_factory=list,
        description="YAML files that add GPU SKUs or override their fields (e.g. prices).",
    )
    skus: list[str] = Field(
        min_length=1, description="GPU SKUs to deploy on (`llmcap catalog skus`)."
    )
    workload: SearchWorkload = Field(
        default_factory=SearchWorkload, description="The traffic (or just its source name)."
    )
    budget: BudgetSpec = Field(default_factory=BudgetSpec, description="GPU limits.")
    space: SpaceSpec = Field(default_factory=SpaceSpec, description="The axes to search.")
    slo: SLOs = Field(default_factory=SLOs, description="Capacity criterion and latency SLOs.")
    objective: Literal["qps_per_dollar"] = Field(
        "qps_per_dollar", description="What is maximised: capacity per dollar-hour."
    )
    strategy: StrategySpec = Field(
        default_factory=StrategySpec, description="How configurations are chosen."
    )
    capacity: CapacitySpec = Field(
        default_factory=CapacitySpec, description="How finely each capacity is searched."
    )
    estimator: Literal["roofline", "profiled", "auto"] = Field(
        "roofline",
        description="Cost model: roofline (every SKU), profiled (measured operator tables), "
        "auto (profiled where tables cover the deployment).",
    )
    op_tables: Path | None = Field(
        None,
        description="A directory of llmcap op tables (`llmcap profile`), or the name of "
        "shipped ones (`llmcap catalog op-tables`), that profiled and auto read instead of "
        "aiconfigurator-core's; readable where the workers run.",
    )
    engine: str = Field(
        DEFAULT_ENGINE,
        description="The serving engine (NAME[@VERSION]): its batching policy, limits, "
        "memory plan, KV precision and per-iteration overhead.",
    )
    block_size: PositiveInt = Field(16, description="KV-cache block size in tokens.")
    prefix_cache: bool = Field(
        True,
        description="Reuse the KV of cached prompt prefixes (as the engines do by default), "
        "for workloads that carry prefix hashes (a Mooncake trace's hash_ids).",
    )
    prefix_cache_tokens: PositiveInt | Literal["unbounded"] | None = Field(
        None,
        description="Prefix-cache size per replica in tokens, least recently used blocks "
        "evicted; null: the replica's KV-cache size; unbounded.",
    )
    speculative: SpeculativeSpec | None = Field(
        None,
        description="Speculative decoding of every configuration: {method: mtp|eagle|draft, "
        "num_speculative_tokens, acceptance_rate or acceptance_rates, tbt_gaps, draft_layers, "
        "draft_model}; null: off.",
    )
    gpu_memory_utilization: float | None = Field(
        None, gt=0.0, le=1.0,
        description="Share of GPU memory the engine takes; null: each engine's own fraction.",
    )  # fmt: skip
    max_configurations: PositiveInt = Field(
        DEFAULT_MAX_CONFIGURATIONS,
        description="The most configurations the space may hold (each is checked, stored "
        "and simulated).",
    )

    @model_validator(mode="before")
    @classmethod
    def _workload_shorthand(cls, data: object) -> object:
        if isinstance(data, dict) and isinstance(data.get("workload"), str):
            data = {**data, "workload": {"source": data["workload"]}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _checkpoint_precision(cls, data: object) -> object:
        """A space that names no precisions tries the checkpoint's own (FP8 for DeepSeek-V3's
        weights), as the engines load it; a model that does not load is reported by its own
        field's validator."""
        if not isinstance(data, dict) or not isinstance(data.get("model"), str):
            return data
        space = data.get("space", {})
        if not isinstance(space, dict) or space.get("precision") is not None:
            return data
        try:
            precision = load_model(data["model"]).default_precision
        except (UnknownModelError, ModelConfigError):
            return data
        return {**data, "space": {**space, "precision": [precision.value]}}

    @model_validator(mode="after")
    def _max_requests_covers_workload(self) -> SearchSpec:
        wanted = self.capacity.max_requests
        if wanted is not None and wanted < self.workload.num_requests:
            raise ValueError(
                f"capacity.max_requests ({wanted}) must be at least workload.num_requests "
                f"({self.workload.num_requests}): the workload is lengthened, never shortened"
            )
        return self

    @property
    def max_requests(self) -> int:
        """The most requests a capacity search lengthens its workload to (see CapacitySpec)."""
        if self.capacity.max_requests is not None:
            return self.capacity.max_requests
        base = self.workload.num_requests
        return max(base, min(MAX_REQUESTS_FACTOR * base, MAX_REQUESTS_CAP))

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return load_engine(value).key  # raises naming the engines and versions available

    @property
    def engine_keys(self) -> list[str]:
        """The engines of the space, as ``name@version`` profile keys."""
        return list(self.space.engines or [self.engine])

    @field_validator("model")
    @classmethod
    def _known_model(cls, name: str) -> str:
        load_model(name)  # raises with the list of built-in names
        return name

    @model_validator(mode="after")
    def _experts_of_a_mixture(self) -> SearchSpec:
        with_expert_precision(load_model(self.model), self.expert_precision)  # dense: refused
        return self

    @model_validator(mode="after")
    def _known_skus(self) -> SearchSpec:
        catalog = self.sku_catalog
        unknown = [f"{field}.{i}: unknown GPU SKU {sku!r}" for field, skus in self._sku_fields()
                   for i, sku in enumerate(skus) if not _has_name(catalog, sku)]  # fmt: skip
        if unknown:  # every one at once
            raise ValueError(f"{'; '.join(unknown)}; allowed: {', '.join(catalog.ids())}")
        return self

    def _sku_fields(self) -> list[tuple[str, list[str]]]:
        """(field, SKUs) of every SKU list the spec names: its own and its pools'."""
        fields = [("skus", self.skus)]
        pools = self.space.disaggregated
        if pools is not None:
            fields += [
                (f"space.disaggregated.{name}.skus", pool.skus)
                for name, pool in (("prefill", pools.prefill), ("decode", pools.decode))
                if pool.skus is not None
            ]
        return fields

    @model_validator(mode="after")
    def _pools_fit_the_budget(self) -> SearchSpec:
        """A disaggregated space needs a split with GPUs on both sides within max_gpus."""
        pools = self.space.pools(self.skus)
        if pools is None:
            return self
        prefill, decode = pools
        budget = self.budget.max_gpus
        if prefill.smallest_gpus + decode.smallest_gpus > budget:
            raise ValueError(
                f"space.disaggregated: no split of budget.max_gpus {budget} has GPUs on both "
                f"sides: the smallest prefill pool takes {prefill.smallest_gpus} GPUs "
                f"({_pool_gpus(prefill, pp=True)}), the smallest decode pool "
                f"{decode.smallest_gpus} ({_pool_gpus(decode, pp=False)}); allowed: pools of "
                f"at most {budget} GPUs together"
            )
        return self

    @model_validator(mode="after")
    def _kv_link_on_the_node_shape(self) -> SearchSpec:
        """kv_link nvlink needs SKUs whose nodes have NVLink."""
        pools = self.space.pools(self.skus)
        space = self.space.disaggregated
        if pools is None or space is None or space.kv_link is not KvLink.NVLINK:
            return self
        for name, axes in zip(("prefill", "decode"), pools, strict=True):
            for sku in axes.skus:
                node = self.sku_catalog.get(sku).default_node
                if node.intra_node_link is LinkKind.PCIE:
                    raise ValueError(
                        f"space.disaggregated.kv_link: nvlink, but the {name} pool's {sku} "
                        f"nodes have no NVLink (intra_node_link {node.intra_node_link.value}); "
                        "allowed: auto or network for it, or SKUs with NVLink nodes"
                    )
        return self

    @model_validator(mode="after")
    def _space_size(self) -> SearchSpec:
        count, factors = self.space.size(len(self.skus))
        if count > self.max_configurations:
            raise ValueError(
                f"space: {count:,} configurations ({factors}) is over max_configurations "
                f"{self.max_configurations:,}; each one is checked, stored and simulated, "
                "so narrow the space, or raise max_configurations (or --max-configurations) "
                "if you mean it"
            )
        return self

    @model_validator(mode="after")
    def _op_tables_cover_the_skus(self) -> SearchSpec:
        ids = list(dict.fromkeys(
            self.sku_catalog.get(s).id for _, skus in self._sku_fields() for s in skus
        ))  # fmt: skip
        check_op_tables(self.estimator, self.op_tables, ids)
        return self

    @cached_property
    def sku_catalog(self) -> Catalog:
        return load_catalog(self.catalog)

    @cached_property
    def model_architecture(self) -> ModelArchitecture:
        return with_expert_precision(load_model(self.model), self.expert_precision)

    def digest(self) -> str:
        """sha256 of the whole spec, every field (the fingerprint leaves some out)."""
        return sha256_json(self.model_dump(mode="json"))

    def _decode_memory_fingerprint(self) -> dict[str, float]:
        """The decode pool's own memory fraction, where the spec gives one (left out
        otherwise, so that specs without it keep their fingerprints)."""
        fraction = self.space.pool_space.decode.gpu_memory_utilization
        return {} if fraction is None else {"decode_gpu_memory_utilization": fraction}

    def fingerprint(self) -> str:
        """sha256 of everything that decides a configuration's capacity and metrics.

        The model enters by its shape (so a config.json path is fingerprinted by
        content), a trace file by its content (a trace rewritten in place, as a
        scheduled planning run sees it, is a new workload; a trace moved is not);
        the name, strategy and budget do not enter: a re-run with a larger budget
        or another strategy reuses what is already done.
        """
        workload = self.workload.model_dump(mode="json")
        if not self.workload.is_builtin:
            workload["source"] = f"sha256:{file_sha256(Path(self.workload.source))}"
        decisive = {
            "model": self.model_architecture.fingerprint_fields(),
            "workload": workload,
            "slo": self.slo.model_dump(mode="json"),
            "capacity": self.capacity.model_dump(mode="json"),
            "estimator": self.estimator,
            **_estimator_data(self.estimator),
            **({"op_tables": op_tables_digest(self.op_tables)} if self.op_tables else {}),
            "block_size": self.block_size,
            "gpu_memory_utilization": self.gpu_memory_utilization,
            **self._decode_memory_fingerprint(),
            "prefix_cache": [self.prefix_cache, self.prefix_cache_tokens],
            "speculative": self.speculative.model_dump() if self.speculative else None,
            "cost_model": cost_model_digest(),  # fitted constants and engine profiles
        }
        return sha256_json(decisive)


def slo_semantics(spec: SearchSpec) -> str:
    """What a configuration's capacity means under this spec's SLOs, in one line."""
    slo = spec.slo
    filters = ", ".join(f.describe() for f in slo.filters)
    if not filters:
        return f"capacity = the largest rate with {slo.capacity.describe()}"
    if slo.capacity_meets_filters:
        return (
            f"capacity = the largest rate with {slo.capacity.describe()} and {filters} "
            "(capacity_meets_filters: true)"
        )
    return (
        f"capacity = the largest rate with {slo.capacity.describe()}; {filters} checked at that "
        "rate (capacity_meets_filters: false; true makes the capacity meet them too)"
    )


def search_workload(spec: SearchSpec, num_requests: int | None = None) -> Workload:
    """The request stream every capacity probe of a search reuses, built as `search run`
    builds it (rate 1 req/s: each probe rescales the arrival times).  `num_requests`
    (default the spec's) may be longer: the first `workload.num_requests` requests are the
    same whatever the length, so a search can lengthen its workload."""
    w = spec.workload
    return build_workload(
        w.model_dump(exclude={"num_requests", "seed"}),
        num_requests=num_requests or w.num_requests,
        qps=1.0,
        concurrency=None,
        seed=w.seed,
    )


def _has_name(catalog: Catalog, sku: str) -> bool:
    """Whether `sku` names a catalog entry (by id or display name, any case)."""
    try:
        catalog.get(sku)
    except LookupError:
        return False
    return True


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, read in chunks (traces can be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_json(data: object) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load_spec(path: str | Path, *, max_configurations: int | None = None) -> SearchSpec:
    """Read and validate a spec file; errors name the file, the field and what is allowed.

    `max_configurations` (a command-line override) replaces the spec's own.
    """
    try:
        data = read_yaml_file(path, "spec file")
    except YamlInputError as exc:
        raise SpecError(str(exc)) from None
    shown = shorten(path)
    if not isinstance(data, dict):
        raise SpecError(f"spec file {shown} must hold a mapping (model:, skus:, space: ...)")
    if max_configurations is not None:
        data = {**data, "max_configurations": max_configurations}
    return parse_spec(data, source=shown)


def parse_spec(data: dict, source: str = "spec") -> SearchSpec:
    try:
        return SearchSpec.model_validate(data)
    except ValidationError as exc:
        from search._errors import format_validation_error

        raise SpecError(format_validation_error(exc, source, SearchSpec)) from None


def _estimator_data(estimator: str) -> dict[str, str]:
    """The measured-table package version, for backends that read it (results depend on it)."""
    if estimator == "roofline":
        return {}
    from importlib import metadata

    try:
        return {"estimator_data": f"aiconfigurator-core {metadata.version('aiconfigurator-core')}"}
    except metadata.PackageNotFoundError:
        return {"estimator_data": "none"}
