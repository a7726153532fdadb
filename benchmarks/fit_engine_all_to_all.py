"""Fit the engines' MoE all-to-all constants (estimators/data/engines.yaml) to measured tables.

Under expert parallelism every MoE layer sends each token's hidden state to the GPUs of its
top-k experts (dispatch) and back (combine).  The engines run DeepEP's kernels for it, and
aiconfigurator-core measures them per engine on one node (``systems/data/<system>/comm/``:
TensorRT-LLM's and vLLM's ``moe_a2a_perf.parquet``, SGLang's ``wideep_deepep_normal_perf`` and
``wideep_deepep_ll_perf``; 1 to 131,072 tokens per rank, hidden sizes 2,048-7,168, top-k 1-22,
EP 4 on GB200/GB300 and 8 on the HGX boards).  TensorRT-LLM on GB200's rack-scale NVLink runs
its own NVLink kernels instead (its MNNVL method), timed in ``trtllm_alltoall_perf.parquet``
(a layer's prepare, dispatch and combine, EP 2-64): that GPU's line is its own entry
(``all_to_all_key``), not part of the Blackwell mean.  The roofline prices one layer's exchange as

    t = 2 (latency + tokens x top_k x hidden x 2 bytes x (ep - 1) / ep / (link x bw_eff))

(``estimators/_moe.py`` `all_to_all_seconds`, tokens per rank, the catalog's NVLink rate),
and this script fits (latency, bw_eff) by least squares on log(predicted / measured)
(``estimators._aic_calibration.fit_all_to_all_line``) to each engine's table on each GPU: at
each size the faster of the high-throughput and low-latency kernels, each phase on its
fastest SM count (``estimators._aic_tables.load_all_to_all``).  It prints the error on the
token counts of odd log2 (fitted on the even ones: held out), then fits on every row and
prints the ``all_to_all`` entries of engines.yaml (a family's entry is the mean of its GPUs'
fits).  The efficiency is of the 16-bit bytes the line counts: an engine that dispatches
FP8 shows above the link's share it really reaches.

    python benchmarks/fit_engine_all_to_all.py            # needs `pip install llmcap[aic]`
"""

from __future__ import annotations

import sys

import numpy as np

from estimators import _aic_tables as aic
from estimators._aic_calibration import (
    A2A_SKUS,
    FIT_ENGINES,
    all_to_all_key,
    all_to_all_line_seconds,
    all_to_all_table,
    even_log2,
    family_lines,
    fit_all_to_all,
    fit_all_to_all_line,
    mean_all_to_all,
    node_link,
)
from sku_catalog import load_catalog


def main() -> int:
    if not aic.aic_available():
        print("needs aiconfigurator-core: pip install 'llmcap[aic]'", file=sys.stderr)
        return 2
    catalog = load_catalog()
    print("held-out median |log error| (odd log2 tokens per rank; fitted on the even ones)")
    for engine in FIT_ENGINES:
        for sku_id in A2A_SKUS:
            sku = catalog.get(sku_id)
            rows = all_to_all_table(sku, engine)
            if rows is None:
                print(f"  {engine:7s} {sku_id:9s} no table")
                continue
            link = node_link(sku)
            train = even_log2(rows.tokens)
            cost = fit_all_to_all_line(rows.take(train), link)
            test = rows.take(~train)
            err = np.abs(np.log(all_to_all_line_seconds(cost, test, link) / test.seconds))
            print(
                f"  {engine:7s} {sku_id:9s} {float(np.median(err)):.3f}  "
                f"(p90 {float(np.percentile(err, 90)):.3f}, {len(rows.tokens)} sizes)"
            )
    print("\nengines.yaml all_to_all entries (fitted on every row):")
    lines = family_lines(A2A_SKUS, fit_all_to_all, mean_all_to_all, all_to_all_key)
    for engine, families in lines.items():
        print(f"  {engine}:")
        for family, c in sorted(families.items()):
            print(f"    {family}: {{latency_us: {c.latency_us:.3g}, bw_eff: {c.bw_eff:.3g}}}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
