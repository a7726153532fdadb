"""A regressor for GEMM shapes that a measured table does not bracket.

The profiled backend interpolates a GEMM table bilinearly in (log n, log k) between the
four measured (n, k) shapes around a model's shape; where one of them was not measured at
every m (TensorRT-LLM's tables miss a few large-m cells of 43 shapes), it has no answer.
There a gradient-boosted regressor (scikit-learn's ``HistGradientBoostingRegressor``)
fitted to every measured cell of that table and dtype predicts ``log seconds`` from
``(log m, log n, log k)`` and logs of the work they imply (FLOPs, bytes, blends of
both), constrained to
increase in every feature, hence in m, n and k (more work is never faster), so the curve
in m it gives is monotone like the interpolated ones.

A fit takes a few seconds; it is stored under `cache_dir()` / ``gemm-regressors``, named
by a hash of the table's cells and the regressor's settings, and loaded on later runs.
`FITS` counts the fits of this process (loads from the cache do not count).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
from typing import Any

import numpy as np

from estimators._cache import cache_dir
from estimators._curves import Curve, monotone

__all__ = [
    "FITS",
    "SETTINGS",
    "GemmRegressor",
    "features",
    "gemm_regressor",
    "regressed_gemm_curve",
]

SETTINGS: dict[str, Any] = {
    "max_iter": 600,
    "learning_rate": 0.1,
    "max_leaf_nodes": 63,
    "min_samples_leaf": 2,
    "l2_regularization": 0.0,
    "monotonic_cst": [1] * 12,  # increasing in every feature (see `features`)
    "early_stopping": False,
    "random_state": 0,
}
FITS = [0]  # fits in this process (a list so tests can read the live value)
_LOADED: dict[str, GemmRegressor] = {}
_CURVES: dict[tuple[str, int, int], Curve] = {}  # (table digest, n, k) -> curve over m


class GemmRegressor:
    """Seconds of ``[m, k] x [k, n]`` GEMMs predicted from one table's measured cells."""

    __slots__ = ("digest", "model")

    def __init__(self, model: Any, digest: str) -> None:
        self.model = model
        self.digest = digest

    def seconds(self, m: Any, n: float, k: float) -> np.ndarray:
        from threadpoolctl import threadpool_limits  # installed with scikit-learn

        m = np.atleast_1d(np.asarray(m, dtype=float))
        x = features(m, np.full(len(m), n), np.full(len(m), k))
        # one thread: predicting a few dozen rows, OpenMP's start-up costs far more than it
        # gives, and on a loaded machine its spinning threads stall for seconds
        with threadpool_limits(limits=1):
            return np.exp(self.model.predict(x))


RIDGES = (32.0, 128.0, 512.0, 2048.0)  # tokens at which compute overtakes the weight read


def features(m: np.ndarray, n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log m, n, k and logs of work that grows with each: FLOPs, bytes moved, pairwise
    products, and ``bytes + FLOPs / ridge`` blends (a roofline whose compute and memory
    terms cross at `RIDGES` tokens).  Every one increases with m, n and k, so a model
    increasing in each feature is increasing in m, n and k."""
    lm, ln, lk = np.log(m), np.log(n), np.log(k)
    nbytes = n * k + m * (n + k)
    blends = [np.log(m * n * k / r + nbytes) for r in RIDGES]
    return np.column_stack(
        [lm, ln, lk, lm + ln + lk, np.log(nbytes), lm + ln, lm + lk, ln + lk, *blends]
    )


def _digest(ms: np.ndarray, ns: np.ndarray, ks: np.ndarray, log_cube: np.ndarray) -> str:
    import sklearn

    h = hashlib.sha256(json.dumps([SETTINGS, RIDGES, sklearn.__version__]).encode())
    for arr in (ms, ns, ks, log_cube):
        h.update(np.ascontiguousarray(arr, dtype=float).tobytes())
    return h.hexdigest()[:32]


def _fit(ms: np.ndarray, ns: np.ndarray, ks: np.ndarray, log_cube: np.ndarray) -> Any:
    from sklearn.ensemble import HistGradientBoostingRegressor

    im, i_n, ik = np.nonzero(~np.isnan(log_cube))
    x = features(ms[im].astype(float), ns[i_n].astype(float), ks[ik].astype(float))
    y = log_cube[im, i_n, ik]
    from threadpoolctl import threadpool_limits  # installed with scikit-learn

    model = HistGradientBoostingRegressor(**SETTINGS)
    # one thread: on a few tens of thousands of rows OpenMP costs more than it gives, and
    # on a shared, loaded machine its spinning threads made a 1 s fit take 40 s
    with threadpool_limits(limits=1):
        model.fit(x, y)
    FITS[0] += 1
    return model


def gemm_regressor(cube: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> GemmRegressor:
    """The regressor of a GEMM cube ``(ms, ns, ks, log seconds [m, n, k], NaN unmeasured)``:
    from this process, else from the disk cache, else fitted (and stored)."""
    ms, ns, ks, log_cube = cube
    digest = _digest(ms, ns, ks, log_cube)
    hit = _LOADED.get(digest)
    if hit is not None:
        return hit
    path = cache_dir() / "gemm-regressors" / f"{digest}.pkl"
    model = None
    if path.is_file():
        try:
            with path.open("rb") as fh:
                model = pickle.load(fh)  # our own cache directory, written below
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
            model = None  # a damaged or stale entry is refitted
    if model is None:
        model = _fit(ms, ns, ks, log_cube)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            with tmp.open("wb") as fh:
                pickle.dump(model, fh)
            tmp.replace(path)
        except OSError:
            pass  # a read-only cache costs a refit next time, nothing else
    reg = GemmRegressor(model, digest)
    _LOADED[digest] = reg
    return reg


def regressed_gemm_curve(cube: tuple, n: int, k: int) -> Curve:
    """Seconds of an ``[m, k] x [k, n]`` GEMM as a function of m (the cube's measured m)
    from the cube's regressor: monotone in m, n and k.  Cached per table and shape: every
    deployment of a model asks for the same few shapes."""
    regressor = gemm_regressor(cube)
    key = (regressor.digest, int(n), int(k))
    curve = _CURVES.get(key)
    if curve is None:
        ms = np.asarray(cube[0], dtype=float)
        curve = Curve(ms, monotone(regressor.seconds(ms, n, k)), work_exp=1.0)
        _CURVES[key] = curve
    return curve
