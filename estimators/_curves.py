"""Curves and grids of measured operator times, shared by every table source.

A `Curve` is seconds against one size (tokens, prompt length, KV length, message size),
a `Grid2D` seconds against (batch size, length), a `ChunkGrid` seconds of prefill chunks
against (batch size, chunk length, KV length), a `GemmCube` the log-seconds of GEMMs on an
(m, n, k) grid.  Interpolation is log-log inside the measured range (exact at measured
points), constant below the smallest size and linear in work above the largest; each
measured curve is made monotone before use (`monotone`), so measurement noise cannot make
more work cheaper.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "ChunkGrid",
    "Curve",
    "GemmCube",
    "Grid2D",
    "chunk_grid_from_rows",
    "cube_from_rows",
    "gemm_curve",
    "grid_from_rows",
    "monotone",
    "rows_where",
]


def monotone(ys: np.ndarray) -> np.ndarray:
    """Non-decreasing in x: each value is the minimum of itself and all larger sizes'."""
    return np.minimum.accumulate(np.asarray(ys, dtype=float)[::-1])[::-1]


class Curve:
    """Seconds as a function of one size ``x``: log-log interpolation between measured
    points, constant below the first, ``t_max * (x / x_max) ** work_exp`` above the last."""

    __slots__ = ("_lx", "_ly", "_x0", "_xn", "_y0", "_yn", "work_exp", "xs", "ys")

    def __init__(self, xs: Sequence[float], ys: Sequence[float], work_exp: float = 1.0):
        xs = np.asarray(xs, dtype=float)
        ys = np.asarray(ys, dtype=float)
        order = np.argsort(xs)
        xs, ys = xs[order], ys[order]
        if len(xs) == 0 or np.any(xs <= 0) or np.any(ys <= 0) or np.any(np.diff(xs) == 0):
            raise ValueError("a curve needs distinct positive sizes and positive times")
        self.xs, self.ys = xs, ys
        self._lx, self._ly = np.log(xs), np.log(ys)
        self._x0, self._xn = float(xs[0]), float(xs[-1])
        self._y0, self._yn = float(ys[0]), float(ys[-1])
        self.work_exp = work_exp

    def __call__(self, x: float) -> float:
        if x <= self._x0:
            return self._y0
        if x >= self._xn:
            return self._yn * (x / self._xn) ** self.work_exp
        return math.exp(float(np.interp(math.log(x), self._lx, self._ly)))

    def many(self, x: np.ndarray) -> np.ndarray:
        x = np.maximum(np.asarray(x, dtype=float), self._x0)
        inside = np.exp(np.interp(np.log(x), self._lx, self._ly))
        above = self._yn * (x / self._xn) ** self.work_exp
        return np.where(x > self._xn, above, inside)


class Grid2D:
    """Seconds over (batch size b, length s): one `Curve` in s per measured b, log-linear
    between the bracketing b, linear in b above the largest."""

    __slots__ = ("_bs", "_curves", "_lbs")

    def __init__(self, bs: Sequence[int], curves: Sequence[Curve]):
        self._bs = [float(b) for b in bs]
        self._lbs = [math.log(b) for b in self._bs]
        self._curves = list(curves)

    def __call__(self, b: float, s: float) -> float:
        bs = self._bs
        if b <= bs[0]:
            return self._curves[0](s)
        if b >= bs[-1]:
            return self._curves[-1](s) * b / bs[-1]
        i = bisect.bisect_left(bs, b)
        if bs[i] == b:
            return self._curves[i](s)
        lo, hi = self._curves[i - 1](s), self._curves[i](s)
        w = (math.log(b) - self._lbs[i - 1]) / (self._lbs[i] - self._lbs[i - 1])
        return math.exp((1.0 - w) * math.log(lo) + w * math.log(hi))


class ChunkGrid:
    """Seconds of prefill attention over (batch size b, chunk length q, KV length L = the
    cached prefix + q): one `Grid2D` over (b, L) per measured q, log-linear in q between
    the bracketing ones, the nearest below the smallest q and linear in q above the
    largest (the work of a chunk at a fixed KV length grows with its queries)."""

    __slots__ = ("_grids", "_lqs", "_qs")

    def __init__(self, qs: Sequence[int], grids: Sequence[Grid2D]):
        self._qs = [float(q) for q in qs]
        self._lqs = [math.log(q) for q in self._qs]
        self._grids = list(grids)

    def __call__(self, b: float, q: float, kv: float) -> float:
        qs = self._qs
        if q <= qs[0]:
            return self._grids[0](b, kv)
        if q >= qs[-1]:
            return self._grids[-1](b, kv) * q / qs[-1]
        i = bisect.bisect_left(qs, q)
        if qs[i] == q:
            return self._grids[i](b, kv)
        lo, hi = self._grids[i - 1](b, kv), self._grids[i](b, kv)
        w = (math.log(q) - self._lqs[i - 1]) / (self._lqs[i] - self._lqs[i - 1])
        return math.exp((1.0 - w) * math.log(lo) + w * math.log(hi))


