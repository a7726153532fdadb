"""The operator tables that ship with llmcap: complete, physically possible, readable by name."""

from __future__ import annotations

import pandas as pd
import pytest

from estimators import load_model, make_estimator
from estimators._op_tables import (
    OpTablesError,
    layer_gemm_shapes,
    load_op_tables,
    resolve_op_tables,
    shipped_op_tables,
)
from sku_catalog import load_catalog

SHIPPED = shipped_op_tables()


def test_h100_and_h200_tables_of_the_dense_validation_models_ship():
    expected = [
        f"{gpu}/{model}" for gpu in ("h100-sxm", "h200")
        for model in ("llama-3.1-70b", "llama-3.1-8b", "qwen3-32b")
    ]  # fmt: skip
    assert shipped_op_tables() == expected


@pytest.mark.parametrize("name", SHIPPED)
def test_each_names_its_gpu_versions_and_covers_every_tp_shape_in_both_dtypes(name):
    tables = load_op_tables(name)
    meta = tables.meta
    assert meta.source == "llmcap-profiler" and meta.device == "cuda"
    assert meta.sku == name.split("/")[0] and meta.gpu_name and meta.driver and meta.torch
    assert meta.tp == [1, 2, 4, 8] and meta.dtype == ["bf16", "fp8"]
    gemm = pd.read_csv(tables.directory / "gemm.csv")
    model = load_model(meta.model)
    for tp in meta.tp:
        for n, k in layer_gemm_shapes(model, tp).values():
            for dtype in ("bf16", "fp8"):
                rows = gemm[(gemm["n"] == n) & (gemm["k"] == k) & (gemm["dtype"] == dtype)]
                assert rows["m"].min() == 1 and rows["m"].max() == 16384, (tp, n, k, dtype)


@pytest.mark.parametrize("name", SHIPPED)
def test_no_measurement_beats_the_gpus_peaks(name):
    """Every GEMM below the SKU's dense tensor peak and every GEMM and decode-attention
    call below its HBM bandwidth (weights or KV read once): a mislabelled GPU or a timing
    that missed the kernels fails here."""
    tables = load_op_tables(name)
    sku = load_catalog().get(tables.meta.sku)
    gemm = pd.read_csv(tables.directory / "gemm.csv")
    seconds = gemm["latency_ms"] * 1e-3
    fp8 = gemm["dtype"] == "fp8"
    flops = 2.0 * gemm["m"] * gemm["n"] * gemm["k"]
    peak = fp8.map({True: sku.peak_flops(True), False: sku.peak_flops(False)})
    assert (flops / seconds <= peak).all()
    weight_bytes = gemm["n"] * gemm["k"] * fp8.map({True: 1, False: 2})
    bandwidth = sku.memory_bandwidth_tbps * 1e12
    assert (weight_bytes / seconds <= bandwidth).all()
    # the busiest GEMMs reach a real share of the peak: the GPU was working, not idling
    assert (flops / seconds / peak).max() > 0.5
    dec = pd.read_csv(tables.directory / "generation_attention.csv")
    kv_bytes = 2 * 2 * dec["batch_size"] * dec["kv_len"] * dec["num_kv_heads"] * dec["head_dim"]
    assert (kv_bytes / (dec["latency_ms"] * 1e-3) <= bandwidth).all()


def test_a_name_resolves_to_the_shipped_directory_and_a_local_directory_wins(tmp_path, monkeypatch):
    assert resolve_op_tables("h200/llama-3.1-8b").name == "llama-3.1-8b"
    local = tmp_path / "h200" / "llama-3.1-8b"
    local.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    assert resolve_op_tables("h200/llama-3.1-8b") == local.resolve()


def test_an_unknown_name_lists_the_shipped_ones():
    with pytest.raises(OpTablesError, match=r"does not exist .*h100-sxm/llama-3\.1-70b"):
        load_op_tables("h100-sxm/llama-9")


def test_the_profiled_backend_reads_shipped_tables_by_name():
    model = load_model("meta-llama/Llama-3.1-70B")
    sku = load_catalog().get("h100-sxm")
    est = make_estimator("profiled", model, sku, tp=4, op_tables="h100-sxm/llama-3.1-70b")
    assert set(est.fallbacks) == {"all_reduce"}  # one GPU measured: no all-reduce table
    # the layer's up-projection at one decode token: weight-read bound, 2 x 28672/4 x 8192
    # bytes at the H100's 3.35 TB/s would take 70 us; measured within 10-30% of that
    t = est.gemm_time("mlp_up_proj", 1)
    assert 70e-6 < t < 100e-6
