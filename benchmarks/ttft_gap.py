"""Where `llmcap validate` under-predicts TTFT at low concurrency, and by how much.

Reads the `points.csv` of ``llmcap validate --out DIR`` and, for the points at a concurrency
of at most ``--max-concurrency`` (default 8, where a request rarely queues behind another's
prefill), groups them by engine, GPU, model, listed prompt length and the client's warm-up
(`ValidationPoint.client_warmup`), printing per group the median measured and predicted
TTFT, the median gap (measured - predicted, ms), that gap per model layer (what a host-bound
prefill would have to spend per layer, on top of the simulated iteration, to close it) and
in measured decode steps (the gap over the median measured TPOT: a gap that holds a steady
number of decode steps across tensor parallelism and concurrency grows with the decode step,
not with the prompt or the layers).  A gap that is large at 1k-token prompts and small at 8k
ones, at the same engine, GPU and model, is the shape of an iteration that lasts max(GPU
time, host launch time): the 8k prompt's GPU time covers the launches, the 1k prompt's does
not.  A gap that is large at every length and concurrency under "no warm-up" is the first
requests' cold start (kernels compiled, loaded or tuned on first use), which no simulator of
the warm engine reproduces.

Nothing is fitted: this reads predictions and measurements and prints their differences.

    llmcap validate --dataset aic-silicon --models moe --estimator auto --no-aic --out DIR
    python benchmarks/ttft_gap.py DIR [--max-concurrency 8]
"""

from __future__ import annotations

import argparse
import csv
import functools
import statistics
from collections import defaultdict
from pathlib import Path

from estimators import load_model


def read_points(directory: Path) -> list[dict[str, str]]:
    with open(directory / "points.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["predicted_ttft_ms"] not in ("", "nan")]
    if rows and "client_warmup" not in rows[0]:
        raise SystemExit(f"{directory}/points.csv has no client_warmup column: rerun validate")
    return rows


@functools.cache
def _layers(model: str) -> int:
    return load_model(model).num_layers


def gap_table(rows: list[dict[str, str]], max_concurrency: int) -> list[tuple]:
    """(engine, GPU, model, prompt length, warm-up, n, measured, predicted, gap, gap/layer,
    gap/TPOT) medians in ms (the last in decode steps) over the points at concurrency <=
    `max_concurrency`."""
    groups: dict[tuple[str, ...], list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        if int(r["concurrency"]) <= max_concurrency:
            key = (r["engine"], r["sku"], r["model"], r["isl"], r["client_warmup"] or "-")
            groups[key].append(r)
    table = []
    for key, members in sorted(groups.items()):
        measured = statistics.median(float(r["measured_ttft_ms"]) for r in members)
        predicted = statistics.median(float(r["predicted_ttft_ms"]) for r in members)
        gap = statistics.median(
            float(r["measured_ttft_ms"]) - float(r["predicted_ttft_ms"]) for r in members
        )
        tpot = statistics.median(float(r["measured_tpot_ms"]) for r in members)
        row = (*key, len(members), measured, predicted, gap, gap / _layers(key[2]), gap / tpot)
        table.append(row)
    return table


def mape_by_warmup(rows: list[dict[str, str]]) -> dict[str, tuple[int, float]]:
    """(points, TTFT MAPE %) by client warm-up, all concurrencies."""
    errors: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        errors[r["client_warmup"] or "-"].append(abs(float(r["ttft_error"])))
    return {k: (len(v), 100 * sum(v) / len(v)) for k, v in sorted(errors.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="a `llmcap validate --out` directory")
    parser.add_argument("--max-concurrency", type=int, default=8)
    args = parser.parse_args()
    rows = read_points(args.dir)
    print(f"TTFT at concurrency <= {args.max_concurrency} (medians, ms)")
    header = ("engine", "GPU", "model", "ISL", "warm-up", "n", "meas", "pred", "gap",
              "gap/layer", "gap/TPOT")  # fmt: skip
    print("{:7s} {:9s} {:26s} {:>5s} {:15s} {:>3s} {:>7s} {:>7s} {:>7s} {:>9s} {:>8s}".format(
        *header))  # fmt: skip
    for e, g, m, isl, w, n, meas, pred, gap, per_layer, steps in gap_table(
        rows, args.max_concurrency
    ):
        print(f"{e:7s} {g:9s} {m[-26:]:26s} {isl:>5s} {w:15s} {n:3d} {meas:7.0f} {pred:7.0f} "
              f"{gap:7.0f} {per_layer:9.2f} {steps:8.1f}")  # fmt: skip
    print("\nTTFT MAPE by client warm-up (all concurrencies)")
    for warmup, (n, mape) in mape_by_warmup(rows).items():
        print(f"  {warmup:15s} {n:5d} points  {mape:5.1f}%")


if __name__ == "__main__":
    main()
