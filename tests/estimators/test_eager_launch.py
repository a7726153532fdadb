"""Eager launches: which iterations an engine runs as CUDA graphs, and the host time of
launching a layer's kernels one by one in the others (engines.yaml eager_launch)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from estimators import BatchShape, Precision, load_engine, load_model, make_estimator
from estimators._engines import EagerLaunch, _build, _engines_yaml
from simulator._deployment import Deployment, engine_scheduler, sized_engine
from tests.benchmark_scripts import load_benchmark


def _prefill(tokens: int) -> BatchShape:
    pairs = tokens * (tokens + 1) / 2
    return BatchShape(tokens, 1, prefill_attn_pairs=pairs, prefill_kv_tokens=tokens)


def test_profiles_carry_their_measured_launch_times():
    """vLLM and SGLang from their engines' graph-against-eager measurements, TensorRT-LLM's
    MoE layer from a timed eager forward's CPU calls and its dense one unmeasured, an MLA
    model's layer where measured (SGLang's DeepSeek-V3 one, TensorRT-LLM's from issue #5929;
    engines.yaml header); Vidur's vLLM has none."""
    vllm, sglang = load_engine("vllm"), load_engine("sglang")
    assert vllm.eager_launch == EagerLaunch(308.0, 707.0)
    assert sglang.eager_launch == EagerLaunch(257.0, 1354.0, 1354.0)
    assert load_engine("vllm@0.11").eager_launch == vllm.eager_launch
    assert load_engine("trtllm").eager_launch == EagerLaunch(0.0, 833.0, 1956.0)
    assert load_engine("vidur").eager_launch is None
    assert (vllm.piecewise_max_tokens, vllm.piecewise_tokens_per_seq) == (512, 2)
    assert sglang.piecewise_max_tokens == 0  # prefill batches run eagerly
    # a MoE model's mean layer: its dense layers and its MoE layers, each at its own time
    assert EagerLaunch(100.0, 400.0).layer_seconds(1, 3) == pytest.approx(325e-6)
    assert EagerLaunch(100.0, 400.0).layer_seconds(0, 0) == 0.0
    # an MLA model's mean layer where the engine's was measured, else the same split
    assert EagerLaunch(100.0, 400.0, 900.0).layer_seconds(1, 3, mla=True) == pytest.approx(900e-6)
    assert EagerLaunch(100.0, 400.0, 900.0).layer_seconds(1, 3) == pytest.approx(325e-6)
    assert EagerLaunch(100.0, 400.0).layer_seconds(1, 3, mla=True) == pytest.approx(325e-6)


@pytest.mark.parametrize(
    ("launch", "why"),
    [
        ({"dense_layer_us": -1, "moe_layer_us": 5}, "negative"),
        ({"dense_layer_us": 1, "moe_layer_us": 5, "mla_layer_us": -2}, "negative"),
        ({"dense_layer_us": 1, "moe_layer_us": 5, "mla_us": 2}, "unknown keys"),
    ],
)
def test_a_malformed_launch_time_is_refused(launch, why):
    body = _engines_yaml()["vllm"]["profiles"]["0.13"]
    overhead = {**body["overhead"], "eager_launch": launch}
    with pytest.raises(ValueError, match=rf"engines\.yaml vllm\.0\.13: malformed profile.*{why}"):
        _build("vllm", "0.13", {**body, "overhead": overhead})


