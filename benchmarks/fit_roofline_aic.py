"""Refit the roofline's GEMM and attention constants per GPU and engine to aiconfigurator's tables.

Fits (estimators/_aic_calibration.py) every GPU with tables in aiconfigurator-core (the
``llmcap[aic]`` extra: H100 SXM, H200, B200, A100 80GB, L40S) under vLLM, SGLang and
TensorRT-LLM, prints each fit's operator errors (MAPE on the rows the fit saw and on the
held-out shapes; "before": today's constants without the engine layer, same rows), and
with ``--write`` stores them as roofline.yaml's ``engines:`` layers.

    python benchmarks/fit_roofline_aic.py            # print the fits and their errors
    python benchmarks/fit_roofline_aic.py --write    # and update estimators/data/roofline.yaml
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from estimators import _aic_tables as aic  # noqa: E402
from estimators._aic_calibration import (  # noqa: E402
    FIT_ENGINES,
    FIT_SKUS,
    fit_tables,
    load_tables,
    score_tables,
    write_engine_layer,
)
from estimators._roofline import load_roofline_constants  # noqa: E402
from sku_catalog import load_catalog  # noqa: E402

YAML_PATH = ROOT / "estimators" / "data" / "roofline.yaml"


def _pct(x: float) -> str:
    return f"{100 * x:5.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(FIT_ENGINES))
    parser.add_argument("--skus", default=",".join(FIT_SKUS))
    parser.add_argument("--write", action="store_true", help=f"update {YAML_PATH.name}")
    args = parser.parse_args()
    if not aic.aic_available():
        print("needs the llmcap[aic] extra (aiconfigurator-core)", file=sys.stderr)
        return 2
    catalog = load_catalog()
    fits = []
    print(
        f"{'gpu':10s} {'engine':7s} {'operator':21s} {'before':>7s} {'train':>7s} "
        f"{'held-out':>8s} {'rows':>12s}"
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
            fit = fit_tables(tables, start)
            fits.append(fit)
            for group, (train, held, n_train, n_held) in fit.errors.items():
                b = before[group]
                b_all = (b[0] * b[2] + b[1] * b[3]) / max(b[2] + b[3], 1)
                print(
                    f"{sku_id:10s} {engine:7s} {group:21s} {_pct(b_all):>7s} {_pct(train):>7s} "
                    f"{_pct(held):>8s} {n_train:6d}/{n_held:<5d}"
                )
    print(f"fitted {len(fits)} (GPU, engine) pairs in {time.perf_counter() - started:.1f} s")
    if args.write:
        write_engine_layer(YAML_PATH, fits, "python benchmarks/fit_roofline_aic.py --write")
        print(f"wrote the engine layers of {YAML_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
