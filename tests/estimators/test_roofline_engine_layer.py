"""The roofline's engine layers (roofline.yaml `engines:`): looked up only for their engine."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from estimators import BatchShape, Precision, RooflineEstimator, load_engine, load_model
from estimators._roofline import (
    AttentionRows,
    _roofline_yaml,
    attention_seconds,
    load_roofline_constants,
    roofline_table,
)
from sku_catalog import load_catalog

H100 = load_catalog().get("h100-sxm")
A40 = load_catalog().get("a40")
LLAMA8 = load_model("meta-llama/Llama-3.1-8B")


def _layer(engine: str, sku_id: str) -> dict:
    return _roofline_yaml()["engines"][engine]["skus"][sku_id]


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_engine_constants_are_the_fitted_entry_of_that_engine(engine):
    fitted = _layer(engine, "h100-sxm")
    consts = load_roofline_constants(H100, engine)
    assert consts.matmul_eff_max == fitted["matmul"]["eff_max"]
    assert consts.attention_prefill_eff_max == fitted["attention"]["prefill_eff_max"]
    assert consts.attention_decode_seq_kv == fitted["attention"]["decode_seq_kv"] > 0
    # what no aiconfigurator table measures stays as fitted to Vidur's tables
    base = load_roofline_constants(H100)
    assert consts.elementwise_norm_mem_eff == base.elementwise_norm_mem_eff
    assert consts.cpu_base_ms == base.cpu_base_ms


def test_vidur_and_no_engine_keep_todays_constants():
    base = load_roofline_constants(H100)
    assert load_roofline_constants(H100, "vidur") == base
    assert base.matmul_eff_max == _roofline_yaml()["families"]["hopper"]["matmul"]["eff_max"]
    assert base.attention_decode_seq_kv == 0.0 and base.matmul_fp8_eff_max == 0.0
    vidur = RooflineEstimator(LLAMA8, H100, engine=load_engine("vidur"))
    vllm = RooflineEstimator(LLAMA8, H100, engine=load_engine("vllm"))
    assert vidur.constants.matmul_eff_max == base.matmul_eff_max
    assert vllm.constants.matmul_eff_max == _layer("vllm", "h100-sxm")["matmul"]["eff_max"]
    assert vllm.constants.matmul_eff_max != base.matmul_eff_max


def test_a_sku_without_tables_keeps_its_own_vidur_fit_under_an_engine():
    # a40: the engine's defaults and ampere layer come first, the SKU's own Vidur fit last
    own = _roofline_yaml()["skus"]["a40"]["matmul"]["eff_max"]
    assert load_roofline_constants(A40, "vllm").matmul_eff_max == own
    ampere = _roofline_yaml()["engines"]["vllm"]["families"]["ampere"]["attention"]
    assert (
        load_roofline_constants(A40, "vllm").attention_prefill_eff_max
        == (ampere["prefill_eff_max"])
    )


def test_fp8_constants_apply_to_fp8_gemms_only():
    table = {
        "defaults": {"matmul": {"eff_max": 0.5, "fp8_eff_max": 0.25, "m_half": 1.0}},
    }
    with roofline_table(table):
        bf16 = RooflineEstimator(LLAMA8, H100, precision=Precision.BF16)
        fp8 = RooflineEstimator(LLAMA8, H100, precision=Precision.FP8)
    m = 8192.0  # compute bound: time = flops / (peak * eff)
    op = next(o for o in bf16.layer_ops if o.name == "mlp_up_proj")
    t16 = bf16.token_op_times(np.array([m]))["mlp_up_proj"][0]
    t8 = fp8.token_op_times(np.array([m]))["mlp_up_proj"][0]
    ovh = bf16.constants.matmul_overhead_us * 1e-6
    assert t16 - ovh == pytest.approx(op.flops_per_token * (m + 1) / (H100.peak_flops() * 0.5))
    assert t8 - ovh == pytest.approx(
        op.flops_per_token * (m + 1) / (H100.peak_flops(fp8=True) * 0.25)
    )


B200 = load_catalog().get("b200")


def _compute_bound_mlp_up(est: RooflineEstimator, m: float = 8192.0) -> tuple[float, float]:
    """(seconds of mlp_up_proj at `m` tokens less its fixed cost, its FLOPs a token)."""
    op = next(o for o in est.layer_ops if o.name == "mlp_up_proj")
    t = est.token_op_times(np.array([m]))["mlp_up_proj"][0]
    return t - est._k.overhead["matmul"], op.flops_per_token


def test_each_low_precision_format_takes_its_own_matmul_constants():
    """NVFP4 GEMMs take matmul.fp4_*, a block-scaled FP8 checkpoint's GEMMs matmul.fp8_block_*,
    a per-tensor FP8 checkpoint's matmul.fp8_*; each against its own tensor peak."""
    table = {
        "defaults": {
            "matmul": {"eff_max": 0.5, "m_half": 1.0, "fp8_eff_max": 0.25,
                       "fp8_block_eff_max": 0.2, "fp4_eff_max": 0.4, "fp4_overhead_us": 9.0},
        }
    }  # fmt: skip
    block = replace(LLAMA8, weight_scale_block=128 * 128)
    m = 8192.0
    with roofline_table(table):
        cases = [
            (RooflineEstimator(LLAMA8, B200, precision=Precision.FP4), B200, "fp4", 0.4),
            (RooflineEstimator(block, H100, precision=Precision.FP8), H100, "fp8", 0.2),
            (RooflineEstimator(LLAMA8, H100, precision=Precision.FP8), H100, "fp8", 0.25),
        ]
    for est, sku, peak, eff in cases:
        t, flops = _compute_bound_mlp_up(est, m)
        p = sku.peak_flops(fp8=peak == "fp8", fp4=peak == "fp4")
        assert t == pytest.approx(flops * (m + 1) / (p * eff))
    assert cases[0][0]._k.overhead["matmul"] == pytest.approx(9e-6)


