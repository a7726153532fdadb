"""Expert weight precision apart from the dense one: gpt-oss's MXFP4 experts (bytes with their
scales, weight-only math on Hopper, W4A8 on Blackwell), NVFP4 checkpoints' 16-bit layers, and
the refusals (FP4 math without FP4 tensor cores)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

from estimators import (
    Precision,
    PrecisionError,
    RooflineEstimator,
    WeightPrecisions,
    load_model,
    plan_memory,
    with_expert_precision,
)
from estimators._memory import weights_bytes_per_gpu
from estimators._weight_precision import gemm_math
from search.cli import cli
from sku_catalog import load_catalog

GIB = 2**30


@pytest.fixture(scope="module")
def gpt_oss():
    return load_model("openai/gpt-oss-120b")


@pytest.fixture(scope="module")
def h100():
    return load_catalog().get("h100-sxm")


@pytest.fixture(scope="module")
def b200():
    return load_catalog().get("b200")


def test_scales_make_nvfp4_4_5_bits_and_mxfp4_4_25_bits_a_weight(gpt_oss):
    assert gpt_oss.matmul_weight_bytes(Precision.FP4) * 8 == 4.5  # an FP8 scale per 16
    assert gpt_oss.matmul_weight_bytes(Precision.MXFP4) * 8 == 4.25  # an E8M0 scale per 32


def test_gpt_oss_checkpoint_keeps_mxfp4_experts_and_16_bit_elsewhere(gpt_oss):
    # config.json's quantization_config: quant_method mxfp4, modules_to_not_convert the
    # attention, router, embedding and LM head
    assert gpt_oss.expert_precision is Precision.MXFP4
    layout = WeightPrecisions.of(gpt_oss, Precision.BF16)
    assert (layout.attention, layout.router, layout.lm_head) == (Precision.BF16,) * 3
    assert layout.experts is Precision.MXFP4
    assert layout.describe(gpt_oss) == "experts mxfp4"
    assert load_model("meta-llama/Llama-3.1-70B").expert_precision is None


def test_gpt_oss_120b_weights_match_its_checkpoint_size(gpt_oss):
    weights = weights_bytes_per_gpu(gpt_oss, 1, 1, Precision.BF16)
    h, layers, experts = 2880, 36, 128
    expert_params = layers * experts * 3 * h * h  # gate, up and down of 128 experts a layer
    rest = gpt_oss.num_params - expert_params  # attention, router, norms, embedding, LM head
    biases_and_final_norm = layers * (64 + 2 * 8) * 64 + h  # QKV biases
    expected = expert_params * 4.25 / 8 + (rest + biases_and_final_norm) * 2
    assert weights == pytest.approx(expected, rel=1e-9)
    # the published checkpoint: 65.3 GB of safetensors (60.8 GiB; the experts' biases and
    # the attention sinks, left out here, are a few MB)
    assert weights / GIB == pytest.approx(60.8, rel=0.005)
    bf16 = weights_bytes_per_gpu(with_expert_precision(gpt_oss, Precision.BF16), 1, 1,
                                 Precision.BF16)  # fmt: skip
    assert bf16 / GIB == pytest.approx(217.5, abs=0.1)  # every weight 16-bit: no H100 holds it


def test_mxfp4_experts_run_weight_only_on_hopper(gpt_oss, h100):
    plan = plan_memory(gpt_oss, h100, 1, 1, Precision.BF16)
    assert plan.fits and plan.weights_bytes / GIB == pytest.approx(60.7, abs=0.1)
    assert "experts mxfp4" in plan.breakdown()
    assert gemm_math(h100, Precision.MXFP4) is Precision.BF16
    est = RooflineEstimator(gpt_oss, h100)
    bf16 = RooflineEstimator(with_expert_precision(gpt_oss, Precision.BF16), h100)
    # decode (a few rows): weight-read bound, so the 4.25-bit experts read 4.25/16 the bytes
    t4, _, b4 = est._routed_experts(1.0)
    t16, _, b16 = bf16._routed_experts(1.0)
    # activations of 4 expert rows: gate-up in and out (3h), down in and out (2h), SwiGLU (3h)
    rows = 4 * 2 * (3 * 2880 + 2 * 2880 + 3 * 2880)
    assert (b4 - rows) / (b16 - rows) == pytest.approx(4.25 / 16, rel=1e-9)
    assert t4 < 0.85 * t16  # (the fitted m_half of H100 GEMMs leaves part compute bound)
    # a long prefill: compute bound at the 16-bit peak either way (dequantised, 16-bit math)
    t4, _, _ = est._routed_experts(65536.0)
    t16, _, _ = bf16._routed_experts(65536.0)
    assert t4 == pytest.approx(t16, rel=1e-9)


def test_weight_only_experts_are_bounded_by_the_unpacking_of_their_weights(gpt_oss, h100, b200):
    """With an engine's fitted dequantization rate, 4-bit experts in 16-bit math (Hopper)
    take at least their weight elements / that rate (and their fixed cost); 16-bit experts
    and Blackwell's W4A8 experts do not pay it."""
    from estimators import load_engine
    from estimators._roofline import load_roofline_constants

    rate = load_roofline_constants(h100, "vllm").matmul_dequant_tera_per_s
    assert 1.0 < rate < 10.0  # fitted to vLLM's H100 w4a16_mxfp4 MoE table
    vllm = load_engine("vllm")
    est = RooflineEstimator(gpt_oss, h100, engine=vllm)
    touched = est._moe.touched(32.0)
    elements = touched * (2 * 2880 * 2880 + 2880 * 2880)  # gate-up and down of each expert
    t, _, _ = est._routed_experts(32.0)
    bound = elements / (rate * 1e12) + est._k_experts.experts_overhead  # one M tile each
    assert t >= bound
    assert t == pytest.approx(bound, rel=0.1)  # the bound decides
    est._k_experts = replace(est._k_experts, sec_per_weight_elem=0.0)  # the bound removed
    assert est._routed_experts(32.0)[0] < 0.9 * t
    bf16 = RooflineEstimator(with_expert_precision(gpt_oss, Precision.BF16), h100, engine=vllm)
    assert bf16._k_experts.sec_per_weight_elem == 0.0
    assert RooflineEstimator(gpt_oss, b200, engine=vllm)._k_experts.sec_per_weight_elem == 0.0


