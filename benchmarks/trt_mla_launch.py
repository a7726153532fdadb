"""TensorRT-LLM's host time per MLA layer, from a public measurement outside the validation set.

NVIDIA/TensorRT-LLM issue #5929 (Jul 2025, v0.21.0rc2) timed `trtllm-serve` under LLMPerf,
one request at a time (batch 1, 600 output tokens), with DeepSeek-R1 on eight GPUs at TP 8
and three expert-parallel degrees: FP8 on H200, NVFP4 on B200, prompts of 1,600 and 8,192
tokens (its table, TTFT p50).  TensorRT-LLM runs context iterations without CUDA graphs, so
such an iteration lasts at least as long as its host takes to launch every layer's kernels.

The derivation (engines.yaml `eager_launch.mla_layer_us`): on H200 at EP 8 the 1,600-token
TTFT (124.1 ms) is far above what a prefill growing with the prompt would take from the
8,192-token one (352.8 ms x 1600 / 8192 = 68.9 ms), so that iteration is bound by its host:
124.1 ms less the prompt's tokenization (engines.yaml `frontend`) over DeepSeek's 61 layers.
This script prints that arithmetic, then simulates every row of the issue's table with
llmcap (`--estimator auto`, each GPU's own engine tables) and prints measured against
predicted.  The H200 EP 8 1,600-token row is the one the constant came from; the others are
held out.  Nothing here reads or fits the validation points.

    python benchmarks/trt_mla_launch.py
"""

from __future__ import annotations

import sys

from estimators import Precision, load_engine, load_model
from search._validate._aic_silicon import ValidationPoint
from search._validate._run import simulate_point

ISSUE = "NVIDIA/TensorRT-LLM#5929"
# (GPU, weights, EP, prompt tokens, measured TTFT p50 in ms), the issue's table
ROWS = (
    ("h200", Precision.FP8, 1, 1600, 164.63),
    ("h200", Precision.FP8, 4, 1600, 134.36),
    ("h200", Precision.FP8, 8, 1600, 124.11),
    ("b200", Precision.FP4, 1, 1600, 161.04),
    ("b200", Precision.FP4, 4, 1600, 160.18),
    ("b200", Precision.FP4, 8, 1600, 172.65),
    ("h200", Precision.FP8, 1, 8192, 515.83),
    ("h200", Precision.FP8, 4, 8192, 370.07),
    ("h200", Precision.FP8, 8, 8192, 352.81),
    ("b200", Precision.FP4, 1, 8192, 394.11),
    ("b200", Precision.FP4, 4, 8192, 390.12),
    ("b200", Precision.FP4, 8, 8192, 448.09),
)
SOURCE_ROW = ("h200", Precision.FP8, 8, 1600)
OUTPUT_TOKENS = 600
MODEL = "deepseek-ai/DeepSeek-V3"  # DeepSeek-R1's architecture


def derived_layer_us() -> float:
    """The launch time per layer the H200 EP 8 rows give (engines.yaml's derivation)."""
    short = next(r for r in ROWS if r[:4] == SOURCE_ROW)
    long = next(r for r in ROWS if r[:3] == SOURCE_ROW[:3] and r[3] == 8192)
    growth_bound = long[4] * short[3] / long[3]
    frontend = load_engine("trtllm").frontend
    tokenize_ms = short[3] * (frontend.tokenize_us_per_token if frontend else 0.0) * 1e-3
    layers = load_model(MODEL).num_layers
    per_layer_us = (short[4] - tokenize_ms) / layers * 1e3
    print(
        f"{ISSUE}, H200 FP8 EP 8: {short[4]:.1f} ms at {short[3]:,} tokens against "
        f"{growth_bound:.1f} ms if prefill grew with the prompt from {long[3]:,} "
        f"({long[4]:.1f} ms): host-bound"
    )
    print(
        f"  ({short[4]:.1f} ms - {tokenize_ms:.1f} ms tokenizing) / {layers} layers = "
        f"{per_layer_us:.0f} us a layer; engines.yaml trtllm mla_layer_us = "
        f"{load_engine('trtllm').eager_launch.mla_layer_us:.0f}"
    )
    return per_layer_us


def point(gpu: str, precision: Precision, ep: int, isl: int, measured: float) -> ValidationPoint:
    """One row as a closed loop of one client: whole contexts (TensorRT-LLM's default, chunked
    context off) under a token limit that holds the prompt."""
    return ValidationPoint(
        id=f"issue5929-{gpu}-ep{ep}-{isl}", engine="trtllm", engine_version="1.0",
        model_path="deepseek-ai/DeepSeek-R1", model=MODEL, system=gpu, sku=gpu,
        tp=8, pp=1, precision=precision, kv_precision=Precision.FP8, isl=isl,
        osl=OUTPUT_TOKENS, concurrency=1, measured_ttft_ms=measured, measured_tpot_ms=0.0,
        ep=ep, moe=True, weights=precision.value, scheduler="orca",
        token_budget=max(8192, isl + 64),
    )  # fmt: skip


def main() -> int:
    derived_layer_us()
    print(f"\n{'GPU':5} {'weights':7} {'EP':>3} {'prompt':>6} {'measured':>9} {'llmcap':>8} "
          f"{'error':>7}")  # fmt: skip
    held_out = []
    for gpu, precision, ep, isl, measured in ROWS:
        result = simulate_point(point(gpu, precision, ep, isl, measured), 3, estimator="auto")
        if not result.ok:
            print(f"{gpu:5} {precision.value:7} {ep:>3} {isl:>6}: {result.error}")
            return 1
        error = result.predicted_ttft_ms / measured - 1
        source = (gpu, precision, ep, isl) == SOURCE_ROW
        if not source:
            held_out.append(abs(error))
        print(
            f"{gpu:5} {precision.value:7} {ep:>3} {isl:>6} {measured:9.1f} "
            f"{result.predicted_ttft_ms:8.1f} {error:+7.1%}" + ("  (source row)" if source else "")
        )
    print(f"held-out rows: TTFT MAPE {sum(held_out) / len(held_out):.1%} (n={len(held_out)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
