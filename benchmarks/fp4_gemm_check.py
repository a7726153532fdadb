"""The roofline's NVFP4 GEMMs against aiconfigurator's measured nvfp4 GEMM tables.

The roofline prices NVFP4 GEMMs against the catalog's FP4 peak with the FP8 GEMM constants
(no FP4 constants fitted) and 4.5-bit weights.  This prints, for Llama-3.1-70B's projections
at TP 4 on B200 (the shapes of the validation's NVFP4 points), the measured time of each
engine's nvfp4 and fp8 GEMM rows next to the roofline's, so that the operator-level error of
the FP4 points can be read apart from the end-to-end one.  Reads operator tables only; no
end-to-end point, nothing fitted.

    python benchmarks/fp4_gemm_check.py [--engine trtllm --engine vllm]
"""

from __future__ import annotations

import argparse

import numpy as np

from estimators import Precision, RooflineEstimator, load_engine, load_model
from estimators import _aic_tables as aic
from estimators._roofline import TokenOp, _token_op_time
from sku_catalog import load_catalog

TOKENS = (1, 8, 32, 128, 1024, 8192)
OPS = ("attn_pre_proj", "attn_post_proj", "mlp_down_proj")


def _shape(op: TokenOp) -> tuple[int, int]:
    """(n, k) of a GEMM op: flops = 2 n k a token, activation bytes = 2 (n + k) a token."""
    s, p = op.bytes_per_token / 2, op.flops_per_token / 2
    root = float(np.sqrt(s * s - 4 * p))
    return round((s + root) / 2), round((s - root) / 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", action="append", default=None)
    parser.add_argument("--model", default="meta-llama/Llama-3.1-70B")
    parser.add_argument("--tp", type=int, default=4)
    args = parser.parse_args()
    sku = load_catalog().get("b200")
    model = load_model(args.model)
    for engine in args.engine or ["trtllm", "vllm"]:
        ref, table = aic.load_gemm("b200_sxm", engine)
        print(f"{engine}: {ref.label}")
        for dtype, precision in (("nvfp4", Precision.FP4), ("fp8", Precision.FP8)):
            est = RooflineEstimator(model, sku, args.tp, 1, precision, engine=load_engine(engine))
            rows = table[table.gemm_dtype == dtype]
            ratios = []
            for op in (o for o in est.layer_ops if o.name in OPS):
                n, k = _shape(op)
                mine = rows[((rows.n == n) & (rows.k == k)) | ((rows.n == k) & (rows.k == n))]
                for m in TOKENS:
                    measured = mine[mine.m == m].seconds
                    if not len(measured):
                        continue
                    predicted = _token_op_time(op, float(m), est._k)
                    ratio = predicted / float(measured.min())
                    ratios.append(ratio)
                    print(
                        f"  {dtype:6s} {op.name:15s} m={m:5d}  measured "
                        f"{float(measured.min()) * 1e6:7.1f} us  roofline {predicted * 1e6:7.1f}"
                        f" us  roofline/measured {ratio:5.2f}"
                    )
            if ratios:
                print(f"  {dtype}: median roofline/measured {float(np.median(ratios)):.2f} "
                      f"over {len(ratios)} rows")  # fmt: skip


if __name__ == "__main__":
    main()
