"""Vidur's public profiling CSVs as a second op-table source (`llmcap profile import-vidur`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from estimators import BatchShape, load_model, make_estimator
from estimators._curves import monotone
from estimators._op_tables import layer_gemm_shapes, load_op_tables
from estimators.profiler import VidurImportError, import_vidur
from sku_catalog import load_catalog

VIDUR_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "vidur"
needs_vidur = pytest.mark.skipif(
    not VIDUR_DIR.is_dir(), reason="Vidur tables (../shared/data/vidur) absent"
)


@pytest.fixture(scope="module")
def a100_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("vidur") / "a100"
    import_vidur(VIDUR_DIR, "a100", out)
    return out


def _vidur_medians(model_dir: str, tp: int, op: str) -> tuple[np.ndarray, np.ndarray]:
    """(num_tokens, seconds) of one operator in Vidur's own CSV: the median column, the
    median of repeated rows."""
    df = pd.read_csv(VIDUR_DIR / "profiling/compute/a100" / model_dir / "mlp.csv")
    g = df[df["num_tensor_parallel_workers"] == tp]
    med = g.groupby("num_tokens")[f"time_stats.{op}.median"].median()
    return med.index.to_numpy(dtype=float), med.to_numpy() * 1e-3


@needs_vidur
def test_import_writes_every_table_with_its_meta(a100_tables: Path):
    t = load_op_tables(a100_tables)
    assert t.meta.source == "vidur" and t.meta.sku == "a100-80gb" and t.meta.dtype == "fp16"
    gemm = pd.read_csv(a100_tables / "gemm.csv")
    # 8 models, 4 GEMMs each, at every TP degree Vidur profiled them (phi-2 at TP 1 only)
    assert gemm["op"].nunique() == 4 * (7 * 4 + 1)
    ctx = pd.read_csv(a100_tables / "context_attention.csv")
    gen = pd.read_csv(a100_tables / "generation_attention.csv")
    # Llama-2-70B's heads over TP 2: 32 query and 4 KV heads of 128 per GPU
    assert set(ctx["num_heads"]) == {32} and set(gen["num_kv_heads"]) == {4}
    assert (ctx["cached_len"] == 0).sum() > 10 and (ctx["cached_len"] > 0).any()
    ar = pd.read_csv(a100_tables / "allreduce.csv")
    assert set(ar["num_gpus"]) == {2, 4, 8} and ar["message_bytes"].min() == 2 * 2048


@needs_vidur
def test_gemm_times_match_the_vidur_rows_at_measured_points(a100_tables: Path):
    model = load_model("meta-llama/Llama-2-7b-hf")
    gemm = pd.read_csv(a100_tables / "gemm.csv")
    for tp in (1, 2):
        est = make_estimator(
            "profiled", model, load_catalog().get("a100-80gb"), tp=tp, op_tables=a100_tables
        )
        shapes = layer_gemm_shapes(model, tp)
        # the shapes no other model shares (shared ones pool every model's rows)
        own = [op for op, (n, k) in shapes.items()
               if gemm.query("n == @n and k == @k")["op"].nunique() == 1]  # fmt: skip
        assert len(own) >= 2
        for op in own:
            assert op not in est.fallbacks
            m, vidur = _vidur_medians("meta-llama/Llama-2-7b-hf", tp, op)
            got = np.array([est.gemm_time(op, x) for x in m])
            assert np.allclose(got, monotone(vidur), rtol=1e-5)  # the writer keeps 6 digits
            # never above a measurement; where noise made more tokens faster, the smaller
            # count takes the larger's time: typically within 2% of its own measurement
            assert np.all(got <= vidur * (1 + 1e-5))
            assert np.isclose(got, vidur, rtol=1e-5).any()
            assert np.max(vidur / got) < 1.4 and np.median(vidur / got) < 1.02
            assert np.all(np.diff(got) >= 0)


@needs_vidur
def test_attention_and_allreduce_come_from_the_vidur_rows(a100_tables: Path):
    model = load_model("meta-llama/Llama-2-70b-hf")
    est = make_estimator(
        "profiled", model, load_catalog().get("a100-80gb"), tp=2, op_tables=a100_tables
    )
    assert not {"attn_prefill", "attn_decode", "all_reduce"} & set(est.fallbacks)
    df = pd.read_csv(VIDUR_DIR / "profiling_2024/a100/attention.csv")
    dec = df[(df["is_prefill"].astype(str) == "False") & (df["batch_size"] == 8)]
    dec = dec.groupby("kv_cache_size")["time_stats.attn_decode.median"].median()
    vidur = monotone(dec.to_numpy()) * 1e-3
    for (kv, t) in zip(dec.index[::10], vidur[::10], strict=True):
        got = est.decode_attention_time(BatchShape(num_decodes=8, decode_kv_tokens=8 * int(kv)))
        assert got == pytest.approx(t, rel=0.003)  # the lookup key is quantised to 0.2%
    net = pd.read_csv(VIDUR_DIR / "profiling/network/a100_dgx/all_reduce.csv")
    net = net[(net["num_workers"] == 2) & (net["devices_per_node"] == 2)]
    med = net.groupby("size")["time_stats.all_reduce.median"].median()
    size = med.index[len(med) // 2]
    expected = monotone(med.to_numpy())[len(med) // 2] * 1e-3
    assert est.all_reduce_time(2.0 * size) == pytest.approx(expected, rel=1e-5)


def test_a_missing_vidur_directory_is_named(tmp_path: Path):
    with pytest.raises(VidurImportError, match="nowhere: does not exist"):
        import_vidur(tmp_path / "nowhere", "a100", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(VidurImportError, match=r"profiling/compute/h100: no <org>/<model>"):
        import_vidur(tmp_path / "empty", "h100", tmp_path / "out")
    with pytest.raises(VidurImportError, match="Vidur profiled a100, h100, a40"):
        import_vidur(tmp_path / "empty", "b200", tmp_path / "out")
