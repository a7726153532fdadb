"""The profiled backend: the measured-table reader, interpolation, selection and errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from click.testing import CliRunner

from estimators import (
    BatchShape,
    EstimatorFallbackWarning,
    Precision,
    ProfiledDataMissing,
    load_model,
    make_estimator,
)
from estimators import _aic_tables as aic
from estimators._profiled import Curve, Grid2D, _gemm_cube, gemm_curve, monotone
from sku_catalog import load_catalog

needs_aic = pytest.mark.skipif(
    not aic.aic_available(),
    reason="the measured tables need the llmcap[aic] extra (aiconfigurator-core)",
)


# --------------------------------------------------------------------------- interpolation


def test_curve_exact_at_measured_points_and_linear_beyond():
    xs = [1, 16, 256, 4096]
    ys = [1e-5, 2e-5, 1e-4, 1e-3]
    c = Curve(xs, ys)
    for x, y in zip(xs, ys, strict=True):
        assert c(x) == pytest.approx(y, rel=1e-12)
    assert c(0.5) == pytest.approx(1e-5)  # constant below the smallest size
    assert c(8192) == pytest.approx(2e-3)  # linear in work above the largest
    assert Curve(xs, ys, work_exp=2.0)(8192) == pytest.approx(4e-3)
    assert np.allclose(c.many(np.array(xs, dtype=float)), ys)


def test_monotone_never_faster_for_more_work():
    noisy = np.array([3.0, 2.0, 4.0, 3.5, 5.0])
    m = monotone(noisy)
    assert np.all(np.diff(m) >= 0)
    assert np.all(m <= noisy)  # lifted by no point: a bigger measured size bounds it


def test_grid2d_exact_rows_and_linear_batch_beyond():
    g = Grid2D([1, 4], [Curve([1, 100], [1.0, 10.0]), Curve([1, 100], [2.0, 20.0])])
    assert g(1, 100) == pytest.approx(10.0)
    assert g(4, 1) == pytest.approx(2.0)
    assert g(8, 1) == pytest.approx(4.0)
    assert 10.0 < g(2, 100) < 20.0


# --------------------------------------------------------------------------- real tables


@needs_aic
def test_reader_loads_real_tables_in_seconds():
    assert aic.system_for_sku("h100-sxm") == "h100_sxm"
    assert aic.system_for_sku("a40") is None
    ref, gemm = aic.load_gemm("h100_sxm", "vllm")
    assert ref.engine == "vllm" and {"m", "n", "k", "seconds", "gemm_dtype"} <= set(gemm)
    assert (gemm["seconds"] > 0).all() and gemm["seconds"].max() < 1.0  # ms -> s
    for phase in ("context", "generation"):
        _, att = aic.load_attention("h100_sxm", "vllm", phase)
        assert len(att) > 1000 and (att["seconds"] > 0).all()
    _, nccl = aic.load_nccl("h100_sxm")
    assert "all_reduce" in set(nccl["op_name"])
    _, car = aic.load_custom_allreduce("h100_sxm", "vllm")
    assert set(car["num_gpus"]) >= {2, 4, 8}


@needs_aic
def test_nearest_version_is_used_and_named():
    ref = aic.resolve_table("a100_sxm", "gemm", "vllm", "0.24.0", "gemm_perf.parquet")
    assert ref.version == "0.14.0"
    with pytest.raises(aic.AicDataMissing, match="available engines: sglang, trtllm, vllm"):
        aic.resolve_table("h100_sxm", "gemm", "vidur", None, "gemm_perf.parquet")


@needs_aic
def test_gemm_interpolation_exact_at_measured_shapes_and_monotone_in_m():
    _, cube = _gemm_cube("h100_sxm", "vllm", None, "bfloat16")
    ms, ns, ks, lc = cube
    i, j = int(np.searchsorted(ns, 4096)), int(np.searchsorted(ks, 4096))
    curve = gemm_curve(cube, 4096, 4096)
    measured = np.exp(lc[:, i, j])
    expected = monotone(measured)
    assert np.allclose(curve.many(ms.astype(float)), expected, rtol=1e-9)
    # exact where the measurement is monotone; where noise made a larger m faster, the
    # smaller m takes the larger one's time, never far below its own measurement
    assert np.isclose(expected, measured, rtol=1e-9).any()
    assert np.max(measured / expected - 1) < 0.2
    off_grid = gemm_curve(cube, 28672, 4096)  # Llama-3 8B gate-up: between measured n
    m = np.arange(1, 20000, 7, dtype=float)
    t = off_grid.many(m)
    assert np.all(np.diff(t) >= 0)


@needs_aic
def test_batch_cost_within_a_sane_factor_of_the_roofline():
    model = load_model("meta-llama/Llama-3.1-8B")
    sku = load_catalog().get("h100-sxm")
    prof = make_estimator("profiled", model, sku, tp=2)
    roof = make_estimator("roofline", model, sku, tp=2)
    assert prof.backend_name == "profiled" and not prof.fallbacks
    shapes = [
        BatchShape(num_decodes=64, decode_kv_tokens=64 * 2000),
        BatchShape(
            num_prefill_tokens=2048,
            num_prefills=1,
            prefill_attn_pairs=2048 * 2049 / 2,
            prefill_kv_tokens=2048,
        ),
    ]
    for shape in shapes:
        ratio = prof.batch_cost(shape).stage_times[0] / roof.batch_cost(shape).stage_times[0]
        assert 0.5 < ratio < 2.0
    more = BatchShape(num_decodes=128, decode_kv_tokens=128 * 2000)
    assert prof.batch_cost(more).stage_times[0] > prof.batch_cost(shapes[0]).stage_times[0]


@needs_aic
def test_missing_shape_falls_back_per_operator_and_says_so():
    model = load_model("meta-llama/Llama-2-7b-hf")  # MHA: no generation rows for 32 KV heads
    est = make_estimator("profiled", model, load_catalog().get("a100-80gb"))
    assert "attn_decode" in est.fallbacks
    assert "fallback to roofline: attn_decode" in est.describe()
    cost = est.batch_cost(BatchShape(num_decodes=8, decode_kv_tokens=8 * 512))
    assert cost.stage_times[0] > 0


# --------------------------------------------------------------------------- selection, errors


@needs_aic
def test_auto_picks_profiled_where_covered_and_roofline_with_a_warning_elsewhere():
    model = load_model("meta-llama/Llama-3.1-8B")
    cat = load_catalog()
    assert make_estimator("auto", model, cat.get("h100-sxm")).backend_name == "profiled"
    with pytest.warns(EstimatorFallbackWarning, match="GPUs with tables: .*h100-sxm"):
        est = make_estimator("auto", model, cat.get("a40"))
    assert est.backend_name == "roofline" and "a40" in est.selection_note


@needs_aic
def test_demanded_profiled_without_data_names_what_is_missing():
    model = load_model("meta-llama/Llama-3.1-8B")
    cat = load_catalog()
    with pytest.raises(ProfiledDataMissing, match="no measured tables for GPU 'a40'"):
        make_estimator("profiled", model, cat.get("a40"))
    with pytest.raises(ProfiledDataMissing, match="precisions measured there: bfloat16"):
        make_estimator("profiled", model, cat.get("a100-80gb"), precision=Precision.FP8)
    with pytest.raises(ProfiledDataMissing, match="engines with tables: sglang, trtllm, vllm"):
        make_estimator("profiled", model, cat.get("h100-sxm"), engine="vidur")


@needs_aic
def test_cli_profiled_without_data_exits_2_and_auto_warns():
    from search.cli import cli as main

    runner = CliRunner()
    env = {"COLUMNS": "200"}
    args = ["simulate", "--sku", "a40", "--num-requests", "20", "--qps", "2"]
    res = runner.invoke(main, [*args, "--estimator", "profiled"], env=env)
    assert res.exit_code == 2, res.output
    assert "no measured tables for GPU 'a40'" in res.output
    assert "Traceback" not in res.output
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the CLI turns the fallback into one line of its own
        res = runner.invoke(main, [*args, "--estimator", "auto"], env=env)
    assert res.exit_code == 0, res.output
    assert "using the roofline" in res.output and "auto -> roofline" in res.output


def test_malformed_table_names_file_and_field(tmp_path, monkeypatch):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    root = tmp_path / "data"
    d = root / "h100_sxm" / "gemm" / "vllm" / "0.1.0"
    d.mkdir(parents=True)
    pd.DataFrame({"m": [1], "n": [2], "k": [3], "latency": [0.1]}).to_parquet(
        d / "gemm_perf.parquet"
    )
    monkeypatch.setattr(aic, "_data_root", lambda: root)
    aic.load_gemm.cache_clear()
    try:
        with pytest.raises(
            aic.AicTableError, match=r"gemm_perf\.parquet: missing field 'gemm_dtype'"
        ):
            aic.load_gemm("h100_sxm", "vllm")
    finally:
        aic.load_gemm.cache_clear()


@needs_aic
@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm", "vidur"])
def test_host_overhead_is_the_engine_profiles_as_in_the_roofline(engine):
    """The profiled backend times the GPU operators from its tables but takes the
    per-iteration host work (CUDA-graph decode, overlap) from the engine profile, exactly
    as the roofline does; it used to add the roofline's fitted eager-mode overhead."""
    from estimators import load_engine

    model = load_model("meta-llama/Llama-3.1-8B")
    sku = load_catalog().get("b200")
    profile = load_engine(engine)
    prof = make_estimator("profiled", model, sku, tp=1, engine=profile)
    roof = make_estimator("roofline", model, sku, tp=1, engine=profile)
    for shape in (
        BatchShape(num_decodes=64, decode_kv_tokens=64 * 2000),
        BatchShape(num_prefill_tokens=8192, num_prefills=1, prefill_attn_pairs=8192 * 8193 / 2,
                   prefill_kv_tokens=8192),
    ):  # fmt: skip
        p, r = prof.batch_cost(shape), roof.batch_cost(shape)
        ovh = profile.iteration_overhead(shape.num_prefills == 0, shape.num_seqs)
        if ovh is None:  # `vidur`: the roofline's fitted host overhead, in both backends
            assert p.cpu_overhead == pytest.approx(r.cpu_overhead) and p.cpu_overhead > 0
            continue
        host = ovh.seconds(shape.num_seqs)
        for cost in (p, r):
            gpu = cost.stage_times[0]
            want = max(host - gpu, 0.0) if profile.overlap else host
            assert cost.cpu_overhead == pytest.approx(want)


