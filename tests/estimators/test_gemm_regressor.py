"""The GEMM gap regressor: monotone, close at measured points, cached on disk."""

from __future__ import annotations

import importlib.util
import itertools

import numpy as np
import pytest

from estimators import _gemm_regressor as gr

HAVE_AIC = importlib.util.find_spec("aiconfigurator_core") is not None


def _cube() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A GEMM-like table: max(compute, weight read) + launch cost, with a few holes."""
    ms = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192], dtype=float)
    ns = np.array([512, 1024, 2048, 4096, 8192, 16384], dtype=float)
    ks = ns.copy()
    m, n, k = np.meshgrid(ms, ns, ks, indexing="ij")
    seconds = np.maximum(2 * m * n * k / 700e12, 2 * n * k / 3e12) + 5e-6
    log_cube = np.log(seconds)
    log_cube[-3:, -1, -1] = np.nan  # large-m cells not measured at one shape
    return ms, ns, ks, log_cube


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LLMCAP_CACHE_DIR", str(tmp_path))
    gr._LOADED.clear()
    yield tmp_path
    gr._LOADED.clear()


def test_close_at_measured_points_and_monotone_on_a_grid(cache):
    ms, ns, ks, lc = _cube()
    reg = gr.gemm_regressor((ms, ns, ks, lc))
    errs = []
    for j, i in itertools.product(range(len(ns)), range(len(ks))):
        pred = reg.seconds(ms, ns[j], ks[i])
        ok = ~np.isnan(lc[:, j, i])
        errs.append(np.abs(pred[ok] / np.exp(lc[ok, j, i]) - 1))
    errs = np.concatenate(errs)
    assert np.median(errs) < 0.03 and errs.mean() < 0.06
    grid_m = np.geomspace(1, 16384, 40)
    grid_nk = np.geomspace(300, 30000, 12)
    t = np.array([[[reg.seconds(m, n, k)[0] for k in grid_nk] for n in grid_nk] for m in grid_m])
    assert (np.diff(t, axis=0) >= 0).all()  # in m
    assert (np.diff(t, axis=1) >= 0).all()  # in n
    assert (np.diff(t, axis=2) >= 0).all()  # in k


def test_fitted_once_then_loaded_from_the_disk_cache(cache):
    cube = _cube()
    fits = gr.FITS[0]
    first = gr.gemm_regressor(cube)
    assert gr.FITS[0] == fits + 1
    files = list((cache / "gemm-regressors").glob("*.pkl"))
    assert [f.stem for f in files] == [first.digest]
    gr._LOADED.clear()  # a new process: only the disk cache is left
    second = gr.gemm_regressor(cube)
    assert gr.FITS[0] == fits + 1  # loaded, not refitted
    m = np.array([3.0, 700.0])
    assert np.array_equal(second.seconds(m, 3000, 5000), first.seconds(m, 3000, 5000))
    other = (*cube[:3], cube[3] + 0.01)  # other measurements: another key, a new fit
    assert gr.gemm_regressor(other).digest != first.digest
    assert gr.FITS[0] == fits + 2


@pytest.mark.skipif(not HAVE_AIC, reason="needs the aic extra")
def test_profiled_backend_uses_it_where_the_table_has_no_bracketing_shape(cache):
    from estimators import load_engine, load_model, make_estimator
    from sku_catalog import load_catalog

    # TensorRT-LLM's H100 table misses large-m cells around Llama-3.1-8B's LM head
    est = make_estimator(
        "profiled", load_model("meta-llama/Llama-3.1-8B"), load_catalog().get("h100-sxm"),
        engine=load_engine("trtllm"),
    )  # fmt: skip
    assert "lm_head" in est.regressed and "lm_head" not in est.fallbacks
    assert "GEMM off the measured grid: lm_head" in est.describe()
    t = [est._head_curve(m) for m in (1, 64, 1024, 8192)]
    assert t == sorted(t)
    # a 1 GB bf16 weight read at 3.35 TB/s is at least 0.31 ms; at most a few times that
    assert 0.3e-3 < t[0] < 1.5e-3


@pytest.mark.skipif(not HAVE_AIC, reason="needs the aic extra")
def test_on_a_real_table_it_is_close_at_measured_cells(cache):
    from estimators._profiled import _gemm_cube

    _, cube = _gemm_cube("h100_sxm", "trtllm", None, "bfloat16")
    reg = gr.gemm_regressor(cube)
    ms, ns, ks, lc = cube
    errs = []
    for j, i in itertools.product(range(len(ns)), range(len(ks))):
        ok = ~np.isnan(lc[:, j, i])
        if ok.any():
            pred = reg.seconds(ms[ok].astype(float), ns[j], ks[i])
            errs.append(np.abs(pred / np.exp(lc[ok, j, i]) - 1))
    errs = np.concatenate(errs)
    assert np.median(errs) < 0.05 and errs.mean() < 0.07  # measured 3.5% and 4.9%
