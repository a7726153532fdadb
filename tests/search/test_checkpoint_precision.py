"""A run that names no weight precision takes the checkpoint's own: FP8 for the checkpoints
whose config.json quantises their weights (DeepSeek-V3, MiniMax-M2.5), 16-bit otherwise, as
the serving engines load them; and an engine whose KV default follows the checkpoint takes
the KV precision that checkpoint declares (none: 16-bit)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from estimators import Precision, load_engine, load_model
from search._spec import parse_spec
from search.cli import cli


@pytest.mark.parametrize(
    ("quantization_config", "expected"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, Precision.FP8),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, Precision.FP8),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, Precision.FP4),
        ({"quant_method": "mxfp4"}, None),  # gpt-oss: the experts alone (expert_precision)
        ({"quant_method": "awq"}, None),  # not one llmcap prices: the run's own precision
        (None, None),
    ],
)
def test_the_checkpoint_precision_comes_from_its_quantization_config(
    tmp_path, quantization_config, expected
):
    model = _model(tmp_path, quantization_config)
    assert model.weight_precision is expected
    assert model.default_precision is (expected or Precision.BF16)


def _model(tmp_path, quantization_config):
    config = {
        "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512,
        "vocab_size": 1000, "max_position_embeddings": 2048,
    }  # fmt: skip
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return load_model(path)


def test_an_engine_whose_kv_default_follows_the_checkpoint_reads_its_declaration(tmp_path):
    v3 = load_model("deepseek-ai/DeepSeek-V3")  # FP8 blocks, no KV quantisation declared
    modelopt = _model(tmp_path, {"quant_method": "modelopt", "quant_algo": "FP8",
                                 "kv_cache_quant_algo": "FP8"})  # fmt: skip
    assert (v3.kv_cache_precision, modelopt.kv_cache_precision) == (None, Precision.FP8)
    for engine in ("vllm@0.13", "trtllm"):  # "auto" follows the checkpoint
        profile = load_engine(engine)
        assert profile.kv_precision(Precision.FP8, v3) is Precision.BF16
        assert profile.kv_precision(Precision.FP8, modelopt) is Precision.FP8
        # quantised to another precision: a ModelOpt checkpoint of it, FP8 KV
        assert profile.kv_precision(Precision.FP4, v3) is Precision.FP8
        assert profile.kv_precision(Precision.FP8, load_model("llama-3.1-8b")) is Precision.FP8
        assert profile.kv_precision(Precision.BF16, v3) is Precision.BF16
    for engine in ("vllm@0.11", "sglang"):  # "auto" is the model's dtype
        assert load_engine(engine).kv_precision(Precision.FP8, modelopt) is Precision.BF16


def test_built_in_checkpoints_and_their_fingerprints():
    assert load_model("deepseek-ai/DeepSeek-V3").default_precision is Precision.FP8
    assert load_model("MiniMaxAI/MiniMax-M2.5").default_precision is Precision.FP8
    assert load_model("openai/gpt-oss-120b").default_precision is Precision.BF16  # MXFP4 experts
    assert load_model("meta-llama/Llama-3.1-8B").default_precision is Precision.BF16
    # a default, not a cost: the fingerprint of a stored result does not carry it
    assert "weight_precision" not in load_model("deepseek-ai/DeepSeek-V3").fingerprint_fields()


def test_simulate_runs_the_checkpoints_precision_unless_told_otherwise():
    runner = CliRunner()
    base = ["simulate", "--model", "deepseek-ai/DeepSeek-V3", "--sku", "h200", "--tp", "8",
            "--ep", "8", "--qps", "1", "--num-requests", "20"]  # fmt: skip
    fp8 = runner.invoke(cli, [*base, "--json"])
    assert fp8.exit_code == 0, fp8.output
    deployment = json.loads(fp8.output)["deployment"]
    # FP8 weights as vLLM loads the checkpoint: its KV "auto", 16-bit (no KV quantisation)
    assert (deployment["precision"], deployment["kv_precision"]) == ("fp8", "bf16")
    # 16-bit DeepSeek-V3 weights (1.3 TB) do not fit eight H200s: said, not guessed around
    bf16 = runner.invoke(cli, [*base, "--precision", "bf16"])
    assert bf16.exit_code == 2 and "weights bf16" in bf16.output and "DOES NOT FIT" in bf16.output
    llama = runner.invoke(cli, ["simulate", "--model", "llama-3.1-8b", "--sku", "h100-sxm",
                                "--qps", "1", "--num-requests", "20", "--json"])  # fmt: skip
    assert llama.exit_code == 0, llama.output
    assert json.loads(llama.output)["deployment"]["precision"] == "bf16"


def test_a_search_space_without_precisions_tries_the_checkpoints_own():
    base = {"model": "deepseek-ai/DeepSeek-V3", "skus": ["h200"], "workload": "chat",
            "budget": {"max_gpus": 8}, "space": {"tp": [8], "ep": [8]}}  # fmt: skip
    assert parse_spec(base).space.precision == [Precision.FP8]
    given = parse_spec({**base, "space": {**base["space"], "precision": ["bf16", "fp8"]}})
    assert given.space.precision == [Precision.BF16, Precision.FP8]
    dense = parse_spec({**base, "model": "llama-3.1-8b", "space": {"tp": [1]}})
    assert dense.space.precision == [Precision.BF16]
    no_space = {key: value for key, value in base.items() if key != "space"}
    assert parse_spec(no_space).space.precision == [Precision.FP8]
