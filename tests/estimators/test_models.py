"""Model architectures: built-in HF configs, user config.json paths, aliases and errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from estimators import (
    ModelArchitecture,
    ModelConfigError,
    Precision,
    UnknownModelError,
    builtin_model_names,
    format_model_table,
    load_model,
    variant_note,
)
from estimators._models import builtin_variant

REQUIRED = (
    "meta-llama/Llama-2-7b-hf",
    "meta-llama/Llama-2-13b-hf",
    "meta-llama/Llama-2-70b-hf",
    "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B",
    "mistralai/Mistral-7B-v0.1",
    "Qwen/Qwen-72B",
    "internlm/internlm-20b",
    "codellama/CodeLlama-34b-Instruct-hf",
    "microsoft/phi-2",
    "Qwen/Qwen3-32B",
)

VIDUR_MODEL_CONFIGS = Path(__file__).resolve().parents[3] / "shared/data/vidur/model_configs"

LLAMA_2_7B_CONFIG: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}


def test_required_models_are_built_in() -> None:
    names = builtin_model_names()
    assert set(REQUIRED) <= set(names)
    assert names == sorted(names, key=str.lower)


@pytest.mark.parametrize("name", REQUIRED)
def test_every_builtin_loads(name: str) -> None:
    model = load_model(name)
    assert isinstance(model, ModelArchitecture)
    assert model.name == name
    assert model.num_attention_heads % model.num_key_value_heads == 0
    assert model.q_size >= model.kv_size > 0
    assert model.num_params > 1e9


@pytest.mark.parametrize(
    ("name", "billions", "tolerance"),
    [
        ("meta-llama/Llama-2-7b-hf", 6.74, 0.05),
        ("meta-llama/Llama-2-13b-hf", 13.0, 0.05),
        ("meta-llama/Llama-2-70b-hf", 70.0, 0.05),
        ("meta-llama/Llama-3.1-8B", 8.03, 0.05),
        ("meta-llama/Llama-3.1-70B", 70.6, 0.05),
        ("meta-llama/Llama-3.1-405B", 405.0, 0.05),
        ("mistralai/Mistral-7B-v0.1", 7.24, 0.05),
        ("Qwen/Qwen-72B", 72.0, 0.05),
        ("internlm/internlm-20b", 20.0, 0.05),
        ("codellama/CodeLlama-34b-Instruct-hf", 33.7, 0.05),
        ("microsoft/phi-2", 2.7, 0.05),
        ("Qwen/Qwen3-32B", 32.8, 0.05),
    ],
)
def test_param_counts_near_published(name: str, billions: float, tolerance: float) -> None:
    assert load_model(name).num_params / 1e9 == pytest.approx(billions, rel=tolerance)


@pytest.mark.parametrize(
    ("name", "kv_heads"),
    [
        ("meta-llama/Llama-2-7b-hf", 32),
        ("meta-llama/Llama-2-70b-hf", 8),
        ("meta-llama/Llama-3.1-8B", 8),
        ("meta-llama/Llama-3.1-405B", 8),
        ("mistralai/Mistral-7B-v0.1", 8),
        ("codellama/CodeLlama-34b-Instruct-hf", 8),
        ("Qwen/Qwen-72B", 64),
        ("Qwen/Qwen3-32B", 8),
    ],
)
def test_kv_heads(name: str, kv_heads: int) -> None:
    assert load_model(name).num_key_value_heads == kv_heads


def test_kv_bytes_per_token_llama_2_7b() -> None:
    model = load_model("meta-llama/Llama-2-7b-hf")
    assert model.kv_bytes_per_token(Precision.BF16.bytes) == 2 * 32 * 4096 * 2 == 524288
    assert model.kv_bytes_per_token(Precision.FP8.bytes) == 262144


def test_qwen_72b_counts_gate_and_up_together() -> None:
    model = load_model("Qwen/Qwen-72B")
    assert model.intermediate_size == 49152 // 2 == 24576
    assert model.num_attention_heads == model.num_key_value_heads == 64
    assert model.hidden_size == 8192
    assert model.num_layers == 80
    assert model.vocab_size == 152064
    assert model.gated_mlp
    assert model.attention_bias  # Qwen-1 has q/k/v biases


def test_qwen3_explicit_head_dim() -> None:
    model = load_model("Qwen/Qwen3-32B")
    assert model.hidden_size == 5120
    assert model.num_attention_heads == 64
    assert model.head_dim == 128  # not 5120 / 64 = 80
    assert model.q_size == 8192
    assert model.kv_bytes_per_token(2) == 2 * 64 * 8 * 128 * 2


def test_phi_2_is_gpt_style() -> None:
    model = load_model("microsoft/phi-2")
    assert not model.gated_mlp
    assert model.norm == "layernorm"
    assert model.parallel_attn_mlp
    assert model.hidden_act.startswith("gelu")
    assert model.head_dim == 80


def test_llama_family_flags() -> None:
    model = load_model("meta-llama/Llama-3.1-70B")
    assert model.gated_mlp and model.norm == "rmsnorm" and not model.parallel_attn_mlp
    assert not model.tie_word_embeddings
    assert model.max_position_embeddings == 131072


@pytest.mark.skipif(not VIDUR_MODEL_CONFIGS.is_dir(), reason="shared Vidur data not present")
@pytest.mark.parametrize(
    ("name", "vidur_file"),
    [
        ("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf.yml"),
        ("meta-llama/Llama-2-70b-hf", "meta-llama/Llama-2-70b-hf.yml"),
        ("Qwen/Qwen-72B", "Qwen/Qwen-72B.yml"),
        ("internlm/internlm-20b", "internlm/internlm-20b.yml"),
        ("codellama/CodeLlama-34b-Instruct-hf", "codellama/CodeLlama-34b-Instruct-hf.yml"),
        ("microsoft/phi-2", "microsoft/phi-2.yml"),
    ],
)
def test_shapes_match_vidur(name: str, vidur_file: str) -> None:
    yaml = pytest.importorskip("yaml")
    vidur = yaml.safe_load((VIDUR_MODEL_CONFIGS / vidur_file).read_text())
    model = load_model(name)
    assert model.num_layers == vidur["num_layers"]
    assert model.num_attention_heads == vidur["num_q_heads"]
    assert model.num_key_value_heads == vidur["num_kv_heads"]
    assert model.hidden_size == vidur["embedding_dim"]
    assert model.intermediate_size == vidur["mlp_hidden_dim"]
    assert model.gated_mlp == vidur["use_gated_mlp"]
    # Vidur pads some vocabularies (32000 -> 32768) for its profiling; HF's is the real one.
    assert model.vocab_size <= vidur["vocab_size"]


@pytest.mark.parametrize(
    ("alias", "name"),
    [
        ("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
        ("Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf"),
        ("LLAMA2-7B", "meta-llama/Llama-2-7b-hf"),
        ("llama-2-70b", "meta-llama/Llama-2-70b-hf"),
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
        ("llama-3.1-70b", "meta-llama/Llama-3.1-70B"),
        ("llama3.1-405b", "meta-llama/Llama-3.1-405B"),
        ("META-LLAMA/LLAMA-2-13B-HF", "meta-llama/Llama-2-13b-hf"),
        ("mistral-7b", "mistralai/Mistral-7B-v0.1"),
        ("Mistral-7B-v0.1", "mistralai/Mistral-7B-v0.1"),
        ("qwen-72b", "Qwen/Qwen-72B"),
        ("qwen3-32b", "Qwen/Qwen3-32B"),
        ("phi-2", "microsoft/phi-2"),
        ("internlm-20b", "internlm/internlm-20b"),
        ("codellama-34b", "codellama/CodeLlama-34b-Instruct-hf"),
        (" phi-2 ", "microsoft/phi-2"),
    ],
)
def test_aliases(alias: str, name: str) -> None:
    assert load_model(alias).name == name


@pytest.mark.parametrize(
    ("variant", "name", "dropped"),
    [
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", ("-instruct",)),
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "meta-llama/Llama-3.1-8B", ("-instruct", "-fp8")),
        ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B", ("-fp8",)),
        ("meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf", ("-chat", "-hf")),
    ],
)
def test_checkpoint_variants_resolve_to_the_builtin_and_say_so(
    variant: str, name: str, dropped: tuple[str, ...]
) -> None:
    assert load_model(variant).name == name
    assert builtin_variant(variant) == (name, dropped)
    note = variant_note(variant)
    assert note is not None and variant in note and name in note
    assert variant_note(name) is None  # the built-in itself needs no note


@pytest.mark.parametrize("name", ["Qwen/Qwen3-999B-A9B-FP8", "foo-instruct", "-instruct"])
def test_a_suffix_alone_does_not_make_a_model(name: str) -> None:
    with pytest.raises(UnknownModelError):
        load_model(name)
    assert variant_note(name) is None


def test_load_from_config_path(tmp_path: Path) -> None:
    folder = tmp_path / "my-llama"
    folder.mkdir()
    config = folder / "config.json"
    config.write_text(json.dumps(LLAMA_2_7B_CONFIG))
    from_file = load_model(str(config))
    from_dir = load_model(folder)
    assert from_file == from_dir
    assert from_file.name == "my-llama"  # no _name_or_path: the directory's name
    builtin = load_model("meta-llama/Llama-2-7b-hf")
    assert from_file.num_params == builtin.num_params
    assert from_file.kv_bytes_per_token(2) == 524288


def test_name_or_path_names_the_model(tmp_path: Path) -> None:
    config = tmp_path / "custom.json"
    config.write_text(json.dumps({**LLAMA_2_7B_CONFIG, "_name_or_path": "acme/llama-custom"}))
    assert load_model(config).name == "acme/llama-custom"


def test_gpt_style_config(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "gpt2",
                "n_layer": 12,
                "n_embd": 768,
                "n_head": 12,
                "n_inner": None,
                "n_positions": 1024,
                "vocab_size": 50257,
                "activation_function": "gelu_new",
                "layer_norm_epsilon": 1e-05,
            }
        )
    )
    model = load_model(config)
    assert (model.num_layers, model.hidden_size, model.num_attention_heads) == (12, 768, 12)
    assert model.num_key_value_heads == 12
    assert model.intermediate_size == 4 * 768
    assert not model.gated_mlp
    assert model.norm == "layernorm"
    assert model.tie_word_embeddings  # the HF default
    assert model.max_position_embeddings == 1024
    assert model.num_params / 1e6 == pytest.approx(124, rel=0.03)


def test_unknown_name_lists_builtins() -> None:
    with pytest.raises(UnknownModelError) as info:
        load_model("meta-llama/Llama-2-9b-chat-hf")
    message = str(info.value)
    assert "Llama-2-9b-chat-hf" in message
    for name in REQUIRED:
        assert name in message
    assert "config.json" in message  # suggests passing a path
    assert isinstance(info.value, ValueError)


def test_missing_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ModelConfigError, match="not found"):
        load_model(str(tmp_path / "nope" / "config.json"))
    with pytest.raises(ModelConfigError, match=r"without a config\.json"):
        load_model(tmp_path)


def test_missing_field_is_named(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    broken = {k: v for k, v in LLAMA_2_7B_CONFIG.items() if k != "hidden_size"}
    config.write_text(json.dumps(broken))
    with pytest.raises(ModelConfigError) as info:
        load_model(config)
    message = str(info.value)
    assert str(config) in message
    assert "hidden_size" in message
    assert isinstance(info.value, ValueError)


def test_gated_mlp_needs_intermediate_size(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    broken = {k: v for k, v in LLAMA_2_7B_CONFIG.items() if k != "intermediate_size"}
    config.write_text(json.dumps(broken))
    with pytest.raises(ModelConfigError, match="intermediate_size"):
        load_model(config)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"num_hidden_layers": "32"}, "num_hidden_layers='32'"),
        ({"num_hidden_layers": 0}, "num_hidden_layers=0"),
        ({"num_key_value_heads": 5}, "not a multiple"),
        ({"hidden_size": 4100}, "not a multiple"),
        ({"num_local_experts": 8}, "no num_experts_per_tok"),
        ({"model_type": "deepseek_v3"}, "'deepseek_v3' uses multi-head latent .* no kv_lora_rank"),
            ({"model_type": "mamba"}, "'mamba' is not priced"),
    ],
)
def test_invalid_values_are_named(tmp_path: Path, change: dict[str, Any], expected: str) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({**LLAMA_2_7B_CONFIG, **change}))
    with pytest.raises(ModelConfigError, match=expected):
        load_model(config)


def test_bad_json(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 4096,,}')
    with pytest.raises(ModelConfigError, match="line 1"):
        load_model(config)
    config.write_text("[1, 2]")
    with pytest.raises(ModelConfigError, match="JSON object"):
        load_model(config)


def test_model_table_renders() -> None:
    console = Console(width=200, record=True)
    console.print(format_model_table())
    text = console.export_text()
    for name in REQUIRED:
        assert name in text
    assert "405.8" in text
