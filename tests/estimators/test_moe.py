"""Mixture-of-experts architectures, their costs and expert parallelism."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
from click.testing import CliRunner

from estimators import ModelConfigError, Precision, load_engine, load_model
from estimators._contract import BatchShape
from estimators._memory import ParallelismError, plan_memory, weights_bytes_per_gpu
from estimators._moe import (
    LOAD_SKEW,
    MoeShape,
    all_to_all_seconds,
    busiest_count,
    busiest_of,
    dispatch_ranks,
    touched_experts,
)
from estimators._roofline import RooflineEstimator
from search.cli import cli
from sku_catalog import load_catalog


@pytest.fixture(scope="module")
def h200():
    return load_catalog().get("h200")


def test_builtin_moe_configs_read_their_experts_and_active_params():
    qwen = load_model("Qwen/Qwen3-30B-A3B")
    assert (qwen.num_experts, qwen.num_experts_per_tok, qwen.moe_intermediate_size) == (
        128, 8, 768,
    )  # fmt: skip
    assert qwen.num_dense_layers == 0 and qwen.shared_expert_intermediate_size == 0
    assert qwen.active_params / 1e9 == pytest.approx(3.3, abs=0.1)
    assert qwen.num_params / 1e9 == pytest.approx(30.5, abs=0.2)
    mixtral = load_model("mixtral-8x7b-v0.1")
    assert (mixtral.num_experts, mixtral.num_experts_per_tok) == (8, 2)
    assert mixtral.moe_intermediate_size == mixtral.intermediate_size == 14336
    assert mixtral.active_params / 1e9 == pytest.approx(12.9, abs=0.1)
    assert mixtral.num_params / 1e9 == pytest.approx(46.7, abs=0.1)
    big = load_model("Qwen3-235B-A22B")
    assert big.num_params / 1e9 == pytest.approx(235.1, abs=0.5)
    assert big.active_params / 1e9 == pytest.approx(22.2, abs=0.3)
    # gpt-oss (OpenAI's model card: 116.8B total / 5.1B active, 20.9B / 3.6B; the card's
    # active count leaves out the 0.58B input embedding, which llmcap counts)
    for name, experts, total, active in (("gpt-oss-120b", 128, 116.8, 5.1),
                                         ("openai/gpt-oss-20b", 32, 20.9, 3.6)):  # fmt: skip
        oss = load_model(name)
        assert (oss.num_experts, oss.num_experts_per_tok, oss.model_type) == (
            experts, 4, "gpt_oss",
        )  # fmt: skip
        assert oss.num_params / 1e9 == pytest.approx(total, abs=0.2)
        embedding = oss.vocab_size * oss.hidden_size / 1e9
        assert oss.active_params / 1e9 == pytest.approx(active + embedding, abs=0.1)
    dense = load_model("llama-3.1-8b")
    assert not dense.is_moe and dense.active_params == dense.num_params


def _write(tmp_path, **fields) -> str:
    base = {
        "model_type": "qwen2_moe", "hidden_size": 1024, "num_hidden_layers": 8,
        "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 1000,
        "intermediate_size": 4096, "num_experts": 16, "num_experts_per_tok": 4,
        "moe_intermediate_size": 256,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**base, **fields}))
    return str(path)


def test_dense_layers_and_shared_experts_from_each_config_spelling(tmp_path):
    m = load_model(_write(tmp_path, shared_expert_intermediate_size=512, mlp_only_layers=[0, 3]))
    assert m.num_dense_layers == 2 and m.num_moe_layers == 6
    assert m.shared_expert_intermediate_size == 512
    assert load_model(_write(tmp_path, decoder_sparse_step=2)).num_dense_layers == 4
    assert load_model(_write(tmp_path, first_k_dense_replace=3)).num_dense_layers == 3
    m = load_model(_write(tmp_path, n_shared_experts=2))
    assert m.shared_expert_intermediate_size == 512
    # every layer dense: a dense model
    assert not load_model(_write(tmp_path, decoder_sparse_step=100)).is_moe
    # the parameter count follows the layer mix exactly
    m = load_model(_write(tmp_path, mlp_only_layers=[0]))
    h = 1024
    attn = h * (1024 + 2 * 256) + 1024 * h
    dense_layer = attn + 3 * h * 4096 + 2 * h
    moe_layer = attn + h * 16 + 16 * 3 * h * 256 + 2 * h
    assert m.num_params == dense_layer + 7 * moe_layer + 1000 * h  # tied LM head (HF default)


def test_models_the_estimator_cannot_price_name_the_field(tmp_path):
    with pytest.raises(ModelConfigError, match=r"kv_lora_rank=512 .* but no qk_nope_head_dim"):
        load_model(_write(tmp_path, model_type="deepseek_v3", kv_lora_rank=512))
    with pytest.raises(ModelConfigError, match="model_type 'jamba' is not priced"):
        load_model(_write(tmp_path, model_type="jamba"))
    with pytest.raises(ModelConfigError, match="num_experts_per_tok"):
        load_model(_write(tmp_path, num_experts_per_tok=None))
    with pytest.raises(ModelConfigError, match="num_experts_per_tok=32 exceeds num_experts=16"):
        load_model(_write(tmp_path, num_experts_per_tok=32))


def test_touched_experts_formula():
    assert touched_experts(128, 8, 1) == pytest.approx(8.0)
    assert touched_experts(128, 8, 2) == pytest.approx(128 * (1 - (120 / 128) ** 2))
    assert 15.0 < touched_experts(128, 8, 2) < 16.0  # two tokens rarely share an expert
    assert touched_experts(128, 8, 512) == pytest.approx(128.0, rel=1e-9)
    assert touched_experts(8, 2, 0) == 0.0


def test_busiest_rank_rows_carry_the_skew_and_never_exceed_its_tokens(h200):
    qwen = load_model("Qwen3-30B-A3B")
    ep1 = MoeShape.of(qwen, tp=4, ep=1)
    assert ep1.width == 768 // 4 and ep1.rows(100) == 800  # every GPU runs every expert
    ep4 = MoeShape.of(qwen, tp=4, ep=4)
    assert ep4.width == 768 and ep4.local_experts == 32
    assert ep4.rows(100) == pytest.approx(100 * 8 / 4 * LOAD_SKEW)
    mixtral = MoeShape.of(load_model("mixtral-8x7b-v0.1"), tp=8, ep=8)
    assert mixtral.rows(1000) == pytest.approx(1000 * 2 / 8 * LOAD_SKEW)
    # 200 choices over 8 ranks: chance loads the busiest above the skew's 31.25
    assert mixtral.rows(100) == pytest.approx(busiest_count(200, 1 / 8, 8))
    assert mixtral.rows(100) > 100 * 2 / 8 * LOAD_SKEW
    hot = MoeShape.of(load_model("mixtral-8x7b-v0.1"), tp=8, ep=8, skew=10.0)
    assert hot.rows(100) == 100  # one expert per GPU: at most every token once


def test_a_ranks_mean_share_is_what_balanced_routing_gives_every_rank():
    """`busiest=False`: the rows and touched experts of a rank's mean share (what the
    measured tables time), which the busiest rank's never fall below."""
    qwen = load_model("Qwen3-30B-A3B")
    ep1, ep4 = MoeShape.of(qwen, tp=4, ep=1), MoeShape.of(qwen, tp=4, ep=4)
    for tokens in (1.0, 16.0, 4096.0):
        assert ep1.rows(tokens, False) == ep1.rows(tokens)  # no EP: no busiest rank
        assert ep4.rows(tokens, False) == pytest.approx(tokens * 8 / 4)
        assert ep4.rows(tokens, False) <= ep4.rows(tokens)
        touched = touched_experts(128, 8, tokens) / 4  # a quarter of the experts hit
        assert ep4.touched(tokens, False) == pytest.approx(touched)
        assert ep4.touched(tokens, False) <= ep4.touched(tokens)
    assert ep4.touched(4.0) > 1.3 * ep4.touched(4.0, False)  # chance, at a small batch


