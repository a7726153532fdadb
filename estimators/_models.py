"""Model architectures from HuggingFace ``config.json`` files: built-in ones and user paths.

The built-in models are the real public ``config.json`` files, shipped in
``estimators/models/`` (one per model, named ``<org>--<name>.json``, with ``_name_or_path``
giving the hub id). A user can pass the path to any other ``config.json`` (or the directory
holding one); nothing here ever touches the network.

The HF field names differ between model families (``num_hidden_layers`` / ``n_layer``,
``hidden_size`` / ``n_embd``, ...), and some families count differently: Qwen-1's
``intermediate_size`` is the gate and up projections together, so each branch is half of it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich import box
from rich.table import Table

from estimators._types import ModelArchitecture, Precision

__all__ = [
    "ModelConfigError",
    "UnknownModelError",
    "builtin_model_names",
    "format_model_table",
    "load_model",
]

_MODELS_PACKAGE = "estimators"
_MODELS_DIR = "models"
MAX_CONFIG_CHARS = 1 << 20  # a HuggingFace config.json is a few KB; 1 MiB is surely another file


class UnknownModelError(ValueError):
    """The name is neither a built-in model nor a path to a config.json."""

    def __init__(self, name: object, builtin_names: Iterable[str]) -> None:
        self.name = name
        self.builtin_names = tuple(builtin_names)
        super().__init__(
            f"unknown model {name!r}: not a built-in model and not a path to a config.json. "
            f"Built-in models: {', '.join(self.builtin_names)}. "
            "For any other model, pass the path to its HuggingFace config.json "
            "(or to the directory holding it)."
        )


class ModelConfigError(ValueError):
    """A config.json that cannot be read or lacks the fields a model architecture needs."""


# --------------------------------------------------------------------------- model families


@dataclass(frozen=True, slots=True)
class _Family:
    """What a model_type implies where config.json says nothing."""

    norm: str = "rmsnorm"
    gated_mlp: bool = True
    parallel_attn_mlp: bool = False
    hidden_act: str = "silu"
    attention_bias: bool = False
    intermediate_divisor: int = 1  # Qwen-1 counts gate+up together in intermediate_size


_LLAMA_LIKE = _Family()
_GPT_LIKE = _Family(norm="layernorm", gated_mlp=False, hidden_act="gelu_new", attention_bias=True)

_FAMILIES: dict[str, _Family] = {
    "llama": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "yi": _LLAMA_LIKE,
    "baichuan": _LLAMA_LIKE,
    "internlm2": _LLAMA_LIKE,
    "phi3": _LLAMA_LIKE,
    "qwen3": _LLAMA_LIKE,
    # mixtures of experts (`_moe_fields` reads their experts)
    "mixtral": _LLAMA_LIKE,
    "qwen2_moe": _Family(attention_bias=True),
    "qwen3_moe": _LLAMA_LIKE,
    "gpt_oss": _Family(attention_bias=True),  # alternate sliding-window layers (layer_types)
    # multi-head latent attention (`_mla_fields` reads the latent ranks)
    "deepseek_v2": _LLAMA_LIKE,
    "deepseek_v3": _LLAMA_LIKE,
    "kimi_k2": _LLAMA_LIKE,  # Kimi-K2/K2.5's text model: DeepSeek-V3's architecture
    "minimax_m2": _LLAMA_LIKE,  # GQA experts; `attn_type_list` all 1: full attention
    "internlm": _Family(attention_bias=True),  # InternLMConfig.bias defaults to True
    "qwen": _Family(attention_bias=True, intermediate_divisor=2),  # Qwen-1: c_attn has a bias
    "qwen2": _Family(attention_bias=True),  # Qwen2/2.5: q/k/v biases
    "gemma": _Family(hidden_act="gelu_pytorch_tanh"),
    "gemma2": _Family(hidden_act="gelu_pytorch_tanh"),
    "phi": _Family(
        norm="layernorm",
        gated_mlp=False,
        parallel_attn_mlp=True,
        hidden_act="gelu_new",
        attention_bias=True,
    ),
    "phi-msft": _Family(
        norm="layernorm",
        gated_mlp=False,
        parallel_attn_mlp=True,
        hidden_act="gelu_new",
        attention_bias=True,
    ),
    "gpt2": _GPT_LIKE,
    "gpt_bigcode": _Family(
        norm="layernorm", gated_mlp=False, hidden_act="gelu_pytorch_tanh", attention_bias=True
    ),
    "starcoder2": _Family(
        norm="layernorm", gated_mlp=False, hidden_act="gelu_pytorch_tanh", attention_bias=True
    ),
    "gptj": _Family(
        norm="layernorm", gated_mlp=False, parallel_attn_mlp=True, hidden_act="gelu_new"
    ),
    "gpt_neox": _Family(
        norm="layernorm",
        gated_mlp=False,
        parallel_attn_mlp=True,  # use_parallel_residual, default True
        hidden_act="gelu",
        attention_bias=True,
    ),
    "falcon": _Family(norm="layernorm", gated_mlp=False, parallel_attn_mlp=True, hidden_act="gelu"),
    "opt": _Family(norm="layernorm", gated_mlp=False, hidden_act="relu", attention_bias=True),
    "bloom": _Family(norm="layernorm", gated_mlp=False, hidden_act="gelu", attention_bias=True),
}

# model_types (and config keys) of mixture-of-experts or otherwise non-dense models, which a
# ModelArchitecture cannot describe.
_UNSUPPORTED_TYPES = frozenset(
    {
        "dbrx",
        "jamba",
        "olmoe",
        "phimoe",
        "granitemoe",
        "llama4",
        "mamba",
        "mamba2",
        "rwkv",
    }
)
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
# multi-head latent attention: the ranks and head widths it needs (`_mla_fields`)
_MLA_TYPES = frozenset({"deepseek_v2", "deepseek_v3", "kimi_k2"})
_MLA_KEYS = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
_TOPK_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_top_k", "top_k")

# HF names of each field, first preferred; the first name is the one shown in messages.
_KEYS: dict[str, tuple[str, ...]] = {
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers", "n_layers"),
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_attention_heads": ("num_attention_heads", "n_head", "num_heads", "n_heads"),
    "num_key_value_heads": (
        "num_key_value_heads",
        "num_kv_heads",
        "n_head_kv",
        "multi_query_group_num",
    ),
    "intermediate_size": ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim"),
    "vocab_size": ("vocab_size", "padded_vocab_size", "n_vocab"),
    "hidden_act": ("hidden_act", "activation_function", "hidden_activation"),
    "max_position_embeddings": (
        "max_position_embeddings",
        "n_positions",
        "seq_length",
        "max_sequence_length",
        "n_ctx",
    ),
    "head_dim": ("head_dim", "kv_channels"),
    "attention_bias": ("attention_bias", "qkv_bias", "bias", "use_bias"),
    "tie_word_embeddings": ("tie_word_embeddings",),
}
_REQUIRED = ("num_layers", "hidden_size", "num_attention_heads", "vocab_size")

_PosInt = Annotated[int, Field(strict=True, ge=1)]


class _ArchFields(BaseModel):
    """The normalised fields, validated before a ModelArchitecture is built."""

    model_config = ConfigDict(extra="forbid")

    num_layers: _PosInt
    hidden_size: _PosInt
    num_attention_heads: _PosInt
    num_key_value_heads: _PosInt
    intermediate_size: _PosInt
    vocab_size: _PosInt
    hidden_act: Annotated[str, Field(strict=True, min_length=1)]
    max_position_embeddings: _PosInt
    head_dim: _PosInt | None = None
    attention_bias: Annotated[bool, Field(strict=True)]
    tie_word_embeddings: Annotated[bool, Field(strict=True)]


def _lookup(config: Mapping[str, Any], field: str) -> tuple[str | None, Any]:
    """(the HF key found, its value) for a field, or (None, None)."""
    for key in _KEYS[field]:
        if key in config and config[key] is not None:
            return key, config[key]
    return None, None


def _display_name(path: Path) -> str:
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem


def _parse_config(config: Mapping[str, Any], source: str, default_name: str) -> ModelArchitecture:
    """A ModelArchitecture from the fields of an HF config.json (``source`` names it)."""
    text_config = config.get("text_config")
    if isinstance(text_config, dict) and not any(k in config for k in _KEYS["num_layers"]):
        config = {**text_config, "_name_or_path": config.get("_name_or_path")}

    model_type = str(config.get("model_type") or "").lower()
    if model_type in _UNSUPPORTED_TYPES:
        raise ModelConfigError(
            f"{source}: model_type {model_type!r} is not priced by the estimator "
            "(state-space or an unsupported expert layout); supported: dense decoder-only "
            "transformers, mixtures of experts (Mixtral, Qwen-MoE, gpt-oss, MiniMax-M2) and "
            "multi-head latent attention (DeepSeek-V2/V3, Kimi-K2)"
        )
    _check_attention_kinds(config, source)
    family = _FAMILIES.get(model_type)
    if family is None:  # unknown type: infer from the fields a config.json does have
        gpt_style = any(k in config for k in ("n_embd", "n_layer", "n_head"))
        has_layernorm = any(
            k in config for k in ("layer_norm_eps", "layer_norm_epsilon", "layernorm_epsilon")
        )
        rms = "rms_norm_eps" in config or not (gpt_style or has_layernorm)
        act = str(_lookup(config, "hidden_act")[1] or ("silu" if rms else "gelu_new"))
        family = _Family(
            norm="rmsnorm" if rms else "layernorm",
            gated_mlp=act.lower() in ("silu", "swish", "swiglu") and not gpt_style,
            parallel_attn_mlp=bool(
                config.get("parallel_attn", False) or config.get("use_parallel_residual", False)
            ),
            hidden_act="silu" if rms else "gelu_new",
            attention_bias=not rms,
        )

    missing = [f for f in _REQUIRED if _lookup(config, f)[0] is None]
    if family.gated_mlp and _lookup(config, "intermediate_size")[0] is None:
        missing.append("intermediate_size")
    if missing:
        described = [
            _KEYS[f][0] + (f" (or {' / '.join(_KEYS[f][1:])})" if len(_KEYS[f]) > 1 else "")
            for f in missing
        ]
        raise ModelConfigError(
            f"{source}: missing required field(s) {', '.join(described)}"
            + (f" for model_type {model_type!r}" if model_type else "")
        )

    sources: dict[str, str] = {}  # normalised field -> HF key it came from, for messages
    values: dict[str, Any] = {}
    for field in _KEYS:
        key, value = _lookup(config, field)
        if key is not None:
            sources[field] = key
            values[field] = value

    heads = values["num_attention_heads"]
    hidden = values["hidden_size"]
    # Defaults and family conventions.
    if "num_key_value_heads" not in values:
        falcon_mqa = (
            model_type == "falcon"
            and bool(config.get("multi_query"))
            and not config.get("new_decoder_architecture")
        )
        bigcode_mqa = model_type == "gpt_bigcode" and bool(config.get("multi_query", True))
        values["num_key_value_heads"] = 1 if falcon_mqa or bigcode_mqa else heads
    if "intermediate_size" not in values:
        values["intermediate_size"] = 4 * hidden if isinstance(hidden, int) else hidden
    elif family.intermediate_divisor > 1 and isinstance(values["intermediate_size"], int):
        values["intermediate_size"] //= family.intermediate_divisor
    values.setdefault("hidden_act", family.hidden_act)
    values.setdefault("max_position_embeddings", 2048)
    values.setdefault("attention_bias", family.attention_bias)
    values.setdefault("tie_word_embeddings", True)  # the HF PretrainedConfig default
    if model_type == "gpt_neox" and "use_parallel_residual" in config:
        family = replace(family, parallel_attn_mlp=bool(config["use_parallel_residual"]))
    if model_type == "falcon" and "parallel_attn" in config:
        family = replace(family, parallel_attn_mlp=bool(config["parallel_attn"]))

    try:
        fields = _ArchFields.model_validate(values)
    except ValidationError as exc:
        problems = []
        for err in exc.errors(include_url=False):
            field = str(err["loc"][0]) if err["loc"] else "?"
            key = sources.get(field, field)
            msg = str(err["msg"]).replace("Input should be", "must be")
            problems.append(f"{key}={err.get('input')!r}: {msg}")
        raise ModelConfigError(f"{source}: invalid field(s): {'; '.join(problems)}") from None

    mla = _mla_fields(config, source)
    if not mla and model_type in _MLA_TYPES:
        raise ModelConfigError(
            f"{source}: model_type {model_type!r} uses multi-head latent attention but has no "
            "kv_lora_rank"
        )
    head_dim = fields.head_dim
    if mla:  # queries and keys are nope + rope wide per head, whatever hidden / heads is
        head_dim = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    if head_dim is None and fields.hidden_size % fields.num_attention_heads:
        raise ModelConfigError(
            f"{source}: hidden_size={fields.hidden_size} is not a multiple of "
            f"num_attention_heads={fields.num_attention_heads} and no head_dim is given"
        )
    if head_dim is not None and head_dim * fields.num_attention_heads == fields.hidden_size:
        head_dim = None  # the usual hidden / heads: no override needed
    if fields.num_attention_heads % fields.num_key_value_heads:
        raise ModelConfigError(
            f"{source}: num_attention_heads={fields.num_attention_heads} is not a multiple of "
            f"{sources.get('num_key_value_heads', 'num_key_value_heads')}="
            f"{fields.num_key_value_heads}"
        )

    name = config.get("_name_or_path")
    if not isinstance(name, str) or not name.strip():
        name = default_name
    moe = _moe_fields(config, source, fields.num_layers, fields.intermediate_size)
    experts, int4_group = _expert_precision(config, moe.get("num_experts", 0), source)
    return ModelArchitecture(
        name=name.strip(),
        num_layers=fields.num_layers,
        hidden_size=fields.hidden_size,
        num_attention_heads=fields.num_attention_heads,
        num_key_value_heads=fields.num_key_value_heads,
        intermediate_size=fields.intermediate_size,
        vocab_size=fields.vocab_size,
        hidden_act=fields.hidden_act,
        norm=family.norm,
        tie_word_embeddings=fields.tie_word_embeddings,
        gated_mlp=family.gated_mlp,
        max_position_embeddings=fields.max_position_embeddings,
        head_dim_override=head_dim,
        attention_bias=fields.attention_bias,
        parallel_attn_mlp=family.parallel_attn_mlp,
        weight_scale_block=_weight_scale_block(config, source),
        expert_precision=experts,
        int4_group_size=int4_group,
        weight_precision=_weight_precision(config),
        kv_cache_precision=_kv_cache_precision(config),
        **_sliding_window_fields(config, source, model_type, fields.num_layers),
        qk_norm=_qk_norm(config, model_type),
        **moe,
        model_type=model_type,
        **mla,
    )


# layer_types values the estimator prices (HF's per-layer attention kinds)
_LAYER_TYPES = ("full_attention", "sliding_attention")
# MiniMax's per-layer attention kinds (`attn_type_list`): 1 is softmax attention over every
# key; 0, MiniMax-Text-01/M1's lightning (linear) attention, is not priced
_MINIMAX_FULL_ATTENTION = 1


def _check_attention_kinds(config: Mapping[str, Any], source: str) -> None:
    """Raise for attention the estimator cannot price, whatever the model_type says:
    DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5: a lightning indexer picks
    ``index_topk`` keys per query, so neither the MLA cost of every key nor the indexer's
    own scoring is what runs), layer kinds of HF's ``layer_types`` other than full and
    sliding-window attention (Qwen3.5's linear attention, ...) and MiniMax's lightning
    attention layers (``attn_type_list`` entries other than 1)."""
    if config.get("index_topk") is not None:
        raise ModelConfigError(
            f"{source}: index_topk={config['index_topk']!r}: DeepSeek Sparse Attention (a "
            "lightning indexer choosing the keys each query reads) is not priced by the "
            "estimator; supported: full, sliding-window and multi-head latent attention"
        )
    types = config.get("layer_types")
    if isinstance(types, list):
        unknown = sorted({str(t) for t in types if t not in _LAYER_TYPES})
        if unknown:
            raise ModelConfigError(
                f"{source}: layer_types holds {', '.join(map(repr, unknown))}, which the "
                f"estimator cannot price; supported: {', '.join(_LAYER_TYPES)}"
            )
    kinds = config.get("attn_type_list")
    if kinds is None:
        return
    if not isinstance(kinds, list) or any(k != _MINIMAX_FULL_ATTENTION for k in kinds):
        raise ModelConfigError(
            f"{source}: attn_type_list={kinds!r:.80}: only 1 (full softmax attention in "
            "every layer) is priced; 0 (lightning / linear attention) is not"
        )


def _mla_fields(config: Mapping[str, Any], source: str) -> dict[str, int]:
    """The multi-head latent attention fields of a config.json ({} for standard attention):
    ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim`` (all
    required once ``kv_lora_rank`` is set) and ``q_lora_rank`` (null: queries projected from
    the hidden state directly, as DeepSeek-V2-Lite). DeepSeek-V3's routing details
    (``n_group``, ``topk_group``, ``routed_scaling_factor``, ``scoring_func``) choose which
    experts a token goes to and scale their outputs: they cost nothing the estimator prices,
    and routing stays modelled as uniform with a load skew (estimators/_moe.py). Its
    multi-token-prediction layer (``num_nextn_predict_layers``) is not loaded for serving
    without speculative decoding, and is left out."""
    if config.get("kv_lora_rank") is None:
        return {}
    missing = [k for k in _MLA_KEYS if config.get(k) is None]
    if missing:
        raise ModelConfigError(
            f"{source}: kv_lora_rank={config['kv_lora_rank']!r} (multi-head latent attention) "
            f"but no {', '.join(missing)}"
        )
    fields = {k: _positive_int(config, k, source) for k in _MLA_KEYS}
    q_rank = config.get("q_lora_rank")
    fields["q_lora_rank"] = 0 if q_rank is None else _positive_int(config, "q_lora_rank", source)
    return fields


# model_types whose `sliding_window` applies to every layer when config.json has no
# layer_types (HF MistralConfig); Qwen2/3 configs carry a window they do not use
# (use_sliding_window: false)
_ALL_LAYERS_SLIDE = frozenset({"mistral"})


def _sliding_window_fields(
    config: Mapping[str, Any], source: str, model_type: str, num_layers: int
) -> dict[str, int]:
    """``sliding_window`` and how many layers use it ({} when none does): the layers that
    ``layer_types`` marks ``sliding_attention`` (gpt-oss alternates them with full
    attention), or every layer of a Mistral config with a window.  gpt-oss's attention sinks
    (a learned logit per head in each softmax) add one score per query and head: nothing the
    estimator prices."""
    types = config.get("layer_types")
    window = config.get("sliding_window")
    if types is None:
        if window is None or model_type not in _ALL_LAYERS_SLIDE:
            return {}
        sliding = num_layers
    else:
        if not isinstance(types, list) or len(types) != num_layers:
            raise ModelConfigError(
                f"{source}: layer_types must list one attention kind per layer "
                f"({num_layers}), got {types!r:.80}"
            )
        sliding = types.count("sliding_attention")
        if not sliding:
            return {}
        if window is None:
            raise ModelConfigError(
                f"{source}: layer_types has sliding_attention layers but no sliding_window"
            )
    return {
        "sliding_window": _positive_int(config, "sliding_window", source),
        "sliding_window_layers": sliding,
    }


# model_types whose attention normalizes each query and key head before RoPE (Qwen3Attention's
# q_norm / k_norm, in HF transformers and in vLLM, SGLang and TensorRT-LLM alike)
_QK_NORM_PER_HEAD = frozenset({"qwen3", "qwen3_moe"})


def _qk_norm(config: Mapping[str, Any], model_type: str) -> str:
    """`ModelArchitecture.qk_norm` of a config: "head" for Qwen3's per-head norms; for
    MiniMax-M2 (``use_qk_norm``), "layer" where ``qk_norm_type`` is ``per_layer``: one
    RMSNorm over all query heads and one over all key heads, which under TP vLLM
    (MiniMaxText01RMSNormTP.forward_qk) and SGLang (MiniMaxM2RMSNormTP) compute from an
    all-reduce of each token's fp32 sums of squares; "" otherwise."""
    if model_type in _QK_NORM_PER_HEAD:
        return "head"
    if model_type == "minimax_m2" and config.get("use_qk_norm"):
        return "layer" if config.get("qk_norm_type") == "per_layer" else "head"
    return ""


def _quantization(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """The checkpoint's ``quantization_config`` ({} where it has none, or not a mapping)."""
    quant = config.get("quantization_config")
    return quant if isinstance(quant, dict) else {}


def _weight_scale_block(config: Mapping[str, Any], source: str) -> int:
    """Weights per scale of a block-scaled checkpoint (``quantization_config``'s
    ``weight_block_size``, [128, 128] -> 16384), 0 when it has none."""
    block = _quantization(config).get("weight_block_size")
    if block is None:
        return 0
    if (
        not isinstance(block, list)
        or not block
        or not all(isinstance(b, int) and not isinstance(b, bool) and b >= 1 for b in block)
    ):
        raise ModelConfigError(
            f"{source}: quantization_config.weight_block_size={block!r}: must be a list of "
            "integers >= 1 (such as [128, 128])"
        )
    size = 1
    for b in block:
        size *= b
    return size


def _expert_precision(
    config: Mapping[str, Any], num_experts: int, source: str
) -> tuple[Precision | None, int]:
    """(the routed experts' own storage precision where the checkpoint keeps them apart, the
    weights per scale of INT4 ones or 0): an MXFP4 ``quantization_config`` (gpt-oss:
    ``quant_method: mxfp4``, its ``modules_to_not_convert`` the attention, router,
    embedding and LM head) quantises the experts only, and so does Kimi-K2.5's
    compressed-tensors one (`_int4_experts`); None for any other checkpoint, or one that
    leaves its experts out."""
    quant = _quantization(config)
    if not num_experts:
        return None, 0
    if quant.get("quant_method") == "compressed-tensors":
        return _int4_experts(quant, source)
    if quant.get("quant_method") != "mxfp4":
        return None, 0
    kept = quant.get("modules_to_not_convert") or []
    if any("experts" in str(module) for module in kept):
        return None, 0
    return Precision.MXFP4, 0


# module names, DeepSeek-V3's and Kimi-K2's, of one routed expert's weights and of the layers
# an INT4 expert checkpoint must keep in 16 bits (`_int4_experts`)
_ROUTED_EXPERT_MODULE = "model.layers.3.mlp.experts.0.down_proj"
_KEPT_16_BIT_MODULES = (
    "model.layers.3.self_attn.o_proj",
    "model.layers.3.mlp.shared_experts.down_proj",
    "model.layers.0.mlp.down_proj",
)


def _compressed_tensors_group(quant: Mapping[str, Any]) -> tuple[Mapping[str, Any], Any]:
    """(weight scheme, input activations scheme) of a compressed-tensors
    ``quantization_config`` with one ``config_groups`` group; ({}, None) for any other."""
    groups = quant.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        return {}, None
    [group] = groups.values()
    if not isinstance(group, dict) or not isinstance(group.get("weights"), dict):
        return {}, None
    return group["weights"], group.get("input_activations")


def _compressed_tensors_fp8(quant: Mapping[str, Any]) -> bool:
    """Whether a compressed-tensors config stores its weights in FP8 (8-bit ``float``, as
    the FP8-dynamic checkpoints do): an FP8 checkpoint as a whole (`_weight_precision`)."""
    weights, _ = _compressed_tensors_group(quant)
    return weights.get("num_bits") == 8 and weights.get("type") == "float"


def _int4_experts(quant: Mapping[str, Any], source: str) -> tuple[Precision | None, int]:
    """A compressed-tensors ``quantization_config`` of INT4 weight-only routed experts, as
    Kimi-K2.5's (a ``config_groups`` group of 4-bit ``int`` weights by ``group`` strategy, no
    input activations quantised, its ``ignore`` list keeping the attention, the shared
    experts and the dense layers' MLP in 16 bits): (INT4, its group size).  Any other
    compressed-tensors layout, which llmcap does not price, is a `ModelConfigError` naming
    the field; (None, 0) when the routed experts are in the ``ignore`` list."""
    ignore = [str(p) for p in quant.get("ignore") or []]
    try:
        patterns = [re.compile(p[3:]) for p in ignore if p.startswith("re:")]
    except re.error as exc:
        raise ModelConfigError(
            f"{source}: quantization_config.ignore: {exc.pattern!r} is not a regular "
            f"expression ({exc})"
        ) from None
    names = {p for p in ignore if not p.startswith("re:")}

    def ignored(module: str) -> bool:
        return module in names or any(p.match(module) for p in patterns)

    if ignored(_ROUTED_EXPERT_MODULE) or _compressed_tensors_fp8(quant):
        return None, 0  # 16-bit experts, or an FP8 checkpoint as a whole
    scheme, activations = _compressed_tensors_group(quant)
    group_size = scheme.get("group_size")
    if (
        scheme.get("num_bits") != 4
        or scheme.get("type") != "int"
        or scheme.get("strategy") != "group"
        or not isinstance(group_size, int)
        or isinstance(group_size, bool)
        or group_size < 1
        or activations is not None
    ):
        raise ModelConfigError(
            f"{source}: quantization_config.config_groups: llmcap prices compressed-tensors "
            "checkpoints of FP8 weights and of INT4 weight-only routed experts (one group of "
            "4-bit int weights, group strategy with a group_size, no input_activations: "
            "Kimi-K2.5's); got "
            f"{json.dumps(quant.get('config_groups'), sort_keys=True)[:300]}"
        )
    quantized = [m for m in _KEPT_16_BIT_MODULES if not ignored(m)]
    if quantized:
        raise ModelConfigError(
            f"{source}: quantization_config.ignore={ignore!r}: INT4 weights outside the "
            f"routed experts ({quantized[0]} is not ignored) are not priced; llmcap prices "
            "INT4 routed experts with 16-bit attention, shared experts and dense MLPs "
            "(Kimi-K2.5's layout)"
        )
    return Precision.INT4, group_size


def _weight_precision(config: Mapping[str, Any]) -> Precision | None:
    """The checkpoint's weight precision where its ``quantization_config`` quantises the
    weights as a whole: FP8 for ``quant_method: fp8`` (DeepSeek-V3's and MiniMax-M2.5's
    block-scaled weights), ModelOpt's ``quant_algo: FP8`` and compressed-tensors' 8-bit
    float weights (the FP8-dynamic checkpoints), FP4 for ModelOpt's ``NVFP4``; None for a
    16-bit checkpoint, or one that quantises its experts alone (gpt-oss's MXFP4, Kimi-K2.5's
    INT4: `_expert_precision`)."""
    quant = _quantization(config)
    method = str(quant.get("quant_method", "")).lower()
    if method == "fp8" or (method == "compressed-tensors" and _compressed_tensors_fp8(quant)):
        return Precision.FP8
    if method == "modelopt":
        return {"FP8": Precision.FP8, "NVFP4": Precision.FP4}.get(
            str(quant.get("quant_algo", "")).upper()
        )
    return None


def _kv_cache_precision(config: Mapping[str, Any]) -> Precision | None:
    """The KV-cache precision the checkpoint declares (``quantization_config``'s
    ``kv_cache_quant_algo``: FP8, as ModelOpt's FP8 and NVFP4 checkpoints have it), None
    where it declares none."""
    algo = _quantization(config).get("kv_cache_quant_algo")
    return Precision.FP8 if str(algo or "").upper() == "FP8" else None


def _positive_int(config: Mapping[str, Any], key: str, source: str) -> int:
    value = config[key]
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ModelConfigError(f"{source}: {key}={value!r}: must be an integer >= 1")
    return value


def _moe_fields(
    config: Mapping[str, Any], source: str, num_layers: int, intermediate_size: int
) -> dict[str, int]:
    """The mixture-of-experts fields of a config.json ({} for a dense model).

    Routed experts: ``num_local_experts`` (Mixtral, gpt-oss), ``num_experts`` (Qwen-MoE),
    ``n_routed_experts``; top-k: ``num_experts_per_tok`` (or ``experts_per_token``); expert
    width: ``moe_intermediate_size``, else ``intermediate_size`` (Mixtral, gpt-oss). Shared
    experts: ``shared_expert_intermediate_size`` (Qwen2-MoE) or ``n_shared_experts`` x the
    expert width. Dense layers: ``first_k_dense_replace`` (the first k), Qwen's
    ``mlp_only_layers`` and ``decoder_sparse_step`` (layer i is MoE when (i + 1) % step == 0).
    ``norm_topk_prob`` only rescales the routing weights: it costs nothing.
    """
    key = next((k for k in _EXPERT_KEYS if config.get(k) is not None), None)
    if key is None:
        return {}
    experts = _positive_int(config, key, source)
    if experts == 1:
        return {}
    topk_key = next((k for k in _TOPK_KEYS if config.get(k) is not None), None)
    if topk_key is None:
        raise ModelConfigError(
            f"{source}: {key}={experts} but no num_experts_per_tok (experts each token is "
            "routed to)"
        )
    topk = _positive_int(config, topk_key, source)
    if topk > experts:
        raise ModelConfigError(
            f"{source}: {topk_key}={topk} exceeds {key}={experts}"
        )
    width = (
        _positive_int(config, "moe_intermediate_size", source)
        if config.get("moe_intermediate_size") is not None
        else intermediate_size
    )
    shared = 0
    if config.get("shared_expert_intermediate_size"):
        shared = _positive_int(config, "shared_expert_intermediate_size", source)
    elif config.get("n_shared_experts"):
        shared = _positive_int(config, "n_shared_experts", source) * width
    dense = set(range(min(int(config.get("first_k_dense_replace") or 0), num_layers)))
    only = config.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) for i in only):
        raise ModelConfigError(f"{source}: mlp_only_layers={only!r}: must be a list of layers")
    dense.update(i for i in only if 0 <= i < num_layers)
    step = config.get("decoder_sparse_step")
    if step is not None:
        step = _positive_int(config, "decoder_sparse_step", source)
        dense.update(i for i in range(num_layers) if (i + 1) % step)
    if len(dense) >= num_layers:
        return {}
    return {
        "num_experts": experts,
        "num_experts_per_tok": topk,
        "moe_intermediate_size": width,
        "shared_expert_intermediate_size": shared,
        "num_dense_layers": len(dense),
    }


