"""What one deployment choice changes, measured against predicted: pairs of measured twins.

The aic-silicon sample measures some deployments more than once with a single field changed,
the engine version, model, GPU, attention TP and DP, lengths and concurrency otherwise the
same.  The ratio of a twin's TTFT or TPOT to its reference's isolates what that field changes,
whatever the absolute calibration, so it checks a mechanism rather than a constant:

* ``--vary ep`` (default): the experts split by expert parallelism (EP n) against tensor
  parallelism (EP 1), TPOT: the load of the busiest EP rank (estimators/_moe.py) and the
  width of each expert's GEMMs;
* ``--vary weights``: 4-bit checkpoints (NVFP4, MXFP4 experts) against 8-bit ones (FP8), TTFT
  and TPOT: what the engine's 4-bit GEMM and MoE kernels save over its 8-bit ones in prefill
  and in decode.

This pairs the points of each `llmcap validate --out DIR` run given (dense or MoE models; e.g.
before and after a change) and prints, per concurrency band, the mean measured and predicted
ratios and the mean |log(predicted ratio / measured ratio)|:

    llmcap validate --dataset aic-silicon --models moe --estimator auto --no-aic --out DIR
    python benchmarks/twin_pairs.py DIR [DIR ...] [--vary ep|weights] [--per-pair]

Nothing is fitted to these pairs; they check the mechanism.
"""

from __future__ import annotations

import argparse
import csv
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from search._validate._aic_silicon import ValidationPoint, load_aic_silicon

BANDS = ((1, 16), (17, 64), (65, 100_000))


@dataclass(frozen=True)
class Variation:
    """One field two twins differ in (`field`, among the `pairs` key's): its value on a point
    (None: the point takes no part), which value is the reference, and the metrics its ratio
    is scored on."""

    field: str
    label: Callable[[ValidationPoint], str | None]
    reference: str
    metrics: tuple[str, ...]


def _weights_label(p: ValidationPoint) -> str | None:
    if p.four_bit:
        return "4-bit"
    return "8-bit" if p.weights == "fp8" else None


VARIATIONS = {
    "ep": Variation("ep", lambda p: f"ep{p.ep}", "ep1", ("tpot",)),
    "weights": Variation("weights", _weights_label, "8-bit", ("ttft", "tpot")),
}


def read_points(directory: Path) -> dict[str, dict[str, str]]:
    with open(directory / "points.csv", newline="") as f:
        return {row["id"]: row for row in csv.DictReader(f)}


@functools.cache
def _layout() -> dict[str, ValidationPoint]:
    """Every aggregated point of the sample by id, read once for all the runs given."""
    return {p.id: p for p in load_aic_silicon(models="all").points}


def pairs(
    points: dict[str, dict[str, str]], vary: Variation
) -> list[tuple[dict[str, str], dict[str, str], str]]:
    """(reference point, twin, the twin's value) for every twin with a reference point."""
    layout = _layout()
    by_key: dict[tuple, dict[str, list[dict[str, str]]]] = {}
    for row in points.values():
        p = layout.get(row["id"])
        if p is None or row["tpot_error"] in ("", "nan") or (value := vary.label(p)) is None:
            continue
        fields = {"engine": p.engine, "version": p.engine_version, "model": p.model,
                  "sku": p.sku, "weights": p.weights, "tp": p.tp, "ep": p.ep, "dp": p.dp,
                  "isl": p.isl, "osl": p.osl, "concurrency": p.concurrency}  # fmt: skip
        del fields[vary.field]
        by_key.setdefault(tuple(fields.values()), {}).setdefault(value, []).append(row)
    out = []
    for values in by_key.values():
        for value, rows in values.items():
            if value != vary.reference:
                out += [(ref, row, value) for ref in values.get(vary.reference, []) for row in rows]
    return out


def ratio(a: dict[str, str], b: dict[str, str], column: str) -> float:
    return float(b[column]) / float(a[column])


def band_rows(found: list, metric: str) -> list[tuple[str, int, float, float, float]]:
    """(band, pairs, mean measured ratio, mean predicted ratio, mean |log error|) of `metric`
    ("ttft" or "tpot") by concurrency band, then over all pairs."""
    out = []
    for low, high in (*BANDS, (1, 100_000)):
        band = [x for x in found if low <= int(x[0]["concurrency"]) <= high]
        if not band:
            continue
        meas = [ratio(a, b, f"measured_{metric}_ms") for a, b, _ in band]
        pred = [ratio(a, b, f"predicted_{metric}_ms") for a, b, _ in band]
        err = sum(abs(math.log(p / m)) for p, m in zip(pred, meas, strict=True)) / len(band)
        name = f"{low}-{high}" if high < 100_000 else (f"{low}+" if low > 1 else "all")
        out.append((name, len(band), sum(meas) / len(band), sum(pred) / len(band), err))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--vary", choices=sorted(VARIATIONS), default="ep")
    parser.add_argument("--per-pair", action="store_true")
    args = parser.parse_args()
    vary = VARIATIONS[args.vary]
    print(f"{'run':<24} {'metric':>6} {'concurrency':>12} {'pairs':>5} {'measured':>9} "
          f"{'predicted':>9} {'|log err|':>9}")  # fmt: skip
    for directory in args.dirs:
        found = pairs(read_points(directory), vary)
        for metric in vary.metrics:
            for name, n, meas, pred, err in band_rows(found, metric):
                print(f"{directory.name:<24} {metric:>6} {name:>12} {n:>5} {meas:>9.3f} "
                      f"{pred:>9.3f} {err:>9.3f}")  # fmt: skip
        if args.per_pair:
            for a, b, value in sorted(found, key=lambda x: (x[1]["model"], x[1]["system"],
                                                            int(x[0]["concurrency"]))):  # fmt: skip
                scores = "  ".join(
                    f"{m} measured {ratio(a, b, f'measured_{m}_ms'):.3f} "
                    f"predicted {ratio(a, b, f'predicted_{m}_ms'):.3f}"
                    for m in vary.metrics
                )
                print(
                    f"  {b['model'][:28]:<28} {b['system']:<9} tp {b['tp']} {value} "
                    f"isl {a['isl']:>5} c {a['concurrency']:>4}: {scores}"
                )


if __name__ == "__main__":
    main()
