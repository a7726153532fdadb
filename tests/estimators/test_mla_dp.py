"""Attention data parallelism (DP) of mixtures of experts: the busiest rank, memory per GPU,
KV capacity per rank, feasibility rules and fingerprints of configurations without DP."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from click.testing import CliRunner

from estimators import BatchShape, Precision, load_model, make_estimator
from estimators._attention_dp import busiest_rank
from estimators._memory import ParallelismError, plan_memory, weights_bytes_per_gpu
from search._spec import parse_spec, sha256_json
from search.cli import cli
from simulator import Deployment, prepare


def test_the_busiest_rank_takes_the_ceiling_of_decodes_and_prefill_chunks():
    batch = BatchShape(
        num_prefill_tokens=900, num_prefills=3, prefill_attn_pairs=3 * 300 * 301 / 2,
        prefill_kv_tokens=900, num_decodes=10, decode_kv_tokens=10_000,
    )  # fmt: skip
    rank = busiest_rank(batch, 4)
    assert (rank.num_decodes, rank.decode_kv_tokens) == (3, 3000)  # ceil(10 / 4) = 3
    assert (rank.num_prefills, rank.num_prefill_tokens, rank.prefill_kv_tokens) == (1, 300, 300)
    assert rank.prefill_attn_pairs == pytest.approx(300 * 301 / 2)
    # one long prompt is not split across ranks
    one = busiest_rank(BatchShape(num_prefill_tokens=8192, num_prefills=1), 8)
    assert one.num_prefill_tokens == 8192
    assert busiest_rank(batch, 1) is batch


def test_dp_weights_per_gpu_and_kv_capacity_per_rank(v3, h200):
    h = 7168
    attention = h * 1536 + 1536 * 16 * 192 + h * 576 + 512 * 16 * 256 + 16 * 128 * h
    # DP2 x TP8 = 16 GPUs, EP16: 16 experts a GPU, each whole (MoE TP 16 / 16 = 1);
    # attention, shared expert and dense MLPs split over one rank's 8 GPUs
    moe_mlp = 16 * 3 * h * 2048 + 3 * h * 2048 // 8
    matmul = 61 * attention + 58 * moe_mlp + 3 * (3 * h * 18432 // 8)
    router = 58 * h * 256 * 2  # 16-bit in the FP8 checkpoint
    other = 61 * (2 * h + 1536 + 512) * 2 + 2 * (129280 // 8) * h * 2 + h * 2 + router
    expected = matmul * (1 + 4 / 16384) + other
    got = weights_bytes_per_gpu(v3, 8, 1, Precision.FP8, ep=16, dp=2)
    assert got == pytest.approx(expected, rel=1e-9)
    assert got / 2**30 == pytest.approx(41.2, abs=0.1)  # against 79.3 GiB at TP8 EP8

    plan = plan_memory(v3, h200, 8, 1, Precision.FP8, Precision.BF16, ep=16, dp=2)
    assert plan.dp == 2 and plan.kv_bytes_per_token == 61 * 576 * 2  # one rank's latent
    assert "DP=2 x TP=8" in plan.breakdown() and "per DP rank; 2 ranks" in plan.breakdown()
    deployment = Deployment(v3, h200, tp=8, precision=Precision.FP8, ep=16, dp=2)
    assert deployment.gpus_per_replica == 16
    prepared = prepare(deployment)
    assert prepared.cluster.num_kv_blocks == 2 * prepared.memory.num_kv_blocks
    assert prepared.hardware.gpus_per_replica == 16


def test_dp_rank_prices_its_share_and_the_experts_every_rank_tokens(v3, h200):
    tp8 = make_estimator("roofline", v3, h200, 8, 1, Precision.FP8, ep=8)
    dp2 = make_estimator("roofline", v3, h200, 8, 1, Precision.FP8, ep=16, dp=2)
    batch = BatchShape(num_decodes=128, decode_kv_tokens=128 * 2000)
    # half the sequences' latent KV and half the experts per GPU: a shorter step
    assert dp2.batch_cost(batch).stage_times[0] < tp8.batch_cost(batch).stage_times[0]
    # the rank's attention is that of 64 sequences on one TP8 group
    assert dp2._decode_attn(64, 64 * 2000) == pytest.approx(tp8._decode_attn(64, 64 * 2000))
    # 16 GPUs span two 8-GPU nodes: the all-to-all runs over the nodes' network
    assert dp2._moe_link[0] == dp2.node.inter_node_bandwidth_gbps * 1e9
    assert tp8._moe_link[0] == tp8.tp_link_bw


def test_dp_feasibility_errors_name_the_field(v3, h200):
    with pytest.raises(ParallelismError, match=r"EP=32 does not divide DP x TP=16"):
        plan_memory(load_model("Qwen3-30B-A3B"), h200, tp=8, ep=32, dp=2)
    with pytest.raises(ParallelismError, match=r"DP=2: meta-llama/Llama-3.1-8B is a dense"):
        plan_memory(load_model("llama-3.1-8b"), h200, tp=1, dp=2)
    with pytest.raises(ParallelismError, match=r"DP=2 with PP=2"):
        plan_memory(load_model("Qwen3-30B-A3B"), h200, tp=2, pp=2, dp=2)
    with pytest.raises(ParallelismError, match=r"MoE TP \(DP x TP / EP\)=16 exceeds the 8 GPUs"):
        plan_memory(v3, h200, tp=8, ep=1, dp=2, precision=Precision.FP8)
    with pytest.raises(ParallelismError, match="attention data-parallel degree must be"):
        plan_memory(v3, h200, tp=8, ep=8, dp=0)
    runner = CliRunner()
    bad = runner.invoke(cli, ["simulate", "--model", "llama-3.1-8b", "--dp", "2", "--qps", "1"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "DP=2: meta-llama/Llama-3.1-8B is a dense model" in bad.output


def _spec(**space):
    return parse_spec(
        {
            "model": "Qwen/Qwen3-30B-A3B", "skus": ["h100-sxm"], "workload": "chat",
            "budget": {"max_gpus": 4}, "space": space,
        }
    )  # fmt: skip


def test_dp_is_a_search_dimension_and_dp1_keeps_its_fingerprint():
    from search._space import candidates, expand_space, fingerprint
    from search._strategy import params_of

    spec = _spec(tp=[1, 2], ep=[1, 2], dp=[1, 2])
    points = expand_space(spec)
    assert spec.space.size(1)[0] == len(points) == 8
    verdicts = {(c.point.tp, c.point.ep, c.point.dp): c.infeasible_reason for c in candidates(spec)}
    assert verdicts[(1, 2, 2)] is None and verdicts[(2, 2, 2)] is None
    assert "EP=2 does not divide TP=1" in verdicts[(1, 2, 1)]
    assert verdicts[(2, 1, 2)] is None  # MoE TP 4 over DP2 x TP2
    dp2 = next(p for p in points if p.dp == 2 and p.tp == 2 and p.ep == 2)
    assert dp2.num_gpus == 4 and dp2.label().startswith("h100-sxm DP2 TP2 PP1 EP2")
    assert dp2.deployment(spec).dp == 2
    # every trial names its dp (a grid trial without it would let the sampler pick one)
    assert params_of(dp2)["dp"] == 2
    one = next(p for p in points if p.dp == 1 and p.ep == 1 and p.tp == 1)
    assert params_of(one)["dp"] == 1
    # dp = 1 leaves the stored form, and so the fingerprint, as before DP existed
    stored = asdict(one)
    del stored["dp"], stored["ep"], stored["decode"]
    assert one.as_dict() == stored
    sku = asdict(spec.sku_catalog.get(one.sku))
    del sku["fp4_tflops"]  # the catalog's FP4 peak enters FP4 configurations only
    fp = spec.fingerprint()
    assert fingerprint(fp, one, spec) == sha256_json({"spec": fp, "point": stored, "sku": sku})
    # and a spec without `dp` has the same fingerprint as one that says dp: [1]
    assert _spec(tp=[1, 2]).fingerprint() == _spec(tp=[1, 2], dp=[1]).fingerprint()


def test_models_without_latent_attention_keep_their_fingerprint_fields():
    llama = load_model("llama-3.1-8b")
    fields = llama.fingerprint_fields()
    assert not {"kv_lora_rank", "q_lora_rank", "v_head_dim", "weight_scale_block"} & set(fields)
    assert set(asdict(llama)) - set(fields) == {
        "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
        "weight_scale_block", "sliding_window", "sliding_window_layers", "expert_precision",
        "qk_norm", "kv_cache_precision", "int4_group_size",
        "model_type",  # model_type: the name says it already
        "weight_precision",  # a default: the run's own precision enters the fingerprint
    }  # fmt: skip
    assert load_model("deepseek-v3").fingerprint_fields()["kv_lora_rank"] == 512
