"""Held-out accuracy of the profiled estimator's interpolation (operator level).

For each GPU, the measured tables of aiconfigurator-core (the llmcap[aic] extra) are
split: some measured points are removed, the interpolator is built from the rest exactly
as the profiled backend builds it (log-log, monotone), and the removed points are
predicted.  Errors are predicted / measured - 1 on points the interpolation did not see.

* GEMM, held-out m: every 5th interior m of each (n, k) shape (tokens in the batch).
* GEMM, held-out n: every other interior n (output features), predicted from the
  neighbouring measured n at every m (what a model shape off the grid relies on).
* GEMM, held-out n by the regressor (`estimators._gemm_regressor`, what the profiled
  backend uses where the table does not bracket a shape): fitted to the table without
  those n, predicting them; also its fit time (a first fit, nothing cached).
* context attention, held-out prompt length: every 3rd interior ``isl`` per batch size.
* generation attention, held-out KV length: every 3rd interior ``step`` per batch size.
* attention, held-out batch size: every other interior batch size.

Targets (issue "Fidelity on today's engines and GPUs"): matmul MAPE <= 5%, attention
MAPE <= 10%.

    python benchmarks/validate_profiled.py [--engine vllm] [--systems h100_sxm,h200_sxm,...]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from estimators import _aic_tables as aic
from estimators import _gemm_regressor
from estimators._profiled import Curve, Grid2D, _gemm_cube, gemm_curve, monotone

FLOOR_S = 50e-6  # second column: only points measured at 50 us or more
SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm", "a100_sxm", "l40s")
DTYPES = ("bfloat16", "fp8")


def _interior_every(n: int, every: int) -> np.ndarray:
    """Indices 1..n-2 that are held out: every `every`-th interior point."""
    idx = np.arange(1, n - 1)
    return idx[(idx % every) == 0]


def gemm_heldout_m(cube) -> np.ndarray:
    ms, _, _, lc = cube
    errs, meas = [], []
    out = _interior_every(len(ms), 5)
    keep = np.setdiff1d(np.arange(len(ms)), out)
    for i in range(lc.shape[1]):
        for j in range(lc.shape[2]):
            col = lc[:, i, j]
            if np.isnan(col).any():
                continue
            t = np.exp(col)
            curve = Curve(ms[keep], monotone(t[keep]))
            pred = curve.many(ms[out].astype(float))
            errs.append(pred / t[out] - 1.0)
            meas.append(t[out])
    return _cat(errs), _cat(meas)


def gemm_heldout_n(cube) -> np.ndarray:
    ms, ns, ks, lc = cube
    errs, meas = [], []
    for i in range(1, len(ns) - 1, 2):
        keep = [x for x in range(len(ns)) if x != i]
        sub = (ms, ns[keep], ks, lc[:, keep, :])
        for j in range(len(ks)):
            col = lc[:, i, j]
            if np.isnan(col).any():
                continue
            curve = gemm_curve(sub, int(ns[i]), int(ks[j]))
            if curve is None:
                continue
            errs.append(curve.many(ms.astype(float)) / np.exp(col) - 1.0)
            meas.append(np.exp(col))
    return _cat(errs), _cat(meas)


def gemm_heldout_n_regressor(cube) -> tuple[tuple[np.ndarray, np.ndarray], float]:
    """((errors, measured) of the held-out n of `gemm_heldout_n`, by a regressor fitted
    without them), and the fit's seconds."""
    ms, ns, ks, lc = cube
    held = np.arange(1, len(ns) - 1, 2)
    train = lc.copy()
    train[:, held, :] = np.nan
    started = time.perf_counter()
    model = _gemm_regressor._fit(ms, ns, ks, train)
    fit_s = time.perf_counter() - started
    reg = _gemm_regressor.GemmRegressor(model, "held-out")
    errs, meas = [], []
    for i in held:
        for j in range(len(ks)):
            col = lc[:, i, j]
            if np.isnan(col).any():
                continue
            pred = monotone(reg.seconds(ms.astype(float), float(ns[i]), float(ks[j])))
            errs.append(pred / np.exp(col) - 1.0)
            meas.append(np.exp(col))
    return (_cat(errs), _cat(meas)), fit_s


def _shapes(df):
    keys = ["num_heads", "num_key_value_heads", "head_dim", "kv_cache_dtype"]
    full = df[df["window_size"] == 0]
    for key, rows in full.groupby(keys):
        kernel = rows["kernel_source"].value_counts().index[0]
        yield key, rows[rows["kernel_source"] == kernel]


