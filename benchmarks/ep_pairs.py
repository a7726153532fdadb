"""How much slower expert parallelism makes a decode step: measured pairs against a run.

The aic-silicon sample measures some deployments twice, with the experts split by tensor
parallelism (EP 1) and by expert parallelism (EP > 1), the engine version, GPU, weights,
attention TP and DP, lengths and concurrency otherwise the same.  Their TPOT ratio (EP n over
EP 1) isolates what EP changes, whatever the absolute calibration: the load of the busiest
EP rank (estimators/_moe.py) and the width of each expert's GEMMs.  This pairs the points of
each `llmcap validate --out DIR` run given (e.g. before and after a change) and prints, per
concurrency band, the measured and predicted ratios and the mean |log(predicted ratio /
measured ratio)|:

    llmcap validate --dataset aic-silicon --models moe --estimator auto --no-aic --out DIR
    python benchmarks/ep_pairs.py DIR [DIR ...] [--per-pair]

Nothing is fitted to these pairs; they check the mechanism.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path

from search._validate._aic_silicon import load_aic_silicon

BANDS = ((1, 16), (17, 64), (65, 100_000))


def read_points(directory: Path) -> dict[str, dict[str, str]]:
    with open(directory / "points.csv", newline="") as f:
        return {row["id"]: row for row in csv.DictReader(f)}


def pairs(points: dict[str, dict[str, str]]) -> list[tuple[dict[str, str], dict[str, str], int]]:
    """(EP 1 point, EP n point, n) for every EP n point with an EP 1 twin."""
    layout = {p.id: p for p in load_aic_silicon(models="moe").points}
    by_key: dict[tuple, dict[int, list[dict[str, str]]]] = {}
    for row in points.values():
        p = layout.get(row["id"])
        if p is None or row["tpot_error"] in ("", "nan"):
            continue
        key = (p.engine, p.engine_version, p.model, p.sku, p.weights, p.tp, p.dp, p.isl,
               p.osl, p.concurrency)  # fmt: skip
        by_key.setdefault(key, {}).setdefault(p.ep, []).append(row)
    out = []
    for eps in by_key.values():
        for ep, rows in eps.items():
            if ep > 1:
                out += [(one, row, ep) for one in eps.get(1, []) for row in rows]
    return out


def ratio(a: dict[str, str], b: dict[str, str], column: str) -> float:
    return float(b[column]) / float(a[column])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--per-pair", action="store_true")
    args = parser.parse_args()
    print(f"{'run':<24} {'concurrency':>12} {'pairs':>5} {'measured':>9} {'predicted':>9} "
          f"{'|log err|':>9}")  # fmt: skip
    for directory in args.dirs:
        found = pairs(read_points(directory))
        for low, high in (*BANDS, (1, 100_000)):
            band = [x for x in found if low <= int(x[0]["concurrency"]) <= high]
            if not band:
                continue
            meas = [ratio(a, b, "measured_tpot_ms") for a, b, _ in band]
            pred = [ratio(a, b, "predicted_tpot_ms") for a, b, _ in band]
            err = sum(abs(math.log(p / m)) for p, m in zip(pred, meas, strict=True)) / len(band)
            name = f"{low}-{high}" if high < 100_000 else (f"{low}+" if low > 1 else "all")
            print(f"{directory.name:<24} {name:>12} {len(band):>5} "
                  f"{sum(meas) / len(band):>9.3f} {sum(pred) / len(band):>9.3f} {err:>9.3f}")
        if args.per_pair:
            for a, b, ep in sorted(found, key=lambda x: (x[1]["model"], int(x[0]["concurrency"]))):
                print(f"  {b['model'][:28]:<28} {b['system']:<9} tp {b['tp']} ep {ep} "
                      f"c {a['concurrency']:>4}: measured {ratio(a, b, 'measured_tpot_ms'):.3f} "
                      f"predicted {ratio(a, b, 'predicted_tpot_ms'):.3f}")


if __name__ == "__main__":
    main()