def _read_json(text: str, source: str) -> dict[str, Any]:
    if len(text) > MAX_CONFIG_CHARS:
        raise ModelConfigError(
            f"{source}: over {MAX_CONFIG_CHARS:,} characters; a config.json is a few KB"
        )
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ModelConfigError(
            f"{source}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise ModelConfigError(f"{source}: JSON nested too deeply for a config.json") from None
    if not isinstance(document, dict):
        raise ModelConfigError(
            f"{source}: expected a JSON object (a HuggingFace config.json), "
            f"got {type(document).__name__}"
        )
    return document


# --------------------------------------------------------------------------- built-in models


def _normalise(name: str) -> str:
    return name.strip().lower()


# checkpoint variants that keep the base model's shapes: instruction or chat tuning changes the
# weights, quantised checkpoints their precision (given separately), never the architecture
QUANTIZED_SUFFIXES = (
    "-fp8", "-fp8-dynamic", "-nvfp4", "-fp4", "-awq", "-gptq", "-int4", "-int8", "-w8a8",
    "-w4a16",
)  # fmt: skip
VARIANT_SUFFIXES = ("-instruct", "-chat", "-it", "-hf", *QUANTIZED_SUFFIXES)


def builtin_variant(name: str) -> tuple[str, tuple[str, ...]] | None:
    """(built-in HF id, suffixes dropped) for a model ID that differs from a built-in only by
    variant suffixes (``nvidia/Llama-3.1-8B-Instruct-FP8`` -> ``meta-llama/Llama-3.1-8B``,
    ("-instruct", "-fp8")); None when no built-in matches that way or the name is one."""
    lookup = _builtins().lookup
    if _normalise(name) in lookup:
        return None
    short = _normalise(name).rsplit("/", 1)[-1]
    dropped: list[str] = []
    while True:
        suffix = next((s for s in VARIANT_SUFFIXES if short.endswith(s)), None)
        if suffix is None or short == suffix:
            return None
        short = short[: -len(suffix)]
        dropped.insert(0, suffix)
        hf_id = lookup.get(short)
        if hf_id is not None:
            return hf_id, tuple(dropped)


def variant_note(name: str) -> str | None:
    """One line saying which built-in architecture a variant model ID resolves to, or None."""
    found = builtin_variant(name)
    if found is None:
        return None
    hf_id, dropped = found
    own = _load_builtin(hf_id).expert_precision
    kept = (
        f"; its experts take the precision given, not {hf_id}'s own {own.value}"
        if own is not None and _quantized(dropped)
        else ""
    )
    return (
        f"model {name!r} has the architecture of built-in {hf_id} ({', '.join(dropped)}: a "
        f"tuned, converted or quantised checkpoint of the same shapes{kept})"
    )


def _quantized(dropped: tuple[str, ...]) -> bool:
    """Whether a variant's suffixes name a quantised checkpoint of its own."""
    return any(s in QUANTIZED_SUFFIXES for s in dropped)


def _aliases(hf_id: str) -> set[str]:
    short = hf_id.rsplit("/", 1)[-1].lower()
    names = {hf_id.lower(), short}
    if short.endswith("-hf"):
        names.add(short[: -len("-hf")])
    for name in list(names):
        if name.startswith("llama-"):  # llama-2-7b -> llama2-7b
            names.add("llama" + name[len("llama-") :])
    return names


# Extra conveniences that the automatic rules above do not produce.
_EXTRA_ALIASES: dict[str, str] = {
    # DeepSeek-R1 is DeepSeek-V3's architecture (same config.json shapes), trained further
    "deepseek-ai/deepseek-r1": "deepseek-ai/DeepSeek-V3",
    "deepseek-r1": "deepseek-ai/DeepSeek-V3",
    # DeepSeek-V3.1 too (same shapes; V3.2 adds sparse attention and is not priced)
    "deepseek-ai/deepseek-v3.1": "deepseek-ai/DeepSeek-V3",
    "deepseek-v3.1": "deepseek-ai/DeepSeek-V3",
    "mistral-7b": "mistralai/Mistral-7B-v0.1",
    "codellama-34b": "codellama/CodeLlama-34b-Instruct-hf",
    "codellama-34b-instruct": "codellama/CodeLlama-34b-Instruct-hf",
}


@dataclass(frozen=True, slots=True)
class _Builtins:
    files: Mapping[str, str]  # HF id -> resource file name
    lookup: Mapping[str, str]  # normalised name or alias -> HF id


@lru_cache(maxsize=1)
def _builtins() -> _Builtins:
    folder = resources.files(_MODELS_PACKAGE).joinpath(_MODELS_DIR)
    files: dict[str, str] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name.lower()):
        if not entry.name.endswith(".json"):
            continue
        document = _read_json(entry.read_text(encoding="utf-8"), f"<built-in {entry.name}>")
        hf_id = document.get("_name_or_path") or entry.name[: -len(".json")].replace("--", "/")
        files[str(hf_id)] = entry.name
    lookup: dict[str, str] = {}
    for hf_id in files:
        for alias in _aliases(hf_id):
            other = lookup.setdefault(alias, hf_id)
            if other != hf_id:
                raise RuntimeError(f"built-in model alias {alias!r} names {other} and {hf_id}")
    for alias, hf_id in _EXTRA_ALIASES.items():
        if hf_id in files:
            lookup.setdefault(alias, hf_id)
    return _Builtins(files=files, lookup=lookup)


