"""TTFT and TPOT errors of `llmcap validate` points, split by attention data parallelism.

`points.csv` (written by ``llmcap validate --out DIR``) has no attention-DP column; this
joins each point on its `id` with the attention-DP degree validate simulates it with (the
aic-silicon selection's, read from the installed aiconfigurator-core, with the later dumps'
layouts read back as `_aic_silicon.dump_layout` does) and prints the mean absolute
percentage error of TTFT and TPOT over all points, the points without attention DP
(dp 1) and those with it (dp > 1), and each attention-DP degree apart, per directory given
(e.g. a run before and after a change):

    python benchmarks/validate_by_dp.py BEFORE_DIR AFTER_DIR [--per-point]

``--per-point`` also lists every dp > 1 point's measured and predicted TTFT of each run.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from search._validate._aic_silicon import load_aic_silicon


def read_points(directory: Path) -> dict[str, dict[str, str]]:
    with open(directory / "points.csv", newline="") as f:
        return {row["id"]: row for row in csv.DictReader(f)}


def mape(rows: list[dict[str, str]], column: str) -> float:
    errors = [abs(float(r[column])) for r in rows if r[column] not in ("", "nan")]
    return 100 * sum(errors) / len(errors) if errors else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--per-point", action="store_true")
    args = parser.parse_args()
    dp_of = {p.id: p.dp for p in load_aic_silicon(models="all").points}
    runs = {d: read_points(d) for d in args.dirs}
    print(f"{'run':<32} {'points':>10} {'n':>4} {'TTFT MAPE %':>12} {'TPOT MAPE %':>12}")
    for directory, points in runs.items():
        rows = list(points.values())
        groups = {
            "all": rows,
            "dp 1": [r for r in rows if dp_of.get(r["id"], 1) == 1],
            "dp > 1": [r for r in rows if dp_of.get(r["id"], 1) > 1],
        }
        for dp in sorted({dp_of.get(r["id"], 1) for r in rows} - {1}):
            groups[f"dp {dp}"] = [r for r in rows if dp_of.get(r["id"], 1) == dp]
        for name, group in groups.items():
            ttft, tpot = mape(group, "ttft_error"), mape(group, "tpot_error")
            print(f"{directory.name:<32} {name:>10} {len(group):>4} {ttft:>12.1f} {tpot:>12.1f}")
    if args.per_point:
        ids = sorted({i for points in runs.values() for i in points if dp_of.get(i, 1) > 1})
        names = " ".join(f"{d.name[:14]:>14}" for d in runs)
        print(f"\n{'dp > 1 point':<56} {'dp':>3} {'measured':>9} {names}  (TTFT ms)")
        for i in ids:
            measured = next(p[i]["measured_ttft_ms"] for p in runs.values() if i in p)
            predicted = " ".join(
                f"{float(p[i]['predicted_ttft_ms']):>14.1f}" if i in p else f"{'-':>14}"
                for p in runs.values()
            )
            print(f"{i:<56} {dp_of[i]:>3} {float(measured):>9.1f} {predicted}")


if __name__ == "__main__":
    main()
