"""Refit the roofline's GEMM and attention constants per GPU and engine to aiconfigurator's tables.

Fits (estimators/_aic_calibration.py) every GPU with tables in aiconfigurator-core (the
``llmcap[aic]`` extra: H100 SXM, H200, B200, A100 80GB, L40S) under vLLM, SGLang and
TensorRT-LLM, prints each fit's operator errors (MAPE on the rows the fit saw and on the
held-out shapes; "before": today's constants without the engine layer, same rows;
"shipped": the constants a deployment of that GPU and engine runs with today, engine layer
included, on all its rows: for a GPU no fit has seen, such as ``--skus b300,gb200``, what
its architecture family's fits predict of its own tables), and with ``--write`` stores them
as roofline.yaml's ``engines:`` layers.

    python benchmarks/fit_roofline_aic.py            # print the fits and their errors
    python benchmarks/fit_roofline_aic.py --write    # and update estimators/data/roofline.yaml
    python benchmarks/fit_roofline_aic.py --deployments   # and the iteration check below

``--deployments``: for every deployment of the aic-silicon points (GPU, model, precision,
TP, engine; the shapes only, never their measured latencies), the GPU time of one decode
iteration (C sequences at ISL + OSL/2 context) and of one prefill chunk (min(ISL, 8192)
tokens) by the roofline, before (packaged base layers only) and after (with the engine
layers), against the profiled backend, which reads the same tables directly.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from estimators import _aic_tables as aic
from estimators._aic_calibration import (
    FIT_ENGINES,
    FIT_SKUS,
    fit_tables,
    load_tables,
    score_tables,
    write_engine_layer,
)
from estimators._roofline import load_roofline_constants
from sku_catalog import load_catalog

ROOT = Path(__file__).resolve().parents[1]

YAML_PATH = ROOT / "estimators" / "data" / "roofline.yaml"


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def _all_rows(score: tuple[float, float, int, int]) -> float:
    """MAPE over the train and held-out rows of one `score_tables` group."""
    train, held, n_train, n_held = score
    return (train * n_train + held * n_held) / max(n_train + n_held, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(FIT_ENGINES))
    parser.add_argument("--skus", default=",".join(FIT_SKUS))
    parser.add_argument("--write", action="store_true", help=f"update {YAML_PATH.name}")
    parser.add_argument("--deployments", action="store_true", help="the iteration check")
    args = parser.parse_args()
    if not aic.aic_available():
        print("needs the llmcap[aic] extra (aiconfigurator-core)", file=sys.stderr)
        return 2
    catalog = load_catalog()
    fits = []
    print(
        f"{'gpu':10s} {'engine':7s} {'operator':21s} {'before':>7s} {'shipped':>7s} "
        f"{'train':>7s} {'held-out':>8s} {'rows':>12s}"
    )
    started = time.perf_counter()
    for engine in args.engines.split(","):
        for sku_id in args.skus.split(","):
            sku = catalog.get(sku_id)
            tables = load_tables(sku, engine)
            if tables is None:
                print(f"{sku_id:10s} {engine:7s} no tables")
                continue
            start = load_roofline_constants(sku)
            before = score_tables(tables, start)
            shipped = score_tables(tables, load_roofline_constants(sku, engine))
            fit = fit_tables(tables, start)
            fits.append(fit)
            for group, (train, held, n_train, n_held) in fit.errors.items():
                print(
                    f"{sku_id:10s} {engine:7s} {group:21s} {_pct(_all_rows(before[group])):>7s} "
                    f"{_pct(_all_rows(shipped[group])):>7s} {_pct(train):>7s} "
                    f"{_pct(held):>8s} {n_train:6d}/{n_held:<5d}"
                )
    print(f"fitted {len(fits)} (GPU, engine) pairs in {time.perf_counter() - started:.1f} s")
    if args.write:
        write_engine_layer(YAML_PATH, fits, "python benchmarks/fit_roofline_aic.py --write")
        print(f"wrote the engine layers of {YAML_PATH.relative_to(ROOT)}")
    if args.deployments:
        deployment_check()
    return 0


def deployment_check() -> None:
    """Roofline / profiled - 1 of one iteration's GPU time at each aic-silicon deployment."""
    import numpy as np

    from estimators import (
        BatchShape,
        load_engine,
        load_model,
        make_estimator,
        packaged_roofline_table,
        roofline_table,
    )
    from search._validate import load_aic_silicon

    base = {k: v for k, v in packaged_roofline_table().items() if k != "engines"}
    catalog = load_catalog()
    seen: dict[tuple, list[tuple[str, float, float]]] = {}
    for p in load_aic_silicon().points:
        shapes = seen.setdefault((p.sku, p.model, p.precision, p.tp, p.engine), [])
        for shape in (
            ("decode", p.concurrency, p.isl + p.osl // 2),
            ("prefill", 1, min(p.isl, 8192)),
        ):
            if shape not in shapes:
                shapes.append(shape)
    ratios: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for (sku_id, model, precision, tp, engine), shapes in sorted(seen.items()):
        m, sku, eng = load_model(model), catalog.get(sku_id), load_engine(engine)
        after = make_estimator("roofline", m, sku, tp, 1, precision, engine=eng)
        with roofline_table(base):
            before = make_estimator("roofline", m, sku, tp, 1, precision, engine=eng)
        prof = make_estimator("profiled", m, sku, tp, 1, precision, engine=eng)
        for kind, n, length in shapes:
            if kind == "decode":
                b = BatchShape(num_decodes=n, decode_kv_tokens=n * length)
            else:
                b = BatchShape(length, 1, length * (length + 1) / 2, length)
            ref = prof.batch_cost(b).stage_times[0]
            for name, est in (("before", before), ("after", after)):
                r = est.batch_cost(b).stage_times[0] / ref - 1.0
                ratios[name].setdefault(f"{kind} {sku_id}", []).append(r)
                ratios[name].setdefault(f"{kind} {engine}", []).append(r)
                ratios[name].setdefault(f"{kind} all", []).append(r)
    print("\none iteration's GPU time, roofline / profiled - 1: MAPE (median signed), n")
    for group in sorted(ratios["after"], key=lambda g: (g.split()[0], g.split()[1] != "all", g)):
        cells = []
        for name in ("before", "after"):
            r = np.array(ratios[name][group])
            cells.append(f"{name} {100 * np.abs(r).mean():5.1f}% ({100 * np.median(r):+5.1f}%)")
        print(f"  {group:18s} {'  '.join(cells)}  n={len(r)}")


if __name__ == "__main__":
    raise SystemExit(main())