@cache
def _load_builtin(hf_id: str) -> ModelArchitecture:
    file_name = _builtins().files[hf_id]
    source = f"<built-in estimators/{_MODELS_DIR}/{file_name}>"
    entry = resources.files(_MODELS_PACKAGE).joinpath(_MODELS_DIR).joinpath(file_name)
    return _parse_config(_read_json(entry.read_text(encoding="utf-8"), source), source, hf_id)


def builtin_model_names() -> list[str]:
    """The HuggingFace ids of the built-in models, sorted."""
    return sorted(_builtins().files, key=str.lower)


# --------------------------------------------------------------------------- public API


def _looks_like_path(text: str) -> bool:
    return (
        text.endswith(".json")
        or text.startswith((".", "~", os.sep))
        or (os.altsep is not None and text.startswith(os.altsep))
        or text.count("/") > 1
    )


def _config_file(path: Path) -> Path | None:
    """The config.json that ``path`` names (a file, or a directory holding one), if any."""
    try:
        if path.is_file():
            return path
        if path.is_dir() and (path / "config.json").is_file():
            return path / "config.json"
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, no permission
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ModelConfigError(f"cannot use model path {_shown(path)}: {reason}") from None
    return None


def _expand_user(path: Path) -> Path:
    try:
        return path.expanduser()
    except RuntimeError:  # ~name of a user that does not exist: the path as written
        return path


