"""Fit the roofline's constants for FlashInfer's groupwise block-FP8 GEMM on B200.

SGLang runs a block-scaled FP8 checkpoint's dense GEMMs (DeepSeek-V3's attention
projections, shared experts and dense MLPs) through DeepGEMM by default, the kernel the
GEMM tables time (aiconfigurator-core's ``sglang_deepgemm_gemm_nt_f8f8bf16`` rows, from
which roofline.yaml's ``fp8_block_*`` constants are fitted).  With DeepGEMM turned off on
Blackwell (``SGLANG_ENABLE_JIT_DEEPGEMM=false``, or the older
``SGLANG_ENABLE_FLASHINFER_GEMM=true``, as InferenceX's DeepSeek-R1 FP8 B200 and B300
scripts set) it runs FlashInfer's ``gemm_fp8_nt_groupwise`` instead (SGLang
``fp8_utils.dispatch_w8a8_block_fp8_linear``), which no table here times.

The only public timing of that kernel at these shapes found is SGLang PR #13528 ("[NVIDIA]
Add fp8 gemm benchmark on blackwell", benchmark/kernels/deepseek/
benchmark_deepgemm_fp8_gemm_blackwell.py --tp-size 4 on a B200): its ``Flashinfer``
column, microseconds, for DeepSeek-V3's (n, k) = (576, 7168) and (24576, 7168) from 8 to
2,048 tokens (`ROWS`; the row at 4,096 tokens of the second shape is cut off in the stored
copy).  This script fits the roofline's four matmul constants (eff_max, m_half, mem_eff,
overhead_us; estimators/_aic_calibration.py `fit_matmul`, the loss the GEMM-table fits use)
to those rows from the B200 SGLang constants, prints them (with ``--write``, stores them as
estimators/data/gemm_kernels.yaml's ``fp8_block_flashinfer`` for the Blackwell family, the
constants of an engine whose ``fp8_block_gemm`` is ``flashinfer``), and checks each shape
held out of a fit on the other.  No end-to-end point is read.

    .venv/bin/python benchmarks/fit_flashinfer_fp8_gemm.py [--write]
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path

import numpy as np
import yaml

from estimators._aic_calibration import MATMUL_LOW, GemmRows, fit_matmul, gemm_seconds
from estimators._roofline import load_roofline_constants
from sku_catalog import load_catalog

# (m, n, k, microseconds): SGLang PR #13528, B200, the Flashinfer column
ROWS = (
    (8, 576, 7168, 16.640),
    (16, 576, 7168, 16.288),
    (32, 576, 7168, 16.416),
    (64, 576, 7168, 16.352),
    (128, 576, 7168, 16.384),
    (256, 576, 7168, 16.384),
    (1024, 576, 7168, 28.704),
    (2048, 576, 7168, 41.216),
    (4096, 576, 7168, 63.488),
    (8, 24576, 7168, 47.136),
    (16, 24576, 7168, 47.104),
    (32, 24576, 7168, 47.392),
    (64, 24576, 7168, 69.920),
    (128, 24576, 7168, 125.216),
    (256, 24576, 7168, 223.520),
    (1024, 24576, 7168, 826.192),
    (2048, 24576, 7168, 1632.544),
)
FORMAT = "fp8_block"  # fitted as the block-FP8 constants, stored under the kernel's prefix
# the plateau of its math, fitted to the rows where the GEMM is bound by it (`MIN_TOKENS`);
# the weight-read efficiency, fixed cost and ramp (m_half) stay the format's own: at fewer
# tokens the benchmark's own floor shows (its DeepGEMM column takes 58-72 us for any GEMM of
# 256 tokens or fewer, where the GEMM tables time DeepGEMM at 10-40 us), so only the long
# GEMMs say what the kernel itself costs
FITTED = (f"matmul_{FORMAT}_eff_max",)
MIN_TOKENS = 1024
KERNEL_PREFIX = "fp8_block_flashinfer"
FAMILY = "blackwell"
YAML_PATH = Path(__file__).resolve().parents[1] / "estimators" / "data" / "gemm_kernels.yaml"
HEADER = """\
# Matmul constants of GEMM kernels an engine may run in place of the one its GEMM tables
# time (engines.yaml `fp8_block_gemm`), per GPU family, with roofline.yaml's meaning
# (matmul.<format>_<kernel>_eff_max, _m_half, _mem_eff, _overhead_us; estimators/_roofline.py
# `kernel_constants`).  Where a family has none, the format's own constants apply.
#
# fp8_block_flashinfer: FlashInfer's gemm_fp8_nt_groupwise, SGLang's block-FP8 GEMM on
#   Blackwell with DeepGEMM off.  Fitted {date} by: {command}
#   to SGLang PR #13528's B200 benchmark of it (DeepSeek-V3's (n, k) = (576, 7168) and
#   (24576, 7168), its 5 rows of 1,024 to 4,096 tokens, where the math bounds the GEMM),
#   the loss of the GEMM-table fits (estimators/_aic_calibration.py `fit_matmul`): eff_max
#   alone, the rest as fp8_block's; no end-to-end point read.  Held out of a fit on the
#   other shape: n=576 {held_576}, n=24576 {held_24576} MAPE.
"""


def _rows(keep: np.ndarray | None = None) -> GemmRows:
    m, n, k, us = (np.array(col, dtype=float) for col in zip(*ROWS, strict=True))
    rows = GemmRows(m, n, k, us * 1e-6)
    return rows if keep is None else rows.take(keep)


def fit(rows: GemmRows):
    sku = load_catalog().get("b200")
    start = load_roofline_constants(sku, "sglang")
    weight = np.sqrt(rows.seconds)

    def loss(c) -> float:
        d = np.log(gemm_seconds(rows, c, sku, FORMAT)) - np.log(rows.seconds)
        return float(np.sum(weight * d * d) / np.sum(weight))

    return fit_matmul(start, FITTED, loss), sku


def _mape(rows: GemmRows, c, sku) -> float:
    pred = gemm_seconds(rows, c, sku, FORMAT)
    return float(np.mean(np.abs(pred / rows.seconds - 1.0)) * 100)


def write(c, held: dict[float, float]) -> None:
    values = {
        name.removeprefix(f"matmul_{FORMAT}_"): float(f"{getattr(c, name):.4g}")
        for name in FITTED
    }
    text = HEADER.format(
        date=dt.date.today().isoformat(),
        command="python benchmarks/fit_flashinfer_fp8_gemm.py --write",
        held_576=f"{held[576.0]:.1f}%",
        held_24576=f"{held[24576.0]:.1f}%",
    )
    body = {"kernels": {KERNEL_PREFIX: {FAMILY: values}}}
    YAML_PATH.write_text(text + yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    print(f"wrote {YAML_PATH}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"update {YAML_PATH.name}")
    args = parser.parse_args()
    every = _rows()
    long = every.m >= MIN_TOKENS
    c, sku = fit(_rows(long))
    deepgemm = load_roofline_constants(sku, "sglang")
    print(f"fitted to the {int(long.sum())} rows of {MIN_TOKENS:,} tokens and more of "
          f"SGLang PR #13528's {len(ROWS)} (B200, FlashInfer groupwise FP8):")  # fmt: skip
    for name in MATMUL_LOW[FORMAT]:
        key = name.removeprefix("matmul_").replace(FORMAT, KERNEL_PREFIX, 1)
        kept = "" if name in FITTED else ", kept"
        ours, theirs = getattr(c, name), getattr(deepgemm, name)
        print(f"  {key}: {ours:.4g}    (DeepGEMM's: {theirs:.4g}{kept})")
    print(f"MAPE on the rows fitted: {_mape(_rows(long), c, sku):.1f}%; "
          f"the DeepGEMM constants on them: {_mape(_rows(long), deepgemm, sku):.1f}%")
    n = every.n
    held_out = {}
    for held in sorted(set(n.tolist())):
        c_other, _ = fit(_rows(long & (n != held)))
        held_out[held] = _mape(_rows(long & (n == held)), c_other, sku)
        print(f"shape n={held:.0f} held out of a fit on the other: MAPE {held_out[held]:.1f}%")
    big = _rows(long)
    tflops = 2 * big.m * big.n * big.k / big.seconds / 1e12
    print("measured TFLOP/s: " + ", ".join(f"{t:.0f}" for t in tflops)
          + f" (B200 FP8 dense peak {sku.fp8_tflops:g})")  # fmt: skip
    if args.write:
        write(c, held_out)


if __name__ == "__main__":
    main()
