"""NVFP4 weights (--precision fp4): bytes with scales, the FP4 peak, refused without FP4
tensor cores."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from click.testing import CliRunner

from estimators import Precision, PrecisionError, make_estimator
from estimators._memory import plan_memory, weights_bytes_per_gpu
from search._spec import parse_spec, sha256_json
from search.cli import cli
from sku_catalog import load_catalog


@pytest.fixture(scope="module")
def b200():
    return load_catalog().get("b200")


def test_nvfp4_weights_are_half_a_byte_plus_a_one_byte_scale_per_16(v3):
    assert v3.matmul_weight_bytes(Precision.FP4) == 0.5 + 1 / 16
    assert v3.matmul_weight_bytes(Precision.FP8) == 1 + 4 / 16384  # 128 x 128 fp32 scales
    fp8 = weights_bytes_per_gpu(v3, 8, 1, Precision.FP8, ep=8)
    fp4 = weights_bytes_per_gpu(v3, 8, 1, Precision.FP4, ep=8)
    bf16 = weights_bytes_per_gpu(v3, 8, 1, Precision.BF16, ep=8)
    # the router of the 58 MoE layers stays 16-bit in every checkpoint, FP8 ones too
    router = 58 * 7168 * 256
    # bf16 = 2 m + o, fp8 = (m - router)(1 + 4/16384) + 2 router + o: solve for the matmul
    # bytes m and the rest o
    matmul = (bf16 - fp8) / (1 - 4 / 16384) + router
    other = bf16 - 2 * matmul
    # NVIDIA's NVFP4 DeepSeek checkpoints keep the MLA latent projections (q_a, q_b per
    # rank's 16 heads, kv_a, kv_b) of all 61 layers and the router in 16 bits; the output
    # projection, dense MLPs and experts are NVFP4
    latent = 61 * (7168 * 1536 + 1536 * 16 * 192 + 7168 * 576 + 512 * 16 * (128 + 128))
    kept = latent + router
    assert fp4 == pytest.approx((matmul - kept) * 0.5625 + kept * 2 + other, rel=1e-9)
    assert fp4 / 2**30 == pytest.approx(46.7, abs=0.1)  # against 79.3 GiB in FP8


def test_fp4_runs_against_the_catalog_fp4_peak_on_blackwell(v3, b200):
    assert b200.fp4_tflops == 9000
    est = make_estimator("roofline", v3, b200, 8, 1, Precision.FP4, ep=8)
    assert est.peak == 9000e12 and est.attn_peak == 2250e12
    plan = plan_memory(v3, b200, 8, 1, Precision.FP4, ep=8)
    assert plan.kv_precision is Precision.BF16  # FP4 weights keep a 16-bit KV cache by default


def test_fp4_is_refused_without_fp4_tensor_cores(v3, h200):
    with pytest.raises(PrecisionError, match=r"fp4 .* h200 \(hopper\) does not have .* "
                       r"precisions h200 supports: bf16, fp16, fp8"):  # fmt: skip
        plan_memory(v3, h200, 8, 1, Precision.FP4, ep=8)
    with pytest.raises(PrecisionError, match="kv precision fp4"):
        plan_memory(v3, load_catalog().get("b200"), 8, 1, Precision.FP4, Precision.FP4, ep=8)
    runner = CliRunner()
    args = ["simulate", "--model", "deepseek-v3", "--tp", "8", "--ep", "8", "--precision",
            "fp4", "--qps", "1", "--sku"]  # fmt: skip
    bad = runner.invoke(cli, [*args, "a100-80gb"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output
    assert "a100-80gb (ampere) does not have" in bad.output


def test_fp4_in_a_search_space_and_fingerprints_of_other_precisions():
    from search._space import candidates, fingerprint

    spec = parse_spec(
        {
            "model": "deepseek-ai/DeepSeek-V3", "skus": ["h200", "b200"], "workload": "chat",
            "engine": "sglang", "budget": {"max_gpus": 8},
            "space": {"tp": [8], "ep": [8], "precision": ["fp8", "fp4"]},
        }
    )  # fmt: skip
    found = {(c.point.sku, c.point.precision): c for c in candidates(spec)}
    assert found[("h200", "fp4")].infeasible_reason.startswith("precision: precision fp4")
    assert found[("b200", "fp4")].feasible and found[("b200", "fp8")].feasible
    # the catalog's FP4 peak enters only FP4 configurations' fingerprints
    point = found[("b200", "fp8")].point
    sku = asdict(spec.sku_catalog.get("b200"))
    del sku["fp4_tflops"]
    fp = spec.fingerprint()
    assert fingerprint(fp, point, spec) == sha256_json(
        {"spec": fp, "point": point.as_dict(), "sku": sku}
    )