def _shown(path: Path, limit: int = 120) -> str:
    text = str(path)
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-limit // 2 :]}"


def load_model(name_or_path: str | os.PathLike[str]) -> ModelArchitecture:
    """The architecture of a built-in model or of a HuggingFace ``config.json`` on disk.

    ``name_or_path`` is a built-in name in any case (``"meta-llama/Llama-2-7b-hf"``,
    ``"Llama-2-7b-hf"``, ``"llama-2-7b"``, ``"llama-3.1-70b"``, ...) or a variant of one that
    differs only by suffixes such as ``-Instruct`` or ``-FP8`` (`variant_note` says which
    built-in it resolved to), or the path to a
    ``config.json`` or to the directory holding one (a local path wins over a built-in name,
    as in HuggingFace). Never downloads anything.

    Raises `UnknownModelError` for a name that is neither, and `ModelConfigError` for a
    config.json that is missing, not JSON, or lacks required fields.
    """
    text = os.fspath(name_or_path)
    if not isinstance(text, str):
        raise UnknownModelError(name_or_path, builtin_model_names())
    path = _expand_user(Path(text))
    config_path = _config_file(path) if text.strip() else None
    if config_path is not None:
        try:
            if config_path.stat().st_size > MAX_CONFIG_CHARS:
                raise ModelConfigError(
                    f"{_shown(config_path)}: over {MAX_CONFIG_CHARS:,} bytes; a config.json is "
                    "a few KB"
                )
            raw = config_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelConfigError(f"cannot read {_shown(config_path)}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ModelConfigError(
                f"{_shown(config_path)} is not UTF-8 text (byte {exc.object[exc.start]:#04x} at "
                f"offset {exc.start})"
            ) from None
        source = str(config_path)
        return _parse_config(_read_json(raw, source), source, _display_name(config_path))
    hf_id = _builtins().lookup.get(_normalise(text))
    if hf_id is not None:
        return _load_builtin(hf_id)
    if path.is_dir():
        raise ModelConfigError(f"{path} is a directory without a config.json")
    variant = builtin_variant(text)
    if variant is not None:  # e.g. -Instruct, -FP8: the built-in's shapes (`variant_note`)
        model = _load_builtin(variant[0])
        if _quantized(variant[1]) and model.expert_precision is not None:
            # its own quantised checkpoint (nvidia/Kimi-K2.5-NVFP4): the base checkpoint's
            # expert format (Kimi-K2.5's INT4) is not its; the run's precision sets them
            return replace(model, expert_precision=None, int4_group_size=0)
        return model
    if _looks_like_path(text):
        raise ModelConfigError(f"model config file not found: {path}")
    raise UnknownModelError(text, builtin_model_names())


