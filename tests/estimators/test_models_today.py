"""Today's built-in mixtures of experts (Kimi-K2.5, MiniMax-M2.5) and the attention kinds
the estimator refuses to price (DeepSeek Sparse Attention, linear and lightning attention)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from estimators import ModelConfigError, Precision, builtin_model_names, load_model
from estimators._memory import weights_bytes_per_gpu, with_expert_precision
from estimators._models import builtin_variant

KIMI = "moonshotai/Kimi-K2.5"
MINIMAX = "MiniMaxAI/MiniMax-M2.5"


def _routed_and_shared(model: Any) -> tuple[int, int]:
    """(weights of one routed expert, of the shared expert) of one MoE layer, from the
    config's own widths: gate, up and down projections."""
    expert = 3 * model.hidden_size * model.moe_intermediate_size
    shared = 3 * model.hidden_size * model.shared_expert_intermediate_size
    return expert, shared


def test_the_new_models_are_built_in_and_resolve_by_short_name() -> None:
    assert {KIMI, MINIMAX} <= set(builtin_model_names())
    assert load_model("kimi-k2.5").name == KIMI
    assert load_model("minimax-m2.5").name == MINIMAX
    # the NVFP4 checkpoints the silicon sample measures keep the base shapes
    assert builtin_variant("nvidia/Kimi-K2.5-NVFP4") == (KIMI, ("-nvfp4",))
    assert builtin_variant("nvidia/MiniMax-M2.5-NVFP4") == (MINIMAX, ("-nvfp4",))
    # DeepSeek-V3.1 is DeepSeek-V3's architecture
    assert load_model("nvidia/DeepSeek-V3.1-NVFP4").name == "deepseek-ai/DeepSeek-V3"


def test_kimi_k25_is_deepseek_v3_mla_with_384_experts() -> None:
    """The config nests the text model (DeepseekV3ForCausalLM, model_type kimi_k2) under
    text_config, beside a vision tower the estimator does not price."""
    kimi = load_model(KIMI)
    assert kimi.is_moe and kimi.is_mla
    assert (kimi.num_layers, kimi.hidden_size, kimi.num_attention_heads) == (61, 7168, 64)
    assert (kimi.num_experts, kimi.num_experts_per_tok) == (384, 8)
    assert (kimi.moe_intermediate_size, kimi.shared_expert_intermediate_size) == (2048, 2048)
    assert kimi.num_dense_layers == 1  # first_k_dense_replace
    assert (kimi.kv_lora_rank, kimi.q_lora_rank, kimi.qk_rope_head_dim) == (512, 1536, 64)
    # MLA's KV cache: the latent and the rotary key, (512 + 64) x 61 layers at 16 bits
    assert kimi.kv_bytes_per_token(2) == (512 + 64) * 61 * 2


def test_minimax_m25_is_full_attention_gqa_with_256_experts() -> None:
    minimax = load_model(MINIMAX)
    assert minimax.is_moe and not minimax.is_mla
    assert minimax.sliding_window_layers == 0  # attn_type_list: 1 in all 62 layers
    assert (minimax.num_layers, minimax.hidden_size) == (62, 3072)
    assert (minimax.num_attention_heads, minimax.num_key_value_heads) == (48, 8)
    assert minimax.head_dim == 128  # explicit: 48 x 128 = 6144, twice the hidden size
    assert (minimax.num_experts, minimax.num_experts_per_tok) == (256, 8)
    assert minimax.moe_intermediate_size == 1536  # intermediate_size: each expert's width
    assert minimax.shared_expert_intermediate_size == 0 and minimax.num_dense_layers == 0
    assert minimax.kv_bytes_per_token(2) == 2 * 8 * 128 * 62 * 2


@pytest.mark.parametrize(
    ("name", "total_b", "active_b"),
    # model cards: Kimi-K2.5 1T total / 32B activated (its hub page counts 1.04T with the
    # vision tower); MiniMax-M2.5 230B total / 10B activated
    [(KIMI, 1040.0, 32.0), (MINIMAX, 230.0, 10.0)],
)
def test_param_counts_match_the_model_cards(name: str, total_b: float, active_b: float) -> None:
    model = load_model(name)
    assert model.num_params / 1e9 == pytest.approx(total_b, rel=0.03)
    # the cards leave the input embedding out of the activated count (it is a lookup)
    active = (model.active_params - model.embedding_params) / 1e9
    assert active == pytest.approx(active_b, rel=0.05)


@pytest.mark.parametrize("name", [KIMI, MINIMAX])
def test_param_counts_follow_from_the_config(name: str) -> None:
    """Total minus active is the routed experts a token skips, layer by layer."""
    model = load_model(name)
    expert, _ = _routed_and_shared(model)
    moe_layers = model.num_layers - model.num_dense_layers
    skipped = moe_layers * (model.num_experts - model.num_experts_per_tok) * expert
    assert model.num_params - model.active_params == skipped


@pytest.mark.parametrize(("name", "tp", "ep"), [(KIMI, 8, 8), (MINIMAX, 4, 4), (MINIMAX, 4, 1)])
@pytest.mark.parametrize("precision", [Precision.FP8, Precision.BF16])
def test_weights_per_gpu_are_the_parameters_over_the_gpus(
    name: str, tp: int, ep: int, precision: Precision
) -> None:
    """Every weight sharded over TP (experts over EP x their TP share): each GPU holds a
    TP-th of the model, plus the 16-bit embedding and LM head over FP8 weights (the experts
    at `precision` too, not Kimi-K2.5's own INT4: `test_kimi_k2_5_int4_checkpoint_...`)."""
    model = with_expert_precision(load_model(name), precision)
    weights = weights_bytes_per_gpu(model, tp, 1, precision, ep=ep)
    even = model.num_params * precision.bytes / tp
    embeddings = 2 * model.embedding_params * (2 - precision.bytes) / tp
    assert weights == pytest.approx(even + embeddings, rel=0.01)