def test_weight_only_experts_unpack_their_weights_again_for_each_m_tile(gpt_oss, h100):
    """With the fitted M tile (vLLM's H100 table), an expert whose rows fill k tiles unpacks
    its weights k times: a long prefill's experts cost k x the elements / rate (plus the
    fixed cost) where that bound decides, and a decode's (one tile) as unpacked once.  The
    fixed cost is the weight-only kernels' alone."""
    import math

    from estimators import load_engine
    from estimators._roofline import load_roofline_constants

    c = load_roofline_constants(h100, "vllm")
    assert 16.0 <= c.matmul_dequant_tile_rows <= 256.0
    assert 1.0 < c.matmul_dequant_overhead_us < 200.0
    vllm = load_engine("vllm")
    est = RooflineEstimator(gpt_oss, h100, engine=vllm)
    assert est._k_experts.experts_overhead == pytest.approx(c.matmul_dequant_overhead_us * 1e-6)
    once = RooflineEstimator(gpt_oss, h100, engine=vllm)
    once._k_experts = replace(once._k_experts, dequant_tile_rows=0.0)
    assert est._routed_experts(4.0)[0] == once._routed_experts(4.0)[0]  # one tile
    tokens = 16384.0  # 65,536 rows over 128 experts: 512 rows each
    tiles = math.ceil(512 / c.matmul_dequant_tile_rows)
    per_tile = 2880 * 2880 * 3 * 128 / (c.matmul_dequant_tera_per_s * 1e12)
    fixed = c.matmul_dequant_overhead_us * 1e-6
    t = est._routed_experts(tokens)[0]
    assert t >= tiles * per_tile + fixed
    assert t == pytest.approx(tiles * per_tile + fixed, rel=0.1)  # the unpacking decides
    assert once._routed_experts(tokens)[0] < 0.75 * t
    bf16 = RooflineEstimator(with_expert_precision(gpt_oss, Precision.BF16), h100, engine=vllm)
    assert bf16._k_experts.experts_overhead == 0.0


