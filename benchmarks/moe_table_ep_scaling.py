"""How the measured MoE tables' time falls with the expert-parallel degree.

Under balanced routing a rank of an EP-e deployment runs 1/e of the expert rows of EP 1
(`tokens x top-k / e` rows on `experts / e` experts), so at token counts where the grouped
GEMMs are compute bound its time should be close to 1/e of EP 1's.  This script prints, for
every kernel, precision, shape and GPU of aiconfigurator-core's vLLM, SGLang and
TensorRT-LLM MoE tables measured at EP 1 and at larger EP (balanced routing, no MoE TP),
the ratio time(EP e) / time(EP 1) at the largest token count both measure, next to 1/e.

It exists because `llmcap validate --estimator auto` prices prefill (eager) iterations of
expert-parallel deployments from these rows (`estimators._profiled.attach_eager_experts`).
In the tables read on 2026-11-29 most kernels scale as expected (median EP2 0.53, EP8 0.18
over all shapes); rows whose EP 2 takes 0.8 of EP 1 or more are marked `!`.  Two groups of
them are explained:
- DeepSeek-V3's shape (7168 x 2048, top-8 of 256) under the FlashInfer TensorRT-LLM kernels
  of SGLang 0.5.14 and vLLM 0.24 (fp8_block, nvfp4; B200, B300, GB200, GB300): EP 2 takes
  as long as EP 1 and EP 8 0.65 of it, where the same kernel at Kimi-K2's shape (7168 x
  2048, top-8 of 384) gives 0.54 and 0.19.  Those kernels route inside the kernel with
  DeepSeek-V3's group-limited top-k (4 of 8 expert groups); most likely the collectors'
  balanced logits do not survive it, and the timed rank receives far more than its share.
  Priced from these rows, SGLang's wide-EP DeepSeek-V3 prefill pools on GB200 came out
  up to ten times slower than measured (`--modes disagg --estimator auto`), so llmcap now
  prices such a shape from its EP-1 rows times the kernel's EP scaling at a shape that
  scales (`estimators._aic_moe_mla.EP_ROWS_SUSPECT`, the same 0.8 as `!` here).
- SGLang 0.5.10's Triton and Marlin tables (A100, H100, H200), every shape: consistent
  with aiconfigurator's SGLang collector as published, which times rank 0's tokens with
  their remote expert choices clamped onto local expert 0 (zero weight), so the kernel
  computes every choice, not the rank's share.
The others (the top-1 and top-2 models' shapes, TensorRT-LLM's min-latency kernels) are
listed, not explained.
Nothing is fitted; the script reads the tables and prints their ratios.

    python benchmarks/moe_table_ep_scaling.py           # needs `pip install llmcap[aic]`
"""

from __future__ import annotations

import sys

from estimators import _aic_tables as aic
from estimators._aic_moe_mla import EP_ROWS_SUSPECT, ep_scaling

ENGINES = ("vllm", "sglang", "trtllm")
SHAPE = ["kernel_source", "moe_dtype", "hidden_size", "inter_size", "topk", "num_experts"]
EPS = (2, 4, 8, 16)


def ep_ratios(rows) -> list[tuple]:
    """(shape..., tokens, {e: time(EP e) / time(EP 1)}) for each shape of `rows` (one table,
    balanced, MoE TP 1) measured at EP 1 and some of `EPS`: each ratio at the largest token
    count EP 1 and EP e share (`ep_scaling`), `tokens` that of the largest EP compared (the
    tables measure one token grid for every EP, so it is every ratio's)."""
    out = []
    for shape, one in rows.groupby(SHAPE, sort=True):
        ratios = {}
        tokens = 0
        for e in EPS:
            scaling = ep_scaling(one, e)
            if not scaling.empty:
                tokens = int(scaling.index[-1])
                ratios[e] = float(scaling.iloc[-1])
        if ratios:
            out.append((*shape, tokens, ratios))
    return out


def main() -> int:
    if not aic.aic_available():
        print("aiconfigurator-core is not installed: pip install 'llmcap[aic]'", file=sys.stderr)
        return 2
    print("system   engine  version      kernel / dtype / hidden x width, top-k of experts"
          "   tokens  EP2 (0.50)  EP4 (0.25)  EP8 (0.12) EP16 (0.06)")  # fmt: skip
    for system in aic.systems_available():
        for engine in ENGINES:
            if engine not in aic.engines_for(system, "moe"):
                continue
            for version in aic.versions_for(system, "moe", engine, "moe_perf.parquet"):
                _, df = aic.load_moe(system, engine, version)
                rows = df[(df["moe_tp_size"] == 1) & (df["distribution"] == "balanced")]
                for *shape, tokens, ratios in ep_ratios(rows):
                    kernel, dtype, hidden, width, topk, experts = shape
                    what = f"{kernel} / {dtype} / {hidden} x {width}, {topk} of {experts}"
                    cells = "".join(
                        f"{ratios[e]:12.2f}" if e in ratios else f"{'-':>12}" for e in EPS
                    )
                    flag = " !" if ratios.get(2, 0.0) >= EP_ROWS_SUSPECT else ""
                    print(f"{system:8s} {engine:7s} {version:12s} {what:60s} {tokens:7d}"
                          f"{cells}{flag}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