# (header, cell, shown only with --wide): the narrow set fits 80 columns
_MODEL_COLUMNS: tuple[tuple[str, Callable[[ModelArchitecture], str], bool], ...] = (
    ("name", lambda m: m.name, False),
    ("layers", lambda m: str(m.num_layers), False),
    ("hidden", lambda m: str(m.hidden_size), True),
    ("heads", lambda m: str(m.num_attention_heads), False),
    ("kv", lambda m: "latent" if m.is_mla else str(m.num_key_value_heads), False),
    ("head dim", lambda m: str(m.head_dim), True),
    ("intermediate", lambda m: str(m.intermediate_size), True),
    ("vocab", lambda m: str(m.vocab_size), True),
    ("params", lambda m: f"{m.num_params / 1e9:.2f}B", False),
    ("active", lambda m: f"{m.active_params / 1e9:.2f}B", False),
    ("experts", lambda m: f"{m.num_experts_per_tok}/{m.num_experts}" if m.is_moe else "-", True),
)


def format_model_table(
    models: Iterable[ModelArchitecture] | None = None, wide: bool = False
) -> Table:
    """A rich table of model shapes; the built-in models when ``models`` is None.  Names
    never wrap or shorten (they are what a user types); `wide` adds hidden size, head dim,
    intermediate size, vocabulary and the experts (top-k / routed) of a mixture of experts;
    ``active`` is the weights one token runs through (all of them for a dense model)."""
    if models is None:
        models = [load_model(name) for name in builtin_model_names()]
    columns = [c for c in _MODEL_COLUMNS if wide or not c[2]]
    rows = [[cell(model) for _, cell, _ in columns] for model in models]
    table = Table(title="Models", title_justify="left", box=box.SIMPLE_HEAD)
    for i, (header, _, _) in enumerate(columns):
        name = header == "name"
        table.add_column(
            header, justify="left" if name else "right", no_wrap=True,
            min_width=max([len(header), *(len(r[i]) for r in rows)]),  # never shortened
            style="bold" if name else None,
        )  # fmt: skip
    for row in rows:
        table.add_row(*row)
    return table