def test_mxfp4_experts_compute_with_8_bit_activations_on_blackwell(gpt_oss, b200):
    assert gemm_math(b200, Precision.MXFP4) is Precision.FP8
    est = RooflineEstimator(gpt_oss, b200)
    bf16 = RooflineEstimator(with_expert_precision(gpt_oss, Precision.BF16), b200)
    t4, _, _ = est._routed_experts(65536.0)
    t16, _, _ = bf16._routed_experts(65536.0)
    assert t4 < 0.6 * t16  # the FP8 peak is twice the 16-bit one
    assert est.peak == b200.peak_flops()  # attention and the rest stay 16-bit


def test_fp4_math_is_refused_without_fp4_tensor_cores(gpt_oss, h100, b200):
    nvfp4_experts = with_expert_precision(gpt_oss, Precision.FP4)
    with pytest.raises(PrecisionError, match=r"expert precision fp4 \(NVFP4\) needs FP4 tensor "
                       r"cores, which h100-sxm \(hopper\) does not have.*mxfp4"):  # fmt: skip
        plan_memory(nvfp4_experts, h100, 1, 1, Precision.BF16)
    with pytest.raises(PrecisionError, match="expert precision fp4"):
        RooflineEstimator(nvfp4_experts, h100)
    assert plan_memory(nvfp4_experts, b200, 1, 1, Precision.BF16).fits
    with pytest.raises(PrecisionError, match="precision mxfp4: MXFP4 is an expert-weight format"):
        plan_memory(gpt_oss, b200, 1, 1, Precision.MXFP4)
    with pytest.raises(PrecisionError, match="dense model"):
        with_expert_precision(load_model("llama-3.1-8b"), Precision.MXFP4)


def test_nvfp4_keeps_the_lm_head_router_and_mla_latents_16_bit(v3):
    layout = WeightPrecisions.of(v3, Precision.FP4)
    assert (layout.attention, layout.router, layout.lm_head) == (Precision.BF16,) * 3
    assert (layout.attention_out, layout.mlp, layout.experts) == (Precision.FP4,) * 3
    llama = WeightPrecisions.of(load_model("llama-3.1-70b"), Precision.FP4)
    assert (llama.attention, llama.attention_out, llama.mlp) == (Precision.FP4,) * 3
    assert llama.describe(load_model("llama-3.1-70b")) == ""
    fp8 = WeightPrecisions.of(v3, Precision.FP8)
    assert {fp8.attention, fp8.mlp, fp8.experts} == {Precision.FP8}
    assert fp8.router is Precision.BF16  # no checkpoint quantises the router
    # Kimi-K2.5-NVFP4 and MiniMax-M2.5-NVFP4 keep all of self_attn (the output projection
    # too) in 16 bits, their MLPs and experts NVFP4 (NVIDIA's Kimi checkpoint by its own
    # name: moonshotai's is INT4 experts)
    for name in ("nvidia/Kimi-K2.5-NVFP4", "MiniMaxAI/MiniMax-M2.5"):
        layout = WeightPrecisions.of(load_model(name), Precision.FP4)
        assert (layout.attention, layout.attention_out) == (Precision.BF16,) * 2
        assert (layout.mlp, layout.experts) == (Precision.FP4,) * 2


def test_16_bit_latent_projections_of_an_nvfp4_run_use_the_16_bit_peak(v3, b200):
    from estimators._mla import MlaRooflineEstimator
    from estimators._roofline import _token_op_time

    fp4 = MlaRooflineEstimator(v3, b200, 8, 1, Precision.FP4, ep=8)
    bf16 = MlaRooflineEstimator(v3, b200, 8, 1, Precision.BF16, ep=8)
    ops4 = {op.name: op for op in fp4.layer_ops}
    ops16 = {op.name: op for op in bf16.layer_ops}
    assert ops4["attn_pre_proj"].kind == "matmul16" and ops4["attn_post_proj"].kind == "matmul"
    for m in (1.0, 8192.0):  # the same GEMM, weights and math, as in a 16-bit run
        assert _token_op_time(ops4["attn_pre_proj"], m, fp4._k) == pytest.approx(
            _token_op_time(ops16["attn_pre_proj"], m, bf16._k), rel=1e-12
        )
    # the output projection reads 4.5-bit weights
    assert ops4["attn_post_proj"].fixed_bytes == pytest.approx(
        ops16["attn_post_proj"].fixed_bytes * 4.5 / 16, rel=1e-12
    )


