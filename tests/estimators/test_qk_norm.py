"""Query and key RMSNorms before RoPE (`ModelArchitecture.qk_norm`): Qwen3 normalizes each
head, MiniMax-M2 all of a token's query heads and all of its key heads at once, so its
attention's TP ranks all-reduce the sums of squares before they scale."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from estimators import BatchShape, RooflineEstimator, load_model
from sku_catalog import load_catalog

H100 = load_catalog().get("h100-sxm")
DECODE = BatchShape(num_decodes=8, decode_kv_tokens=8 * 2048)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Qwen/Qwen3-32B", "head"),
        ("Qwen/Qwen3-235B-A22B", "head"),
        ("MiniMaxAI/MiniMax-M2.5", "layer"),
        ("meta-llama/Llama-3.1-8B", ""),
        ("deepseek-ai/DeepSeek-V3", ""),
        ("openai/gpt-oss-120b", ""),
    ],
)
def test_the_config_says_which_norm(name: str, kind: str) -> None:
    assert load_model(name).qk_norm == kind


def test_minimax_configs_without_the_norm_or_with_it_per_head(tmp_path: Path) -> None:
    config = json.loads(
        (Path(__file__).parents[2] / "estimators/models/MiniMaxAI--MiniMax-M2.5.json").read_text()
    )
    for fields, kind in (({"use_qk_norm": False}, ""), ({"qk_norm_type": "per_head"}, "head")):
        path = tmp_path / f"{kind or 'none'}.json"
        path.write_text(json.dumps({**config, **fields}))
        assert load_model(str(path)).qk_norm == kind


def test_a_model_without_the_norm_keeps_its_fingerprint_fields() -> None:
    assert "qk_norm" not in load_model("meta-llama/Llama-3.1-8B").fingerprint_fields()
    assert load_model("Qwen/Qwen3-32B").fingerprint_fields()["qk_norm"] == "head"


def test_the_norm_is_one_kernel_over_the_gpus_query_and_key_heads() -> None:
    qwen = load_model("Qwen/Qwen3-32B")
    est = RooflineEstimator(qwen, H100, tp=2)
    [op] = [op for op in est.layer_ops if op.name == "attn_qk_norm"]
    width = (qwen.num_attention_heads // 2 + qwen.num_key_value_heads // 2) * qwen.head_dim
    assert (op.kind, op.count, op.bytes_per_token) == ("norm", 1, 2 * width * 2)
    without = RooflineEstimator(replace(qwen, qk_norm=""), H100, tp=2)
    assert "attn_qk_norm" not in {op.name for op in without.layer_ops}
    assert est.batch_cost(DECODE).stage_times[0] > without.batch_cost(DECODE).stage_times[0]


def test_a_norm_over_all_heads_all_reduces_its_statistics_under_tp() -> None:
    minimax = load_model("MiniMaxAI/MiniMax-M2.5")
    per_head = replace(minimax, qk_norm="head")
    for tp in (1, 4):
        layer = RooflineEstimator(minimax, H100, tp=tp).operator_times(DECODE)
        head = RooflineEstimator(per_head, H100, tp=tp).operator_times(DECODE)
        assert layer["attn_qk_norm"] == head["attn_qk_norm"] > 0
        if tp == 1:
            assert layer["all_reduce"] == head["all_reduce"] == 0.0
            continue
        # one more all-reduce a layer, of 8 bytes a token: its latency, no more
        est = RooflineEstimator(minimax, H100, tp=tp)
        extra = layer["all_reduce"] - head["all_reduce"]
        assert extra == pytest.approx(est.all_reduce_time(8.0 * DECODE.num_tokens))
        assert 0 < extra < est.all_reduce_time(minimax.hidden_size * 2.0 * DECODE.num_tokens)