def test_sizing_follows_the_batch_cap_token_budget_and_gpu(h100):
    """vLLM captures up to min(2 x max_num_seqs, 512) tokens, never past its token budget;
    SGLang's decode graphs are its limit tier's (cuda_graph_max_bs by GPU memory and TP)."""
    vllm = load_engine("vllm")
    assert vllm.sized(h100, 1, 4, 8192).piecewise_max_tokens == 8
    assert vllm.sized(h100, 1, 1024, 8192).piecewise_max_tokens == 512
    assert vllm.sized(h100, 1, 1024, 256).piecewise_max_tokens == 256
    assert vllm.sized(h100, 1, 1024, None).piecewise_tokens_per_seq == 0  # resolved
    sglang = load_engine("sglang")
    assert sglang.sized(h100, 2, 64, 8192).graph_max_batch == 256  # TP < 4 below 160 GB
    assert sglang.sized(h100, 8, 64, 8192).graph_max_batch == 512
    assert sglang.sized(h100, 8, 64, 8192).piecewise_max_tokens == 0
    trt = load_engine("trtllm")
    assert trt.sized(h100, 8, 64, 8192) is trt  # nothing to resolve
    # TensorRT-LLM as its launches configure it: decode graphs up to the batch cap
    assert trt.sized(h100, 8, 256, 8192).graph_max_batch == 256


def test_a_deployment_sizes_its_engine_per_attention_dp_rank(h100):
    vllm = load_engine("vllm")
    scheduler = replace(engine_scheduler(vllm, h100, 8, dp=4), batch_size=64)
    assert sized_engine(vllm, h100, 8, scheduler, dp=4).piecewise_max_tokens == 32
    assert sized_engine(None, h100, 8, scheduler) is None
    model = load_model("Qwen/Qwen3-30B-A3B")
    d = Deployment(model, h100, tp=2, scheduler=replace(scheduler, batch_size=4), engine=vllm)
    assert d.sized_engine().piecewise_max_tokens == 8


def test_graphed_iterations(h100):
    vllm = load_engine("vllm").sized(h100, 1, 128, 8192)  # captures up to 256 tokens
    assert vllm.graphed(512, True, 512)  # a decode batch the full graphs capture
    assert not vllm.graphed(600, True, 600)
    assert vllm.graphed(256, False, 3)  # a small prefill, in the piecewise graphs
    assert not vllm.graphed(257, False, 3)
    sglang = load_engine("sglang")
    assert sglang.graphed(8, True, 8)
    assert not sglang.graphed(8, False, 1)  # any prefill batch runs eagerly


def test_an_eager_iteration_lasts_at_least_its_launches(llama8b, h100):
    """Llama-3.1-8B on one H100 under SGLang: a 16-token prefill (a few hundred us of GPU
    work a layer at most) takes 32 layers x 257 us; the same tokens as decodes replay
    graphs and are not held to it; a long prefill's GPU time is above the floor."""
    sglang = load_engine("sglang")
    est = make_estimator("roofline", llama8b, h100, 1, engine=sglang)
    bare = make_estimator("roofline", llama8b, h100, 1, engine=replace(sglang, eager_launch=None))
    floor = 32 * 257e-6
    small = est.batch_cost(_prefill(16)).stage_times[0]
    assert bare.batch_cost(_prefill(16)).stage_times[0] < floor
    assert small == pytest.approx(floor, rel=1e-12)
    decode = BatchShape(num_decodes=16, decode_kv_tokens=16 * 512)
    assert est.batch_cost(decode).stage_times == bare.batch_cost(decode).stage_times
    long = _prefill(8192)
    assert est.batch_cost(long).stage_times == bare.batch_cost(long).stage_times
    assert bare.batch_cost(long).stage_times[0] > floor
    assert "takes at least 8.2 ms a stage" in est.describe()


def test_decodes_above_the_graphs_launch_eagerly_and_decode_steps_agree(llama8b, h100):
    """A decode batch past the engine's captured sizes pays the floor, in `batch_cost` and
    in the lazily priced `decode_steps` alike (its mirror check would catch a difference),
    for every pipeline stage."""
    vllm = replace(load_engine("vllm@0.13"), graph_max_batch=4, piecewise_max_tokens=4)
    for pp in (1, 2):
        est = make_estimator("roofline", llama8b, h100, 1, pp, engine=vllm)
        floor = 32 // pp * 308e-6
        big = BatchShape(num_decodes=8, decode_kv_tokens=8 * 64)
        assert min(est.batch_cost(big).stage_times) == pytest.approx(floor, rel=1e-12)
        small = BatchShape(num_decodes=4, decode_kv_tokens=4 * 64)
        assert max(est.batch_cost(small).stage_times) < floor
        steps = est.pipeline_decode_steps(8, 8 * 64)
        for i in range(3):
            host, stages, hop, *_ = next(steps)
            cost = est.batch_cost(BatchShape(num_decodes=8, decode_kv_tokens=8 * (64 + i)))
            assert (host, stages, hop) == (cost.cpu_overhead, cost.stage_times, cost.pp_hop_time)
        assert est._pipeline_steps_checked == {8}
        assert next(est.decode_steps(8, 8 * 64))[1] == est.batch_cost(big).stage_times[0]
        assert est._decode_steps_mirror


