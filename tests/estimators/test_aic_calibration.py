"""Fits of the roofline's engine layers to aiconfigurator's tables, and their folds."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("aiconfigurator_core") is None, reason="needs the aic extra"
)


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCAP_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_a_fit_beats_the_vidur_constants_on_held_out_rows():
    from estimators._aic_calibration import fit_tables, load_tables, score_tables
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    sku = load_catalog().get("h100-sxm")
    tables = load_tables(sku, "vllm")
    start = load_roofline_constants(sku)
    fit = fit_tables(tables, start)
    before = score_tables(tables, start)
    for group in ("gemm bfloat16", "attention context", "attention generation"):
        assert fit.errors[group][1] < before[group][1]  # held-out MAPE
        assert fit.errors[group][3] > 100  # held-out rows
    assert fit.errors["gemm bfloat16"][1] < 0.12
    assert fit.errors["attention generation"][1] < 0.15
    assert 0.3 < fit.constants.matmul_eff_max < 1.0


def test_the_matmul_fit_keeps_its_efficiencies_physical_and_beats_the_unbounded_one(
    monkeypatch,
):
    """H200 under SGLang: an unbounded fit read the small-m GEMMs as a bandwidth above the
    HBM's (mem_eff ~2) plus a 140-token compute floor; the bounded multi-start fit stays
    at or below the peaks and predicts the held-out shapes better."""
    from estimators import _aic_calibration as cal
    from estimators._calibration import fit_group
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    sku = load_catalog().get("h200")
    tables = cal.load_tables(sku, "sglang")
    start = load_roofline_constants(sku)
    bounded = cal.fit_tables(tables, start)
    c = bounded.constants
    assert c.matmul_mem_eff <= 1.0 and c.matmul_eff_max <= 1.0
    assert c.matmul_fp8_mem_eff <= 1.0
    assert c.matmul_m_half < 100.0
    monkeypatch.setattr(cal, "fit_matmul", fit_group)  # the unbounded fit it replaced
    free = cal.fit_tables(tables, start)
    assert free.constants.matmul_mem_eff > 1.0
    assert bounded.errors["gemm bfloat16"][1] < free.errors["gemm bfloat16"][1] - 0.02


def test_the_matmul_fit_recovers_known_constants():
    """GEMM times made by the roofline's own formula from known constants (mem_eff 0.8,
    m_half 40 tokens): the fit gives them back."""
    from estimators._aic_calibration import MATMUL, GemmRows, fit_matmul, gemm_seconds
    from estimators._roofline import RooflineConstants
    from sku_catalog import load_catalog

    sku = load_catalog().get("h200")
    truth = RooflineConstants().with_values(
        {"matmul_eff_max": 0.75, "matmul_m_half": 40.0, "matmul_mem_eff": 0.8,
         "matmul_overhead_us": 4.0}
    )  # fmt: skip
    m, n, k = np.meshgrid(2.0 ** np.arange(0, 14), [1024.0, 4096.0, 8192.0], [2048.0, 8192.0])
    rows = GemmRows(m.ravel(), n.ravel(), k.ravel(), np.zeros(m.size))
    rows.seconds = gemm_seconds(rows, truth, sku, None)

    def loss(c: RooflineConstants) -> float:
        d = np.log(gemm_seconds(rows, c, sku, None)) - np.log(rows.seconds)
        return float(np.mean(d * d))

    fitted = fit_matmul(RooflineConstants(), MATMUL, loss)
    for name in MATMUL:
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=0.05), name


def test_the_fp4_fit_recovers_known_constants_against_the_fp4_peak():
    """NVFP4 rows timed by the roofline (FP4 peak, 4.5-bit weights) from known fp4_*
    constants: fitting that format's names gives them back."""
    from estimators._aic_calibration import MATMUL_LOW, GemmRows, fit_matmul, gemm_seconds
    from estimators._roofline import RooflineConstants
    from sku_catalog import load_catalog

    sku = load_catalog().get("b200")
    names = MATMUL_LOW["fp4"]
    truth = RooflineConstants().with_values(dict(zip(names, (0.45, 60.0, 0.6, 8.0), strict=True)))
    m, n, k = np.meshgrid(2.0 ** np.arange(0, 14), [1024.0, 4096.0, 8192.0], [2048.0, 8192.0])
    rows = GemmRows(m.ravel(), n.ravel(), k.ravel(), np.zeros(m.size))
    rows.seconds = gemm_seconds(rows, truth, sku, "fp4")
    assert not np.allclose(rows.seconds, gemm_seconds(rows, truth, sku, "fp8"))

    def loss(c: RooflineConstants) -> float:
        d = np.log(gemm_seconds(rows, c, sku, "fp4")) - np.log(rows.seconds)
        return float(np.mean(d * d))

    start = RooflineConstants().with_values(dict(zip(names, (0.7, 24.0, 0.8, 4.0), strict=True)))
    fitted = fit_matmul(start, names, loss)
    for name in names:
        assert getattr(fitted, name) == pytest.approx(getattr(truth, name), rel=0.05), name


