"""Memory planner: does a deployment fit, and how many KV-cache blocks does it leave?

Per GPU (vLLM's accounting)::

    usable      = memory * gpu_memory_utilization
    kv_bytes    = usable - weights - activation reserve - framework reserve
    num_blocks  = kv_bytes // (block_size * kv_bytes_per_token)

* weights: ``layers / pp`` layers of per-GPU parameters (matmuls split by TP; K/V
  projections replicated where there are fewer KV heads than TP ranks; norms
  replicated), plus the vocab-parallel embedding on the first stage and the LM head
  on the last; the largest stage is reported.  Embedding and LM head stay 16-bit
  under FP8 weights (as vLLM's FP8 checkpoints keep them).
* activation reserve: the peak of one forward pass over ``max_num_batched_tokens``
  tokens (vLLM's profile run), per GPU::

      tokens * 2 B * (2 * hidden + qkv_width + mlp_up_width + intermediate) / TP-split
      + min(tokens, 256) * vocab * 4 B * 2      (fp32 logits and probabilities)

  i.e. the residual and normalised hidden states, the QKV output, the MLP up
  projection output and its activation alive at once, plus the sampler's logits.
* framework reserve: CUDA context, NCCL buffers, allocator slack (1 GiB default).
* KV bytes per token per GPU: ``2 * (layers / pp) * max(1, kv_heads / tp) * head_dim *
  kv_bytes``.  Every PP stage holds the same tokens, so blocks per GPU = blocks per
  replica.  Multi-head latent attention (MLA, DeepSeek-V2/V3) caches one compressed latent
  per token and layer, ``(layers / pp) * (kv_lora_rank + qk_rope_head_dim) * kv_bytes``
  (DeepSeek-V3, 16-bit: 61 x 576 x 2 = 70,272 B a token), which every head reads: under TP
  the latent is *replicated* on every rank (as vLLM and SGLang run MLA without attention
  data parallelism), so TP does not divide it.
* attention data parallelism (DP, mixtures of experts): a replica of ``dp x tp`` GPUs runs
  attention (and the dense and shared-expert MLPs) as ``dp`` independent TP groups, each
  with its own batch and its own KV cache, and shares the routed experts over all
  ``dp x tp`` GPUs (experts / EP each, every expert split ``dp x tp / EP`` ways).  Weights
  per GPU count the attention of one TP group and that share of the experts; KV blocks per
  GPU are one DP rank's (the replica holds ``dp`` times as many); the activation reserve is
  one rank's forward pass.
* sliding-window layers (gpt-oss) under an engine that windows their KV cache
  (`EngineProfile.sliding_window_kv`, see `kv_cache_layout`): a block counts the full
  layers' bytes of its tokens (plus, for SGLang's window pool, ``swa_full_tokens_ratio`` x
  the sliding layers'), and under vLLM's paged layout every running request also holds
  ``window_kv_blocks`` blocks for its sliding layers' window.  A model whose every layer
  slides (Mistral-7B-v0.1) keeps every key (an upper bound).
* block-scaled FP8 weights (DeepSeek-V3's 128 x 128 blocks) add one fp32 scale per block
  to every matmul weight (`ModelArchitecture.matmul_weight_bytes`).
* each kind of weight (attention, its output projection, dense MLPs, router, routed experts)
  at the precision the checkpoint stores it in (`WeightPrecisions`,
  estimators/_weight_precision.py): NVFP4 4.5 bits a weight (an FP8 scale per 16), MXFP4
  4.25 (an E8M0 scale per 32); gpt-oss-120b with MXFP4 experts and 16-bit attention,
  router, embedding and LM head holds 60.6 GiB of weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from estimators._engines import SLIDING_KV_FULL, SLIDING_KV_POOL
from estimators._types import (
    EXPERT_ONLY_PRECISIONS,
    ModelArchitecture,
    Precision,
    resolve_kv_precision,
)
from estimators._weight_precision import WeightPrecisions
from sku_catalog._types import GpuSku, NodeShape

if TYPE_CHECKING:
    from estimators._engines import EngineProfile

__all__ = [
    "DoesNotFitError",
    "DrafterMemory",
    "MemoryPlan",
    "ParallelismError",
    "PrecisionError",
    "check_fits",
    "kv_bytes_per_token_per_gpu",
    "kv_cache_layout",
    "layer_weight_bytes_per_gpu",
    "plan_memory",
    "select_node",
    "validate_parallelism",
    "with_expert_precision",
]

GIB = float(1 << 30)
_ACT_BYTES = 2
_EMB_BYTES = 2
_DEFAULT_BATCHED_TOKENS = 4096
_SAMPLER_ROWS = 256  # vLLM's default max_num_seqs: logits rows in the profile run


class MemoryFractionError(ValueError):
    """The engine's own memory fraction leaves no memory for the deployment (its reserve
    grows with the token budget), and no fraction was given."""


class DoesNotFitError(ValueError):
    """The model and its reserves do not fit the GPU memory of the deployment."""

    def __init__(self, plan: MemoryPlan) -> None:
        self.plan = plan
        super().__init__(plan.breakdown())


class ParallelismError(ValueError):
    """A TP/PP degree the model or the node cannot take."""


class PrecisionError(ParallelismError):
    """A precision the GPU cannot run (FP4 without FP4 tensor cores), or one the KV cache
    cannot be kept in: like a bad TP, a shape of the deployment that cannot exist."""


def validate_precision(
    sku: GpuSku,
    precision: Precision,
    kv_precision: Precision | None,
    experts: Precision | None = None,
) -> None:
    """Raise `PrecisionError` for FP4 (NVFP4) weights, dense or expert, on a GPU without FP4
    tensor cores (the catalog's ``fp4_tflops``: Blackwell), for MXFP4 or INT4 as the dense
    weights' precision (expert formats: `experts`, which run weight-only where no FP4
    tensor cores take them; estimators/_weight_precision.py) and for a 4-bit KV cache
    (engines keep KV in FP8 or 16 bits)."""
    arch = f" ({sku.architecture})" if sku.architecture else ""
    whose = EXPERT_ONLY_PRECISIONS.get(Precision(precision))
    if whose is not None:
        p = Precision(precision).value
        raise PrecisionError(
            f"precision {p}: {p.upper()} is an expert-weight format ({whose} experts); give "
            f"it as the expert precision (--expert-precision {p}) with precision bf16, fp16, "
            "fp8 or fp4"
        )
    if Precision(precision) is Precision.FP4 and sku.fp4_tflops is None:
        raise PrecisionError(
            f"precision fp4 (NVFP4) needs FP4 tensor cores, which {sku.id}{arch} does not have "
            f"(Blackwell GPUs do); precisions {sku.id} supports: bf16, fp16, fp8"
        )
    if experts is not None and Precision(experts) is Precision.FP4 and sku.fp4_tflops is None:
        raise PrecisionError(
            f"expert precision fp4 (NVFP4) needs FP4 tensor cores, which {sku.id}{arch} does "
            f"not have (Blackwell GPUs do); expert precisions {sku.id} supports: bf16, fp16, "
            "fp8, mxfp4 and int4 (weight-only: 4-bit weights, 16-bit math)"
        )
    if kv_precision is not None and Precision(kv_precision).four_bit:
        raise PrecisionError(
            f"kv precision {Precision(kv_precision).value}: the KV cache is kept in fp8, bf16 "
            "or fp16"
        )


def with_expert_precision(
    model: ModelArchitecture, expert: Precision | None
) -> ModelArchitecture:
    """`model` with its routed experts stored at `expert` (None: `model` as it is, its
    checkpoint's own expert precision kept); raises `PrecisionError` for a dense model."""
    if expert is None:
        return model
    if not model.is_moe:
        raise PrecisionError(
            f"expert precision {Precision(expert).value}: {model.name} is a dense model (no "
            "experts); its weights take the precision alone"
        )
    return replace(model, expert_precision=Precision(expert))


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _tp_ok(model: ModelArchitecture, tp: int) -> bool:
    heads, kv = model.num_attention_heads, model.num_key_value_heads
    if heads % tp:
        return False
    return kv % tp == 0 if kv >= tp else tp % kv == 0


def select_node(sku: GpuSku, tp: int, pp: int = 1) -> NodeShape:
    """The node shape a TP x PP deployment of `sku` runs on: the first of the SKU's
    shapes that holds all TP x PP GPUs, else the first that holds one TP group (the
    pipeline then crosses nodes).  Raises `ParallelismError` when no shape holds TP."""
    for node in sku.nodes:
        if node.gpus_per_node >= tp * pp:
            return node
    for node in sku.nodes:
        if node.gpus_per_node >= tp:
            return node
    most = max(n.gpus_per_node for n in sku.nodes)
    raise ParallelismError(
        f"TP={tp} exceeds the {most} GPUs of the largest {sku.id} node (tensor parallelism "
        f"stays inside a node); allowed TP: at most {most}"
    )


def validate_parallelism(
    model: ModelArchitecture,
    tp: int,
    pp: int,
    sku: GpuSku,
    node: NodeShape | None = None,
    ep: int = 1,
    dp: int = 1,
) -> None:
    """Raise `ParallelismError` if `model` cannot run with `tp` x `pp` on `sku`.

    TP must divide the attention heads, and divide the KV heads (or be a multiple of
    them: KV heads are then replicated), and stay inside one node (`node`, or the
    largest of the SKU's node shapes); PP must divide the layers; EP and attention DP
    follow `validate_expert_parallelism`.
    """
    if not isinstance(tp, int) or tp < 1:
        raise ParallelismError(f"tensor-parallel degree must be an integer >= 1, got {tp!r}")
    if not isinstance(pp, int) or pp < 1:
        raise ParallelismError(f"pipeline-parallel degree must be an integer >= 1, got {pp!r}")
    gpus = node.gpus_per_node if node else max(n.gpus_per_node for n in sku.nodes)
    allowed_tp = [t for t in range(1, gpus + 1) if _tp_ok(model, t)]
    heads, kv = model.num_attention_heads, model.num_key_value_heads
    if heads % tp:
        raise ParallelismError(
            f"TP={tp} does not divide the {heads} attention heads of {model.name}; "
            f"allowed TP on {sku.id} ({gpus} GPUs per node): {allowed_tp}"
        )
    if kv >= tp and kv % tp:
        raise ParallelismError(
            f"TP={tp} does not divide the {kv} KV heads of {model.name}; "
            f"allowed TP on {sku.id} ({gpus} GPUs per node): {allowed_tp}"
        )
    if kv < tp and tp % kv:
        raise ParallelismError(
            f"TP={tp} exceeds the {kv} KV heads of {model.name} and is not a multiple of them "
            f"(KV heads could not be replicated evenly); allowed TP on {sku.id} "
            f"({gpus} GPUs per node): {allowed_tp}"
        )
    if tp > gpus:
        raise ParallelismError(
            f"TP={tp} exceeds the {gpus} GPUs of one {sku.id} node (tensor parallelism stays "
            f"inside a node); allowed TP: {allowed_tp}"
        )
    if model.num_layers % pp:
        raise ParallelismError(
            f"PP={pp} does not divide the {model.num_layers} layers of {model.name}; "
            f"allowed PP: {_divisors(model.num_layers)}"
        )
    validate_expert_parallelism(model, tp, ep, dp, pp, gpus)


def allowed_ep(
    model: ModelArchitecture, tp: int, dp: int = 1, gpus_per_node: int | None = None
) -> list[int]:
    """EP degrees a replica of `dp` x `tp` GPUs of `model` can run (see
    `validate_expert_parallelism`)."""
    if not model.is_moe:
        return [1]
    gpus = tp * dp
    return [
        e for e in _divisors(gpus)
        if model.num_experts % e == 0 and model.moe_intermediate_size % (gpus // e) == 0
        and (gpus_per_node is None or gpus // e <= gpus_per_node)
    ]  # fmt: skip


def validate_expert_parallelism(
    model: ModelArchitecture, tp: int, ep: int, dp: int = 1, pp: int = 1,
    gpus_per_node: int | None = None,
) -> None:  # fmt: skip
    """Raise `ParallelismError` unless EP=`ep` and attention DP=`dp` fit: both 1 for a dense
    model; for a mixture of experts, EP divides the routed experts and the replica's
    ``dp x tp`` MoE GPUs (each holds experts/EP experts, each split dp x tp / EP ways, as
    aiconfigurator's moe_tp x moe_ep = tp x attention_dp), that MoE TP divides the expert
    width and stays inside one node (`gpus_per_node`); attention DP runs without pipeline
    stages. Wide EP (dp x tp beyond one node) is allowed: its all-to-all then crosses the
    nodes' network."""
    if not isinstance(ep, int) or isinstance(ep, bool) or ep < 1:
        raise ParallelismError(f"expert-parallel degree must be an integer >= 1, got {ep!r}")
    if not isinstance(dp, int) or isinstance(dp, bool) or dp < 1:
        raise ParallelismError(
            f"attention data-parallel degree must be an integer >= 1, got {dp!r}"
        )
    if dp > 1 and not model.is_moe:
        raise ParallelismError(
            f"DP={dp}: {model.name} is a dense model; attention data parallelism shares "
            "expert layers between its ranks (for a dense model use replicas); allowed DP: [1]"
        )
    if dp > 1 and pp > 1:
        raise ParallelismError(
            f"DP={dp} with PP={pp}: attention data parallelism is modelled without pipeline "
            "stages; allowed PP with DP > 1: [1]"
        )
    if ep == 1 and not model.is_moe:
        return
    if not model.is_moe:
        raise ParallelismError(
            f"EP={ep}: {model.name} is a dense model (no experts to shard); allowed EP: [1]"
        )
    allowed = allowed_ep(model, tp, dp, gpus_per_node)
    gpus = tp * dp
    at = f"TP={tp}" if dp == 1 else f"DP={dp} x TP={tp}"
    if model.num_experts % ep:
        raise ParallelismError(
            f"EP={ep} does not divide the {model.num_experts} experts of {model.name}; "
            f"allowed EP at {at}: {allowed}"
        )
    if gpus % ep:
        what = f"TP={tp}" if dp == 1 else f"DP x TP={gpus}"
        raise ParallelismError(
            f"EP={ep} does not divide {what} (the replica's GPUs; experts are sharded over EP "
            f"and each expert over {what.split('=')[0]}/EP); allowed EP at {at}: {allowed}"
        )
    moe_tp = gpus // ep
    if model.moe_intermediate_size % moe_tp:
        raise ParallelismError(
            f"{'TP' if dp == 1 else 'DP x TP'}/EP={moe_tp} does not divide the expert width "
            f"{model.moe_intermediate_size} of {model.name}; allowed EP at {at}: {allowed}"
        )
    if gpus_per_node is not None and moe_tp > gpus_per_node:
        raise ParallelismError(
            f"MoE TP (DP x TP / EP)={moe_tp} exceeds the {gpus_per_node} GPUs of one node "
            f"(each expert's tensor parallelism stays inside a node); allowed EP at {at}: "
            f"{allowed}"
        )


@dataclass(frozen=True, slots=True)
class DrafterMemory:
    """Per-GPU memory of a speculative-decoding drafter (estimators/_speculative.py):
    `label` names it (a draft model, or MTP / EAGLE head layers)."""

    label: str
    weights_bytes: float
    kv_bytes_per_token: float  # its KV of one token, kept beside the target's


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Per-GPU memory budget of one deployment (bytes unless noted)."""

    model_name: str
    sku_id: str
    tp: int
    pp: int
    precision: Precision
    kv_precision: Precision
    block_size: int
    gpu_memory_utilization: float
    max_num_batched_tokens: int
    gpu_memory_bytes: float  # HBM of one GPU
    usable_bytes: float  # gpu_memory_bytes * gpu_memory_utilization
    weights_bytes: float  # largest pipeline stage, per GPU
    activation_bytes: float  # peak activations of one forward pass, per GPU
    reserve_bytes: float  # CUDA context, NCCL, allocator slack
    kv_bytes: float  # left for the KV cache, per GPU (negative when it does not fit)
    kv_bytes_per_token: float  # per GPU (this stage's layers, this rank's KV heads)
    num_kv_blocks: int  # per GPU = per replica
    kv_capacity_tokens: int  # num_kv_blocks * block_size
    fits: bool  # at least one KV block is left
    engine: str = "vidur@2024"  # the engine profile whose memory plan this is
    memory_fraction_name: str = "gpu_memory_utilization"
    memory_fraction_of: str = "total"  # the fraction is of total memory, or of what is free
    graph_reserve_bytes: float = 0.0  # CUDA-graph memory counted inside the fraction
    dp: int = 1  # attention data parallelism: KV blocks above are one DP rank's
    # a speculative drafter's weights and KV per token (within kv_bytes_per_token), or None
    drafter: DrafterMemory | None = None
    # blocks every running request holds for its sliding-window layers' window, beside its
    # tokens' blocks (vLLM's paged layout, `kv_cache_layout`; 0 otherwise)
    window_kv_blocks: int = 0
    # the kinds of weight stored apart from `precision` ("experts mxfp4, ..."; "": none)
    weight_layout: str = ""

    def drafter_note(self) -> str:
        """"; drafter (...): ..." naming the drafter's weights and KV, or "" without one."""
        d = self.drafter
        if d is None:
            return ""
        return (
            f"; drafter ({d.label}): weights {d.weights_bytes / GIB:.2f} GiB beside the "
            f"model's, KV {d.kv_bytes_per_token / 1024:.0f} KiB of each token's"
        )

    def breakdown(self) -> str:
        """Each term in GiB against the GPU's memory."""
        g = GIB
        verdict = "fits" if self.fits else "DOES NOT FIT"
        of = "" if self.memory_fraction_of == "total" else " of free"
        lines = [
            f"{self.model_name} on {self.sku_id}, "
            + (f"DP={self.dp} x " if self.dp > 1 else "")
            + f"TP={self.tp} PP={self.pp}, weights "
            f"{self.precision.value}"
            + (f" ({self.weight_layout})" if self.weight_layout else "")
            + f", KV {self.kv_precision.value}, engine {self.engine}: "
            f"{verdict}",
            f"  GPU memory          {self.gpu_memory_bytes / g:8.2f} GiB",
            f"  usable ({self.memory_fraction_name} {self.gpu_memory_utilization:.3g}{of}) "
            f"{self.usable_bytes / g:8.2f} GiB",
            f"  - weights           {self.weights_bytes / g:8.2f} GiB (per GPU, largest stage)",
            f"  - activations       {self.activation_bytes / g:8.2f} GiB "
            f"({self.max_num_batched_tokens} batched tokens)",
            *(
                [f"  - drafter weights   {self.drafter.weights_bytes / g:8.2f} GiB "
                 f"({self.drafter.label})"]
                if self.drafter is not None
                else []
            ),
            f"  - framework reserve {self.reserve_bytes / g:8.2f} GiB",
            *(
                [f"  - CUDA graphs       {self.graph_reserve_bytes / g:8.2f} GiB"]
                if self.graph_reserve_bytes
                else []
            ),
            f"  = KV cache          {self.kv_bytes / g:8.2f} GiB -> {self.num_kv_blocks} blocks of "
            f"{self.block_size} tokens = {self.kv_capacity_tokens} tokens "
            f"({self.kv_bytes_per_token / (1 << 20):.3f} MiB/token per GPU)"
            + (f", per DP rank; {self.dp} ranks" if self.dp > 1 else "")
            + self.drafter_note(),
            *(
                [f"    sliding-window layers: {self.window_kv_blocks} blocks per running "
                 "request for their window"]
                if self.window_kv_blocks
                else []
            ),
        ]
        if not self.fits:
            short = self.block_size * self.kv_bytes_per_token - self.kv_bytes
            lines.append(
                f"  short by {short / g:.2f} GiB per GPU: use more GPUs (TP/PP), a lower "
                f"precision, or a GPU with more memory"
            )
        return "\n".join(lines)


def _layer_params_by_kind(
    model: ModelArchitecture, tp: int, ep: int = 1, dp: int = 1
) -> tuple[dict[str, float], float]:
    """({weight kind: matmul params}, 16-bit params such as norms and biases) of one layer on
    one GPU, the kinds those of `WeightPrecisions` (attention, attention_out, mlp, router,
    experts); of a mixture of experts, the mean over its dense and MoE layers with
    experts/EP experts per GPU, each DP x TP / EP wide (router replicated, shared experts
    split over TP)."""
    h = model.hidden_size
    hd = model.head_dim
    heads = model.num_attention_heads // tp
    kv_heads = max(1, model.num_key_value_heads // tp)
    qkv = (heads + 2 * kv_heads) * hd
    attention_out = heads * hd * h
    attention = h * qkv
    if model.is_mla:  # latent down-projections replicated, up- and output projections split
        qkv = 0
        attention_out = heads * model.v_head_dim * h
        attention = model.mla_attention_params(heads) - attention_out
    params = {"attention": float(attention), "attention_out": float(attention_out)}
    mlp = model.mlp_params(model.intermediate_size // tp)
    if model.is_moe:
        share = model.num_moe_layers / model.num_layers
        shared = model.mlp_params(model.shared_expert_intermediate_size // tp)
        params["mlp"] = share * shared + (1 - share) * mlp
        params["router"] = share * model.hidden_size * model.num_experts
        params["experts"] = share * (
            model.num_experts // ep
            * model.mlp_params(model.moe_intermediate_size // (tp * dp // ep))
        )  # fmt: skip
    else:
        params["mlp"] = float(mlp)
    other = 2 * h  # two norms
    if model.is_mla:  # the query and KV latents' norms
        other += model.q_lora_rank + model.kv_lora_rank
    if model.attention_bias:
        other += qkv
    return params, float(other)


def layer_weight_bytes_per_gpu(
    model: ModelArchitecture, tp: int, precision: Precision, ep: int = 1, dp: int = 1
) -> float:
    """Weight bytes of one decoder layer on one GPU (of a mixture of experts, the mean
    layer: see `_layer_params_by_kind`), each kind of weight at the precision the
    checkpoint keeps it in (`WeightPrecisions`), with its scales."""
    params, other = _layer_params_by_kind(model, tp, ep, dp)
    kinds = WeightPrecisions.of(model, precision)
    by_precision: dict[Precision, float] = {}
    for kind, count in params.items():
        p = getattr(kinds, kind)
        by_precision[p] = by_precision.get(p, 0.0) + count
    matmul = sum(count * model.matmul_weight_bytes(p) for p, count in by_precision.items())
    return matmul + other * _ACT_BYTES


def weights_bytes_per_gpu(
    model: ModelArchitecture, tp: int, pp: int, precision: Precision, ep: int = 1, dp: int = 1
) -> float:
    """Weight bytes on the most loaded GPU of a (DP x) TP x PP deployment (experts over EP)."""
    layers = model.num_layers // pp
    per_layer = layer_weight_bytes_per_gpu(model, tp, precision, ep, dp)
    vocab = -(-model.vocab_size // tp)
    emb = vocab * model.hidden_size * _EMB_BYTES
    final_norm = model.hidden_size * _ACT_BYTES
    body = layers * per_layer
    if pp == 1:
        return body + emb + (0.0 if model.tie_word_embeddings else emb) + final_norm
    first = body + emb
    last = body + emb + final_norm  # a tied LM head still needs its own copy on the last stage
    return float(max(first, last))


def kv_bytes_per_token_per_gpu(
    model: ModelArchitecture, tp: int, pp: int, kv_precision: Precision
) -> float:
    """KV-cache bytes of one token on one GPU: its stage's layers and its rank's KV heads
    (replicated where fewer than TP), or of MLA the whole latent on every rank."""
    layers = model.num_layers // pp
    if model.is_mla:
        return float(layers * model.kv_elements_per_token_layer * kv_precision.bytes)
    kv_heads = max(1, model.num_key_value_heads // tp)
    return float(2 * layers * kv_heads * model.head_dim * kv_precision.bytes)


def kv_cache_layout(
    model: ModelArchitecture,
    tp: int,
    pp: int,
    kv_precision: Precision,
    block_size: int,
    engine: EngineProfile | None,
) -> tuple[float, int]:
    """(KV bytes a block's token costs on one GPU, blocks each running request holds for
    its sliding-window layers' window) under `engine`'s sliding-window layout.

    Every layer full, every layer sliding, or an engine that keeps every key: all layers'
    bytes, no window blocks.  ``pool`` (SGLang): the full layers' bytes plus
    ``swa_full_tokens_ratio`` x the sliding layers' (their pool holds that share of the full
    pool's tokens).  ``paged`` (vLLM v1): the full layers' bytes; the sliding layers keep
    the pages of the last ``window - 1`` tokens and the current one, about
    ``ceil((window - 1) / block_size) + 1`` pages of their layers, counted in blocks of the
    full layers' size.  The prompt's pages a sliding layer holds until its prefill is done
    are not counted (they are freed at the next step)."""
    every = kv_bytes_per_token_per_gpu(model, tp, pp, kv_precision)
    sliding = model.sliding_window_layers
    layout = engine.sliding_window_kv if engine is not None else SLIDING_KV_FULL
    if not sliding or sliding >= model.num_layers or layout == SLIDING_KV_FULL:
        return every, 0
    sliding_bytes = every * sliding / model.num_layers
    full_bytes = every - sliding_bytes
    if layout == SLIDING_KV_POOL:
        return full_bytes + engine.swa_full_tokens_ratio * sliding_bytes, 0
    window_pages = -(-(model.sliding_window - 1) // block_size) + 1
    window_bytes = window_pages * block_size * sliding_bytes
    return full_bytes, math.ceil(window_bytes / (block_size * full_bytes))


def activation_bytes_per_gpu(
    model: ModelArchitecture, tp: int, tokens: int, sampler_rows: int = _SAMPLER_ROWS
) -> float:
    """Peak activations of one forward pass over `tokens` tokens (see module docstring)."""
    h = model.hidden_size
    hd = model.head_dim
    heads = model.num_attention_heads // tp
    kv_heads = max(1, model.num_key_value_heads // tp)
    inter = model.intermediate_size // tp
    if model.is_moe:  # a token's top-k expert rows, all on one GPU at worst
        inter = max(inter, model.num_experts_per_tok * model.moe_intermediate_size // tp)
    up = inter * (2 if model.gated_mlp else 1)
    qkv = (heads + 2 * kv_heads) * hd
    if model.is_mla:  # both latents, the queries and the prefill's up-projected K and V
        qkv = (
            model.q_lora_rank + model.kv_lora_rank + model.qk_rope_head_dim
            + heads * (hd + model.qk_nope_head_dim + model.v_head_dim)
        )  # fmt: skip
    per_token = _ACT_BYTES * (2 * h + qkv + up + inter)
    logits = min(tokens, sampler_rows) * model.vocab_size * 4 * 2
    return float(tokens * per_token + logits)


def plan_memory(
    model: ModelArchitecture,
    sku: GpuSku,
    tp: int = 1,
    pp: int = 1,
    precision: Precision = Precision.BF16,
    kv_precision: Precision | None = None,
    block_size: int = 16,
    gpu_memory_utilization: float | None = None,
    max_num_batched_tokens: int | None = None,
    framework_reserve_gib: float | None = None,
    engine: EngineProfile | None = None,
    ep: int = 1,
    dp: int = 1,
    drafter: DrafterMemory | None = None,
) -> MemoryPlan:
    """Per-GPU memory plan of `model` on `sku` with `tp` x `pp` (see module docstring).

    `engine` applies that engine's memory plan: its memory fraction (unless
    `gpu_memory_utilization` is given) and what it is a fraction of, its reserves and whether
    the activation peak counts inside the fraction, and its KV precision under FP8 weights
    (unless `kv_precision` is given).  None plans as Vidur's 2024 vLLM (0.9 of total memory,
    1 GiB framework reserve, the profiling run's activations inside the fraction).
    `drafter`: a speculative drafter's weights (beside the target's) and KV (every cached
    token holds both, so it adds to the bytes per token).
    """

    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    validate_parallelism(model, tp, pp, sku, ep=ep, dp=dp)
    validate_precision(sku, precision, kv_precision, model.expert_precision)
    precision = Precision(precision)
    if kv_precision is None and engine is not None:
        kv_precision = engine.kv_precision(precision, model)
    kv_prec = resolve_kv_precision(precision, kv_precision)
    tokens = max_num_batched_tokens or _DEFAULT_BATCHED_TOKENS
    if tokens < 1:
        raise ValueError(f"max_num_batched_tokens must be >= 1, got {tokens}")
    if gpu_memory_utilization is None:
        gpu_memory_utilization = (
            engine.memory_fraction_for(sku, tp, pp, tokens) if engine is not None else 0.9
        )
        if engine is not None and gpu_memory_utilization <= 0.0:
            raise MemoryFractionError(
                f"{engine.key}: its own {engine.memory_fraction_name} on {sku.name} at "
                f"{tokens:,} batched tokens a rank is {gpu_memory_utilization:.3g} (the "
                "engine's reserve grows with its token budget and leaves no memory); give "
                "the fraction (--gpu-memory-utilization, gpu_memory_utilization) or a smaller "
                "token budget (--chunk-size / --max-tokens)"
            )
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    if framework_reserve_gib is None:
        framework_reserve_gib = engine.framework_reserve_gib if engine is not None else 1.0

    kv_per_token, window_blocks = kv_cache_layout(model, tp, pp, kv_prec, block_size, engine)
    weights = weights_bytes_per_gpu(model, tp, pp, precision, ep, dp)
    if drafter is not None:
        kv_per_token += drafter.kv_bytes_per_token
        weights_total = weights + drafter.weights_bytes
    else:
        weights_total = weights
    if engine is None or engine.activation_in_fraction:
        rows = engine.sampler_rows if engine is not None else _SAMPLER_ROWS
        act = activation_bytes_per_gpu(model, tp, tokens, rows)
    else:
        act = 0.0  # the engine keeps activations outside its fraction
    reserve = framework_reserve_gib * GIB
    graphs = engine.graph_reserve_gib * GIB if engine is not None else 0.0
    mem = sku.memory_bytes
    of = engine.memory_of if engine is not None else "total"
    if of == "free":  # a fraction of what is free after weights, activations and reserves
        kv = gpu_memory_utilization * (mem - weights_total - act - reserve - graphs)
        usable = weights_total + act + reserve + graphs + kv
    else:
        usable = mem * gpu_memory_utilization
        kv = usable - weights_total - act - reserve - graphs
    blocks = int(kv // (block_size * kv_per_token)) if kv > 0 else 0
    return MemoryPlan(
        model_name=model.name,
        sku_id=sku.id,
        tp=tp,
        pp=pp,
        precision=precision,
        kv_precision=kv_prec,
        block_size=block_size,
        gpu_memory_utilization=gpu_memory_utilization,
        max_num_batched_tokens=tokens,
        gpu_memory_bytes=mem,
        usable_bytes=usable,
        weights_bytes=weights,
        activation_bytes=act,
        reserve_bytes=reserve,
        kv_bytes=kv,
        kv_bytes_per_token=kv_per_token,
        num_kv_blocks=blocks,
        kv_capacity_tokens=blocks * block_size,
        fits=blocks >= 1,
        engine=engine.key if engine is not None else "vidur@2024",
        memory_fraction_name=(
            engine.memory_fraction_name if engine is not None else "gpu_memory_utilization"
        ),
        memory_fraction_of=of,
        graph_reserve_bytes=graphs,
        dp=dp,
        drafter=drafter,
        window_kv_blocks=window_blocks,
        weight_layout=WeightPrecisions.of(model, precision).describe(model),
    )


def check_fits(
    model: ModelArchitecture,
    sku: GpuSku,
    tp: int = 1,
    pp: int = 1,
    precision: Precision = Precision.BF16,
    kv_precision: Precision | None = None,
    block_size: int = 16,
    gpu_memory_utilization: float | None = None,
    max_num_batched_tokens: int | None = None,
    framework_reserve_gib: float | None = None,
    engine: EngineProfile | None = None,
    ep: int = 1,
    dp: int = 1,
    drafter: DrafterMemory | None = None,
) -> MemoryPlan:
    """`plan_memory`, raising `DoesNotFitError` (with the breakdown) when it does not fit."""
    plan = plan_memory(
        model,
        sku,
        tp,
        pp,
        precision,
        kv_precision,
        block_size,
        gpu_memory_utilization,
        max_num_batched_tokens,
        framework_reserve_gib,
        engine,
        ep,
        dp,
        drafter,
    )
    if not plan.fits:
        raise DoesNotFitError(plan)
    return plan