def test_the_expected_maximum_of_standard_normals():
    assert busiest_of(1) == 0.0
    assert busiest_of(2) == pytest.approx(1 / math.sqrt(math.pi), rel=1e-4)  # exact
    assert busiest_of(4) == pytest.approx(1.0294, abs=1e-3)  # tabulated order statistics
    assert busiest_of(8) == pytest.approx(1.4236, abs=1e-3)
    assert busiest_of(2) < busiest_of(8) < busiest_of(72) < 2.5


@pytest.mark.parametrize("ep", [4, 8, 32])
def test_the_busiest_rank_matches_uniform_routing_drawn_at_random(ep):
    """DeepSeek-V3's 256 experts, top-8 of distinct experts a token, uniform routing: the
    busiest of `ep` ranks' touched experts and rows, drawn 400 times, against `touched` and
    the chance part of `rows` (skew 1, so the router's own imbalance does not hide it)."""
    shape = MoeShape(256, 8, 7168, 256 / ep, 2048, True, ep, skew=1.0)
    rng = np.random.default_rng(0)
    for tokens in (4, 16, 64):
        most_touched, most_rows = [], []
        for _ in range(400):
            picks = np.argsort(rng.random((tokens, 256)), axis=1)[:, :8]
            rank_of = picks // (256 // ep)
            most_rows.append(np.bincount(rank_of.ravel(), minlength=ep).max())
            most_touched.append(np.bincount(np.unique(picks) // (256 // ep), minlength=ep).max())
        assert shape.touched(tokens) == pytest.approx(np.mean(most_touched), abs=0.45)
        assert shape.rows(tokens) == pytest.approx(np.mean(most_rows), rel=0.06)
    # far above the mean at a small batch, at the mean once every expert is touched
    assert shape.touched(4) > 1.3 * touched_experts(256, 8, 4) / ep
    assert shape.touched(4096) == pytest.approx(256 / ep)


def test_all_to_all_scales_with_bytes_and_vanishes_without_ep():
    args = dict(ranks=4.0, hidden=4096, act_bytes=2, link_bw=450e9, eff=1.0, latency=0.0)
    assert all_to_all_seconds(1000, ep=1, **args) == 0.0
    t8 = all_to_all_seconds(1000, ep=8, **args)
    assert t8 == pytest.approx(2 * 1000 / 8 * 4 * 4096 * 2 * 7 / 8 / 450e9)
    assert all_to_all_seconds(2000, ep=8, **args) == pytest.approx(2 * t8)
    assert all_to_all_seconds(1000, ep=2, **args) == pytest.approx(t8 * (1 / 2 * 1 / 2) / (7 / 64))


def test_a_token_goes_once_to_each_rank_holding_its_experts():
    assert dispatch_ranks(256, 8, 1) == 1.0
    assert dispatch_ranks(8, 2, 8) == pytest.approx(2.0)  # one expert per rank: k ranks
    assert dispatch_ranks(256, 1, 8) == pytest.approx(1.0)
    # DeepSeek-V3 over 8 ranks: 8 distinct experts of 256 land on 5.3 ranks on average
    # (1 - C(224, 8) / C(256, 8) per rank), not 8
    miss = 1.0
    for i in range(8):
        miss *= (224 - i) / (256 - i)
    assert dispatch_ranks(256, 8, 8) == pytest.approx(8 * (1 - miss))
    assert 5.2 < dispatch_ranks(256, 8, 8) < 5.4
    assert dispatch_ranks(256, 22, 8) < 8.0  # never more ranks than there are


def test_moe_decode_reads_only_touched_experts(h200):
    qwen = load_model("Qwen3-30B-A3B")
    est = RooflineEstimator(qwen, h200, tp=1)
    one = est._moe_part(1.0, 1.0)
    full = est._moe_part(1024.0, 1024.0)
    expert = 3 * 2048 * 768 * 2  # bytes of one expert's weights
    assert one[2] == pytest.approx(8 * expert, rel=0.01)  # 8 experts read
    assert full[2] > 127 * expert  # all 128 read
    # a batch of one costs far less than a dense model of the same total size would
    dense_equiv = RooflineEstimator(load_model("Qwen3-32B"), h200, tp=1)
    decode = BatchShape(num_decodes=1, decode_kv_tokens=1000)
    assert (
        est.batch_cost(decode).stage_times[0] < 0.3 * dense_equiv.batch_cost(decode).stage_times[0]
    )


def test_only_attention_dp_swaps_the_mlp_all_reduce_for_the_all_to_all(h200):
    """Under attention TP every GPU holds every token: with EP it runs its experts on all of
    them and the outputs are all-reduced as a dense MLP's; the all-to-all (DeepEP) moves
    tokens only between attention-DP ranks."""
    qwen = load_model("Qwen3-235B-A22B")
    tp8 = RooflineEstimator(qwen, h200, tp=8, precision=Precision.FP8)
    ep8 = RooflineEstimator(qwen, h200, tp=8, ep=8, precision=Precision.FP8)
    dep8 = RooflineEstimator(qwen, h200, tp=1, dp=8, ep=8, precision=Precision.FP8)
    assert tp8.operator_counts["all_reduce"] == ep8.operator_counts["all_reduce"] == 2
    assert dep8.operator_counts["all_reduce"] == 0
    prefill = BatchShape(num_prefill_tokens=8192, num_prefills=2, prefill_attn_pairs=8192 * 4096,
                         prefill_kv_tokens=8192)  # fmt: skip
    assert ep8.operator_times(prefill)["moe_experts"] > tp8.operator_times(prefill)["moe_experts"]
    # the experts' part of a layer: EP's rows alone under TP; the exchange on top under DP
    rows = ep8._routed_experts(8192.0)[0]
    assert ep8._moe_part(8192.0, 8192.0)[0] == pytest.approx(
        qwen.num_moe_layers / qwen.num_layers * rows
        + (1 - qwen.num_moe_layers / qwen.num_layers) * ep8._dense_mlp_seconds(8192.0)
    )
    assert dep8._moe_part(1024.0, 8192.0)[0] > dep8._routed_experts(8192.0)[0]


def test_each_engine_exchanges_dp_ranks_tokens_its_own_way():
    """Under attention DP with EP: TensorRT-LLM runs an all-to-all only when EP exceeds the
    model's top-k, vLLM and SGLang (their defaults) all-gather and reduce-scatter."""
    b200 = load_catalog().get("b200")
    deepseek = load_model("deepseek-ai/DeepSeek-V3")  # top-8 of 256
    gptoss = load_model("openai/gpt-oss-120b")  # top-4 of 128
    trt, vllm, sglang = load_engine("trtllm"), load_engine("vllm"), load_engine("sglang")
    assert trt.moe_all_to_all == "above_top_k" and not trt.runs_all_to_all(8, 8)
    assert trt.runs_all_to_all(16, 8) and trt.runs_all_to_all(8, 4)
    assert vllm.moe_all_to_all == sglang.moe_all_to_all == "never"
    assert not vllm.runs_all_to_all(64, 8)

    def exchange(model, engine, ep, dp):
        est = RooflineEstimator(model, b200, tp=1, dp=dp, ep=ep, precision=Precision.FP8,
                                engine=engine)  # fmt: skip
        share = model.num_moe_layers / model.num_layers  # dense layers averaged in
        layer = est._moe_part(512.0, 512.0 * dp)[0] - (1 - share) * est._dense_mlp_seconds(512.0)
        return est, layer / share - est._routed_experts(512.0 * dp)[0]

    est, gather = exchange(deepseek, trt, 8, 8)
    assert not est._moe_all_to_all
    assert gather == pytest.approx(est._gather_scatter_time(512.0 * 8 * deepseek.hidden_size * 2))
    est, a2a = exchange(gptoss, trt, 8, 8)
    assert est._moe_all_to_all and a2a > 0
    est, _ = exchange(deepseek, replace(sglang, moe_all_to_all="always"), 8, 8)
    assert est._moe_all_to_all  # SGLang launched with --moe-a2a-backend deepep


def test_the_all_to_all_runs_at_the_engines_measured_line(h200):
    """An engine with a fitted DeepEP line (engines.yaml all_to_all) prices the exchange at
    it; one without takes the roofline's alltoall constants."""
    qwen = load_model("Qwen3-235B-A22B")
    sglang = replace(load_engine("sglang"), moe_all_to_all="always")
    line = sglang.all_to_all["hopper"]
    est = RooflineEstimator(qwen, h200, tp=1, dp=8, ep=8, precision=Precision.FP8, engine=sglang)
    ranks = dispatch_ranks(qwen.num_experts, qwen.num_experts_per_tok, 8)
    want = all_to_all_seconds(8192, ranks, qwen.hidden_size, 2, 8, est.tp_link_bw, line.bw_eff,
                              line.latency_us * 1e-6)  # fmt: skip
    got = est._moe_part(1024.0, 8192.0)[0] - est._routed_experts(8192.0)[0]
    assert got == pytest.approx(want)
    bare = RooflineEstimator(qwen, h200, tp=1, dp=8, ep=8, precision=Precision.FP8)
    c = bare.constants
    assert bare._a2a_link == (bare.tp_link_bw, c.alltoall_bw_eff, c.alltoall_latency_us * 1e-6)


def test_ep_memory_per_gpu(h200):
    qwen = load_model("Qwen3-235B-A22B")
    w1 = weights_bytes_per_gpu(qwen, 8, 1, Precision.FP8)
    w8 = weights_bytes_per_gpu(qwen, 8, 1, Precision.FP8, ep=8)
    assert w8 == pytest.approx(w1)  # experts/EP each TP/EP wide: the same bytes per GPU
    expert_bytes = 94 * 128 * 3 * 4096 * 1536  # all expert weights, fp8
    assert w8 == pytest.approx(expert_bytes / 8, rel=0.05)  # experts dominate
    plan = plan_memory(qwen, h200, tp=8, ep=8, precision=Precision.FP8)
    assert plan.fits and plan.weights_bytes == pytest.approx(w8)
    with pytest.raises(ParallelismError, match="EP=3 does not divide the 128 experts"):
        plan_memory(qwen, h200, tp=8, ep=3)
    with pytest.raises(ParallelismError, match="EP=8 does not divide TP=4"):
        plan_memory(qwen, h200, tp=4, ep=8)
    with pytest.raises(ParallelismError, match="dense model"):
        plan_memory(load_model("llama-3.1-8b"), h200, tp=2, ep=2)


def test_simulate_moe_end_to_end_and_bad_ep():
    runner = CliRunner()
    args = ["simulate", "--model", "Qwen3-30B-A3B", "--sku", "h100-sxm", "--tp", "2",
            "--num-requests", "20", "--qps", "2", "--json"]  # fmt: skip
    ok = runner.invoke(cli, [*args, "--ep", "2"])
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.output)
    assert summary["requests"]["completed"] == 20 if "requests" in summary else True
    bad = runner.invoke(cli, [*args, "--ep", "3"])
    assert bad.exit_code == 2
    assert "EP=3 does not divide the 128 experts of Qwen/Qwen3-30B-A3B" in bad.output
    assert "Traceback" not in bad.output


def test_ep_is_a_search_dimension_with_its_feasibility_rules():
    from search._space import candidates, expand_space
    from search._spec import parse_spec

    spec = parse_spec(
        {
            "model": "Qwen/Qwen3-30B-A3B", "skus": ["h100-sxm"], "workload": "chat",
            "budget": {"max_gpus": 4}, "space": {"tp": [2, 4], "ep": [1, 2, 4]},
        }
    )  # fmt: skip
    points = expand_space(spec)
    assert spec.space.size(1)[0] == 6 and len(points) == 6
    assert "EP4" in next(p for p in points if p.ep == 4).label()
    assert "ep" not in next(p for p in points if p.ep == 1).as_dict()  # old fingerprints hold
    verdicts = {(c.point.tp, c.point.ep): c.infeasible_reason for c in candidates(spec)}
    assert verdicts[(2, 2)] is None and verdicts[(4, 4)] is None and verdicts[(4, 1)] is None
    assert "EP=4 does not divide TP=2" in verdicts[(2, 4)]
    assert points[0].deployment(spec).ep == points[0].ep


def test_silicon_moe_points_are_kept_only_when_asked_and_carry_their_ep():
    from search._validate._aic_silicon import select_points
    from search._validate._run import simulate_point

    base = {
        "id": "p1", "silicon_data_source": "x; silicon_concurrency=8", "backend": "trtllm",
        "backend_version": "1.0", "model_path": "Qwen/Qwen3-235B-A22B-FP8",
        "system": "h200_sxm", "mode": "agg", "isl": "1024", "osl": "64",
        "gemm_quant_mode": "fp8_block", "batch_size": "8", "tp_size": "8", "pp_size": "1",
        "attention_dp_size": "", "moe_tp_size": "1", "moe_ep_size": "8",
        "silicon_ttft_ms": "100", "silicon_tpot_ms": "10",
    }  # fmt: skip
    dense = {**base, "model_path": "meta-llama/Llama-3.1-70B", "moe_ep_size": ""}
    mismatch = {**base, "moe_tp_size": "2"}  # 2 x 8 != 8 x 1
    # 1 x 8 == 1 x 8, each of the 8 attention-DP ranks batching 1 of the 8 requests
    dp8 = {**base, "tp_size": "1", "attention_dp_size": "8", "batch_size": "1"}
    wide_tp = {**base, "tp_size": "64", "moe_tp_size": "8"}
    assert select_points([base, dense]).skipped == {
        "mixture-of-experts model (not in --models dense)": 1
    }
    moe = select_points([base, dense, mismatch, dp8, wide_tp], models="moe")
    point, dp_point = moe.points
    assert (point.moe, point.ep, point.tp, point.dp) == (True, 8, 8, 1)
    assert (dp_point.ep, dp_point.tp, dp_point.dp) == (8, 1, 8)
    assert moe.skipped == {
        "dense model (not in --models moe)": 1,
        "MoE TP x EP differs from attention DP x TP": 1,
        "TP beyond one node (tp_size > 8 GPUs)": 1,
    }
    assert len(select_points([base, dense], models="all").points) == 2
    result = simulate_point(point, requests_per_slot=2)
    assert result.ok and 1.0 < result.predicted_tpot_ms < 100.0


def test_a_gpt_oss_config_reads_as_a_mixture_of_experts(tmp_path):
    config = {
        "model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 24,
        "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
        "intermediate_size": 2880, "num_local_experts": 32, "experts_per_token": 4,
        "vocab_size": 201088, "sliding_window": 128, "tie_word_embeddings": False,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    m = load_model(str(path))
    assert (m.num_experts, m.num_experts_per_tok, m.moe_intermediate_size) == (32, 4, 2880)
    assert m.attention_bias and m.num_params / 1e9 == pytest.approx(20.9, abs=0.5)
    # OpenAI's 3.6B active leaves out the embedding lookup (0.58B), which we count as Qwen
    # (3.3B) and Mistral (12.9B) do
    embedding = 201088 * 2880
    assert (m.active_params - embedding) / 1e9 == pytest.approx(3.61, abs=0.05)


def test_shared_experts_run_beside_the_routed_ones_where_the_engine_streams_them():
    """TensorRT-LLM runs DeepSeek's shared experts on an auxiliary stream in CUDA-graphed
    iterations, vLLM (0.13+) in iterations of up to 256 tokens: the MoE layer then waits for
    the longer of the shared experts and the router with the routed experts."""
    b200 = load_catalog().get("b200")
    deepseek = load_model("deepseek-ai/DeepSeek-V3")
    trt, vllm, sglang = load_engine("trtllm"), load_engine("vllm"), load_engine("sglang")
    assert trt.shared_experts_stream.covers(4096, graphed=True)
    assert not trt.shared_experts_stream.covers(8, graphed=False)
    assert vllm.shared_experts_stream.covers(256, graphed=False)
    assert not vllm.shared_experts_stream.covers(257, graphed=True)
    assert sglang.shared_experts_stream is None
    assert load_engine("vllm@0.12.0").shared_experts_stream is None

    def estimator(engine):
        return RooflineEstimator(deepseek, b200, tp=8, precision=Precision.FP4, engine=engine)

    plain, beside = estimator(replace(trt, shared_experts_stream=None)), estimator(trt)
    shared = sum(plain._op_seconds(op, 8.0) for op in plain._shared_expert_ops)
    main = plain._routed_experts(8.0)[0] + sum(
        plain._op_seconds(op, 8.0) for op in plain._router_ops
    )
    assert 0 < shared < main
    share = deepseek.num_moe_layers / deepseek.num_layers
    assert beside._moe_part(8.0, 8.0, True)[0] == pytest.approx(
        plain._moe_part(8.0, 8.0)[0] - share * shared
    )
    assert beside._moe_part(8.0, 8.0)[0] == pytest.approx(plain._moe_part(8.0, 8.0)[0])
    # a graphed decode step saves it on every MoE layer; a prefill iteration (eager) does not
    decode = BatchShape(num_decodes=8, decode_kv_tokens=8 * 2048)
    saved = plain.batch_cost(decode).stage_times[0] - beside.batch_cost(decode).stage_times[0]
    assert saved == pytest.approx(deepseek.num_layers * share * shared, rel=1e-6)
    prefill = BatchShape(num_prefill_tokens=1024, num_prefills=1,
                         prefill_attn_pairs=1024 * 1025 / 2, prefill_kv_tokens=1024)  # fmt: skip
    assert beside.batch_cost(prefill).stage_times[0] == pytest.approx(
        plain.batch_cost(prefill).stage_times[0]
    )
    # a model without shared experts is unchanged
    qwen = load_model("Qwen3-235B-A22B")
    q_plain, q_trt = (
        RooflineEstimator(qwen, b200, tp=8, precision=Precision.FP8, engine=engine)
        for engine in (replace(trt, shared_experts_stream=None), trt)
    )
    assert q_trt._moe_part(8.0, 8.0, True)[0] == pytest.approx(q_plain._moe_part(8.0, 8.0)[0])


def test_a_gpus_own_all_to_all_line_comes_before_its_familys():
    """TensorRT-LLM's GB200 line (its NVLink kernels there) prices a GB200 exchange; a B200,
    same family, takes the Blackwell line."""
    from sku_catalog import load_catalog

    catalog = load_catalog()
    deepseek = load_model("deepseek-ai/DeepSeek-V3")
    trt = load_engine("trtllm")
    for sku_id, key in (("gb200", "gb200"), ("b200", "blackwell")):
        est = RooflineEstimator(deepseek, catalog.get(sku_id), tp=1, dp=8, ep=8,
                                precision=Precision.FP8, engine=trt)  # fmt: skip
        line = trt.all_to_all[key]
        assert est._a2a_link[1:] == (line.bw_eff, line.latency_us * 1e-6)
    assert trt.all_to_all["gb200"] != trt.all_to_all["blackwell"]