def test_block_fp8_and_nvfp4_rows_fit_their_own_constants_but_vllms_block_rows_are_left_out():
    """TensorRT-LLM's B200 tables: the fp8_block and nvfp4 rows fit constants of their own
    that beat the per-tensor FP8 ones on their held-out shapes; vLLM's fp8_block rows (flat
    in m) are left out with the reason."""
    from estimators._aic_calibration import fit_tables, load_tables, score_tables
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    sku = load_catalog().get("b200")
    tables = load_tables(sku, "trtllm")
    assert {"fp8", "fp8_block", "nvfp4"} <= set(tables.gemm)
    start = load_roofline_constants(sku)
    fit = fit_tables(tables, start)
    assert fit.constants.matmul_fp8_block_eff_max > 0 and fit.constants.matmul_fp4_eff_max > 0
    fp8_only = fit.constants.with_values(
        {n: 0.0 for n in fit.fitted if n.startswith(("matmul_fp8_block", "matmul_fp4"))}
    )
    before = score_tables(tables, fp8_only)
    for group in ("gemm fp8_block", "gemm nvfp4"):
        assert fit.errors[group][1] < before[group][1] - 0.05  # held-out MAPE
    vllm = load_tables(load_catalog().get("h200"), "vllm")
    assert "fp8_block" not in vllm.gemm and "fp8" in vllm.gemm
    assert any("fp8_block" in reason for reason in vllm.excluded)


