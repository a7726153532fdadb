"""How well one MoE kernel's measured time at one model's experts prices another model's.

An engine's MoE kernel is sometimes measured only at other models' experts: vLLM's Marlin
MXFP4 kernel, which the gpt-oss H100/H200 launch scripts force, is timed on those GPUs at
one shape (hidden 3,584, expert width 3,072, top-16 of 896), not at gpt-oss's.  llmcap then
scales the measured shape's time to the deployment's (``estimators._aic_moe_mla``
`scaled_to_shape`: the same time at the same tokens per expert, times the ratio of the
experts' total sizes).  This script checks that rule where the answer is known: for every
kernel, precision and GPU of aiconfigurator-core's vLLM, SGLang and TensorRT-LLM MoE tables
(balanced routing, no TP or EP) measured at two or more shapes, it prices each shape from
the others (leave-one-shape-out) and prints the error at 1,024, 4,096 and 8,192 tokens.

    python benchmarks/moe_shape_transfer.py            # needs `pip install llmcap[aic]`
"""

from __future__ import annotations

import sys

import numpy as np

from estimators import _aic_tables as aic
from estimators._aic_moe_mla import scaled_to_shape

SYSTEMS = ("h100_sxm", "h200_sxm", "b200_sxm")
ENGINES = ("vllm", "sglang", "trtllm")
TOKENS = (1024, 4096, 8192)
SHAPE = ["hidden_size", "inter_size", "topk", "num_experts"]


def held_out_errors(rows) -> list[float]:
    """predicted / measured - 1 of each shape of one kernel's `rows`, priced from the
    others, at `TOKENS`."""
    errors = []
    shapes = rows[SHAPE].drop_duplicates().itertuples(index=False, name=None)
    for shape in shapes:
        own = np.logical_and.reduce([rows[f] == v for f, v in zip(SHAPE, shape, strict=True)])
        scaled = scaled_to_shape(rows[~own], (*shape, 1, 1), (rows["moe_dtype"].iloc[0],))
        if scaled is None:
            continue
        measured = rows[own].groupby("num_tokens")["seconds"].min()
        errors += [scaled[1](n) / measured[n] - 1 for n in TOKENS if n in measured.index]
    return errors


def main() -> int:
    if not aic.aic_available():
        print("needs aiconfigurator-core: pip install 'llmcap[aic]'", file=sys.stderr)
        return 2
    print(f"leave-one-shape-out error at {', '.join(map(str, TOKENS))} tokens "
          "(predicted / measured - 1)")  # fmt: skip
    print(f"{'table':44s} {'kernel':58s} {'dtype':12s} {'n':>4s} {'median |e|':>10s} "
          f"{'p90 |e|':>8s} {'median e':>9s}")  # fmt: skip
    everything: list[float] = []
    for system in SYSTEMS:
        for engine in ENGINES:
            versions = aic.versions_for(system, "moe", engine, "moe_perf.parquet")
            if not versions:
                continue
            ref, df = aic.load_moe(system, engine, versions[-1])
            df = df[
                (df["distribution"] == "balanced")
                & (df["moe_tp_size"] == 1)
                & (df["moe_ep_size"] == 1)
            ]
            for (kernel, dtype), rows in df.groupby(["kernel_source", "moe_dtype"]):
                errors = held_out_errors(rows)
                if len(errors) < 3:
                    continue
                everything += errors
                e = np.abs(errors)
                print(f"{ref.label:44s} {str(kernel)[:58]:58s} {dtype:12s} {len(e):4d} "
                      f"{np.median(e):10.0%} {np.percentile(e, 90):8.0%} "
                      f"{np.median(errors):+9.0%}")  # fmt: skip
    e = np.abs(everything)
    print(f"all: n {len(e)}, median |error| {np.median(e):.0%}, p90 {np.percentile(e, 90):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