def test_a_format_without_its_own_constants_falls_back_to_the_fp8_ones():
    table = {"defaults": {"matmul": {"eff_max": 0.5, "m_half": 1.0, "fp8_eff_max": 0.25}}}
    block = replace(LLAMA8, weight_scale_block=128 * 128)
    with roofline_table(table):
        fp4 = RooflineEstimator(LLAMA8, B200, precision=Precision.FP4)
        fp8_block = RooflineEstimator(block, H100, precision=Precision.FP8)
    t4, flops = _compute_bound_mlp_up(fp4)
    assert t4 == pytest.approx(flops * 8193.0 / (B200.peak_flops(fp4=True) * 0.25))
    t8, _ = _compute_bound_mlp_up(fp8_block)
    assert t8 == pytest.approx(flops * 8193.0 / (H100.peak_flops(fp8=True) * 0.25))


def test_routed_experts_keep_the_fp8_constants_of_a_format_fitted_to_dense_gemms():
    """The per-format constants are fitted to dense GEMMs; a grouped GEMM pays the M floor
    once per expert, so an NVFP4 run's experts keep the FP8 ones."""
    deepseek = load_model("deepseek-ai/DeepSeek-V3")
    table = {
        "defaults": {"matmul": {"eff_max": 0.5, "m_half": 8.0, "fp8_eff_max": 0.5,
                                "fp8_m_half": 8.0, "fp4_m_half": 500.0}},
    }  # fmt: skip
    with roofline_table(table):
        est = RooflineEstimator(deepseek, B200, tp=8, precision=Precision.FP4)
    assert est._k.m_half == 500.0
    assert est._k_experts.m_half == 8.0


def test_roofline_table_swaps_the_table_for_the_block_only():
    before = load_roofline_constants(H100, "vllm")
    with roofline_table({"defaults": {"matmul": {"eff_max": 0.123}}}):
        inside = load_roofline_constants(H100, "vllm")
        est = RooflineEstimator(LLAMA8, H100, engine=load_engine("vllm"))
    assert inside.matmul_eff_max == 0.123 and est.constants.matmul_eff_max == 0.123
    assert inside.attention_decode_seq_kv == 0.0  # no engine layer in that table
    assert load_roofline_constants(H100, "vllm") == before