@pytest.mark.parametrize("tile", [0.0, 64.0])
def test_the_dequantization_rate_fit_recovers_a_known_rate_and_tile(tile):
    """Weight-only MoE rows timed by the roofline with a known rate (3 tera-elements a
    second), the weights unpacked once or again per 64-row M tile, and a 40 us fixed cost:
    the fit gives all three back; the installed tables' fit lands near the kernels' measured
    element rate (gpt-oss's 128 experts at 32 tokens, H200, about 3-5e12/s)."""
    from estimators._aic_calibration import (
        MoeRows,
        fit_dequant_rate,
        weight_only_moe_seconds,
    )
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    sku = load_catalog().get("h200")
    c = load_roofline_constants(sku, "vllm")
    tokens = np.tile(2.0 ** np.arange(0, 14), 2)
    n = len(tokens)
    rows = MoeRows(
        tokens, np.full(n, 2880.0), np.repeat([2880.0, 1440.0], n // 2), np.full(n, 4.0),
        np.full(n, 128.0), np.zeros(n),
    )  # fmt: skip
    truth = {
        "matmul_dequant_tera_per_s": 3.0,
        "matmul_dequant_tile_rows": tile,
        "matmul_dequant_overhead_us": 40.0,
    }
    rows.seconds = weight_only_moe_seconds(rows, c.with_values(truth), sku)
    start = {
        "matmul_dequant_tera_per_s": 0.0,
        "matmul_dequant_tile_rows": 128.0,
        "matmul_dequant_overhead_us": 0.0,
    }
    fitted = fit_dequant_rate(rows, c.with_values(start), sku)
    assert fitted.matmul_dequant_tera_per_s == pytest.approx(3.0, rel=0.01)
    assert fitted.matmul_dequant_tile_rows == tile
    assert fitted.matmul_dequant_overhead_us == pytest.approx(40.0, rel=0.02)
    assert 2.0 < c.matmul_dequant_tera_per_s < 6.0


def _synthetic_moe_rows(truth: dict[str, float], eps: tuple[float, ...]):
    """fp4 MoE rows of 8, 64 and 256 experts at `eps`, 1-2048 tokens, timed by the roofline
    with the MoE constants `truth` (B200, TensorRT-LLM's other constants)."""
    from estimators._aic_calibration import MoeRows, low_precision_moe_seconds
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    sku = load_catalog().get("b200")
    c = load_roofline_constants(sku, "trtllm")
    tokens = np.tile(2.0 ** np.arange(0, 12), 3 * len(eps))
    n = len(tokens)
    experts = np.repeat([8.0, 64.0, 256.0], n // 3)
    ep = np.tile(np.repeat(eps, 12), 3)
    rows = MoeRows(
        tokens, np.full(n, 7168.0), np.full(n, 2048.0), np.full(n, 8.0), experts, np.zeros(n),
        ep,
    )  # fmt: skip
    rows.seconds = low_precision_moe_seconds(rows, c.with_values(truth), sku, "fp4")
    return rows, c, sku


def test_the_moe_overhead_fit_recovers_a_known_fixed_cost_and_its_shares_per_expert():
    """Low-precision MoE rows timed by the roofline with a known fixed cost (20 us) and
    known shares per expert the GPU holds (0.2 us) and per expert of the model (0.05 us)
    over tables of 8 to 256 experts at EP 1, 2, 4 and 8: the fit gives all three back from
    the decode-batch rows alone (each GPU at least one expert row)."""
    from estimators._aic_calibration import fit_moe_overhead, moe_overhead_rows, moe_overhead_terms

    terms = moe_overhead_terms("fp4")
    truth = dict(zip(terms, (20.0, 0.2, 0.05), strict=True))
    rows, c, sku = _synthetic_moe_rows(truth, (1.0, 2.0, 4.0, 8.0))
    decode = moe_overhead_rows(rows)
    assert 0 < decode.sum() < len(decode)  # the large batches are left to the GEMMs
    assert not decode[rows.tokens * 8 < rows.ep].any()  # and those leaving a GPU no rows
    fitted = fit_moe_overhead(rows, c, sku, "fp4", terms)
    for name, value in truth.items():
        assert getattr(fitted, name) == pytest.approx(value, rel=0.03)


def test_the_moe_overhead_shares_are_fitted_where_the_rows_tell_them_apart():
    """The share per local expert needs rows at several EP degrees (at EP 1 alone the fit
    keeps the fixed cost alone, however many expert counts the shapes have); the share per
    expert of the model is kept where it prices held-out shapes better, here where the
    rows were timed with one."""
    from estimators._aic_calibration import _held_out_moe, fit_moe_overheads, moe_overhead_terms

    fixed, local, routed = moe_overhead_terms("fp4")
    rows, c, sku = _synthetic_moe_rows({fixed: 20.0, local: 0.2}, (1.0,))
    held = _held_out_moe(rows)
    fitted, names = fit_moe_overheads(rows.take(~held), rows.take(held), c, sku, "fp4")
    assert names == (fixed,) and getattr(fitted, local) == 0.0
    rows, c, sku = _synthetic_moe_rows({fixed: 20.0, local: 0.2, routed: 0.05}, (1.0, 4.0))
    # every 3rd shape is held out: the 256 experts' here
    held = rows.experts == 256.0
    fitted, names = fit_moe_overheads(rows.take(~held), rows.take(held), c, sku, "fp4")
    assert names == (fixed, local, routed)
    assert getattr(fitted, routed) == pytest.approx(0.05, rel=0.1)


def test_ep_rows_count_where_the_collector_shrank_the_gpus_experts():
    """A kernel whose EP n rows take about 1/n of its EP 1 time at the largest batch holds
    1/n of the experts a GPU; one timed alike at every EP did not shrink them (vLLM
    0.19.0's H200 MXFP4 table).  A format's EP rows are read where every kernel that timed
    it shrank them, else its EP 1 rows alone."""
    from estimators._aic_calibration import _kernels_sharded_by_ep, _moe_rows

    rows = []
    for kernel, share in (("sharded", 1.0), ("unsharded", 0.0)):
        for ep in (1, 2, 4, 8):
            for tokens in (1, 16, 256):
                t = 1e-5 + 1e-7 * tokens * (1.0 / ep if share else 1.0)
                rows.append(dict(
                    kernel_source=kernel, moe_dtype="fp8", distribution="balanced",
                    hidden_size=4096, inter_size=1536, topk=8, num_experts=128,
                    moe_tp_size=1, moe_ep_size=ep, num_tokens=tokens, seconds=t,
                ))  # fmt: skip
    df = pd.DataFrame(rows)
    assert _kernels_sharded_by_ep(df) == {"sharded"}
    read = _moe_rows(df[df.kernel_source == "unsharded"], "fp8", with_ep=True)
    assert set(read.ep.tolist()) == {1.0}
    sharded = df[df.kernel_source == "sharded"]
    assert set(_moe_rows(sharded, "fp8", with_ep=True).ep.tolist()) == {1.0, 2.0, 4.0, 8.0}
    assert set(_moe_rows(sharded, "fp8").ep.tolist()) == {1.0}  # without EP rows unless asked
    assert set(_moe_rows(df, "fp8", with_ep=True).ep.tolist()) == {1.0}  # one did not shrink


def test_hopper_block_scaled_experts_pay_a_fixed_cost_that_shrinks_with_expert_parallelism():
    """TensorRT-LLM's Hopper CUTLASS block-scaled FP8 experts: the fixed cost its MoE table
    measures falls from about 46 us at 128 experts a GPU (EP 1) to about 25 at 32 (EP 4);
    the shipped constants price Qwen3-235B-A22B's balanced EP 1 and EP 4 rows at 1-4
    tokens within 15% each."""
    from estimators import _aic_tables as aic
    from estimators._aic_calibration import MoeRows, low_precision_moe_seconds
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    sku = load_catalog().get("h100-sxm")
    c = load_roofline_constants(sku, "trtllm")
    assert c.moe_fp8_block_per_local_expert_us > 0.1
    _, table = aic.load_moe("h100_sxm", "trtllm", "1.3.0rc10")
    t = table[(table.moe_dtype == "fp8_block") & (table.hidden_size == 4096)
              & (table.inter_size == 1536) & (table.num_experts == 128) & (table.topk == 8)
              & (table.distribution == "balanced") & (table.moe_tp_size == 1)
              & table.moe_ep_size.isin([1, 4]) & table.num_tokens.isin([1, 2, 4])]  # fmt: skip
    t = t.groupby(["moe_ep_size", "num_tokens"], as_index=False).seconds.min()
    n = len(t)
    assert n == 6
    rows = MoeRows(
        t.num_tokens.to_numpy(float), np.full(n, 4096.0), np.full(n, 1536.0), np.full(n, 8.0),
        np.full(n, 128.0), t.seconds.to_numpy(), t.moe_ep_size.to_numpy(float),
    )  # fmt: skip
    pred = low_precision_moe_seconds(rows, c, sku, "fp8_block")
    assert np.abs(pred / rows.seconds - 1).max() < 0.15


def test_low_precision_experts_pay_their_fitted_fixed_cost_in_place_of_their_gemms():
    """gpt-oss's MXFP4 experts on B200 (W4A8) under TensorRT-LLM: the shipped constants hold
    a fixed cost fitted to the engine's w4a8 MoE rows, which the experts pay in place of two
    FP8 GEMMs' and an activation's fixed costs (about twice it); without a fitted cost,
    those.  The fitted layer lands within 20% of the measured EP 1 rows at 1 and 4 tokens
    (from 16 tokens on, the table's balanced routing touches more experts than uniform
    routing does); the fixed cost is one for every EP degree the table measures, a
    compromise between them (about 12% MAPE over its rows)."""
    from estimators import Precision, load_engine, load_model, make_estimator
    from estimators import _aic_tables as aic
    from estimators._roofline import expert_coeffs, load_roofline_constants
    from sku_catalog import load_catalog

    sku = load_catalog().get("b200")
    c = load_roofline_constants(sku, "trtllm")
    assert c.moe_w4a8_overhead_us > 0
    fused = expert_coeffs(c, sku, Precision.FP8, "w4a8")
    assert fused.overhead["matmul"] == 0.0 and fused.overhead["act"] == 0.0
    assert fused.experts_overhead == pytest.approx(c.moe_w4a8_overhead_us * 1e-6)
    gemms = expert_coeffs(c, sku, Precision.FP8, None)
    own = 2 * gemms.overhead["matmul"] + gemms.overhead["act"]
    assert own > 1.5 * fused.experts_overhead
    est = make_estimator("roofline", load_model("openai/gpt-oss-120b"), sku, 1, 1,
                         Precision.BF16, engine=load_engine("trtllm"))  # fmt: skip
    _, table = aic.load_moe("b200_sxm", "trtllm", "1.3.0rc20")
    rows = table[(table.moe_dtype == "w4a8_mxfp4_mxfp8") & (table.num_experts == 128)
                 & (table.distribution == "balanced") & (table.moe_tp_size == 1)
                 & (table.moe_ep_size == 1)]  # fmt: skip
    for tokens in (1, 4):
        measured = rows[rows.num_tokens == tokens].seconds.min()
        assert est._routed_experts(float(tokens))[0] == pytest.approx(measured, rel=0.2)


def test_kernels_no_engine_runs_by_default_fit_no_fixed_cost():
    """TensorRT-LLM's B200 fp8_block rows are DeepGEMM's alone, an opt-in backend: no
    fixed cost is fitted to them, and DeepSeek-V3's FP8 experts there keep their GEMMs'
    own; vLLM's Hopper FP8 rows are FlashInfer CUTLASS's alone: likewise."""
    from estimators._aic_calibration import load_tables
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    catalog = load_catalog()
    assert "fp8_block" not in load_tables(catalog.get("b200"), "trtllm").low_precision_moe
    assert "fp8" not in load_tables(catalog.get("h200"), "vllm").low_precision_moe
    assert load_roofline_constants(catalog.get("b200"), "trtllm").moe_fp8_block_overhead_us == 0
    assert load_roofline_constants(catalog.get("h200"), "vllm").moe_fp8_overhead_us == 0


def test_same_die_gpus_fit_their_weight_only_experts_from_one_collector_version():
    """vLLM's H100 has only the 0.24.0 MoE table; the H200's nearest to the profile's 0.13
    is 0.19.0, whose collector timed another MXFP4 path (20-48% slower at 1-16 tokens of
    the same shapes).  Both fits read the version the Hopper GPUs share, and the shipped
    weight-only constants of the two (one GH100 die, one clock) then agree within a few
    percent, as their compute-side nature requires; GPUs alone in their family keep the
    version nearest the profile's."""
    from estimators._aic_calibration import _family_moe_version, _table_version
    from estimators._aic_tables import resolve_table, system_for_sku
    from estimators._roofline import load_roofline_constants
    from sku_catalog import load_catalog

    catalog = load_catalog()
    wanted = _table_version("vllm")
    assert _family_moe_version(catalog.get("h100-sxm"), "vllm", wanted) == "0.24.0"
    assert _family_moe_version(catalog.get("h200"), "vllm", wanted) == "0.24.0"
    nearest = resolve_table(system_for_sku("b200"), "moe", "vllm", wanted, "moe_perf.parquet")
    assert _family_moe_version(catalog.get("b200"), "vllm", wanted) == nearest.version
    h100, h200 = (load_roofline_constants(catalog.get(s), "vllm") for s in ("h100-sxm", "h200"))
    assert h200.matmul_dequant_tile_rows == h100.matmul_dequant_tile_rows
    for name in ("matmul_dequant_tera_per_s", "matmul_dequant_overhead_us"):
        assert getattr(h200, name) == pytest.approx(getattr(h100, name), rel=0.1)


def test_leaving_out_a_model_removes_exactly_its_shapes():
    from estimators import load_model
    from estimators._aic_calibration import load_tables, model_shapes, without_model_shapes
    from sku_catalog import load_catalog

    model = load_model("meta-llama/Llama-3.1-8B")
    full = load_tables(load_catalog().get("h100-sxm"), "vllm")
    cut = without_model_shapes(full, model)
    gemms, heads = model_shapes(model)
    assert (4096, 4096) in gemms and (32, 8, 128) in heads
    g, g0 = cut.gemm["bfloat16"], full.gemm["bfloat16"]
    left = set(zip(g.n.tolist(), g.k.tolist(), strict=True))
    assert not left & gemms
    assert len(g.m) == len(g0.m) - 74 * len(gemms & set(zip(g0.n, g0.k, strict=True)))
    r = cut.attention.rows
    assert not set(zip(r.heads, r.kv_heads, r.head_dim, strict=True)) & heads
    assert 0 < len(cut.attention.seconds) < len(full.attention.seconds)


def test_gpu_fold_has_no_constants_from_that_gpus_tables(cache):
    from estimators._aic_calibration import fit_all_to_all, fit_allreduce, mean_all_to_all
    from estimators._roofline import constants_from_table
    from search._validate._holdout import gpu_fold
    from sku_catalog import load_catalog

    fold = gpu_fold("b200")
    for engine in ("vllm", "sglang", "trtllm"):
        layer = fold.table["engines"][engine]
        assert "b200" not in layer["skus"] and "blackwell" not in layer["families"]
        assert {"h100-sxm", "h200"} <= set(layer["skus"])
        # B200 gets the engine's defaults: the geometric mean of the other GPUs' fits
        fitted = [layer["skus"][s]["matmul"]["eff_max"] for s in layer["skus"]]
        b200 = constants_from_table(fold.table, "blackwell", "b200", engine)
        assert b200.matmul_eff_max == pytest.approx(np.exp(np.mean(np.log(fitted))), rel=1e-3)
        assert fold.allreduce[engine] == {"blackwell": None}  # no other Blackwell GPU
        # B200's all-to-all: the other Blackwell GPUs' tables (B300, GB200) alone, but
        # TensorRT-LLM's GB200 line is its own (its NVLink kernels there: all_to_all_key)
        kin = ("b300",) if engine == "trtllm" else ("b300", "gb200")
        others = [fit_all_to_all(load_catalog().get(s), engine) for s in kin]
        assert fold.all_to_all[engine] == {"blackwell": mean_all_to_all(others), "b200": None}
    gb200 = gpu_fold("gb200")  # TensorRT-LLM's own GB200 line goes with the GPU's tables
    assert gb200.all_to_all["trtllm"]["gb200"] is None
    h100 = gpu_fold("h100-sxm")
    assert "h100-sxm" not in h100.table["engines"]["vllm"]["skus"]
    h200_only = h100.allreduce["vllm"]["hopper"]  # refitted to H200's table alone
    assert h200_only == fit_allreduce(load_catalog().get("h200"), "vllm")
    assert 1.0 < h200_only.latency_us < 30.0 and 0.2 < h200_only.bw_eff < 1.5


def test_model_fold_refits_once_and_caches(cache, monkeypatch):
    import estimators._aic_calibration as calibration
    from search._validate._holdout import model_fold

    fold = model_fold("meta-llama/Llama-3.1-8B")
    assert len(list((cache / "roofline-fits").glob("*.json"))) == 15  # 5 GPUs x 3 engines

    def no_refit(*_args, **_kwargs):
        raise AssertionError("a cached fold was fitted again")

    monkeypatch.setattr(calibration, "fit_tables", no_refit)
    again = model_fold("meta-llama/Llama-3.1-8B")
    assert again.table == fold.table
    assert "(4096, 14336)" in fold.excluded


def test_the_two_line_allreduce_fit_recovers_known_algorithms():
    """Messages timed by a known one-shot line and a known two-shot line (the faster of
    the two), 2-8 GPUs, 1 KiB-128 MiB: the fit gives back both lines."""
    from estimators._aic_calibration import allreduce_seconds, fit_allreduce_lines
    from estimators._engines import AllReduceCost

    truth = AllReduceCost(5.0, 0.4, 30.0, 0.8)
    n = np.repeat([2.0, 4.0, 8.0], 18)
    nbytes = np.tile(2.0 ** np.arange(10, 28), 3)
    link = 450e9
    fitted = fit_allreduce_lines(n, nbytes, allreduce_seconds(truth, n, nbytes, link), link)
    assert fitted.latency_us == pytest.approx(5.0, rel=0.02)
    assert fitted.bw_eff == pytest.approx(0.4, rel=0.02)
    assert fitted.large == pytest.approx((30.0, 0.8), rel=0.02)
    one = fit_allreduce_lines(n, nbytes, allreduce_seconds(truth, n, nbytes, link), link, 1)
    assert one.large is None


def test_the_all_to_all_fit_recovers_a_known_line():
    from estimators._aic_calibration import (
        AllToAllRows,
        all_to_all_line_seconds,
        fit_all_to_all_line,
    )
    from estimators._engines import AllToAllCost

    truth = AllToAllCost(25.0, 0.4)
    tokens = np.tile(2.0 ** np.arange(0, 15), 2)
    ep = np.repeat([4.0, 8.0], 15)
    rows = AllToAllRows(tokens, ep, np.full(30, 5.0), np.full(30, 7168.0), np.ones(30))
    rows = AllToAllRows(tokens, ep, rows.ranks, rows.hidden,
                        all_to_all_line_seconds(truth, rows, 900e9))  # fmt: skip
    fitted = fit_all_to_all_line(rows, 900e9)
    assert fitted.latency_us == pytest.approx(25.0, rel=0.01)
    assert fitted.bw_eff == pytest.approx(0.4, rel=0.01)


def test_the_all_to_all_tables_are_per_rank_sizes_on_the_kernel_the_engine_runs():
    """SGLang's DeepEP tables: a dispatch plus a combine at each size, the low-latency
    kernels' sizes where they were measured (no high-throughput-only size among them)."""
    from estimators._aic_tables import load_all_to_all

    _, sglang = load_all_to_all("b200_sxm", "sglang")
    ds = sglang[(sglang.hidden_size == 7168) & (sglang.topk == 8) & (sglang.num_experts == 256)]
    us = ds.set_index("num_tokens")["seconds"] * 1e6
    assert set(ds["ep"]) == {8}
    assert 12 not in us.index and 16 in us.index and 131072 in us.index  # 12: normal only
    assert 30 < us[16] < 70 and 3000 < us[16384] < 6000  # tens of us; ms at 16k tokens
    assert us[1024] > 5 * us[16]  # latency-bound small, bandwidth-bound large
    _, trt = load_all_to_all("b200_sxm", "trtllm")  # DeepEP, one HGX board
    assert set(trt["ep"]) == {8}
    # TensorRT-LLM on GB200's rack-scale NVLink: its own kernels, EP 2-64, a layer's
    # prepare + dispatch + combine (tens of microseconds at a few tokens)
    label, mnnvl = load_all_to_all("gb200", "trtllm")
    assert "trtllm_alltoall_perf" in label and set(mnnvl["ep"]) == {2, 4, 8, 16, 32, 64}
    one = mnnvl[(mnnvl.ep == 32) & (mnnvl.num_tokens == 1)]["seconds"].item() * 1e6
    assert 25 < one < 60


def test_the_shipped_all_to_all_lines_are_the_fit_of_the_installed_tables():
    """engines.yaml's all_to_all entries are what benchmarks/fit_engine_all_to_all.py
    prints: each family the mean of its GPUs' fits, a GPU where the engine runs kernels of
    its own (TensorRT-LLM on GB200) its own."""
    from estimators import load_engine
    from estimators._aic_calibration import (
        A2A_SKUS,
        all_to_all_key,
        fit_all_to_all,
        mean_all_to_all,
    )
    from sku_catalog import load_catalog

    catalog = load_catalog()
    for engine in ("vllm", "sglang", "trtllm"):
        shipped = load_engine(engine).all_to_all
        entries: dict[str, list] = {}
        for s in A2A_SKUS:  # each GPU's entry: its family's, or its own (all_to_all_key)
            sku = catalog.get(s)
            entries.setdefault(all_to_all_key(sku, engine), []).append(sku)
        assert set(shipped) == set(entries)
        for key, skus in entries.items():
            fit = mean_all_to_all([fit_all_to_all(sku, engine) for sku in skus])
            assert shipped[key].latency_us == pytest.approx(fit.latency_us, rel=0.01)
            assert shipped[key].bw_eff == pytest.approx(fit.bw_eff, rel=0.01)
    assert set(load_engine("trtllm").all_to_all) == {"hopper", "blackwell", "gb200"}