def _write(tmp_path: Path, config: dict[str, Any]) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


_MLA_MOE: dict[str, Any] = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 4,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "intermediate_size": 2048,
    "moe_intermediate_size": 256,
    "n_routed_experts": 16,
    "num_experts_per_tok": 2,
    "kv_lora_rank": 128,
    "q_lora_rank": 256,
    "qk_nope_head_dim": 64,
    "qk_rope_head_dim": 32,
    "v_head_dim": 64,
    "vocab_size": 1000,
}


def test_an_mla_moe_config_without_an_indexer_loads(tmp_path: Path) -> None:
    assert load_model(str(_write(tmp_path, _MLA_MOE))).is_mla


@pytest.mark.parametrize("model_type", ["deepseek_v32", "glm_moe_dsa"])
def test_deepseek_sparse_attention_is_refused(tmp_path: Path, model_type: str) -> None:
    """DeepSeek-V3.2 and GLM-5 read index_topk keys a query, chosen by an indexer: never
    priced as the MLA of every key."""
    config = {**_MLA_MOE, "model_type": model_type, "index_topk": 2048, "index_n_heads": 32}
    with pytest.raises(ModelConfigError, match=r"index_topk=2048: DeepSeek Sparse Attention"):
        load_model(str(_write(tmp_path, config)))


def test_linear_attention_layers_are_refused_before_anything_else(tmp_path: Path) -> None:
    """Qwen3.5's layer_types mix linear_attention (Gated DeltaNet) with full attention; the
    message names the layer kind, not a field the linear layers make irrelevant."""
    config = {
        "model_type": "qwen3_5_moe_text",
        "num_hidden_layers": 4,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "vocab_size": 1000,
        "num_experts": 16,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 256,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    }
    with pytest.raises(ModelConfigError, match=r"layer_types holds 'linear_attention'"):
        load_model(str(_write(tmp_path, config)))


@pytest.mark.parametrize(("kinds", "ok"), [([1, 1, 1, 1], True), ([0, 0, 0, 1], False)])
def test_minimax_attention_kinds(tmp_path: Path, kinds: list[int], ok: bool) -> None:
    """attn_type_list: 1 is softmax attention (MiniMax-M2), 0 lightning attention (M1)."""
    config = {
        "model_type": "minimax_m2",
        "num_hidden_layers": 4,
        "hidden_size": 1024,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "intermediate_size": 256,
        "num_local_experts": 16,
        "num_experts_per_tok": 2,
        "vocab_size": 1000,
        "attn_type_list": kinds,
    }
    path = str(_write(tmp_path, config))
    if ok:
        assert load_model(path).num_experts == 16
    else:
        with pytest.raises(ModelConfigError, match=r"attn_type_list=\[0, 0, 0, 1\]"):
            load_model(path)


def _compressed_tensors(ignore: list[str], bits: int = 4, group: int = 32) -> dict[str, Any]:
    """A compressed-tensors quantization_config of Kimi-K2.5's form."""
    weights = {"num_bits": bits, "type": "int", "strategy": "group", "group_size": group,
               "symmetric": True}  # fmt: skip
    return {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ignore,
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                      "input_activations": None}},
    }  # fmt: skip


KIMI_IGNORE = ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*",
               "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]  # fmt: skip


def test_int4_routed_experts_come_from_a_compressed_tensors_config(tmp_path: Path) -> None:
    config = {**_MLA_MOE, "quantization_config": _compressed_tensors(KIMI_IGNORE, group=128)}
    model = load_model(str(_write(tmp_path, config)))
    assert (model.expert_precision, model.int4_group_size) == (Precision.INT4, 128)
    assert model.matmul_weight_bytes(Precision.INT4) == 0.5 + 2 / 128
    # the experts in its ignore list: a 16-bit checkpoint as far as llmcap prices it
    kept = {**_MLA_MOE, "quantization_config": _compressed_tensors([*KIMI_IGNORE, "re:.*"])}
    assert load_model(str(_write(tmp_path, kept))).expert_precision is None


@pytest.mark.parametrize(
    ("quant", "field"),
    [
        (_compressed_tensors(["lm_head"]), "quantization_config.ignore"),  # INT4 everywhere
        (_compressed_tensors(KIMI_IGNORE, bits=8), "quantization_config.config_groups"),
        (_compressed_tensors(["re:(unclosed"]), "quantization_config.ignore"),
    ],
)
def test_compressed_tensors_layouts_llmcap_does_not_price_name_the_field(
    tmp_path: Path, quant: dict[str, Any], field: str
) -> None:
    config = {**_MLA_MOE, "quantization_config": quant}
    with pytest.raises(ModelConfigError, match=field.replace(".", r"\.")):
        load_model(str(_write(tmp_path, config)))


def test_an_fp8_compressed_tensors_checkpoint_is_fp8_as_a_whole(tmp_path: Path) -> None:
    """The FP8-dynamic checkpoints (compressed-tensors 8-bit float weights): an FP8 run by
    default, experts included, not an error of the INT4 reader."""
    quant = {
        "quant_method": "compressed-tensors", "format": "float-quantized", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
            "num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}},
    }  # fmt: skip
    model = load_model(str(_write(tmp_path, {**_MLA_MOE, "quantization_config": quant})))
    assert (model.weight_precision, model.expert_precision) == (Precision.FP8, None)
    assert model.default_precision is Precision.FP8
