"""Fit the engines' all-reduce constants (estimators/data/engines.yaml) to measured tables.

The engines' all-reduce (vLLM's and SGLang's custom kernels, TensorRT-LLM's own) is measured
operator by operator in aiconfigurator-core's perf database
(``systems/data/<system>/comm/<engine>/<version>/custom_allreduce_perf.parquet``; CUDA-graph
kernels where both are there; 2, 4 and 8 GPUs; messages of 1 KiB to 128 MiB, one token's
hidden state to an 8192-token prefill chunk of a 8192-wide model).  An engine runs one
algorithm for small messages (one-shot: each GPU reads every peer's buffer; latency-bound)
and another for large ones (two-shot reduce-scatter + all-gather, or NCCL's ring: bandwidth-
bound), so the roofline prices a message as the faster of two lines

    t = min(latency + 2 (n - 1) / n * bytes / (link * bw_eff),
            large_latency + 2 (n - 1) / n * bytes / (link * large_bw_eff))

(``estimators/_roofline.py``, ``AllReduceCost``), fitted by least squares on
log(predicted / measured) (``estimators._aic_calibration.fit_allreduce_lines``).  This script
fits each engine on each GPU on the messages of even log2 size and prints the error on the
odd ones (held out), for one ring line (the model before 2026-11-24) and for two; then fits
on every message and prints the ``allreduce`` entries of engines.yaml (a family's entry is
the mean of its GPUs' fits: hopper = h100_sxm and h200_sxm).

    python benchmarks/fit_engine_allreduce.py            # needs `pip install llmcap[aic]`
"""

from __future__ import annotations

import sys

import numpy as np

from estimators import _aic_tables as aic
from estimators._aic_calibration import (
    FIT_ENGINES,
    allreduce_seconds,
    allreduce_table,
    even_log2,
    family_lines,
    fit_allreduce,
    fit_allreduce_lines,
    mean_allreduce,
    node_link,
)
from sku_catalog import load_catalog

SKUS = ("a100-80gb", "h100-sxm", "h200", "b200")


def _held_out_error(table, link: float, lines: int) -> tuple[float, float]:
    """Median |log error| on the odd-log2-size messages of a fit on the even ones: all, and
    messages of 8 MiB or more."""
    n, nbytes, seconds = table
    train = even_log2(nbytes)
    cost = fit_allreduce_lines(n[train], nbytes[train], seconds[train], link, lines)
    test = ~train
    err = np.abs(np.log(allreduce_seconds(cost, n[test], nbytes[test], link) / seconds[test]))
    return float(np.median(err)), float(np.median(err[nbytes[test] >= 8 << 20]))


def main() -> int:
    if not aic.aic_available():
        print("needs aiconfigurator-core: pip install 'llmcap[aic]'", file=sys.stderr)
        return 2
    catalog = load_catalog()
    print("held-out median |log error| (odd log2 sizes; fitted on the even ones): all / >= 8 MiB")
    for engine in FIT_ENGINES:
        for sku_id in SKUS:
            sku = catalog.get(sku_id)
            table = allreduce_table(sku, engine)
            if table is None:
                print(f"  {engine:7s} {sku_id:9s} no table")
                continue
            link = node_link(sku)
            one = _held_out_error(table, link, 1)
            two = _held_out_error(table, link, 2)
            print(
                f"  {engine:7s} {sku_id:9s} one line {one[0]:.3f} / {one[1]:.3f}   "
                f"two lines {two[0]:.3f} / {two[1]:.3f}   ({len(table[0])} messages)"
            )
    print("\nengines.yaml allreduce entries (fitted on every message):")
    for engine, families in family_lines(SKUS, fit_allreduce, mean_allreduce).items():
        print(f"  {engine}:")
        for family, c in sorted(families.items()):
            lat, eff = c.large  # type: ignore[misc]
            print(
                f"    {family}: {{latency_us: {c.latency_us:.3g}, bw_eff: {c.bw_eff:.3g}, "
                f"large: {{latency_us: {lat:.3g}, bw_eff: {eff:.3g}}}}}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
