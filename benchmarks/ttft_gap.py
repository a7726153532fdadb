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

``--by-concurrency`` splits each group by the client's concurrency: a gap that holds a
steady number of measured decode steps while the concurrency (and with it the decode step)
grows many times over is counted in iterations of the decode side, not in the prompt's work.

``--against DIR2`` compares two runs of the same points (say the roofline and
``--estimator auto``): for each engine, how many measured TTFTs lie above both
predictions, between them or below both.  Where most lie above both, the time missing is
not the choice between the two operator sources.

Nothing is fitted: this reads predictions and measurements and prints their differences.

    llmcap validate --dataset aic-silicon --models moe --estimator auto --no-aic --out DIR
    python benchmarks/ttft_gap.py DIR [--max-concurrency 8] [--by-concurrency]
    python benchmarks/ttft_gap.py DIR --against DIR2
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


def gap_table(
    rows: list[dict[str, str]], max_concurrency: int, by_concurrency: bool = False
) -> list[tuple]:
    """(engine, GPU, model, prompt length, warm-up, [concurrency,] n, measured, predicted,
    gap, gap/layer, gap/TPOT) medians in ms (the last in decode steps) over the points at
    concurrency <= `max_concurrency`; the concurrency is a key of its own when
    `by_concurrency`."""
    groups: dict[tuple, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        concurrency = int(r["concurrency"])
        if concurrency <= max_concurrency:
            key = (r["engine"], r["sku"], r["model"], r["isl"], r["client_warmup"] or "-")
            groups[(*key, concurrency) if by_concurrency else key].append(r)
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


def bracket(
    rows: list[dict[str, str]], other: list[dict[str, str]]
) -> dict[str, tuple[int, int, int]]:
    """(above both, between, below both) by engine: where each point's measured TTFT lies
    against its two predictions, this run's and `other`'s (points in both runs only; a
    measurement equal to either prediction counts as between)."""
    theirs = {r["id"]: float(r["predicted_ttft_ms"]) for r in other}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        if r["id"] not in theirs:
            continue
        ours, measured = float(r["predicted_ttft_ms"]), float(r["measured_ttft_ms"])
        low, high = sorted((ours, theirs[r["id"]]))
        side = 0 if measured > high else 2 if measured < low else 1
        counts[r["engine"]][side] += 1
    return {engine: tuple(c) for engine, c in sorted(counts.items())}


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
    parser.add_argument("--by-concurrency", action="store_true",
                        help="one row per concurrency within each group")  # fmt: skip
    parser.add_argument("--against", type=Path, metavar="DIR2",
                        help="another run's --out directory: measured TTFT against both runs' "
                        "predictions, by engine")  # fmt: skip
    args = parser.parse_args()
    rows = read_points(args.dir)
    if args.against is not None:
        print_bracket(bracket(rows, read_points(args.against)), args.dir, args.against)
        return
    print(f"TTFT at concurrency <= {args.max_concurrency} (medians, ms)")
    header = ("engine", "GPU", "model", "ISL", "warm-up", "C", "n", "meas", "pred", "gap",
              "gap/layer", "gap/TPOT")  # fmt: skip
    print("{:7s} {:9s} {:26s} {:>5s} {:15s} {:>5s} {:>3s} {:>7s} {:>7s} {:>7s} {:>9s} "
          "{:>8s}".format(*header))  # fmt: skip
    for row in gap_table(rows, args.max_concurrency, args.by_concurrency):
        e, g, m, isl, w = row[:5]
        c = str(row[5]) if args.by_concurrency else f"<={args.max_concurrency}"
        n, meas, pred, gap, per_layer, steps = row[-6:]
        print(f"{e:7s} {g:9s} {m[-26:]:26s} {isl:>5s} {w:15s} {c:>5s} {n:3d} {meas:7.0f} "
              f"{pred:7.0f} {gap:7.0f} {per_layer:9.2f} {steps:8.1f}")  # fmt: skip
    print("\nTTFT MAPE by client warm-up (all concurrencies)")
    for warmup, (n, mape) in mape_by_warmup(rows).items():
        print(f"  {warmup:15s} {n:5d} points  {mape:5.1f}%")


def print_bracket(counts: dict[str, tuple[int, int, int]], ours: Path, theirs: Path) -> None:
    print(f"measured TTFT against the predictions of {ours} and {theirs}")
    print(f"{'engine':7s} {'points':>6s} {'above both':>10s} {'between':>8s} {'below both':>10s}")
    total = tuple(sum(c[i] for c in counts.values()) for i in range(3))
    for engine, (above, between, below) in [*counts.items(), ("all", total)]:
        print(f"{engine:7s} {above + between + below:6d} {above:10d} {between:8d} {below:10d}")


if __name__ == "__main__":
    main()