def test_expert_precision_flag_of_simulate():
    runner = CliRunner()
    base = ["simulate", "--qps", "1", "--num-requests", "20", "--json"]
    ok = runner.invoke(cli, [*base, "--model", "gpt-oss-120b", "--sku", "h100-sxm"])
    assert ok.exit_code == 0, ok.output
    assert '"weight_layout": "experts mxfp4"' in ok.output
    dense = runner.invoke(cli, [*base, "--model", "llama-3.1-8b", "--sku", "h100-sxm",
                                "--expert-precision", "mxfp4"])  # fmt: skip
    assert dense.exit_code == 2 and "Traceback" not in dense.output
    assert "expert precision mxfp4: meta-llama/Llama-3.1-8B is a dense model" in dense.output
    hopper = runner.invoke(cli, [*base, "--model", "gpt-oss-120b", "--sku", "h100-sxm",
                                 "--expert-precision", "fp4"])  # fmt: skip
    assert hopper.exit_code == 2 and "h100-sxm (hopper) does not have" in hopper.output
    bad = runner.invoke(cli, [*base, "--model", "gpt-oss-120b", "--expert-precision", "int8"])
    assert bad.exit_code == 2 and "--expert-precision" in bad.output


def test_fingerprints_of_models_without_an_expert_precision_do_not_change(gpt_oss):
    assert "expert_precision" not in load_model("deepseek-v3").fingerprint_fields()
    assert gpt_oss.fingerprint_fields()["expert_precision"] == "mxfp4"
    assert replace(gpt_oss, expert_precision=None).fingerprint_fields() != (
        gpt_oss.fingerprint_fields()
    )


def test_a_search_spec_sets_the_experts_and_refuses_nvfp4_experts_on_hopper(gpt_oss):
    from search._errors import SpecError
    from search._space import candidates
    from search._spec import parse_spec

    base = {"model": "gpt-oss-120b", "skus": ["h100-sxm", "b200"], "workload": "chat",
            "engine": "vllm", "budget": {"max_gpus": 1}, "space": {"tp": [1]}}  # fmt: skip
    spec = parse_spec({**base, "expert_precision": "fp4"})
    assert spec.model_architecture.expert_precision is Precision.FP4
    found = {c.point.sku: c for c in candidates(spec)}
    assert "expert precision fp4 (NVFP4) needs FP4 tensor cores" in (
        found["h100-sxm"].infeasible_reason
    )
    assert found["b200"].feasible
    # unset: the checkpoint's own MXFP4 experts, and the fingerprint of that model
    plain = parse_spec(base)
    assert plain.model_architecture == gpt_oss
    # 4-bit experts read whether the GPU has FP4 tensor cores: its FP4 peak is fingerprinted
    from search._space import _sku_record

    point = found["b200"].point
    assert "fp4_tflops" in _sku_record("b200", point, plain)
    dense = parse_spec({**base, "model": "llama-3.1-8b"})
    assert "fp4_tflops" not in _sku_record("b200", point, dense)
    with pytest.raises(SpecError, match=r"expert precision mxfp4: .* is a dense model"):
        parse_spec({**base, "model": "llama-3.1-8b", "expert_precision": "mxfp4"})


@pytest.fixture(scope="module")
def kimi():
    return load_model("moonshotai/Kimi-K2.5")


def test_kimi_checkpoint_keeps_int4_experts_and_16_bit_elsewhere(kimi):
    # config.json's quantization_config: compressed-tensors, 4-bit int weights in groups of
    # 32, no activation quantisation, ignoring the LM head, attention, shared experts and the
    # dense layer's MLP
    assert (kimi.expert_precision, kimi.int4_group_size) == (Precision.INT4, 32)
    assert kimi.weight_precision is None  # the rest is 16-bit: a run defaults to bf16
    layout = WeightPrecisions.of(kimi, Precision.BF16)
    assert (layout.attention, layout.mlp, layout.router) == (Precision.BF16,) * 3
    assert layout.experts is Precision.INT4
    assert layout.describe(kimi) == "experts int4"
    assert kimi.matmul_weight_bytes(Precision.INT4) * 8 == 4.5  # a 16-bit scale per 32