@needs_aic
def test_decode_attention_is_the_generation_table_row():
    """At a measured (batch, step) the per-layer decode attention equals the table's full-
    attention row of the engine's kernel (70B at TP4: 16 query heads, 2 KV heads per GPU),
    also inside `batch_cost`."""
    model = load_model("meta-llama/Llama-3.1-70B")
    sku = load_catalog().get("h200")
    est = make_estimator("profiled", model, sku, tp=4, engine="vllm")
    _, df = aic.load_attention(est.system, est.tables_engine, "generation", None)
    kernel = est.attention_kernels["attn_decode"]
    row = df[
        (df["kernel_source"] == kernel)
        & (df["num_heads"] == 16)
        & (df["num_key_value_heads"] == 2)
        & (df["head_dim"] == 128)
        & (df["kv_cache_dtype"] == "bfloat16")
        & (df["window_size"] == 0)
        & (df["batch_size"] == 32)
        & (df["step"] == 2047)
    ]
    assert len(row) >= 1
    want = float(row["seconds"].median())
    shape = BatchShape(num_decodes=32, decode_kv_tokens=32 * 2048)  # step + 1 tokens read
    assert est.operator_times(shape)["attn_decode"] == pytest.approx(want, rel=1e-9)
    # batch_cost: the layers' attention on top of the token-level part
    attn = est.batch_cost(shape).stage_times[0] - est.batch_cost(
        BatchShape(num_decodes=32, decode_kv_tokens=32)
    ).stage_times[0]
    short = est.operator_times(BatchShape(num_decodes=32, decode_kv_tokens=32))["attn_decode"]
    assert attn == pytest.approx(model.num_layers * (want - short), rel=1e-6)


@needs_aic
def test_gemms_of_a_kernel_the_tables_do_not_time_fall_to_the_roofline():
    """With the engine's block-FP8 GEMMs on FlashInfer's kernel (B200), the GEMM table,
    which times DeepGEMM, prices none of them and says so; on H200, where the engine keeps
    the tables' kernel, the table prices them as before."""
    from dataclasses import replace

    from estimators import ProfiledEstimator, load_engine

    deepseek = load_model("deepseek-ai/DeepSeek-V3")
    flashinfer = replace(load_engine("sglang"), fp8_block_gemm="flashinfer")
    catalog = load_catalog()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b200 = ProfiledEstimator(deepseek, catalog.get("b200"), tp=8, precision=Precision.FP8,
                                 engine=flashinfer)  # fmt: skip
        h200 = ProfiledEstimator(deepseek, catalog.get("h200"), tp=8, precision=Precision.FP8,
                                 engine=flashinfer)  # fmt: skip
    assert "flashinfer" in b200.fallbacks["gemm"] and not b200._gemm_curves
    assert "gemm" not in h200.fallbacks and h200._gemm_curves