def test_a_mixture_of_experts_pays_its_moe_layers_launches(h100):
    """Qwen3-30B-A3B (48 MoE layers) under vLLM: 48 x 707 us when nothing is graphed."""
    model = load_model("Qwen/Qwen3-30B-A3B")
    vllm = replace(load_engine("vllm"), piecewise_max_tokens=0)
    est = make_estimator("roofline", model, h100, 1, precision=Precision.BF16, engine=vllm)
    assert est._eager_stage == pytest.approx(48 * 707e-6, rel=1e-12)
    assert est.batch_cost(_prefill(8)).stage_times[0] == pytest.approx(48 * 707e-6)


def test_tensorrt_llm_context_iterations_of_a_moe_model_last_at_least_their_launches(h100):
    """TensorRT-LLM runs context iterations eagerly: gpt-oss-120b's 36 MoE layers take at
    least 36 x 833 us a prefill iteration; its decode batches replay graphs; a dense model
    keeps no floor (none measured)."""
    trt = load_engine("trtllm")
    gpt_oss = load_model("openai/gpt-oss-120b")
    est = make_estimator("roofline", gpt_oss, h100, 2, engine=trt)
    assert est.batch_cost(_prefill(64)).stage_times[0] == pytest.approx(36 * 833e-6, rel=1e-12)
    decode = BatchShape(num_decodes=8, decode_kv_tokens=8 * 512)
    assert est.batch_cost(decode).stage_times[0] < 36 * 833e-6
    llama = load_model("meta-llama/Llama-3.1-8B")
    bare = make_estimator("roofline", llama, h100, 1, engine=replace(trt, eager_launch=None))
    dense = make_estimator("roofline", llama, h100, 1, engine=trt)
    assert dense.batch_cost(_prefill(16)).stage_times == bare.batch_cost(_prefill(16)).stage_times


def test_an_mla_model_takes_the_engines_mla_layer_launch_time(h200):
    """DeepSeek-V3's 61 MLA layers under TensorRT-LLM: a short context iteration lasts
    61 x 1956 us (issue #5929's host-bound 1,600-token context, engines.yaml header), above
    its GPU time; gpt-oss keeps the grouped-query MoE layer's 833 us."""
    trt = load_engine("trtllm")
    deepseek = load_model("deepseek-ai/DeepSeek-V3")
    est = make_estimator("roofline", deepseek, h200, 8, precision=Precision.FP8, engine=trt, ep=8)
    assert est.batch_cost(_prefill(256)).stage_times[0] == pytest.approx(61 * 1956e-6, rel=1e-12)
    bare = make_estimator(
        "roofline", deepseek, h200, 8, precision=Precision.FP8, ep=8,
        engine=replace(trt, eager_launch=None),
    )  # fmt: skip
    assert bare.batch_cost(_prefill(256)).stage_times[0] < 61 * 1956e-6


def test_the_shipped_mla_launch_time_is_the_derivation_of_the_issue_table(capsys):
    """engines.yaml's TensorRT-LLM mla_layer_us is what benchmarks/trt_mla_launch.py derives
    from issue #5929's host-bound H200 row, to the microsecond."""
    module = load_benchmark("trt_mla_launch")
    derived = module.derived_layer_us()
    assert load_engine("trtllm").eager_launch.mla_layer_us == pytest.approx(derived, abs=0.5)
    assert "host-bound" in capsys.readouterr().out