def test_kimi_int4_weights_are_the_experts_at_4_5_bits_and_the_rest_at_16(kimi):
    weights = weights_bytes_per_gpu(kimi, 1, 1, Precision.BF16)
    moe_layers = kimi.num_layers - kimi.num_dense_layers
    experts = moe_layers * kimi.num_experts * 3 * kimi.hidden_size * kimi.moe_intermediate_size
    rest = kimi.num_params - experts
    assert weights == pytest.approx(experts * 4.5 / 8 + rest * 2, rel=1e-6)  # 594.2 GB
    # eight H200s hold it (the public vLLM runs of the validation set), not at 16 bits
    h200 = load_catalog().get("h200")
    plan = plan_memory(kimi, h200, tp=8, ep=8)
    assert plan.fits and plan.weights_bytes / GIB == pytest.approx(71.0, abs=0.1)
    assert not plan_memory(with_expert_precision(kimi, Precision.BF16), h200, tp=8, ep=8).fits


def test_int4_experts_run_weight_only_on_every_gpu(kimi, h100, b200, gpt_oss):
    """INT4 experts compute in 16 bits on Hopper and Blackwell alike and pay the engine's
    fitted unpacking rate there (on Blackwell fitted to vLLM's Marlin INT4 table, the kernel
    it runs them with); MXFP4 experts on Blackwell stay W4A8, without that bound."""
    from estimators import load_engine
    from estimators._roofline import load_roofline_constants

    vllm = load_engine("vllm")
    for sku in (h100, b200):
        assert gemm_math(sku, Precision.INT4) is Precision.BF16
        rate = load_roofline_constants(sku, "vllm").matmul_dequant_tera_per_s
        assert 1.0 < rate < 10.0
        est = RooflineEstimator(kimi, sku, 8, 1, Precision.BF16, ep=8, engine=vllm)
        assert est._k_experts.sec_per_weight_elem == pytest.approx(1e-12 / rate)
        touched = est._moe.touched(32.0)
        elements = touched * 3 * kimi.hidden_size * kimi.moe_intermediate_size
        assert est._routed_experts(32.0)[0] >= elements / (rate * 1e12)
    w4a8 = RooflineEstimator(gpt_oss, b200, engine=vllm)
    assert w4a8._k_experts.sec_per_weight_elem == 0.0


def test_int4_is_an_expert_format_only():
    from search._errors import SpecError
    from search._spec import parse_spec

    runner = CliRunner()
    dense = runner.invoke(cli, ["simulate", "--model", "kimi-k2.5", "--precision", "int4",
                                "--qps", "1"])  # fmt: skip
    assert dense.exit_code == 2 and "--precision" in dense.output
    with pytest.raises(PrecisionError, match=r"--expert-precision int4\) with precision bf16"):
        plan_memory(load_model("kimi-k2.5"), load_catalog().get("h200"), tp=8,
                    precision=Precision.INT4)  # fmt: skip
    spec = {"model": "kimi-k2.5", "skus": ["h200"], "workload": "chat", "engine": "vllm",
            "budget": {"max_gpus": 8}, "space": {"tp": [8], "precision": ["int4"]}}  # fmt: skip
    with pytest.raises(SpecError, match="int4 is an expert-weight format"):
        parse_spec(spec)


def test_nvidias_kimi_checkpoint_takes_the_precision_given():
    from estimators import variant_note

    nvfp4 = load_model("nvidia/Kimi-K2.5-NVFP4")  # its own NVFP4 experts, not INT4
    assert nvfp4.expert_precision is None
    assert WeightPrecisions.of(nvfp4, Precision.FP4).experts is Precision.FP4
    note = variant_note("nvidia/Kimi-K2.5-NVFP4")
    assert "its experts take the precision given, not moonshotai/Kimi-K2.5's own int4" in note
    assert load_model("moonshotai/Kimi-K2.5-Instruct").expert_precision is Precision.INT4
