"""Engine profiles: how vLLM, SGLang, TensorRT-LLM (and Vidur's 2024 vLLM) run a model, as data.

A profile is not a code path: it is the numbers an engine brings to one deployment, read from
``estimators/data/engines.yaml`` (each value there names its source):

* the per-iteration host overhead, for decode-only iterations (CUDA graphs) and iterations with
  prefill, and whether the engine overlaps it with the GPU step;
* which iterations run as CUDA graphs (decode batches up to `graph_max_batch`; any iteration
  up to `piecewise_max_tokens` tokens where the engine captures piecewise graphs)
  and, for the others, the host time of launching a layer's kernels one by one
  (`eager_launch`): such an iteration cannot finish before its last kernel is launched;
* the host work its HTTP frontend does on a request before the engine sees it (`frontend`:
  tokenizing the prompt, one request at a time), and the request's latency through it;
* its all-reduce (custom kernels, fitted to measured tables, per GPU family);
* its default batching policy and limits, under the engine's own names;
* its memory plan (the fraction it takes and of what, reserves);
* how it admits a request against the KV cache (`kv_admission`: blocks for the prompt, growing
  and evicting under pressure, or the whole length reserved up front);
* the KV-cache precision it uses with FP8 weights;
* the models whose FP8 GEMM inputs it quantizes inside the kernel before the GEMM rather
  than in a kernel of their own (`fp8_quant_fused_model_types`);
* whether a layer's residual adds run inside its RMSNorm kernels (`fused_residual_add`);
* whether its token budget under attention DP is the replica's, split over the DP ranks
  (`dp_splits_token_budget`), or every rank's own;
* the models whose shared expert it runs inside the routed experts' kernel
  (`shared_experts_fusion`).

``load_engine("vllm@0.12.0")`` returns the profile covering that version; `vidur` reproduces
llmcap's behaviour before profiles existed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

import yaml

from estimators._types import ModelArchitecture, Precision
from sku_catalog._types import GpuSku

KV_ON_DEMAND = "on_demand"
KV_RESERVE_FULL_LENGTH = "reserve_full_length"
KV_ADMISSIONS = (KV_ON_DEMAND, KV_RESERVE_FULL_LENGTH)
# disaggregated serving: where the client sees a request's first token (engines.yaml header)
FIRST_TOKEN_PREFILL = "prefill"  # the prefill pool's token, when its prefill ends
FIRST_TOKEN_DECODE_ADMIT = "decode_admit"  # the decode replica's, when it admits the request
FIRST_TOKEN_DECODE_STEP = "decode_step"  # the decode replica's, after its first step with it
FIRST_TOKEN_SOURCES = (FIRST_TOKEN_PREFILL, FIRST_TOKEN_DECODE_ADMIT, FIRST_TOKEN_DECODE_STEP)
# disaggregated serving: when a decode replica reserves a request's KV blocks (engines.yaml
# header): when the request is routed, before its prefill may start, or at the hand-off
DECODE_RESERVE_AT_ROUTE = "at_route"
DECODE_RESERVE_AT_HANDOFF = "at_handoff"
DECODE_RESERVE_MOMENTS = (DECODE_RESERVE_AT_ROUTE, DECODE_RESERVE_AT_HANDOFF)
# how an engine exchanges the tokens of attention-DP ranks with the experts under EP
# (engines.yaml header): an all-to-all always, only when EP exceeds the model's top-k, or never
# (all-gather before the experts, reduce-scatter after)
MOE_ALL_TO_ALL_ALWAYS = "always"
MOE_ALL_TO_ALL_ABOVE_TOP_K = "above_top_k"
MOE_ALL_TO_ALL_NEVER = "never"
MOE_ALL_TO_ALL_RULES = (MOE_ALL_TO_ALL_ALWAYS, MOE_ALL_TO_ALL_ABOVE_TOP_K, MOE_ALL_TO_ALL_NEVER)
# how an engine keeps the KV cache of sliding-window layers (estimators/_memory.py
# `kv_cache_layout`): every key (full), a fixed window of pages per running request (paged),
# or a window pool sized to a share of the full pool's tokens (pool)
SLIDING_KV_FULL = "full"
SLIDING_KV_PAGED = "paged"
SLIDING_KV_POOL = "pool"
SLIDING_KV_LAYOUTS = (SLIDING_KV_FULL, SLIDING_KV_PAGED, SLIDING_KV_POOL)
# the kernel an engine runs the dense GEMMs of a block-scaled FP8 checkpoint with (engines.yaml
# header): the one the GEMM tables time (DeepGEMM in SGLang and TensorRT-LLM), or FlashInfer's
# groupwise kernel, SGLang's on Blackwell when DeepGEMM is off (its constants:
# estimators/data/gemm_kernels.yaml)
FP8_BLOCK_GEMM_TABLES = ""
FP8_BLOCK_GEMM_FLASHINFER = "flashinfer"
FP8_BLOCK_GEMM_KERNELS = (FP8_BLOCK_GEMM_TABLES, FP8_BLOCK_GEMM_FLASHINFER)

__all__ = [
    "DECODE_RESERVE_AT_HANDOFF",
    "DECODE_RESERVE_AT_ROUTE",
    "DECODE_RESERVE_MOMENTS",
    "DEFAULT_ENGINE",
    "FIRST_TOKEN_DECODE_ADMIT",
    "FIRST_TOKEN_DECODE_STEP",
    "FIRST_TOKEN_PREFILL",
    "FIRST_TOKEN_SOURCES",
    "FP8_BLOCK_GEMM_FLASHINFER",
    "FP8_BLOCK_GEMM_KERNELS",
    "FP8_BLOCK_GEMM_TABLES",
    "KV_ADMISSIONS",
    "KV_ON_DEMAND",
    "KV_RESERVE_FULL_LENGTH",
    "MOE_ALL_TO_ALL_ABOVE_TOP_K",
    "MOE_ALL_TO_ALL_ALWAYS",
    "MOE_ALL_TO_ALL_NEVER",
    "MOE_ALL_TO_ALL_RULES",
    "SLIDING_KV_FULL",
    "SLIDING_KV_LAYOUTS",
    "SLIDING_KV_PAGED",
    "SLIDING_KV_POOL",
    "AllReduceCost",
    "AllToAllCost",
    "EagerLaunch",
    "EngineLimits",
    "EngineProfile",
    "IterationOverhead",
    "SharedExpertsFusion",
    "SharedExpertsStream",
    "UnknownEngineError",
    "available_engines",
    "load_engine",
]

DEFAULT_ENGINE = "vllm"
GIB = float(1 << 30)
MIB = float(1 << 20)


class UnknownEngineError(ValueError):
    """An engine name or version the profiles hold no data for."""


@dataclass(frozen=True, slots=True)
class IterationOverhead:
    """Host work of one iteration: ``base_ms + per_seq_ms * sequences``."""

    base_ms: float
    per_seq_ms: float

    def seconds(self, num_seqs: int) -> float:
        return (self.base_ms + self.per_seq_ms * num_seqs) * 1e-3


@dataclass(frozen=True, slots=True)
class EagerLaunch:
    """Host time to launch one layer's kernels one by one, in an iteration that runs without
    CUDA graphs: a dense layer's (attention and MLP) and a mixture-of-experts layer's
    (attention, router, experts and shared experts), each with its tensor-parallel
    all-reduces, in microseconds; and, where it was measured, the mean layer of a mixture
    of experts with multi-head latent attention (DeepSeek-V3's layout: MLA in every layer,
    a few dense layers first), whose attention launches more kernels than grouped-query
    attention (None: such a model's layers take the dense and MoE times)."""

    dense_layer_us: float
    moe_layer_us: float
    mla_layer_us: float | None = None

    def layer_seconds(self, dense_layers: int, moe_layers: int, mla: bool = False) -> float:
        """Mean seconds a layer's launches take, over `dense_layers` and `moe_layers` (of a
        model with MLA attention where `mla`)."""
        layers = dense_layers + moe_layers
        if layers <= 0:
            return 0.0
        if mla and self.mla_layer_us is not None:
            return self.mla_layer_us * 1e-6
        us = dense_layers * self.dense_layer_us + moe_layers * self.moe_layer_us
        return us / layers * 1e-6


@dataclass(frozen=True, slots=True)
class Frontend:
    """The engine's HTTP server around each request (engines.yaml header): tokenizing the
    prompt before the scheduler sees it, `tokenize_us_per_token` microseconds a prompt
    token, one request at a time; and `request_ms` more on every request's TTFT that no
    engine clock counts (the request's way in and its first token's way back to the
    client), which holds no tokenizer."""

    tokenize_us_per_token: float
    request_ms: float = 0.0

    @property
    def seconds_per_token(self) -> float:
        return self.tokenize_us_per_token * 1e-6

    @property
    def request_seconds(self) -> float:
        return self.request_ms * 1e-3


@dataclass(frozen=True, slots=True)
class SharedExpertsStream:
    """The iterations in which an engine runs a mixture-of-experts layer's shared experts on
    an auxiliary CUDA stream, concurrently with the router and the routed experts: those of
    at most `max_tokens` tokens per attention-DP rank (0: any number), and with
    `graphed_only` only those run as CUDA graphs."""

    max_tokens: int = 0
    graphed_only: bool = False

    def covers(self, num_tokens: int, graphed: bool) -> bool:
        """Whether an iteration of `num_tokens` tokens per attention-DP rank, run as a CUDA
        graph or not (`graphed`), runs the shared experts beside the routed ones."""
        if self.graphed_only and not graphed:
            return False
        return self.max_tokens <= 0 or num_tokens <= self.max_tokens


@dataclass(frozen=True, slots=True)
class SharedExpertsFusion:
    """Where an engine runs a mixture-of-experts layer's shared expert inside the routed
    experts' fused MoE kernel, as one more expert every token picks: for the config.json
    `model_types` listed, when the experts are not spread by expert parallelism, unless the
    deployment's MoE kernel is one of `not_with_kernels` (substrings of its name, as
    `EngineProfile.moe_kernels` names kernels)."""

    model_types: tuple[str, ...] = ()
    not_with_kernels: tuple[str, ...] = ()

    def applies(self, model_type: str, ep: int, kernel: str) -> bool:
        """Whether a deployment of that model_type at expert parallelism `ep` whose MoE runs
        `kernel` ("" where the engine's default is not named) fuses its shared expert."""
        if ep != 1 or model_type not in self.model_types:
            return False
        return not any(name in kernel for name in self.not_with_kernels)


@dataclass(frozen=True, slots=True)
class AllReduceCost:
    """The roofline's ring all-reduce constants for one GPU family: a message takes
    ``latency + 2 (n - 1) / n * bytes / (link * bw_eff)``.  With ``large_*`` the engine has
    a second algorithm (one-shot kernels for small messages, two-shot or NCCL rings for
    large ones) and each message takes the faster of the two lines."""

    latency_us: float
    bw_eff: float
    large_latency_us: float | None = None
    large_bw_eff: float | None = None

    @property
    def large(self) -> tuple[float, float] | None:
        """(latency_us, bw_eff) of the large-message algorithm, or None."""
        if self.large_latency_us is None or self.large_bw_eff is None:
            return None
        return self.large_latency_us, self.large_bw_eff


@dataclass(frozen=True, slots=True)
class AllToAllCost:
    """The engine's MoE all-to-all (expert-parallel dispatch and combine) on one node, for
    one GPU family: each phase sends each of a rank's tokens, a 16-bit hidden state, once to
    every other rank holding one of its experts, in ``latency + bytes / (link * bw_eff)``
    (estimators/_moe.py `all_to_all_seconds`, `dispatch_ranks`)."""

    latency_us: float
    bw_eff: float


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """Default batching limits of an engine on one GPU and parallelism."""

    token_budget: int
    batch_cap: int
    graph_max_batch: int


@dataclass(frozen=True, slots=True)
class EngineProfile:
    """One engine version's runtime behaviour (see module docstring)."""

    name: str  # vllm | sglang | trtllm | vidur
    version: str  # the profile's key: the first version it describes
    label: str
    scheduler: str  # llmcap policy: sarathi | sglang | vllm | orca | static
    token_budget_name: str
    batch_cap_name: str
    limit_tiers: tuple[Mapping[str, Any], ...]
    overlap: bool
    graph_max_batch: int
    decode_overhead: IterationOverhead | None  # None: the roofline's own CPU overhead
    prefill_overhead: IterationOverhead | None
    allreduce: Mapping[str, AllReduceCost]
    all_to_all: Mapping[str, AllToAllCost]
    memory_fraction_name: str
    memory_fraction: Any  # float | {"by_world_size": {...}} | {"reserved_mib": {...}}
    memory_of: str  # total | free
    framework_reserve_gib: float
    activation_in_fraction: bool
    sampler_rows: int
    graph_reserve_gib: float
    kv_precision_fp8_weights: Precision
    # "on_demand": blocks for the prompt at admission, more as it decodes, preemption when they
    # run out (vLLM, SGLang); "reserve_full_length": blocks for prompt + max output reserved
    # before a request starts, so it is never evicted (TensorRT-LLM GUARANTEED_NO_EVICT)
    kv_admission: str = KV_ON_DEMAND
    # config.json model_types whose implementation in this engine writes an FP8 GEMM's input
    # from the kernel before it (all-reduce + RMSNorm, SwiGLU): the GEMM pays only its own
    # kernel.  Other models' inputs are quantized by a kernel of their own, as the measured
    # FP8 GEMM tables time them
    fp8_quant_fused_model_types: tuple[str, ...] = ()
    # the models whose shared expert the engine runs inside the routed experts' fused MoE
    # kernel (None: none)
    shared_experts_fusion: SharedExpertsFusion | None = None
    # disaggregated serving: the prefill side sends each layer's KV cache as that layer
    # finishes, so the hand-off waits only for what remains after the last layer
    # (simulator/_deployment.py `layerwise_transfer_wait`); False: the whole prompt's KV
    # is sent after its prefill
    kv_transfer_layerwise: bool = False
    # disaggregated serving: where the client sees a request's first token (one of
    # FIRST_TOKEN_SOURCES): the prefill pool's token at the prefill's end, or the decode
    # replica's once it admitted the transferred request at an iteration boundary, or once
    # its first decode step with the request ended
    disagg_first_token: str = FIRST_TOKEN_PREFILL
    # disaggregated serving: when the decode replica reserves a request's KV blocks (one of
    # DECODE_RESERVE_MOMENTS): when the request is routed, its prefill held until they are
    # reserved, or when its prefill hands it over
    disagg_decode_reserve: str = DECODE_RESERVE_AT_HANDOFF
    # disaggregated serving: the decode request reaches the decode server as text after the
    # prefill returned, and its frontend tokenizes the prompt again (`frontend`) before its
    # scheduler sees the request
    disagg_decode_tokenizes: bool = False
    # the KV cache of sliding-window layers (one of SLIDING_KV_LAYOUTS): kept whole like a
    # full layer's, a window of pages per running request, or a window pool holding
    # `swa_full_tokens_ratio` x the full pool's tokens
    sliding_window_kv: str = SLIDING_KV_FULL
    swa_full_tokens_ratio: float = 0.0
    # under attention DP with EP, whether the MoE layer exchanges tokens by all-to-all (one of
    # MOE_ALL_TO_ALL_RULES; else all-gather + reduce-scatter)
    moe_all_to_all: str = MOE_ALL_TO_ALL_ALWAYS
    # whether a layer's residual adds run inside the RMSNorm kernel after them (fused add +
    # RMSNorm), keeping their memory traffic without a kernel of their own; False: an add
    # kernel and a norm kernel each (Vidur's operator model)
    fused_residual_add: bool = False
    # under attention DP, whether the engine's token budget is the replica's, split evenly
    # over its DP ranks (SGLang's chunked_prefill_size); False: every rank runs the whole
    # budget (vLLM's and TensorRT-LLM's DP ranks each take the same limits)
    dp_splits_token_budget: bool = False
    # expert precision -> GPU family -> the measured MoE kernel the engine runs by default
    # there (a `kernel_source` substring of aiconfigurator's moe tables; engines.yaml header)
    moe_kernels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # the kernel of a block-scaled FP8 checkpoint's dense GEMMs (one of
    # FP8_BLOCK_GEMM_KERNELS; "": the one the GEMM tables time)
    fp8_block_gemm: str = FP8_BLOCK_GEMM_TABLES
    # iterations of at most this many tokens, prefills among them, run as piecewise CUDA
    # graphs (0: no iteration with a prefill does); a capture size of at most
    # `piecewise_tokens_per_seq` tokens per sequence of the batch cap (0: no such bound), as
    # `sized` resolves it
    piecewise_max_tokens: int = 0
    piecewise_tokens_per_seq: int = 0
    # whether a deployment captures every decode batch up to its batch cap as a CUDA graph,
    # beyond `graph_max_batch`, as the engine's launch recipes configure it (`sized`)
    decode_graphs_cover_batch: bool = False
    # host time of launching a layer's kernels in an iteration no CUDA graph covers (None:
    # not measured for this engine, no such floor)
    eager_launch: EagerLaunch | None = None
    # where a mixture-of-experts layer runs its shared experts on an auxiliary CUDA stream
    # beside the router and the routed experts (None: on the main stream, after them)
    shared_experts_stream: SharedExpertsStream | None = None
    # the HTTP server's work on a request before the scheduler takes it in and its latency
    # (None: none, the request reaches the scheduler when the client sends it)
    frontend: Frontend | None = None

    def runs_all_to_all(self, ep: int, top_k: int) -> bool:
        """Whether an EP degree `ep` exchanges attention-DP ranks' tokens by all-to-all for a
        model routing each token to `top_k` experts (`moe_all_to_all`)."""
        rule = self.moe_all_to_all
        return rule == MOE_ALL_TO_ALL_ALWAYS or (rule == MOE_ALL_TO_ALL_ABOVE_TOP_K and ep > top_k)

    def fp8_quant_fused(self, model_type: str) -> bool:
        """Whether the engine quantizes this model's FP8 GEMM inputs in the kernel before."""
        return model_type in self.fp8_quant_fused_model_types

    def moe_kernel(self, expert_precision: Precision, family: str) -> str:
        """The measured MoE kernel the engine runs by default for experts stored at
        `expert_precision` on a GPU `family` (`moe_kernels`), or "" where none is named."""
        return self.moe_kernels.get(Precision(expert_precision).value, {}).get(family, "")

    def fuses_shared_experts(self, model_type: str, ep: int, kernel: str) -> bool:
        """Whether the engine runs this model's shared expert as one more routed expert of
        its fused MoE kernel at expert parallelism `ep` with MoE kernel `kernel`
        (`shared_experts_fusion`)."""
        fusion = self.shared_experts_fusion
        return fusion is not None and fusion.applies(model_type, ep, kernel)

    @property
    def key(self) -> str:
        """``name@version``: what results record."""
        return f"{self.name}@{self.version}"

    @property
    def is_vidur(self) -> bool:
        return self.name == "vidur"

    @property
    def reserves_kv_full_length(self) -> bool:
        """Whether a request starts only once KV blocks for its whole length are reserved."""
        return self.kv_admission == KV_RESERVE_FULL_LENGTH

    # ------------------------------------------------------------ per deployment

    def limits(self, sku: GpuSku, tp: int = 1) -> EngineLimits:
        """The engine's default token budget, batch cap and CUDA-graph batch on `sku`."""
        mem_gib = sku.memory_bytes / GIB
        family = sku.family
        for tier in self.limit_tiers:
            if mem_gib < float(tier.get("min_memory_gib", 0)):
                continue
            if "max_memory_gib" in tier and mem_gib >= float(tier["max_memory_gib"]):
                continue
            if family in [str(f).lower() for f in tier.get("not_families", ())]:
                continue
            if "max_tp" in tier and tp > int(tier["max_tp"]):
                continue
            return EngineLimits(
                int(tier["token_budget"]),
                int(tier["batch_cap"]),
                int(tier.get("graph_max_batch", self.graph_max_batch)),
            )
        raise UnknownEngineError(f"engine {self.key}: no batching limits match {sku.id}")

    def memory_fraction_for(self, sku: GpuSku, tp: int, pp: int, token_budget: int) -> float:
        """The engine's default memory fraction for this deployment."""
        rule = self.memory_fraction
        if isinstance(rule, int | float):
            return float(rule)
        if "by_world_size" in rule:
            table = sorted((int(k), float(v)) for k, v in rule["by_world_size"].items())
            value = table[0][1]
            for size, fraction in table:
                if tp * pp >= size:
                    value = fraction
            return value
        r = rule["reserved_mib"]
        total_mib = sku.memory_bytes / MIB
        graph_bs = self.limits(sku, tp).graph_max_batch
        reserved = (
            float(r["base"])
            + float(r["per_budget_token"]) * max(token_budget, int(r["min_budget_tokens"]))
            + float(r["per_graph_seq"]) * graph_bs
            + float(r["per_world_rank"]) * tp * pp
        )
        if total_mib > float(r["floor_above_gib"]) * 1024:
            reserved = max(reserved, float(r["floor_mib"]))
        return round((total_mib - reserved) / total_mib, 3)

    def kv_precision(
        self, precision: Precision, model: ModelArchitecture | None = None
    ) -> Precision:
        """The KV-cache precision the engine uses by default with `precision` weights of
        `model`.  Where the engine's default follows the checkpoint's declared KV
        quantisation (`kv_precision_fp8_weights` fp8) and the run keeps the checkpoint's own
        precision, the checkpoint's declaration decides: DeepSeek-V3's FP8 blocks declare
        none, so a 16-bit KV cache (engines.yaml header)."""
        precision = Precision(precision)
        if not precision.low:  # 16-bit weights: their own dtype
            return precision
        follows = self.kv_precision_fp8_weights
        if follows is Precision.FP8 and model is not None and precision is model.weight_precision:
            return model.kv_cache_precision or Precision.BF16
        return follows

    def sized(
        self, sku: GpuSku, tp: int, batch_cap: int, token_budget: int | None
    ) -> EngineProfile:
        """The profile as a deployment on `sku` at attention TP `tp` with this batch cap
        and token budget (each attention DP rank's) runs it: the CUDA graphs the engine
        captures there, its decode batches (`limits`) and its largest piecewise graph."""
        graphs = self.limits(sku, tp).graph_max_batch
        if self.decode_graphs_cover_batch:
            graphs = max(graphs, batch_cap)
        tokens = self.piecewise_max_tokens
        if self.piecewise_tokens_per_seq:
            tokens = min(tokens, self.piecewise_tokens_per_seq * batch_cap)
        if token_budget is not None:
            tokens = min(tokens, token_budget)
        unchanged = graphs == self.graph_max_batch and tokens == self.piecewise_max_tokens
        if unchanged and not self.piecewise_tokens_per_seq:
            return self
        return replace(
            self, graph_max_batch=graphs, piecewise_max_tokens=tokens, piecewise_tokens_per_seq=0
        )

    def graphed(self, num_tokens: int, decode_only: bool, num_seqs: int) -> bool:
        """Whether an iteration of `num_seqs` sequences and `num_tokens` tokens runs as a CUDA
        graph: a decode-only batch the engine captures, or any batch within its piecewise
        graphs."""
        if decode_only and num_seqs <= self.graph_max_batch:
            return True
        return num_tokens <= self.piecewise_max_tokens

    def iteration_overhead(self, decode_only: bool, num_seqs: int) -> IterationOverhead | None:
        """The host overhead model of an iteration (None: the roofline's own)."""
        if decode_only and num_seqs <= self.graph_max_batch:
            return self.decode_overhead
        return self.prefill_overhead

    def describe(self) -> str:
        return f"{self.key} ({self.label})"


# ------------------------------------------------------------------ loading


@functools.cache
def _engines_yaml() -> dict[str, Any]:
    text = resources.files("estimators").joinpath("data/engines.yaml").read_text("utf-8")
    data = yaml.safe_load(text) or {}
    engines = data.get("engines") if isinstance(data, dict) else None
    if not isinstance(engines, dict) or not engines:
        raise ValueError("estimators/data/engines.yaml: expected a mapping under `engines:`")
    return engines


def version_tuple(text: str) -> tuple[int, ...] | None:
    """Numeric release parts of a version (``1.0.0rc3`` -> (1, 0, 0)); None if none."""
    found = re.match(r"^v?(\d+(?:\.\d+)*)", text.strip())
    if not found:
        return None
    return tuple(int(p) for p in found.group(1).split("."))


def _cmp(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    n = max(len(a), len(b))
    a2, b2 = a + (0,) * (n - len(a)), b + (0,) * (n - len(b))
    return (a2 > b2) - (a2 < b2)


def available_engines() -> dict[str, list[str]]:
    """Engine name -> its profile versions, in order."""
    out = {}
    for name, body in _engines_yaml().items():
        keys = list((body or {}).get("profiles", {}))
        out[name] = sorted(keys, key=lambda k: version_tuple(k) or ())
    return out


def _available_text() -> str:
    parts = []
    for name, versions in available_engines().items():
        parts.append(f"{name} ({', '.join(versions)})")
    return ", ".join(parts)


@functools.cache
def load_engine(spec: str | None = None) -> EngineProfile:
    """The profile of ``NAME[@VERSION]`` (default: current vLLM).

    A version selects the profile whose range covers it (``vllm@0.12.0`` -> vLLM 0.11's);
    no version selects the engine's default profile.  Raises `UnknownEngineError` naming what
    is available when the engine or the version has no profile.
    """
    text = (spec or DEFAULT_ENGINE).strip()
    name, _, version = text.partition("@")
    name = name.strip().lower()
    version = version.strip()
    engines = _engines_yaml()
    if name not in engines:
        raise UnknownEngineError(
            f"unknown engine {name!r}; available engines (profile versions): {_available_text()}"
        )
    body = engines[name]
    profiles: dict[str, Any] = body.get("profiles", {})
    if not version:
        key = str(body.get("default") or next(iter(profiles)))
        return _build(name, key, profiles[key])
    if version in profiles:
        return _build(name, version, profiles[version])
    wanted = version_tuple(version)
    if wanted is None:
        raise UnknownEngineError(
            f"engine {name}: version {version!r} is not a release number; profiles: "
            f"{', '.join(available_engines()[name])}"
        )
    ordered = available_engines()[name]
    for i, key in enumerate(ordered):
        start = version_tuple(key) or ()
        until = profiles[key].get("until")
        end = version_tuple(str(until)) if until else None
        if end is None and i + 1 < len(ordered):
            end = version_tuple(ordered[i + 1])
        if _cmp(wanted, start) >= 0 and (end is None or _cmp(wanted, end) < 0):
            return _build(name, key, profiles[key])
    raise UnknownEngineError(
        f"engine {name}: no profile covers version {version} (profiles start at "
        f"{ordered[0]}: {', '.join(ordered)}); available engines: {_available_text()}"
    )


def _allreduce_cost(entry: Mapping[str, Any]) -> AllReduceCost:
    large = entry.get("large")
    return AllReduceCost(
        float(entry["latency_us"]),
        float(entry["bw_eff"]),
        float(large["latency_us"]) if large else None,
        float(large["bw_eff"]) if large else None,
    )


def _overhead(value: Any) -> IterationOverhead | None:
    if value is None:
        return None
    return IterationOverhead(float(value["base_ms"]), float(value["per_seq_ms"]))


def _eager_launch(value: Any) -> EagerLaunch | None:
    if value is None:
        return None
    _known_keys(value, "eager_launch", ("dense_layer_us", "moe_layer_us", "mla_layer_us"))
    mla = value.get("mla_layer_us")
    launch = EagerLaunch(
        float(value["dense_layer_us"]),
        float(value["moe_layer_us"]),
        None if mla is None else float(mla),
    )
    times = (launch.dense_layer_us, launch.moe_layer_us, launch.mla_layer_us or 0.0)
    if min(times) < 0:
        raise ValueError(f"eager_launch {dict(value)!r} has a negative time")
    return launch


def _frontend(value: Any) -> Frontend | None:
    if value is None:
        return None
    _known_keys(value, "frontend", ("tokenize_us_per_token", "request_ms"))
    per_token = float(value["tokenize_us_per_token"])
    request_ms = float(value.get("request_ms", 0.0))
    for name, number in (("tokenize_us_per_token", per_token), ("request_ms", request_ms)):
        if not number >= 0:
            raise ValueError(f"frontend.{name} {number} is negative")
    return Frontend(per_token, request_ms)


def _shared_experts_stream(value: Any) -> SharedExpertsStream | None:
    if value is None:
        return None
    _known_keys(value, "shared_experts_stream", ("max_tokens", "graphed_only"))
    stream = SharedExpertsStream(
        int(value.get("max_tokens", 0)),
        _flag(value.get("graphed_only", False), "shared_experts_stream.graphed_only"),
    )
    if stream.max_tokens < 0:
        raise ValueError(f"shared_experts_stream.max_tokens {stream.max_tokens} is negative")
    return stream


def _shared_experts_fusion(value: Any) -> SharedExpertsFusion | None:
    if value is None:
        return None
    _known_keys(value, "shared_experts_fusion", ("model_types", "not_with_kernels"))
    return SharedExpertsFusion(
        tuple(str(t) for t in value.get("model_types") or ()),
        tuple(str(k) for k in value.get("not_with_kernels") or ()),
    )


def _known_keys(value: Mapping[str, Any], name: str, keys: tuple[str, ...]) -> None:
    """Refuse a mapping field `name` of the profile with keys other than `keys`."""
    unknown = set(value) - set(keys)
    if unknown:
        raise ValueError(f"{name} has unknown keys {sorted(unknown)}")


def _one_of(value: Any, name: str, allowed: tuple[str, ...]) -> str:
    """`value` of the profile's field `name`, one of `allowed`."""
    if value not in allowed:
        raise ValueError(f"{name} {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _sliding_kv(value: Any, ratio: Any) -> tuple[str, float]:
    value = _one_of(value, "sliding_window_kv", SLIDING_KV_LAYOUTS)
    if value != SLIDING_KV_POOL:
        if ratio is not None:
            raise ValueError(f"swa_full_tokens_ratio is for sliding_window_kv {SLIDING_KV_POOL}")
        return value, 0.0
    if not isinstance(ratio, (int, float)) or not 0.0 < ratio <= 1.0:
        raise ValueError(f"swa_full_tokens_ratio {ratio!r} is not in (0, 1]")
    return value, float(ratio)


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} {value!r} is not true or false")
    return value


def _build(name: str, key: str, body: Mapping[str, Any]) -> EngineProfile:
    where = f"engines.yaml {name}.{key}"
    try:
        overhead = body["overhead"]
        memory = body["memory"]
        sliding_kv, swa_ratio = _sliding_kv(
            body.get("sliding_window_kv", SLIDING_KV_FULL), body.get("swa_full_tokens_ratio")
        )
        return EngineProfile(
            name=name,
            version=key,
            label=str(body.get("label", f"{name} {key}")),
            scheduler=str(body["scheduler"]),
            token_budget_name=str(body["token_budget_name"]),
            batch_cap_name=str(body["batch_cap_name"]),
            limit_tiers=tuple(dict(t) for t in body["limits"]),
            overlap=bool(overhead.get("overlap", False)),
            graph_max_batch=int(overhead.get("graph_max_batch", 0)),
            piecewise_max_tokens=int(overhead.get("piecewise_max_tokens", 0)),
            piecewise_tokens_per_seq=int(overhead.get("piecewise_tokens_per_seq", 0)),
            decode_graphs_cover_batch=bool(overhead.get("decode_graphs_cover_batch", False)),
            eager_launch=_eager_launch(overhead.get("eager_launch")),
            shared_experts_stream=_shared_experts_stream(body.get("shared_experts_stream")),
            frontend=_frontend(body.get("frontend")),
            decode_overhead=_overhead(overhead.get("decode")),
            prefill_overhead=_overhead(overhead.get("prefill")),
            allreduce={
                str(fam).lower(): _allreduce_cost(v)
                for fam, v in (body.get("allreduce") or {}).items()
            },
            all_to_all={
                str(fam).lower(): AllToAllCost(float(v["latency_us"]), float(v["bw_eff"]))
                for fam, v in (body.get("all_to_all") or {}).items()
            },
            memory_fraction_name=str(memory["fraction_name"]),
            memory_fraction=memory["fraction"],
            memory_of=str(memory.get("of", "total")),
            framework_reserve_gib=float(memory.get("framework_reserve_gib", 1.0)),
            activation_in_fraction=bool(memory.get("activation_in_fraction", True)),
            sampler_rows=int(memory.get("sampler_rows", 256)),
            graph_reserve_gib=float(memory.get("graph_reserve_gib", 0.0)),
            kv_precision_fp8_weights=Precision(body.get("kv_precision_fp8_weights", "bf16")),
            kv_admission=_one_of(
                body.get("kv_admission", KV_ON_DEMAND), "kv_admission", KV_ADMISSIONS
            ),
            fp8_quant_fused_model_types=tuple(
                str(t) for t in body.get("fp8_quant_fused_model_types") or ()
            ),
            shared_experts_fusion=_shared_experts_fusion(body.get("shared_experts_fusion")),
            kv_transfer_layerwise=_flag(
                body.get("kv_transfer_layerwise", False), "kv_transfer_layerwise"
            ),
            disagg_first_token=_one_of(
                body.get("disagg_first_token", FIRST_TOKEN_PREFILL),
                "disagg_first_token",
                FIRST_TOKEN_SOURCES,
            ),
            disagg_decode_reserve=_one_of(
                body.get("disagg_decode_reserve", DECODE_RESERVE_AT_HANDOFF),
                "disagg_decode_reserve",
                DECODE_RESERVE_MOMENTS,
            ),
            disagg_decode_tokenizes=_flag(
                body.get("disagg_decode_tokenizes", False), "disagg_decode_tokenizes"
            ),
            sliding_window_kv=sliding_kv,
            swa_full_tokens_ratio=swa_ratio,
            moe_all_to_all=_one_of(
                body.get("moe_all_to_all", MOE_ALL_TO_ALL_ALWAYS),
                "moe_all_to_all",
                MOE_ALL_TO_ALL_RULES,
            ),
            fused_residual_add=_flag(
                body.get("fused_residual_add", False), "fused_residual_add"
            ),
            dp_splits_token_budget=_flag(
                body.get("dp_splits_token_budget", False), "dp_splits_token_budget"
            ),
            moe_kernels={
                str(Precision(p).value): {str(f).lower(): str(k) for f, k in fams.items()}
                for p, fams in (body.get("moe_kernels") or {}).items()
            },
            fp8_block_gemm=_one_of(
                body.get("fp8_block_gemm", FP8_BLOCK_GEMM_TABLES),
                "fp8_block_gemm",
                FP8_BLOCK_GEMM_KERNELS,
            ),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: malformed profile ({exc!r})") from None
