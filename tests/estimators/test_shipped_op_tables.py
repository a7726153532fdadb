"""The operator tables that ship with llmcap: complete, physically possible, readable by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from estimators import load_model, make_estimator
from estimators._op_tables import (
    OpTablesError,
    load_op_tables,
    resolve_op_tables,
    shipped_op_tables,
)
from estimators.profiler._plan import FULL_GRID, plan_profile
from sku_catalog import load_catalog

SHIPPED = shipped_op_tables()


def test_h100_and_h200_tables_of_the_validation_models_ship():
    dense = [
        f"{gpu}/{model}" for gpu in ("h100-sxm", "h200")
        for model in ("llama-3.1-70b", "llama-3.1-8b", "qwen3-32b")
    ]  # fmt: skip
    moe = [f"h200/{m}" for m in ("deepseek-v3", "minimax-m2.5", "qwen3-235b-a22b", "qwen3-30b-a3b")]
    assert shipped_op_tables() == sorted(dense + moe)


@pytest.mark.parametrize("name", SHIPPED)
def test_each_names_its_gpu_versions_and_covers_every_planned_shape(name):
    """Every GEMM and MoE shape `llmcap profile run` plans for the model at the tables' TP
    degrees and dtypes is there, over the whole token grid."""
    tables = load_op_tables(name)
    meta = tables.meta
    assert meta.source == "llmcap-profiler" and meta.device == "cuda"
    assert meta.sku == name.split("/")[0] and meta.gpu_name and meta.driver and meta.torch
    dtypes = tuple(meta.dtype) if isinstance(meta.dtype, list) else (meta.dtype,)
    plan = plan_profile(load_model(meta.model), meta.tp, dtypes)
    assert plan.tps == meta.tp and plan.gemms
    gemm = pd.read_csv(tables.directory / "gemm.csv")
    for g in plan.gemms:
        rows = gemm[(gemm["n"] == g.n) & (gemm["k"] == g.k) & (gemm["dtype"] == g.dtype)]
        assert list(rows["m"]) == list(FULL_GRID.tokens), g
    if not plan.moes:
        assert not (tables.directory / "moe.csv").exists()
        return
    moe = pd.read_csv(tables.directory / "moe.csv")
    for e in plan.moes:
        rows = moe[(moe["moe_tp"] == e.moe_tp) & (moe["moe_ep"] == e.moe_ep)
                   & (moe["dtype"] == e.dtype) & (moe["inter_size"] == e.inter)]  # fmt: skip
        assert list(rows["num_tokens"]) == list(FULL_GRID.moe_tokens), e


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
    moe_file = tables.directory / "moe.csv"
    if moe_file.exists():  # one GPU's experts: their rows' FLOPs, their weights read once
        moe = pd.read_csv(moe_file)
        fp8 = moe["dtype"] == "fp8"
        width = moe["inter_size"] // moe["moe_tp"]
        local = moe["num_experts"] // moe["moe_ep"]
        rows = np.ceil(moe["num_tokens"] * moe["topk"] / moe["moe_ep"])
        seconds = moe["latency_ms"] * 1e-3
        peak = fp8.map({True: sku.peak_flops(True), False: sku.peak_flops(False)})
        assert (2.0 * rows * 3 * width * moe["hidden_size"] / seconds <= peak).all()
        active = np.minimum(local, rows)
        weights = active * 3 * width * moe["hidden_size"] * fp8.map({True: 1, False: 2})
        assert (weights / seconds <= bandwidth).all()
    if not (tables.directory / "generation_attention.csv").exists():
        return  # multi-head latent attention: not timed
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
