"""Multi-head latent attention (DeepSeek-V3): config fields, KV cache, weights and costs."""

from __future__ import annotations

import json

import pytest

from estimators import BatchShape, ModelConfigError, Precision, load_model, make_estimator
from estimators._memory import plan_memory, weights_bytes_per_gpu
from estimators._mla import MlaRooflineEstimator


def test_deepseek_v3_reads_its_latent_attention_and_experts(v3):
    assert (v3.kv_lora_rank, v3.q_lora_rank) == (512, 1536)
    assert (v3.qk_nope_head_dim, v3.qk_rope_head_dim, v3.v_head_dim) == (128, 64, 128)
    assert (v3.num_experts, v3.num_experts_per_tok, v3.moe_intermediate_size) == (256, 8, 2048)
    assert v3.shared_expert_intermediate_size == 2048 and v3.num_dense_layers == 3
    assert v3.weight_scale_block == 128 * 128
    # DeepSeek's own figures: 671B weights, 37B activated per token (MTP layer not loaded)
    assert v3.num_params / 1e9 == pytest.approx(671.0, abs=0.3)
    assert v3.active_params / 1e9 == pytest.approx(37.6, abs=0.3)
    # DeepSeek-R1 is the same architecture
    assert load_model("deepseek-ai/DeepSeek-R1") is v3
    assert load_model("DeepSeek-R1") is v3


def test_mla_kv_cache_is_the_latent_replicated_on_every_tp_rank(v3, h200):
    # 61 layers x (kv_lora_rank 512 + rope 64) elements x 2 bytes
    assert v3.kv_bytes_per_token(2) == 61 * 576 * 2 == 70_272
    for tp in (1, 8):
        plan = plan_memory(v3, h200, tp, 1, Precision.FP8, Precision.BF16, ep=tp)
        assert plan.kv_bytes_per_token == 70_272  # not divided by TP
    fp8_kv = plan_memory(v3, h200, 8, 1, Precision.FP8, Precision.FP8, ep=8)
    assert fp8_kv.kv_bytes_per_token == 35_136


def test_weights_per_gpu_under_tp8_ep8_by_hand(v3):
    h = 7168
    attention = (
        h * 1536  # q_a_proj, replicated
        + 1536 * 16 * 192  # q_b_proj, 16 of 128 heads
        + h * 576  # kv_a_proj_with_mqa, replicated
        + 512 * 16 * 256  # kv_b_proj
        + 16 * 128 * h  # o_proj
    )
    moe_mlp = 32 * 3 * h * 2048 + 3 * h * 2048 // 8  # 32 experts, shared/8
    router = 58 * h * 256  # replicated, 16-bit in the FP8 checkpoint too
    dense_mlp = 3 * h * 18432 // 8
    matmul = 61 * attention + 58 * moe_mlp + 3 * dense_mlp
    fp8_with_scales = matmul * (1 + 4 / 16384)
    norms = 61 * (2 * h + 1536 + 512) * 2
    embedding_and_head = 2 * (129280 // 8) * h * 2 + h * 2  # 16-bit, vocab-parallel; final norm
    expected = fp8_with_scales + 2 * router + norms + embedding_and_head
    assert expected == pytest.approx(85.14e9, rel=1e-3)  # 79.3 GiB
    got = weights_bytes_per_gpu(v3, 8, 1, Precision.FP8, ep=8)
    assert got == pytest.approx(expected, rel=1e-9)
    # 16-bit weights have no scales: twice the matmul bytes
    bf16 = weights_bytes_per_gpu(v3, 8, 1, Precision.BF16, ep=8)
    assert bf16 == pytest.approx(2 * (matmul + router) + norms + embedding_and_head, rel=1e-9)


def test_mla_config_errors_name_the_field(tmp_path):
    base = {
        "model_type": "deepseek_v3", "hidden_size": 1024, "num_hidden_layers": 4,
        "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 1000,
        "intermediate_size": 4096, "kv_lora_rank": 256, "qk_nope_head_dim": 64,
        "qk_rope_head_dim": 32, "v_head_dim": 64,
    }  # fmt: skip
    path = tmp_path / "config.json"

    def load(**change):
        path.write_text(json.dumps({**base, **change}))
        return load_model(str(path))

    lite = load()  # no q_lora_rank: queries straight from the hidden state (V2-Lite)
    assert lite.is_mla and lite.q_lora_rank == 0 and not lite.is_moe
    assert lite.head_dim == 96
    assert lite.kv_bytes_per_token(2) == 4 * (256 + 32) * 2
    with pytest.raises(ModelConfigError, match="no qk_rope_head_dim"):
        load(qk_rope_head_dim=None)
    with pytest.raises(ModelConfigError, match="v_head_dim=0: must be an integer >= 1"):
        load(v_head_dim=0)
    with pytest.raises(ModelConfigError, match="weight_block_size='128'"):
        load(quantization_config={"weight_block_size": "128"})


def test_decode_reads_the_latent_once_for_all_heads(v3, h200):
    est = make_estimator("roofline", v3, h200, 8, 1, Precision.FP8, ep=8)
    assert isinstance(est, MlaRooflineEstimator)
    c = est.constants
    # memory-bound at TP8 (16 heads): each extra KV token costs its 1,152-byte latent
    extra = est._decode_attn(64, 2 * 64 * 4096) - est._decode_attn(64, 64 * 4096)
    assert extra == pytest.approx(
        64 * 4096 * 1152 / (h200.memory_bandwidth_bytes * c.attention_decode_mem_eff), rel=1e-9
    )
    # prefill attention runs over 16 up-projected heads: 2 x 16 x (192 + 128) FLOPs a pair
    assert est._attn_flops_per_pair == 2 * 16 * (192 + 128)
    names = [op.name for op in est.layer_ops]
    assert names[:5] == [
        "input_layernorm", "attn_pre_proj", "attn_latent_norm", "attn_q_up_proj", "attn_rope",
    ]  # fmt: skip
    pre = next(op for op in est.layer_ops if op.name == "attn_pre_proj")
    assert pre.flops_per_token == 2 * (1536 + 576) * 7168  # fused, replicated down-projections


def test_decode_step_is_bounded_below_by_its_weight_and_kv_reads(v3, h200):
    """Physics: a decode step cannot beat reading its weights and KV from HBM."""
    est = make_estimator("roofline", v3, h200, 8, 1, Precision.FP8, ep=8)
    for nd in (1, 64, 256):
        batch = BatchShape(num_decodes=nd, decode_kv_tokens=nd * 2000)
        cost = est.batch_cost(batch)
        step = cost.stage_times[0]
        ideal = cost.bytes_moved / 8 / h200.memory_bandwidth_bytes
        assert ideal < step < 10 * ideal + 0.01
    # 256 sequences touch every expert: about all 85 GB of weights a GPU holds are read each
    # step, and every GPU reads the whole (replicated) latent cache: 512,000 tokens x 61 x 1152
    assert cost.bytes_moved / 8 == pytest.approx(85e9 + 256 * 2000 * 61 * 1152, rel=0.05)