def test_vectorised_attention_equals_the_estimators_hooks():
    est = RooflineEstimator(LLAMA8, H100, tp=2, engine=load_engine("vllm"))
    batches = [
        BatchShape(num_prefill_tokens=512, num_prefills=1, prefill_attn_pairs=512 * 513 / 2,
                   prefill_kv_tokens=512),
        BatchShape(num_prefill_tokens=3 * 256, num_prefills=3,
                   prefill_attn_pairs=3 * 256 * (1000 + 257 / 2), prefill_kv_tokens=3 * 1256),
        BatchShape(num_decodes=64, decode_kv_tokens=64 * 3000),
        BatchShape(num_decodes=1, decode_kv_tokens=17),
    ]  # fmt: skip
    col = lambda name: np.array([float(getattr(b, name)) for b in batches])  # noqa: E731
    n = len(batches)
    rows = AttentionRows(
        np.full(n, float(est.heads_per_gpu)), np.full(n, float(est.kv_heads_per_gpu)),
        np.full(n, float(LLAMA8.head_dim)), 2.0,
        col("num_prefill_tokens"), col("num_prefills"), col("prefill_attn_pairs"),
        col("prefill_kv_tokens"), col("num_decodes"), col("decode_kv_tokens"),
    )  # fmt: skip
    many = attention_seconds(rows, est.constants, est.attn_peak, est.hbm_bw)
    for b, t in zip(batches, many, strict=True):
        ops = est.operator_times(b)
        assert t == pytest.approx(ops["attn_prefill"] + ops["attn_decode"], rel=1e-12)


def test_an_engines_own_block_fp8_gemm_kernel_takes_its_measured_constants():
    """FlashInfer's groupwise block-FP8 GEMM (an engine's `fp8_block_gemm`) computes at its
    own fitted efficiency on Blackwell, so a DeepSeek-V3 FP8 prefill takes longer than with
    the tables' DeepGEMM; decode, bound by the weight read, hardly moves; on Hopper, where
    that kernel has no constants, the format's own apply."""
    deepseek = load_model("deepseek-ai/DeepSeek-V3")
    sglang = load_engine("sglang")
    flashinfer = replace(sglang, fp8_block_gemm="flashinfer")
    prefill = BatchShape(num_prefill_tokens=8192, num_prefills=1,
                         prefill_attn_pairs=8192 * 8193 // 2, prefill_kv_tokens=8192)  # fmt: skip
    decode = BatchShape(num_decodes=4, decode_kv_tokens=4 * 2048)

    def seconds(sku_id, engine, batch):
        est = RooflineEstimator(deepseek, load_catalog().get(sku_id), tp=8,
                                precision=Precision.FP8, engine=engine)  # fmt: skip
        return est.batch_cost(batch).stage_times[0], est

    (base, _), (slow, est) = (seconds("b200", e, prefill) for e in (sglang, flashinfer))
    assert slow > 1.2 * base
    assert "flashinfer kernel" in est.describe()
    b200 = load_roofline_constants(load_catalog().get("b200"), "sglang")
    assert 0 < b200.matmul_fp8_block_flashinfer_eff_max < b200.matmul_fp8_block_eff_max
    decode_base, _ = seconds("b200", sglang, decode)
    decode_slow, _ = seconds("b200", flashinfer, decode)
    assert decode_slow == pytest.approx(decode_base, rel=0.05)
    hopper = [seconds("h200", e, prefill)[0] for e in (sglang, flashinfer)]
    assert hopper[0] == hopper[1]


def test_the_flashinfer_constants_are_the_fit_of_its_public_benchmark():
    """estimators/data/gemm_kernels.yaml holds what benchmarks/fit_flashinfer_fp8_gemm.py
    fits to SGLang PR #13528's rows (rerun it with --write after changing either)."""
    from tests.benchmark_scripts import load_benchmark

    bench = load_benchmark("fit_flashinfer_fp8_gemm")
    rows = bench._rows()
    fitted, sku = bench.fit(rows.take(rows.m >= bench.MIN_TOKENS))
    stored = load_roofline_constants(sku, "sglang").matmul_fp8_block_flashinfer_eff_max
    assert fitted.matmul_fp8_block_eff_max == pytest.approx(stored, rel=1e-3)


def test_a_table_written_in_full_keeps_the_gemm_kernels_constants():
    """The Vidur refit writes every constant into the table's defaults, zeros included; the
    GEMM-kernel constants (estimators/data/gemm_kernels.yaml) still apply over them."""
    from estimators._roofline import RooflineConstants, constants_from_table, kernel_constants

    full = {"defaults": RooflineConstants().to_nested()}
    assert full["defaults"]["matmul"]["fp8_block_flashinfer_eff_max"] == 0.0
    c = constants_from_table(full, "blackwell", "b200", "sglang")
    measured = kernel_constants("blackwell")["matmul_fp8_block_flashinfer_eff_max"]
    assert c.matmul_fp8_block_flashinfer_eff_max == measured > 0