def attention_heldout(df, phase: str) -> tuple[np.ndarray, np.ndarray]:
    """(errors of held-out lengths, errors of held-out batch sizes)."""
    length = "isl" if phase == "context" else "step"
    exp = 2.0 if phase == "context" else 1.0
    shift = 0.0 if phase == "context" else 1.0
    e_len, e_b, m_len, m_b = [], [], [], []
    for _, rows in _shapes(df):
        med = rows.groupby(["batch_size", length])["seconds"].median().reset_index()
        curves = {}
        for b, r in med.groupby("batch_size", sort=True):
            r = r.sort_values(length)
            xs = r[length].to_numpy(dtype=float) + shift
            ys = r["seconds"].to_numpy()
            if len(xs) < 2:
                continue
            curves[int(b)] = Curve(xs, monotone(ys), exp)
            out = _interior_every(len(xs), 3)
            if len(out):
                keep = np.setdiff1d(np.arange(len(xs)), out)
                pred = Curve(xs[keep], monotone(ys[keep]), exp).many(xs[out])
                e_len.append(pred / ys[out] - 1.0)
                m_len.append(ys[out])
        bs = sorted(curves)
        for i in range(1, len(bs) - 1, 2):
            others = [b for b in bs if b != bs[i]]
            grid = Grid2D(others, [curves[b] for b in others])
            r = med[med["batch_size"] == bs[i]]
            xs = r[length].to_numpy(dtype=float) + shift
            ys = r["seconds"].to_numpy()
            # only lengths measured at both neighbouring batch sizes (inside the range)
            lo, hi = curves[others[i - 1]].xs, curves[others[i]].xs
            inside = (xs <= min(lo[-1], hi[-1])) & (xs >= max(lo[0], hi[0]))
            if inside.any():
                pred = np.array([grid(bs[i], x) for x in xs[inside]])
                e_b.append(pred / ys[inside] - 1.0)
                m_b.append(ys[inside])
    return (_cat(e_len), _cat(m_len)), (_cat(e_b), _cat(m_b))


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.array([])


def _mape(errs: np.ndarray) -> float:
    return float(np.abs(errs).mean()) if errs.size else float("nan")


def _fmt(result: tuple[np.ndarray, np.ndarray]) -> str:
    errs, meas = result
    if errs.size == 0:
        return "      -"
    a = np.abs(errs)
    big = errs[meas >= FLOOR_S]
    return (
        f"{100 * a.mean():6.2f}% {100 * np.median(errs):+6.2f}% "
        f"{100 * np.percentile(a, 95):6.1f}%  {errs.size:7d}   |  >=50us: "
        f"{100 * _mape(big):6.2f}%  {big.size:6d}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", default="vllm")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument(
        "--no-regressor",
        dest="regressor",
        action="store_false",
        help="skip the GEMM regressor's held-out error (a fit per table and dtype)",
    )
    args = parser.parse_args()
    if not aic.aic_available():
        sys.exit("needs the llmcap[aic] extra (aiconfigurator-core)")
    print(
        "held-out errors: MAPE, median signed, P95 |err|, n points  |  MAPE and n of the "
        "points measured at >= 50 us"
    )
    worst = {
        "matmul": 0.0,
        "attention": 0.0,
        "matmul50": 0.0,
        "attention50": 0.0,
        "regressor": 0.0,
        "fit_s": 0.0,
    }
    for system in args.systems.split(","):
        try:
            ref, _ = aic.load_gemm(system, args.engine)
        except aic.AicDataMissing as exc:
            print(f"{system}: {exc}")
            continue
        print(f"\n{system} ({args.engine} {ref.version})")
        for dtype in DTYPES:
            _, cube = _gemm_cube(system, args.engine, None, dtype)
            if cube is None:
                continue
            em, en = gemm_heldout_m(cube), gemm_heldout_n(cube)
            print(f"  gemm {dtype:9s} held-out m      {_fmt(em)}")
            print(f"  gemm {dtype:9s} held-out n      {_fmt(en)}")
            if args.regressor:
                er, fit_s = gemm_heldout_n_regressor(cube)
                print(f"  gemm {dtype:9s} held-out n reg  {_fmt(er)}  (fit {fit_s:.1f} s)")
                worst["regressor"] = np.nanmax([worst["regressor"], _mape(er[0])])
                worst["fit_s"] = max(worst["fit_s"], fit_s)
            for e, meas in (em, en):
                worst["matmul"] = np.nanmax([worst["matmul"], _mape(e)])
                worst["matmul50"] = np.nanmax([worst["matmul50"], _mape(e[meas >= FLOOR_S])])
        for phase in ("context", "generation"):
            try:
                ref, df = aic.load_attention(system, args.engine, phase)
            except aic.AicDataMissing as exc:
                print(f"  {phase}: {exc}")
                continue
            el, eb = attention_heldout(df, phase)
            what = "isl" if phase == "context" else "kv length"
            print(f"  {phase:10s} attn held-out {what:9s} {_fmt(el)}")
            print(f"  {phase:10s} attn held-out batch     {_fmt(eb)}")
            for e, meas in (el, eb):
                worst["attention"] = np.nanmax([worst["attention"], _mape(e)])
                worst["attention50"] = np.nanmax([worst["attention50"], _mape(e[meas >= FLOOR_S])])
    print(
        f"\nworst MAPE: matmul {100 * worst['matmul']:.2f}% (target <= 5%), "
        f"attention {100 * worst['attention']:.2f}% (target <= 10%)\n"
        f"worst MAPE of points measured at >= 50 us: matmul {100 * worst['matmul50']:.2f}%, "
        f"attention {100 * worst['attention50']:.2f}%"
    )
    if args.regressor:
        print(
            f"GEMM regressor, held-out n: worst MAPE {100 * worst['regressor']:.2f}% "
            f"(target <= 5%), slowest first fit {worst['fit_s']:.1f} s (target < 30 s)"
        )


if __name__ == "__main__":
    main()