def chunk_grid_from_rows(
    batches: np.ndarray, chunks: np.ndarray, cached: np.ndarray, seconds: np.ndarray
) -> ChunkGrid | None:
    """A `ChunkGrid` from prefill rows (batch size, chunk length, cached prefix, seconds):
    per chunk length, the rows' `grid_from_rows` over KV length; None unless two chunk
    lengths have one."""
    chunks = np.asarray(chunks)
    kv = chunks + np.asarray(cached)
    qs, grids = [], []
    for q in np.unique(chunks):
        at = chunks == q
        grid = grid_from_rows(np.asarray(batches)[at], kv[at], np.asarray(seconds)[at], 1.0)
        if grid is not None:
            qs.append(int(q))
            grids.append(grid)
    return ChunkGrid(qs, grids) if len(qs) >= 2 else None


def _bracket(vals: np.ndarray, x: float) -> tuple[int, int, float, float]:
    """(i_lo, i_hi, weight of hi, work scale beyond the range) in log space."""
    if x <= vals[0]:
        return 0, 0, 0.0, 1.0
    if x >= vals[-1]:
        return len(vals) - 1, len(vals) - 1, 0.0, x / float(vals[-1])
    i = int(np.searchsorted(vals, x))
    if vals[i] == x:
        return i, i, 0.0, 1.0
    w = (math.log(x) - math.log(vals[i - 1])) / (math.log(vals[i]) - math.log(vals[i - 1]))
    return i - 1, i, w, 1.0


def gemm_curve(cube: GemmCube, n: int, k: int) -> Curve | None:
    """Seconds of an ``[m, k] x [k, n]`` GEMM as a function of m, or None when the
    table lacks a bracketing (n, k) corner.  Bilinear in (log n, log k), exact at
    measured shapes; linear in n or k beyond the largest measured."""
    ms, ns, ks, lc = cube
    i0, i1, wi, sn = _bracket(ns, n)
    j0, j1, wj, sk = _bracket(ks, k)
    corners = [
        ((1 - wi) * (1 - wj), lc[:, i0, j0]),
        ((1 - wi) * wj, lc[:, i0, j1]),
        (wi * (1 - wj), lc[:, i1, j0]),
        (wi * wj, lc[:, i1, j1]),
    ]
    logt = np.zeros(len(ms))
    for w, col in corners:
        if w == 0.0:
            continue
        if np.isnan(col).any():
            return None
        logt += w * col
    t = np.exp(logt) * sn * sk
    return Curve(ms, monotone(t), work_exp=1.0)


class GemmCube(NamedTuple):
    """Measured GEMMs of one dtype: log seconds on the grid ``ms x ns x ks`` (NaN where
    a shape was not measured)."""

    ms: np.ndarray
    ns: np.ndarray
    ks: np.ndarray
    log_seconds: np.ndarray


def rows_where(rows: Any, **values: object) -> Any:
    """The rows of the table `rows` (a pandas DataFrame) whose every named column equals its
    value."""
    mask = np.ones(len(rows), dtype=bool)
    for column, value in values.items():
        mask &= (rows[column] == value).to_numpy()
    return rows[mask]


def grid_from_rows(
    batches: np.ndarray, lengths: np.ndarray, seconds: np.ndarray, work_exp: float
) -> Grid2D | None:
    """A `Grid2D` from measured rows: the median per (batch, length), one monotone curve per
    batch size measured at two lengths or more; None when no batch size has two."""
    import pandas as pd

    rows = pd.DataFrame({"b": batches, "x": lengths, "t": seconds})
    med = rows.groupby(["b", "x"])["t"].median().reset_index()
    bs, curves = [], []
    for b, sub in med.groupby("b", sort=True):
        sub = sub.sort_values("x")
        if len(sub) < 2:
            continue
        bs.append(int(b))
        curves.append(
            Curve(sub["x"].to_numpy(dtype=float), monotone(sub["t"].to_numpy()), work_exp)
        )
    return Grid2D(bs, curves) if bs else None


def cube_from_rows(m: np.ndarray, n: np.ndarray, k: np.ndarray, seconds: np.ndarray) -> GemmCube:
    """The `GemmCube` of rows with distinct (m, n, k): NaN where no row was measured."""
    ms, ns, ks = np.unique(m), np.unique(n), np.unique(k)
    cube = np.full((len(ms), len(ns), len(ks)), np.nan)
    cube[np.searchsorted(ms, m), np.searchsorted(ns, n), np.searchsorted(ks, k)] = np.log(seconds)
    return GemmCube(ms, ns, ks, cube)
